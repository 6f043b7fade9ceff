// Package helper runs this test binary again as a helper process that a
// chaos test can SIGKILL, SIGSTOP and SIGCONT: TestMain hands Main the
// helpers by name, and Start runs one.
package helper

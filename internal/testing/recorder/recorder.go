// Package recorder is a testing.TB that keeps what a test helper reports
// instead of acting on the real test: the tests of helpers that fail,
// skip or log (a seed that cannot be read, a server that is missing, a
// proxy that cannot stop) check what the helper said through it.
//
// Fatal, Skip and FailNow end the calling goroutine with runtime.Goexit,
// as the testing package's do, so a helper that may call them runs inside
// Run:
//
//	r := recorder.New(t)
//	if ended := r.Run(func() { chaos.Budget(r) }); !ended {
//		t.Error("Budget accepted a bad CHAOS_TIME")
//	}
//	t.Log(r.Errors())
package recorder

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// TB is a testing.TB that records errors, logs, skips and cleanups. What
// it does not record (TempDir, Setenv, Context, ...) goes to the test it
// wraps. It is safe for use by several goroutines.
type TB struct {
	testing.TB

	// TestName is what Name returns; the wrapped test's name if empty.
	TestName string

	mu         sync.Mutex
	errs       []string
	logs       []string
	skipped    string // the message of the last Skip
	skippedNow bool   // whether Skip was called
	cleanups   []func()
}

// New returns a TB that wraps t.
func New(t testing.TB) *TB { return &TB{TB: t} }

// Helper does nothing: the recorded calls are not reported with a
// position.
func (r *TB) Helper() {}

// Name returns TestName, or the wrapped test's name.
func (r *TB) Name() string {
	if r.TestName != "" {
		return r.TestName
	}
	return r.TB.Name()
}

// Error records an error, formatted as fmt.Sprint does.
func (r *TB) Error(args ...any) { r.add(&r.errs, fmt.Sprint(args...)) }

// Errorf records an error.
func (r *TB) Errorf(format string, args ...any) { r.add(&r.errs, fmt.Sprintf(format, args...)) }

// Log records a log line, formatted as fmt.Sprint does.
func (r *TB) Log(args ...any) { r.add(&r.logs, fmt.Sprint(args...)) }

// Logf records a log line.
func (r *TB) Logf(format string, args ...any) { r.add(&r.logs, fmt.Sprintf(format, args...)) }

// Fail marks the recorder failed, with an empty error.
func (r *TB) Fail() { r.add(&r.errs, "") }

// FailNow marks the recorder failed and ends the goroutine.
func (r *TB) FailNow() {
	r.Fail()
	runtime.Goexit()
}

// Fatal records an error and ends the goroutine.
func (r *TB) Fatal(args ...any) {
	r.Error(args...)
	runtime.Goexit()
}

// Fatalf records an error and ends the goroutine.
func (r *TB) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// Skip records a skip and ends the goroutine.
func (r *TB) Skip(args ...any) {
	r.skip(fmt.Sprint(args...))
	runtime.Goexit()
}

// Skipf records a skip and ends the goroutine.
func (r *TB) Skipf(format string, args ...any) {
	r.skip(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// SkipNow records a skip without a message and ends the goroutine.
func (r *TB) SkipNow() {
	r.skip("")
	runtime.Goexit()
}

// Failed reports whether an error was recorded.
func (r *TB) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs) > 0
}

// Skipped reports whether a skip was recorded.
func (r *TB) Skipped() bool {
	_, ok := r.SkipMessage()
	return ok
}

// Cleanup records f, for RunCleanups.
func (r *TB) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// Errors returns the errors recorded, oldest first.
func (r *TB) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

// Logs returns the log lines recorded, oldest first.
func (r *TB) Logs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.logs)
}

// SkipMessage returns the message of the skip recorded, and whether there
// was one.
func (r *TB) SkipMessage() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.skipped, r.skippedNow
}

// RunCleanups runs the functions given to Cleanup, the last first, as the
// testing package does when a test ends, and forgets them.
func (r *TB) RunCleanups() {
	r.mu.Lock()
	fs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for _, f := range slices.Backward(fs) {
		f()
	}
}

// Run calls f on a goroutine of its own and reports whether f ended by
// runtime.Goexit, as Fatal, FailNow and Skip end it, rather than by
// returning. A panic in f is not recovered.
func (r *TB) Run(f func()) (ended bool) {
	done := make(chan bool)
	go func() {
		returned := false
		defer func() { done <- !returned }()
		f()
		returned = true
	}()
	return <-done
}

func (r *TB) add(list *[]string, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*list = append(*list, s)
}

func (r *TB) skip(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.skipped, r.skippedNow = msg, true
}

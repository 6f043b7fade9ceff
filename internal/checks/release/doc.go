// Package release holds the tests of snowkey's releases as a user meets
// them: scripts/release.sh run in a temporary clone, and every released
// module installed from its tag into fresh modules with an empty module
// cache (see install_test.go). It has no code of its own.
package release

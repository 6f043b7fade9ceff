// Package gocmd gives a test that runs the go command (to build a
// program, list packages or install a module) the flags this test binary
// was compiled with, so that the go command finds in the build cache what
// the test run compiled already.
//
// Flags such as -race and -trimpath are part of every compiled package's
// key in the build cache: a go build without them compiles every
// dependency once more, which on a cold cache costs minutes of CPU, while
// a build with them only links.
//
//	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
//	cmd.Env = gocmd.Env()
package gocmd

import (
	"os"
	"runtime/debug"
	"slices"
	"strings"
)

// sharedFlags are the build settings, as debug.BuildInfo names them, that
// change what a package compiles to and that a go command takes as a
// boolean flag of the same name.
var sharedFlags = []string{"-race", "-msan", "-asan", "-trimpath"}

// Flags returns the flags among -race, -msan, -asan and -trimpath that
// the running binary was built with, in that order, from its build
// information; none if it has none.
func Flags() []string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	var flags []string
	for _, name := range sharedFlags {
		for _, s := range info.Settings {
			if s.Key == name && s.Value == "true" {
				flags = append(flags, name)
			}
		}
	}
	return flags
}

// GOFLAGS returns a value of the GOFLAGS environment variable made of
// extra (such as -mod=mod) followed by Flags, each once.
func GOFLAGS(extra ...string) string {
	var flags []string
	for _, f := range append(slices.Clone(extra), Flags()...) {
		if !slices.Contains(flags, f) {
			flags = append(flags, f)
		}
	}
	return strings.Join(flags, " ")
}

// Env returns the environment of this process with GOFLAGS set to
// GOFLAGS(extra...): what a go command a test runs should be given.
// Whatever GOFLAGS held before is dropped, so that the go command
// builds as this binary was built, not as the shell that started the
// test run asked.
func Env(extra ...string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOFLAGS=") })
	return append(env, "GOFLAGS="+GOFLAGS(extra...))
}

package testenv

import (
	"context"
	"flag"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// A watch is the budget of one test under Deadline.
type watch struct {
	name  string
	start time.Time
	d     time.Duration
	timer *time.Timer
}

var watches sync.Map // testing.TB -> *watch

// Deadline bounds t's time. If t has not ended d after the call (its
// subtests and cleanups included), the watchdog ends the test binary as
// go test's -timeout does, but after d instead of the whole package's
// timeout: it prints which test ran out of time, every test still running
// under a Deadline, and then panics with the stacks of all goroutines, so
// the package fails with exit status 2 within seconds of the hang and the
// stacks show where it waits. (Output that t logged is lost unless go
// test runs with -v, as with -timeout.)
//
// It returns t.Context() limited to d minus a grace of a tenth of d (at
// most 5s), so that a test that passes the context to what it waits on
// fails first on its own, with a context error and its own message; the
// watchdog is for code that ignores its context. Called again for the
// same t, it replaces the budget, counted from the new call.
//
// Call it first in a test that waits on anything, with a budget several
// times the test's usual time, because the machine is shared and -race
// slows code down:
//
//	func TestFailover(t *testing.T) {
//		ctx := testenv.Deadline(t, 30*time.Second)
//		…
//	}
func Deadline(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	if d <= 0 {
		t.Fatalf("testenv: Deadline %v: want a positive budget", d)
	}
	w := &watch{name: t.Name(), start: time.Now(), d: d}
	if old, loaded := watches.Swap(t, w); loaded {
		old.(*watch).timer.Stop()
	} else {
		// Registered once, before any cleanup the test registers after
		// this call, so it runs after them: a hang in a cleanup is caught.
		t.Cleanup(func() {
			if w, ok := watches.LoadAndDelete(t); ok {
				w.(*watch).timer.Stop()
			}
		})
	}
	w.timer = time.AfterFunc(d, func() {
		expire(fmt.Sprintf("%s did not end within its deadline of %v (testenv.Deadline)", w.name, d))
	})
	ctx, cancel := context.WithTimeout(t.Context(), d-min(d/10, 5*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// Main runs m's tests under a watchdog for the package as a whole: if they
// have not ended within budget, it stops the binary as Deadline does. A
// budget fitted to the package (a few times its usual time) fails a hang in
// a test that set no Deadline of its own sooner than go test's -timeout,
// which one script sets for every package, and holds when the package is
// run by hand with go test's default of 10 minutes. It returns m.Run's
// exit code:
//
//	func TestMain(m *testing.M) {
//		os.Exit(testenv.Main(m, 3*time.Minute))
//	}
//
// Benchmarks and fuzzing (-test.bench, -test.fuzz) run as long as they are
// asked to: with either flag, the budget does not apply, and go test's
// -timeout is the bound.
func Main(m *testing.M, budget time.Duration) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	for _, name := range []string{"test.bench", "test.fuzz"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return m.Run()
		}
	}
	timer := time.AfterFunc(budget, func() {
		expire(fmt.Sprintf("the package's tests did not end within their budget of %v (testenv.Main)", budget))
	})
	defer timer.Stop()
	return m.Run()
}

// expire reports a test past its budget and ends the binary with every
// goroutine's stack.
func expire(what string) {
	var running []string
	watches.Range(func(_, v any) bool {
		w := v.(*watch)
		running = append(running, fmt.Sprintf("\t%s (%.1fs of its %v)", w.name, time.Since(w.start).Seconds(), w.d))
		return true
	})
	sort.Strings(running)
	msg := "testenv: " + what
	if len(running) > 0 {
		msg += "\ntests still running under a Deadline:\n" + strings.Join(running, "\n")
	}
	debug.SetTraceback("all")
	panic(msg)
}

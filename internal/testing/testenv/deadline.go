package testenv

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
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
	timer *stretchTimer
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
// d is counted in a machine's own time: on a machine with more runnable
// work than CPUs, the budget stretches with the load (see Main), so that
// a slow machine is not taken for a hang.
//
// It returns t.Context(), ended with context.DeadlineExceeded d minus a
// grace of a tenth of d (at most 5s) after the call, stretched the same
// way, so that a test that passes the context to what it waits on fails
// first on its own, with a context error and its own message; the
// watchdog is for code that ignores its context. Called again for the
// same t, it replaces the budget, counted from the new call.
//
// Call it first in a test that waits on anything, with a budget several
// times the test's usual time, because -race slows code down:
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
		old.(*watch).timer.stop()
	} else {
		// Registered once, before any cleanup the test registers after
		// this call, so it runs after them: a hang in a cleanup is caught.
		t.Cleanup(func() {
			if w, ok := watches.LoadAndDelete(t); ok {
				w.(*watch).timer.stop()
			}
		})
	}
	w.timer = afterStretched(d, stretch, func() {
		expire(fmt.Sprintf("%s did not end within its deadline of %v (testenv.Deadline)", w.name, d))
	})
	ctx, cancel := context.WithCancelCause(t.Context())
	ends := afterStretched(d-min(d/10, 5*time.Second), stretch, func() { cancel(context.DeadlineExceeded) })
	t.Cleanup(func() {
		ends.stop()
		cancel(nil)
	})
	return budgetCtx{ctx}
}

// budgetCtx is a context that a stretched timer ends: its Err is
// context.DeadlineExceeded then, as a context with a deadline's is.
type budgetCtx struct{ context.Context }

func (c budgetCtx) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// maxStretch bounds how many times a budget stretches on an overloaded
// machine; go test's -timeout is the last bound beyond it.
const maxStretch = 8

// stretch returns how many times its own time a budget may take now: the
// machine's 1-minute load average per CPU (/proc/loadavg), between 1 and
// maxStretch; 1 where the load cannot be read. A machine with two CPUs
// and a load of 12 runs each runnable thread about a sixth of the time.
func stretch() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 1
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 1
	}
	load, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 1
	}
	return min(max(load/float64(runtime.NumCPU()), 1), maxStretch)
}

// stretchTimer calls a function once a budget, stretched by the machine's
// load, has passed (afterStretched).
type stretchTimer struct {
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

// afterStretched calls f once d, stretched by load, has passed: when d
// has passed, it asks load how many times longer the budget may be now,
// and if d times that has not passed yet, it waits for the rest and asks
// again; on an idle machine that is d. f runs in its own goroutine.
func afterStretched(d time.Duration, load func() float64, f func()) *stretchTimer {
	st := &stretchTimer{}
	start := time.Now()
	var check func()
	check = func() {
		left := time.Duration(float64(d)*load()) - time.Since(start)
		st.mu.Lock()
		if st.stopped {
			st.mu.Unlock()
			return
		}
		if left > 0 {
			st.timer = time.AfterFunc(left, check)
			st.mu.Unlock()
			return
		}
		st.stopped = true
		st.mu.Unlock()
		f()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.timer = time.AfterFunc(d, check)
	return st
}

// stop stops the timer and reports whether f was still to be called.
func (st *stretchTimer) stop() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.stopped {
		return false
	}
	st.stopped = true
	st.timer.Stop()
	return true
}

// Main runs m's tests under a watchdog for the package as a whole: if they
// have not ended within budget, it stops the binary as Deadline does.
//
// Budgets are counted in the machine's own time: when a budget has
// passed on a machine whose load average is above its number of CPUs,
// the watchdog gives it that many times its length (at most 8), asks
// again when that has passed, and fires only once the budget stretched by
// the load of the moment has passed. So a machine busy with other work
// makes the tests slower, never red; a hang still ends, later. A
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
	timer := afterStretched(budget, stretch, func() {
		expire(fmt.Sprintf("the package's tests did not end within their budget of %v (testenv.Main)", budget))
	})
	defer timer.stop()
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
	msg := fmt.Sprintf("testenv: %s; the machine's load stretches budgets %.1f times now", what, stretch())
	if len(running) > 0 {
		msg += "\ntests still running under a Deadline:\n" + strings.Join(running, "\n")
	}
	debug.SetTraceback("all")
	panic(msg)
}

package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// hangEnv, set in a child test binary, makes TestDeadline hang there
// instead of testing: under a Deadline ("deadline"), a Deadline lengthened
// by a second call ("replaced"), under TestMain's budget alone ("main"),
// or with none ("none"), the control.
const hangEnv = "SNOWKEY_TESTENV_HANG"

// hangMark is what the child prints when it reaches the hang.
const hangMark = "testenv test: hanging now"

// hang is TestDeadline in a child process: it hangs in hangHere, ignoring
// its context, as a test stuck on a lost reply would.
func hang(t *testing.T, mode string) {
	switch mode {
	case "deadline":
		Deadline(t, 300*time.Millisecond)
	case "replaced":
		Deadline(t, 300*time.Millisecond)
		Deadline(t, 1500*time.Millisecond)
	}
	hangHere()
}

func hangHere() {
	fmt.Println(hangMark)
	select {}
}

// startHang starts TestDeadline in mode in a child test binary, with
// args added to its flags. Its
// output collects in out; reached is closed once the child printed
// hangMark, exited once it ended, with its error in *exitErr.
func startHang(ctx context.Context, t *testing.T, mode string, args ...string) (cmd *exec.Cmd, out *LogBuffer, reached, exited chan struct{}, exitErr *error) {
	t.Helper()
	cmd = exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^TestDeadline$", "-test.timeout=5m"}, args...)...)
	cmd.Env = append(os.Environ(), hangEnv+"="+mode)
	out = &LogBuffer{}
	cmd.Stderr = out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reached, exited = make(chan struct{}), make(chan struct{})
	exitErr = new(error)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(out, sc.Text())
			if sc.Text() == hangMark {
				close(reached)
			}
		}
		*exitErr = cmd.Wait()
		close(exited)
	}()
	return cmd, out, reached, exited, exitErr
}

// runHang runs TestDeadline's hang in mode in a child test binary, killed
// after limit, and returns its output, how long it ran, its exit error,
// and whether it reached the hang.
func runHang(t *testing.T, mode string, limit time.Duration) (string, time.Duration, error, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	start := time.Now()
	_, out, reached, exited, exitErr := startHang(ctx, t, mode)
	<-exited
	select {
	case <-reached:
		return out.String(), time.Since(start), *exitErr, true
	default:
		return out.String(), time.Since(start), *exitErr, false
	}
}

// TestDeadline shows a hang under Deadline ending the binary within its
// budget with the stacks, and without one running on (the control). In a
// child process with hangEnv set, it is the hang itself.
func TestDeadline(t *testing.T) {
	if mode := os.Getenv(hangEnv); mode != "" {
		hang(t, mode)
		return
	}
	t.Parallel()
	Deadline(t, 2*time.Minute)
	out, took, err, reached := runHang(t, "deadline", 60*time.Second)
	var exit *exec.ExitError
	if !reached || !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("hang under a 300ms Deadline: %v after %v, reached the hang %v; want exit status 2\n%s", err, took, reached, out)
	}
	for _, want := range []string{
		"TestDeadline did not end within its deadline of 300ms",
		"tests still running under a Deadline:",
		"s of its 300ms)",
		"testenv.hangHere(", // the hung goroutine's stack
		"goroutine ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, took, err, reached = runHang(t, "replaced", 60*time.Second)
	if !reached || !errors.As(err, &exit) || exit.ExitCode() != 2 || took < 1500*time.Millisecond ||
		!strings.Contains(out, "deadline of 1.5s") {
		t.Errorf("hang under a Deadline replaced by 1.5s: %v after %v, reached the hang %v; want exit status 2 after 1.5s\n%s",
			err, took, reached, out)
	}

	// Main's budget for the whole package catches a hang under no
	// Deadline.
	out, took, err, reached = runHang(t, "main", 60*time.Second)
	if !reached || !errors.As(err, &exit) || exit.ExitCode() != 2 ||
		!strings.Contains(out, "the package's tests did not end within their budget of 300ms") ||
		!strings.Contains(out, "testenv.hangHere(") {
		t.Errorf("hang under Main's 300ms budget: %v after %v, reached the hang %v; want exit status 2 and the stacks\n%s",
			err, took, reached, out)
	}

	// The control: without a Deadline, the child that reached the hang is
	// still hanging several of the budgets above later; and so it is
	// under Main's budget when it runs benchmarks, which the budget does
	// not bound.
	for _, tc := range []struct {
		mode string
		args []string
	}{{"none", nil}, {"main", []string{"-test.bench=^BenchmarkNone$"}}} {
		stillHangs(t, tc.mode, tc.args...)
	}
}

// stillHangs starts the hang in mode and checks that the child reaches it
// and is still hanging, with no word from the watchdog, well after the
// 300ms budgets above would have ended it, however far the load
// stretched them.
func stillHangs(t *testing.T, mode string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd, out, reached, exited, exitErr := startHang(ctx, t, mode, args...)
	select {
	case <-reached:
	case <-exited:
		t.Fatalf("hang %s %v: the child ended (%v) before it reached the hang\n%s", mode, args, *exitErr, out.String())
	}
	select {
	case <-exited:
		t.Fatalf("hang %s %v: the child ended (%v) after it reached the hang\n%s", mode, args, *exitErr, out.String())
	case <-time.After(2*time.Second + maxStretch*300*time.Millisecond):
	}
	_ = cmd.Process.Kill()
	<-exited
	if strings.Contains(out.String(), "testenv:") {
		t.Errorf("hang %s %v: the watchdog spoke\n%s", mode, args, out.String())
	}
}

// TestDeadlineContext checks the returned context: it ends with
// DeadlineExceeded, not before a grace ahead of the watchdog, and the
// watchdog is off once the test has ended.
func TestDeadlineContext(t *testing.T) {
	t.Parallel()
	var ctx context.Context
	var first, second *watch
	var start time.Time
	t.Run("sub", func(t *testing.T) {
		first = nil
		Deadline(t, time.Hour)
		first = watchOf(t)
		start = time.Now()
		ctx = Deadline(t, 2*time.Second)
		second = watchOf(t)
		if ctx.Err() != nil {
			t.Fatalf("the context ended at once: %v", ctx.Err())
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
			t.Fatal("the context of a 2s budget did not end within a minute")
		}
		if took := time.Since(start); took < 1800*time.Millisecond || ctx.Err() != context.DeadlineExceeded {
			t.Errorf("the context ended after %v with %v; want DeadlineExceeded, no sooner than 1.8s (2s less a tenth)", took, ctx.Err())
		}
	})
	// Neither of the sub-test's watchdogs (an hour, then 2s) may still be
	// armed: stop reports whether it stopped one that had not fired (one
	// that had would have ended this binary).
	if first == nil || second == nil {
		t.Fatal("the sub-test set no watch")
	}
	if first.timer.stop() || second.timer.stop() {
		t.Error("a watchdog of a test that has ended was still armed")
	}
	if _, ok := watches.Load(t); ok {
		t.Error("a watch is left for the parent, which set none")
	}
}

// TestAfterStretched: a budget stretches by the load found when it has
// passed, and again by the load found then; on an idle machine it is
// the budget.
func TestAfterStretched(t *testing.T) {
	t.Parallel()
	ctx := Deadline(t, time.Minute)
	for _, tc := range []struct {
		loads []float64 // what load returns, call by call; the last repeats
		want  time.Duration
	}{
		{[]float64{1}, 100 * time.Millisecond},
		{[]float64{3}, 300 * time.Millisecond},
		{[]float64{2, 4}, 400 * time.Millisecond},
	} {
		var mu sync.Mutex
		calls := 0
		load := func() float64 {
			mu.Lock()
			defer mu.Unlock()
			calls++
			return tc.loads[min(calls, len(tc.loads))-1]
		}
		fired := make(chan time.Duration, 1)
		start := time.Now()
		afterStretched(100*time.Millisecond, load, func() { fired <- time.Since(start) })
		select {
		case took := <-fired:
			if took < tc.want {
				t.Errorf("loads %v: fired after %v, before %v", tc.loads, took, tc.want)
			}
		case <-ctx.Done():
			t.Fatalf("loads %v: never fired", tc.loads)
		}
	}
	st := afterStretched(50*time.Millisecond, func() float64 { return 1 }, func() { t.Error("a stopped timer fired") })
	if !st.stop() || st.stop() {
		t.Error("Stop of a pending timer: want true once, then false")
	}
	time.Sleep(100 * time.Millisecond) // past the budget: the stopped timer must stay quiet
	if s := stretch(); s < 1 || s > maxStretch {
		t.Errorf("stretch() = %v, outside [1, %d]", s, maxStretch)
	}
}

// watchOf returns the watch Deadline set for t.
func watchOf(t *testing.T) *watch {
	t.Helper()
	w, ok := watches.Load(t)
	if !ok {
		t.Fatal("no watch after Deadline")
	}
	return w.(*watch)
}

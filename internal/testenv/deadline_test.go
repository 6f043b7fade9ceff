package testenv

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// hangEnv, set in a child test binary, makes TestHangHelper hang: under a
// Deadline ("deadline"), a Deadline lengthened by a second call
// ("replaced"), under TestMain's budget alone ("main"), or with none
// ("none"), the control.
const hangEnv = "SNOWKEY_TESTENV_HANG"

// TestHangHelper is run by TestDeadline in a child process; it hangs in
// hangHere, ignoring its context, as a test stuck on a lost reply would.
func TestHangHelper(t *testing.T) {
	mode := os.Getenv(hangEnv)
	switch mode {
	case "":
		t.Skip("run by TestDeadline in a child process")
	case "deadline":
		Deadline(t, 300*time.Millisecond)
	case "replaced":
		Deadline(t, 300*time.Millisecond)
		Deadline(t, 1500*time.Millisecond)
	}
	hangHere()
}

func hangHere() { select {} }

// runHang runs TestHangHelper in mode in a child test binary, killed after
// limit, and returns its output, how long it ran and its exit error.
func runHang(t *testing.T, mode string, limit time.Duration) (string, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHangHelper$", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), hangEnv+"="+mode)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	return out.String(), time.Since(start), err
}

// TestDeadline shows a hang under Deadline ending the binary within its
// budget with the stacks, and without one running on (the control).
func TestDeadline(t *testing.T) {
	t.Parallel()
	out, took, err := runHang(t, "deadline", 60*time.Second)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("hang under a 300ms Deadline: %v after %v; want exit status 2\n%s", err, took, out)
	}
	for _, want := range []string{
		"TestHangHelper did not end within its deadline of 300ms",
		"tests still running under a Deadline:",
		"TestHangHelper (0.",
		"testenv.hangHere(", // the hung goroutine's stack
		"goroutine ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, took, err = runHang(t, "replaced", 60*time.Second)
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || took < 1500*time.Millisecond ||
		!strings.Contains(out, "deadline of 1.5s") {
		t.Errorf("hang under a Deadline replaced by 1.5s: %v after %v; want exit status 2 after 1.5s\n%s", err, took, out)
	}

	// Main's budget for the whole package catches a hang under no
	// Deadline.
	out, took, err = runHang(t, "main", 60*time.Second)
	if !errors.As(err, &exit) || exit.ExitCode() != 2 ||
		!strings.Contains(out, "the package's tests did not end within their budget of 300ms") ||
		!strings.Contains(out, "testenv.hangHere(") {
		t.Errorf("hang under Main's 300ms budget: %v after %v; want exit status 2 and the stacks\n%s", err, took, out)
	}

	// The control: without a Deadline the same hang is still running when
	// the parent gives up on it.
	out, took, err = runHang(t, "none", 3*time.Second)
	if err == nil || !errors.As(err, &exit) || exit.ExitCode() != -1 || strings.Contains(out, "testenv:") {
		t.Errorf("hang without a Deadline: %v after %v; want it killed by the parent\n%s", err, took, out)
	}
}

// TestDeadlineContext checks the returned context: it ends a grace before
// the watchdog would fire, and the watchdog is off once the test has ended.
func TestDeadlineContext(t *testing.T) {
	t.Parallel()
	var ctx context.Context
	t.Run("sub", func(t *testing.T) {
		start := time.Now()
		ctx = Deadline(t, 2*time.Second)
		dl, ok := ctx.Deadline()
		if !ok || dl.Sub(start) > 1800*time.Millisecond+50*time.Millisecond || dl.Sub(start) < 1700*time.Millisecond {
			t.Errorf("context deadline %v after the call; want 1.8s (2s less a tenth)", dl.Sub(start))
		}
		long := Deadline(t, time.Hour)
		if dl, _ := long.Deadline(); time.Until(dl) < 59*time.Minute-5*time.Second {
			t.Errorf("an hour's budget gives a context of %v; want the grace capped at 5s", time.Until(dl))
		}
	})
	if ctx.Err() == nil {
		t.Error("the context is still live after its test ended")
	}
	// The sub-test's watchdog (2s, then an hour) must be off: outlive the
	// first budget.
	time.Sleep(2500 * time.Millisecond)
	if _, ok := watches.Load(t); ok {
		t.Error("a watch is left for the parent, which set none")
	}
}

package helper

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// procState returns the state letter of pid from /proc (R, S, T, …).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) S …: the comm may hold spaces, so look after the last ')'.
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

// waitState polls until pid is in one of the states.
func waitState(t *testing.T, pid int, states string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := procState(t, pid)
		if strings.Contains(states, st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d in state %s, want one of %s", pid, st, states)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitReady(t *testing.T, p *Process) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(p.StdoutPath())
		if strings.Contains(string(b), "ready") {
			return
		}
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("helper not ready (exited=%v): %s", p.Exited(), p.Stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProcessStopContFinish(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	p := Start(t, "sleeper", "SLEEPER_NOTE=hello")
	waitReady(t, p)
	p.Stop()
	waitState(t, p.Pid(), "T")
	p.Cont()
	waitState(t, p.Pid(), "SR")
	if err := p.Wait(50 * time.Millisecond); !errors.Is(err, errTimeout) {
		t.Fatalf("Wait on a running process: %v; want ErrTimeout", err)
	}
	p.CloseStdin()
	if err := p.Wait(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := p.Stderr(); got != "stdin closed: hello" {
		t.Errorf("stderr %q", got)
	}
	p.Kill() // after exit: nothing to do, no error
}

func TestProcessKill(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	p := Start(t, "sleeper")
	waitReady(t, p)
	p.Stop() // SIGKILL ends a stopped process too
	p.Kill()
	if !p.Exited() {
		t.Fatal("not exited after Kill")
	}
	ws := p.exitState().Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("exit state %v; want killed by SIGKILL", p.exitState())
	}
	if err := p.Wait(time.Second); err == nil {
		t.Error("Wait after a kill: no error")
	}
}

func TestProcessFailure(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	p := Start(t, "exit3")
	err := p.Wait(30 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "failing on purpose") {
		t.Fatalf("Wait: %v; want exit status 3 and the helper's stderr", err)
	}
}

func TestProcessUnknownHelper(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	p := Start(t, "no-such-helper")
	err := p.Wait(30 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "names no helper") {
		t.Fatalf("Wait: %v; want the unknown helper named", err)
	}
}

// TestProcessKilledAtCleanup: a helper left running is killed when its
// test ends.
func TestProcessKilledAtCleanup(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	var p *Process
	t.Run("leaves it running", func(t *testing.T) {
		p = Start(t, "sleeper")
		waitReady(t, p)
	})
	if !p.Exited() {
		t.Fatal("helper still running after its test ended")
	}
}

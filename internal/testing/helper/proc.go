package helper

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envHelper names, in a process started by StartHelper, the helper it is
// to run; HelperMain reads it.
const envHelper = "FAULTS_HELPER"

// killTimeout bounds the wait for a killed process to be reaped.
const killTimeout = 10 * time.Second

// HelperMain runs a helper process's body when this test binary was
// started by StartHelper, and exits with the body's result; otherwise it
// returns at once. Call it first in TestMain:
//
//	func TestMain(m *testing.M) {
//		helper.Main(map[string]func() int{"issuer": issuer})
//		os.Exit(m.Run())
//	}
//
// A helper reads its parameters from its environment (set by StartHelper's
// env) and reports through files.
func Main(helpers map[string]func() int) {
	name := os.Getenv(envHelper)
	if name == "" {
		return
	}
	f, ok := helpers[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "helper: %s=%q names no helper of this test binary (have %v)\n",
			envHelper, name, slices.Sorted(maps.Keys(helpers)))
		os.Exit(2)
	}
	os.Exit(f())
}

// Process is a helper process: this test binary, run again to execute one
// helper (see HelperMain), which the test may kill, stop and continue.
// It is killed, if still running, when the test ends. Its methods may be
// called from any goroutine, except those that take t's Fatal path, which
// say so.
type Process struct {
	t    testing.TB
	name string
	dir  string
	cmd  *exec.Cmd

	stdin io.WriteCloser
	done  chan struct{} // closed once the process has exited and been reaped
}

// Start starts this test binary as a helper process that runs the
// helper name (see HelperMain), with env ("KEY=value") added to the
// test's environment. Its standard output and error go to files in a
// directory of its own (see StdoutPath); its standard input is a pipe
// the test may close with CloseStdin. It dies with the test binary (Linux's parent-death signal)
// and is killed when the test ends.
func Start(t testing.TB, name string, env ...string) *Process {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("helper: find the test binary: %v", err)
	}
	p := &Process{t: t, name: name, dir: t.TempDir(), done: make(chan struct{})}
	stdout, err := os.Create(p.StdoutPath())
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	defer stdout.Close()
	stderr, err := os.Create(p.stderrPath())
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	defer stderr.Close()

	// -test.run=^$: a binary whose TestMain lacks HelperMain runs no test
	// instead of every test, recursively.
	p.cmd = exec.Command(self, "-test.run=^$")
	p.cmd.Env = append(append(os.Environ(), envHelper+"="+name), env...)
	p.cmd.Stdout, p.cmd.Stderr = stdout, stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("helper: start helper %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(killTimeout):
			t.Errorf("helper: helper %s (pid %d) not reaped %v after SIGKILL", name, p.Pid(), killTimeout)
		}
	})
	return p
}

// Pid returns the process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// StdoutPath returns the file that receives the process's standard output.
func (p *Process) StdoutPath() string { return filepath.Join(p.dir, "stdout") }

// stderrPath returns the file that receives the process's standard error.
func (p *Process) stderrPath() string { return filepath.Join(p.dir, "stderr") }

// Stderr returns the end (up to 4 KiB) of what the process wrote to its
// standard error, for failure messages.
func (p *Process) Stderr() string {
	b, err := os.ReadFile(p.stderrPath())
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return strings.TrimSpace(string(b))
}

// CloseStdin closes the process's standard input, a way to tell it to
// finish.
func (p *Process) CloseStdin() { _ = p.stdin.Close() }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process; a process that already exited is not
// an error.
func (p *Process) Signal(sig syscall.Signal) {
	if p.Exited() {
		return
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !p.Exited() {
		p.t.Errorf("helper: signal %v to helper %s (pid %d): %v", sig, p.name, p.Pid(), err)
	}
}

// Kill ends the process at once with SIGKILL, as a crash would, and waits
// until it is gone.
func (p *Process) Kill() {
	p.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(killTimeout):
		p.t.Errorf("helper: helper %s (pid %d) not reaped %v after SIGKILL", p.name, p.Pid(), killTimeout)
	}
}

// Stop freezes the process with SIGSTOP: it holds its connections and
// leases but runs no code, like a process stalled by a long pause, until
// Cont.
func (p *Process) Stop() { p.Signal(syscall.SIGSTOP) }

// Cont resumes a process frozen by Stop.
func (p *Process) Cont() { p.Signal(syscall.SIGCONT) }

// Wait waits up to timeout for the process to exit and returns an error
// if it did not (wrapping errTimeout) or exited unsuccessfully, naming
// its exit state and the end of its standard error.
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
	case <-time.After(timeout):
		return errorf(errTimeout, "helper %s (pid %d) still running after %v", p.name, p.Pid(), timeout)
	}
	if st := p.cmd.ProcessState; !st.Success() {
		return fmt.Errorf("helper: helper %s (pid %d): %v\n%s", p.name, p.Pid(), st, p.Stderr())
	}
	return nil
}

// exitState returns the process's exit state once it has exited, or nil.
func (p *Process) exitState() *os.ProcessState {
	if !p.Exited() {
		return nil
	}
	return p.cmd.ProcessState
}

// errorf wraps sentinel with a message.
func errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}

// errTimeout is returned by waits that ran out of time.
var errTimeout = errors.New("helper: timed out")

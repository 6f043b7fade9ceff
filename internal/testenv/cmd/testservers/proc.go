package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// proc is one server process started by testservers. Servers run in their own
// process group, so a Ctrl-C typed at the terminal reaches the command under
// test but not the servers, which stay up until the command has finished.
type proc struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	err     error         // exit error; valid after done is closed
}

// startProc starts cmd with its output sent to logPath. cred, when not nil,
// runs the process as another user (PostgreSQL refuses to run as root).
func startProc(name, logPath string, cmd *exec.Cmd, cred *syscall.Credential) (*proc, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: open log: %w", name, err)
	}
	defer logFile.Close()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// If testservers itself dies without cleaning up, the servers go too.
		Pdeathsig:  syscall.SIGKILL,
		Credential: cred,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", name, cmd.Path, err)
	}
	p := &proc{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has already ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitErr describes an early exit, for startup errors.
func (p *proc) exitErr() error {
	return fmt.Errorf("%s exited during startup (%v)\n%s", p.name, p.err, logTail(p.logPath))
}

// stop sends sig and waits up to grace for the process to end, then kills
// the whole process group (PostgreSQL's backends included) with SIGKILL.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) error {
	pid := p.cmd.Process.Pid
	if !p.exited() {
		_ = p.cmd.Process.Signal(sig)
	}
	var err error
	select {
	case <-p.done:
	case <-time.After(grace):
		err = fmt.Errorf("%s (pid %d) did not stop within %v after %v; killed", p.name, pid, grace, sig)
	}
	// Leftover children share the process group; kill them as well.
	if kerr := syscall.Kill(-pid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) && err == nil {
		err = fmt.Errorf("%s: kill process group %d: %w", p.name, pid, kerr)
	}
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		if err == nil {
			err = fmt.Errorf("%s (pid %d) still running after SIGKILL", p.name, pid)
		}
	}
	return err
}

// logTail returns the last lines of a server log, indented, for error messages.
func logTail(path string) string {
	const maxBytes = 4096
	const maxLines = 25
	f, err := os.Open(path)
	if err != nil {
		return "    (no log: " + err.Error() + ")"
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > maxBytes {
		_, _ = f.Seek(st.Size()-maxBytes, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "    --- last lines of %s ---\n", path)
	for _, l := range lines {
		buf.WriteString("    " + l + "\n")
	}
	return strings.TrimRight(buf.String(), "\n")
}

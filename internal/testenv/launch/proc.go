// Package launch starts, waits for and stops the server processes of
// snowkey's tests: redis-server (a standalone server, a Redis Cluster's
// nodes, a Sentinel) and PostgreSQL. It is the one implementation behind
// both starters, the shared servers of cmd/testservers and the private
// servers of package testenv, so that a server is started, waited for and
// killed the same way wherever it comes from.
//
// It knows nothing of testing.TB, so that the testservers command can use
// it: every call that waits takes a context and returns an error, with the
// tail of the server's log when the server is at fault. It talks the few
// Redis commands it needs itself (Do, Info) rather than through a client
// library, whose retries and logging would blur its wait loops.
package launch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is one server process. It runs in a process group of its own, so
// that a Ctrl-C typed at the terminal reaches the command under test but
// not the servers, which are stopped by their owner; and it is killed if
// the process that started it dies first, so no server outlives its run.
type Proc struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	err     error         // the exit error; valid once done is closed
}

// StartProc starts cmd, named name in messages, with its standard output
// and error appended to logPath. cred, when not nil, runs the process as
// another user (PostgreSQL refuses to run as root).
func StartProc(name, logPath string, cmd *exec.Cmd, cred *syscall.Credential) (*Proc, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: open log: %w", name, err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Credential: cred,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: start %s: %w", name, cmd.Path, err)
	}
	p := &Proc{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Name returns the name given to StartProc.
func (p *Proc) Name() string { return p.name }

// LogPath returns the file that holds the process's output.
func (p *Proc) LogPath() string { return p.logPath }

// Pid returns the process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has already ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err returns how the process ended (nil for exit status 0); it must be
// called only after Done is closed.
func (p *Proc) Err() error { return p.err }

// ExitError describes an exit during startup, with the end of the log.
func (p *Proc) ExitError() error {
	return fmt.Errorf("%s exited during startup (%v)\n%s", p.name, p.err, LogTail(p.logPath))
}

// Stop sends sig and waits up to grace for the process to end, then kills
// its whole process group (PostgreSQL's backends included) with SIGKILL and
// waits up to 5s more. It returns an error if grace ran out or the process
// outlived SIGKILL; a process that has already exited is only reaped.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) error {
	pid := p.Pid()
	if !p.Exited() {
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
	// Wait for the group to be gone too: PostgreSQL's backends keep its
	// shared memory until they exit, and a restart refuses to start
	// while they hold it.
	deadline := time.After(5 * time.Second)
	for !p.Exited() || groupAlive(pid) {
		select {
		case <-deadline:
			if err == nil {
				err = fmt.Errorf("%s (pid %d) or a process of its group still running after SIGKILL", p.name, pid)
			}
			return err
		case <-p.done:
		case <-time.After(5 * time.Millisecond):
		}
	}
	return err
}

// groupAlive reports whether a process of group pgid runs, zombies aside
// (they hold nothing; their reaping is up to their new parent).
func groupAlive(pgid int) bool {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) >= 3 && f[0] != "Z" && f[0] != "X" && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// Kill ends the process and its group at once with SIGKILL, as a crash
// would, and waits for it.
func (p *Proc) Kill() error {
	return p.Stop(syscall.SIGKILL, 5*time.Second)
}

// LogTail returns the last lines of a log file, indented, for error
// messages.
func LogTail(path string) string {
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

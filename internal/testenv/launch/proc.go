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
// with SIGKILL its process group and every process it had started (their
// children included: PostgreSQL puts each backend in a session of its
// own), and waits up to 5s more for all of them to be gone. It returns an
// error if grace ran out or a process outlived SIGKILL; a process that has
// already exited is only reaped.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) error {
	pid := p.Pid()
	family := descendants(readProcs(), pid) // before they lose their parent
	if !p.Exited() {
		_ = p.cmd.Process.Signal(sig)
	}
	var err error
	select {
	case <-p.done:
	case <-time.After(grace):
		err = fmt.Errorf("%s (pid %d) did not stop within %v after %v; killed", p.name, pid, grace, sig)
	}
	if kerr := syscall.Kill(-pid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) && err == nil {
		err = fmt.Errorf("%s: kill process group %d: %w", p.name, pid, kerr)
	}
	procs := readProcs()
	for _, r := range family {
		if r.alive(procs) {
			_ = syscall.Kill(r.pid, syscall.SIGKILL)
		}
	}
	// Wait for all of them to be gone: PostgreSQL's backends keep its
	// shared memory until they exit, and a restart refuses to start while
	// they hold it.
	deadline := time.After(5 * time.Second)
	for {
		procs := readProcs()
		alive := !p.Exited() || groupAlive(procs, pid)
		for _, r := range family {
			alive = alive || r.alive(procs)
		}
		if !alive {
			return err
		}
		select {
		case <-deadline:
			if err == nil {
				err = fmt.Errorf("%s (pid %d) or a process it started still running after SIGKILL", p.name, pid)
			}
			return err
		case <-p.done:
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// procInfo is what /proc/PID/stat tells of a process.
type procInfo struct {
	state      string // R, S, D, Z (zombie), …
	ppid, pgrp int
	start      string // start time after boot, in clock ticks: with the pid, it names a process
}

// readProcs reads every process's state from /proc, by pid.
func readProcs() map[int]procInfo {
	procs := map[int]procInfo{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		// "pid (comm) state ppid pgrp …", starttime the 22nd field; comm
		// may hold spaces and parentheses, so count from the last ')'.
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
		f := strings.Fields(string(b[end+1:]))
		if err != nil || len(f) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		procs[pid] = procInfo{state: f[0], ppid: ppid, pgrp: pgrp, start: f[19]}
	}
	return procs
}

// A relative is a process started, directly or not, by a Proc.
type relative struct {
	pid   int
	start string
}

// alive reports whether the relative still runs, zombies aside (they hold
// nothing; their reaping is up to their new parent).
func (r relative) alive(procs map[int]procInfo) bool {
	p, ok := procs[r.pid]
	return ok && p.start == r.start && p.state != "Z" && p.state != "X"
}

// descendants returns every process below pid in procs.
func descendants(procs map[int]procInfo, pid int) []relative {
	var out []relative
	for parents := []int{pid}; len(parents) > 0; parents = parents[1:] {
		for child, p := range procs {
			if p.ppid == parents[0] {
				out = append(out, relative{child, p.start})
				parents = append(parents, child)
			}
		}
	}
	return out
}

// groupAlive reports whether a process of group pgid runs, zombies aside.
func groupAlive(procs map[int]procInfo, pgid int) bool {
	for _, p := range procs {
		if p.pgrp == pgid && p.state != "Z" && p.state != "X" {
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

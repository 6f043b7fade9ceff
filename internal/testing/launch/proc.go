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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one server process. It runs in a process group of its own, so
// that a Ctrl-C typed at the terminal reaches the command under test but
// not the servers, which are stopped by their owner; and it is killed if
// the process that started it dies first, so no server outlives its run.
type proc struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	err     error         // the exit error; valid once done is closed
	tree    bool          // Stop kills and waits for every descendant
}

// startProc starts cmd, named name in messages, with its standard output
// and error appended to logPath. cred, when not nil, runs the process as
// another user (PostgreSQL refuses to run as root). With tree, Stop also
// kills and waits for every process it started, in its group or not.
func startProc(name, logPath string, cmd *exec.Cmd, cred *syscall.Credential, tree bool) (*proc, error) {
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
	p := &proc{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{}), tree: tree}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Name returns the name the process was started with.
func (p *proc) Name() string { return p.name }

// LogPath returns the file that holds the process's output.
func (p *proc) LogPath() string { return p.logPath }

// pid returns the process ID.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *proc) Done() <-chan struct{} { return p.done }

// exited reports whether the process has already ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err returns how the process ended (nil for exit status 0); it must be
// called only after Done is closed.
func (p *proc) Err() error { return p.err }

// exitError describes an exit during startup, with the end of the log.
func (p *proc) exitError() error {
	return fmt.Errorf("%s exited during startup (%v)\n%s", p.name, p.err, LogTail(p.logPath))
}

// Stop sends sig and waits up to grace for the process to end, then kills
// its process group with SIGKILL and waits up to 5s more for it to be gone.
// A process started with its tree tracked (PostgreSQL, whose backends each
// run in a session of their own, out of its group) has every process it
// had started killed too, and waited for. It returns an error if grace ran
// out or a process outlived SIGKILL; a process that has already exited is
// only reaped.
func (p *proc) Stop(sig syscall.Signal, grace time.Duration) error {
	pid := p.pid()
	var family []relative
	if p.tree {
		family = descendants(readProcs(), pid) // before they lose their parent
	}
	if !p.exited() {
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
	for _, r := range family {
		if r.alive() {
			_ = syscall.Kill(r.pid, syscall.SIGKILL)
		}
	}
	// Wait for them all: PostgreSQL's backends keep its shared memory until
	// they exit, and a restart refuses to start while they hold it.
	deadline := time.After(5 * time.Second)
	for !p.exited() || slices.ContainsFunc(family, relative.alive) {
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
	return err
}

// procInfo is what /proc/PID/stat tells of a process.
type procInfo struct {
	state string // R, S, D, Z (zombie), …
	ppid  int
	start string // start time after boot, in clock ticks: with the pid, it names a process
}

// readProc reads /proc/PID/stat.
func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// "pid (comm) state ppid …", starttime the 22nd field; comm may hold
	// spaces and parentheses, so count from the last ')'.
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 20 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return procInfo{state: f[0], ppid: ppid, start: f[19]}, true
}

// readProcs reads every process's /proc/PID/stat, by pid. It takes some
// milliseconds, so only processes with their tree tracked pay for it.
func readProcs() map[int]procInfo {
	procs := map[int]procInfo{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			procs[pid] = p
		}
	}
	return procs
}

// A relative is a process started, directly or not, by a proc.
type relative struct {
	pid   int
	start string
}

// alive reports whether the relative still runs, zombies aside (they hold
// nothing; their reaping is up to their new parent).
func (r relative) alive() bool {
	p, ok := readProc(r.pid)
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

// kill ends the process and its group at once with SIGKILL, as a crash
// would, and waits for it.
func (p *proc) kill() error {
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

package launch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startStubborn starts a shell that ignores SIGTERM and has two children:
// one in its process group, one in a session of its own (as PostgreSQL's
// backends are); it returns the shell and the children's pids.
func startStubborn(t *testing.T, tree bool) (*proc, map[string]int) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", `trap "" TERM
sleep 60 & echo $! > `+filepath.Join(dir, "group.pid")+`
setsid sleep 60 & echo $! > `+filepath.Join(dir, "session.pid")+`
wait`)
	p, err := startProc("stubborn", filepath.Join(dir, "log"), cmd, nil, tree)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.kill() })
	children := map[string]int{"group": 0, "session": 0}
	for name := range children {
		for deadline := time.Now().Add(10 * time.Second); children[name] == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the shell did not start its %s child", name)
			}
			b, _ := os.ReadFile(filepath.Join(dir, name+".pid"))
			children[name], _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	// setsid may still be on its way to exec sleep in a new session.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(children["session"]) + "/stat")
		if f := strings.Fields(string(b)); len(f) > 5 && f[5] == strconv.Itoa(children["session"]) {
			return p, children
		}
		if time.Now().After(deadline) {
			t.Fatal("the session child did not start a session of its own")
		}
	}
}

// running reports whether pid runs, zombies aside.
func running(pid int) bool {
	p, ok := readProc(pid)
	return ok && p.state != "Z" && p.state != "X"
}

func TestProcStop(t *testing.T) {
	t.Parallel()
	t.Run("tree", func(t *testing.T) {
		t.Parallel()
		p, children := startStubborn(t, true)
		err := p.Stop(syscall.SIGTERM, 200*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "did not stop within") {
			t.Errorf("Stop of a process that ignores SIGTERM: %v; want a did-not-stop error", err)
		}
		if !p.exited() {
			t.Error("process still running after Stop")
		}
		// Stop returns once they are gone.
		for name, pid := range children {
			if running(pid) {
				t.Errorf("the %s child %d of the stopped process still runs", name, pid)
			}
		}
		if err := p.Stop(syscall.SIGTERM, time.Second); err != nil {
			t.Errorf("Stop of an exited process: %v", err)
		}
	})
	// Without its tree tracked, the group dies and the child in a session
	// of its own lives on: why PostgreSQL's processes are tracked.
	t.Run("group only", func(t *testing.T) {
		t.Parallel()
		p, children := startStubborn(t, false)
		defer syscall.Kill(children["session"], syscall.SIGKILL)
		if err := p.kill(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); running(children["group"]); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the group child outlived the group's SIGKILL")
			}
		}
		if !running(children["session"]) {
			t.Error("the session child died with the group; then tracking the tree would not be needed")
		}
	})
}

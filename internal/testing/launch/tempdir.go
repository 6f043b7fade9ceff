package launch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	tempPrefix = "snowkey-testservers-"
	ownerFile  = "testservers.pid" // the pid of the process that owns the directory
)

// TempDir makes a directory for one run's servers, mode 0711, and writes
// the pid of the calling process in it. When running as root it lies under
// a directory that every user can search, for PostgreSQL's user. It first
// removes the directories of earlier runs whose process is gone, killed
// before it could clean up (their servers died with it). The caller
// removes the directory when done.
func TempDir() (string, error) {
	base := os.TempDir()
	if os.Geteuid() == 0 && !traversable(base) {
		base = "/tmp"
	}
	removeStale(base)
	dir, err := os.MkdirTemp(base, tempPrefix)
	if err != nil {
		return "", fmt.Errorf("make temp dir: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return "", fmt.Errorf("make temp dir: %w", err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := os.WriteFile(filepath.Join(dir, ownerFile), pid, 0o644); err != nil {
		return "", fmt.Errorf("make temp dir: %w", err)
	}
	return dir, nil
}

// removeStale removes the directories under base of earlier runs whose
// process is gone. Directories of live runs are left alone.
func removeStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, tempPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or still being made
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}

// traversable reports whether others may search every directory on path.
func traversable(path string) bool {
	path, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	for {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(path)
		if parent == path {
			return true
		}
		path = parent
	}
}

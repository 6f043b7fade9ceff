package launch

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestRemoveStale(t *testing.T) {
	base := t.TempDir()
	mk := func(name, pid string) string {
		dir := filepath.Join(base, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if pid != "" {
			if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(pid), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	live := mk(tempPrefix+"live", strconv.Itoa(os.Getpid()))
	dead := mk(tempPrefix+"dead", "2147483646") // above any pid_max
	noPid := mk(tempPrefix+"nopid", "")
	other := mk("other", "2147483646")
	removeStale(base)
	for dir, want := range map[string]bool{live: true, dead: false, noPid: true, other: true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s: exists=%v, want %v", filepath.Base(dir), err == nil, want)
		}
	}
}

func TestTraversable(t *testing.T) {
	dir := t.TempDir()
	closed := filepath.Join(dir, "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(closed, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if traversable(open) {
		t.Errorf("%s reported traversable under a 0700 directory", open)
	}
	if !traversable("/") {
		t.Error("/ reported not traversable")
	}
}

func TestTempDir(t *testing.T) {
	dir, err := TempDir()
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o711 {
		t.Fatalf("TempDir %s: %v, %v; want mode 0711", dir, st.Mode(), err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil || string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Errorf("owner file: %q, %v; want this pid", b, err)
	}
	if os.Geteuid() == 0 && !traversable(filepath.Dir(dir)) {
		t.Errorf("as root, %s lies under a directory others cannot search", dir)
	}
}

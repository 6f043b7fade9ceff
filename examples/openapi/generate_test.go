//go:build generate

package openapi_test

// Run by `make generate-check` (go test -tags generate): oapi-codegen and
// ogen are built from the module proxy on first use, which costs minutes
// on a fresh machine, more than make test can spend; make test checks the
// committed code against openapi.yaml without them (TestSchemaMatches).

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// generators are how each generator runs in its folder.
var generators = []struct {
	dir  string
	args []string
	// control is a change to openapi.yaml that must change the code.
	old, new string
}{
	{"oapigen", []string{"tool", "oapi-codegen", "-config", "oapi-codegen.yaml", "../openapi.yaml"},
		"      x-go-type: idtype.ID\n", ""},
	{"ogenapi", []string{"tool", "ogen", "--target", ".", "--package", "ogenapi", "--clean", "../openapi.yaml"},
		"      format: int64\n", ""},
}

// TestGeneratedIsCurrent runs oapi-codegen and ogen (the versions go.mod
// pins as tools) on a copy of this module and checks that they write the
// committed files byte for byte. Its controls take the ID's mapping out of
// the copy's openapi.yaml (x-go-type for oapi-codegen, format int64 for
// ogen) and see the code change.
func TestGeneratedIsCurrent(t *testing.T) {
	ctx := testenv.Deadline(t, 4*time.Minute)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to run the generators with: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range generators {
		for _, control := range []bool{false, true} {
			name := g.dir
			if control {
				name += "/control"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				dir := copyModule(t, root)
				if control {
					spec := filepath.Join(dir, "openapi.yaml")
					b, err := os.ReadFile(spec)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Contains(b, []byte(g.old)) {
						t.Fatalf("openapi.yaml has no %q to take out", g.old)
					}
					if err := os.WriteFile(spec, bytes.Replace(b, []byte(g.old), []byte(g.new), 1), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				cmd := exec.CommandContext(ctx, goBin, g.args...)
				cmd.Dir = filepath.Join(dir, g.dir)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("go %s: %v\n%s", strings.Join(g.args, " "), err, out)
				}
				differ, err := compareDirs(filepath.Join(dir, g.dir), g.dir)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case control && len(differ) == 0:
					t.Errorf("control: without %q the generated code is the same", strings.TrimSpace(g.old))
				case !control && len(differ) > 0:
					t.Errorf("the generator writes other %v than the committed files: run `go %s` in examples/openapi/%s", differ, strings.Join(g.args, " "), g.dir)
				}
			})
		}
	}
}

// compareDirs names the files that differ between two folders, or that
// only one has.
func compareDirs(a, b string) ([]string, error) {
	names := map[string]bool{}
	for _, d := range []string{a, b} {
		entries, err := os.ReadDir(d)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			names[e.Name()] = true
		}
	}
	var differ []string
	for n := range names {
		x, errX := os.ReadFile(filepath.Join(a, n))
		y, errY := os.ReadFile(filepath.Join(b, n))
		if errX != nil || errY != nil || !bytes.Equal(x, y) {
			if (errX != nil && !errors.Is(errX, os.ErrNotExist)) || (errY != nil && !errors.Is(errY, os.ErrNotExist)) {
				return nil, errors.Join(errX, errY)
			}
			differ = append(differ, n)
		}
	}
	return differ, nil
}

// copyModule copies this module's sources (not its test files) to a new
// folder, its replace directive pointed at the repository root.
func copyModule(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if p == "go.mod" {
			b = bytes.Replace(b, []byte("=> ../.."), []byte("=> "+root), 1)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, p), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

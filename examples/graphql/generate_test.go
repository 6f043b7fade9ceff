//go:build generate

package blog_test

// Run by `make generate-check` (go test -tags generate): gqlgen is built
// from the module proxy on first use, which costs minutes on a fresh
// machine, more than make test can spend; make test checks the committed
// code against the schema without it (TestSchemaServed).

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// generated are the files gqlgen writes from schema.graphqls and
// gqlgen.yml.
var generated = []string{"generated.go", "models_gen.go", "schema.resolvers.go", "resolver.go"}

// TestGeneratedIsCurrent runs gqlgen (go tool gqlgen, the version go.mod
// pins) on a copy of this module and checks that it writes the committed
// files byte for byte. Its control changes the schema in a second copy
// and sees generated.go change.
func TestGeneratedIsCurrent(t *testing.T) {
	ctx := testenv.Deadline(t, 4*time.Minute)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to run gqlgen with: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []struct {
		name    string
		control bool
	}{{"committed schema", false}, {"control: a field added", true}} {
		t.Run(run.name, func(t *testing.T) {
			t.Parallel()
			dir := copyModule(t, root)
			if run.control {
				schema := filepath.Join(dir, "schema.graphqls")
				b, err := os.ReadFile(schema)
				if err != nil {
					t.Fatal(err)
				}
				b = bytes.Replace(b, []byte("  title: String!\n}"), []byte("  title: String!\n  editorId: ID\n}"), 1)
				if err := os.WriteFile(schema, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.CommandContext(ctx, goBin, "tool", "gqlgen", "generate")
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("gqlgen generate: %v\n%s", err, out)
			}
			var differ []string
			for _, f := range generated {
				want, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					differ = append(differ, f)
				}
			}
			switch {
			case run.control && !strings.Contains(strings.Join(differ, " "), "generated.go"):
				t.Errorf("control: a new field left generated.go as it was (%v differ)", differ)
			case !run.control && len(differ) > 0:
				t.Errorf("gqlgen writes other %v than the committed ones: run `go tool gqlgen generate` in examples/graphql", differ)
			}
		})
	}
}

// copyModule copies this module's sources to a new folder, its replace
// directive pointed at the repository root.
func copyModule(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "go.mod" {
			b = bytes.Replace(b, []byte("=> ../.."), []byte("=> "+root), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

package consumer_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/checks/consumer"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 3*time.Minute))
}

// repoRoot is the checkout this package is in.
const repoRoot = "../../.."

// TestIdtypeAlone is idtype's promise to its users: a module that imports
// only idtype needs no other module, so go mod tidy writes no go.sum at
// all. It holds because idtype depends on the standard library alone and
// so do its tests (its PostgreSQL round trip is in sqltype's tests).
//
// Its control is TestTestImportsReachConsumers.
func TestIdtypeAlone(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	sum, err := consumer.GoSum(ctx, t.TempDir(), repoRoot, []string{"github.com/snowkeyhq/snowkey/idtype"}, "GOPROXY=off")
	if err != nil {
		t.Fatal(err)
	}
	if sum.Lines != 0 {
		t.Errorf("a module importing only idtype has %d go.sum lines, want none; it names:\n  %s",
			sum.Lines, strings.Join(sum.Modules, "\n  "))
	}
}

// TestTestImportsReachConsumers is the control of TestIdtypeAlone: it
// shows that the measurement sees the fault that idtype's promise
// defends against. A library whose code uses the standard library alone,
// but one of whose tests imports pgx, costs a module that imports it pgx
// in its go.sum; without the test file it costs nothing.
func TestTestImportsReachConsumers(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	// The library requires what snowkey requires, at the same versions,
	// which the module cache holds.
	gomod, pgx := libGoMod(t)
	lib := t.TempDir()
	write(t, lib, "go.mod", gomod)
	root, err := os.ReadFile(filepath.Join(repoRoot, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, lib, "go.sum", string(root))
	write(t, lib, "lib.go", "// Package lib is a library of the standard library alone.\npackage lib\n\n// N is a number.\nconst N = 1\n")

	sum, err := consumer.GoSum(ctx, t.TempDir(), lib, []string{"lib.local"}, "GOPROXY=off")
	if err != nil {
		t.Fatal(err)
	}
	if sum.Lines != 0 {
		t.Fatalf("without the test file: %d go.sum lines (%v), want none", sum.Lines, sum.Modules)
	}

	write(t, lib, "lib_test.go", "package lib\n\nimport (\n\t\"testing\"\n\n\t\"github.com/jackc/pgx/v5\"\n)\n\n"+
		"func TestConnect(t *testing.T) { _, _ = pgx.ParseConfig(\"\") }\n")
	sum, err = consumer.GoSum(ctx, t.TempDir(), lib, []string{"lib.local"}, "GOPROXY=off")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(sum.Modules, strings.ReplaceAll(pgx, " ", "@")) {
		t.Fatalf("with a test that imports pgx: go.sum names %v, want %s among them", sum.Modules, pgx)
	}
	t.Logf("a test that imports pgx costs a consumer %d go.sum lines: %v", sum.Lines, sum.Modules)
}

// libGoMod returns snowkey's go.mod as the go.mod of module lib.local,
// and the pgx it requires, "path version".
func libGoMod(t *testing.T) (gomod, pgx string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "module":
			lines[i] = "module lib.local"
		case len(f) >= 2 && f[0] == "github.com/jackc/pgx/v5":
			pgx = f[0] + " " + f[1]
		}
	}
	if pgx == "" {
		t.Fatal("snowkey's go.mod does not require pgx")
	}
	return strings.Join(lines, "\n"), pgx
}

func write(t *testing.T, dir, name, data string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

package apifile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/checks/apifile"
	"github.com/snowkeyhq/snowkey/internal/testing/gocmd"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 6*time.Minute))
}

// repoRoot is the checkout this package is in.
const repoRoot = "../../.."

// TestAPIFilesCurrent fails, printing each difference, when the exported
// API of a released module is not what its api/*.txt file says: a change
// to the API is then a reviewed diff of that file (make api writes it).
//
// Its control is TestChangedExportIsSeen.
func TestAPIFilesCurrent(t *testing.T) {
	ctx := testenv.Deadline(t, 5*time.Minute)
	// go list -export compiles what it lists: as this binary was built,
	// it finds that in the build cache.
	t.Setenv("GOFLAGS", gocmd.GOFLAGS())
	reports, err := apifile.Check(ctx, repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reports {
		t.Error(r)
	}
	if len(reports) > 0 {
		t.Log("if the change is meant, run make api and commit the api/*.txt files with it")
	}
}

// TestChangedExportIsSeen is the control of TestAPIFilesCurrent: in a
// repository of two modules, one of them not released, an added export,
// a changed signature and a removed field each make Check report the
// lines that differ, while the unreleased module's exports never do.
func TestChangedExportIsSeen(t *testing.T) {
	ctx := testenv.Deadline(t, 3*time.Minute)
	root := t.TempDir()
	write(t, root, "go.mod", "module example.com/lib\n\ngo 1.26.0\n")
	write(t, root, "lib.go", "// Package lib is a library.\npackage lib\n\n// T is a type.\ntype T struct{ A, B int }\n\n// F is a function.\nfunc F(s string) int { return len(s) }\n")
	write(t, root, "internal/x/x.go", "// Package x is internal.\npackage x\n\n// X is no API.\nconst X = 1\n")
	write(t, root, "tool/go.mod", "module example.com/lib/tool\n\n// Not released: a tool.\n\ngo 1.26.0\n")
	write(t, root, "tool/tool.go", "// Package tool is not released.\npackage tool\n\n// Y is no API.\nconst Y = 1\n")

	wrote, err := apifile.Write(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if len(wrote) != 1 || wrote[0] != filepath.Join("api", "snowkey.txt") {
		t.Fatalf("Write wrote %v, want the root module's file alone", wrote)
	}
	got, err := os.ReadFile(filepath.Join(root, "api", "snowkey.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := "pkg example.com/lib, func F(string) int\n" +
		"pkg example.com/lib, type T struct\n" +
		"pkg example.com/lib, type T struct, A int\n" +
		"pkg example.com/lib, type T struct, B int\n"
	if string(got) != want {
		t.Fatalf("API file:\n%s\nwant:\n%s", got, want)
	}
	if reports, err := apifile.Check(ctx, root); err != nil || len(reports) != 0 {
		t.Fatalf("Check right after Write: %v, %v; want no report", reports, err)
	}

	write(t, root, "tool/tool.go", "// Package tool is not released.\npackage tool\n\n// Y is no API.\nconst Y = 2\n\n// Z neither.\nvar Z int\n")
	write(t, root, "lib.go", "// Package lib is a library.\npackage lib\n\n// T is a type.\ntype T struct{ A int }\n\n// F is a function.\nfunc F(s string, n int) int { return len(s) + n }\n\n// G is new.\nfunc G() {}\n")
	reports, err := apifile.Check(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(reports, "")
	t.Logf("Check reports:\n%s", text)
	for _, line := range []string{
		"-pkg example.com/lib, func F(string) int\n",
		"+pkg example.com/lib, func F(string, int) int\n",
		"+pkg example.com/lib, func G()\n",
		"-pkg example.com/lib, type T struct, B int\n",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("Check's report lacks %q", line)
		}
	}
	if len(reports) != 1 || strings.Contains(text, "tool") {
		t.Errorf("Check reported %d files, want the root module's alone, and nothing of the unreleased module", len(reports))
	}
}

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

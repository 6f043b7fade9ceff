package readmecheck_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/checks/readmecheck"
	"github.com/snowkeyhq/snowkey/internal/testing/gocmd"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// EnvReadme names the Markdown file TestReadme checks instead of the
// repository's README.md, such as a draft: SNOWKEY_README=/tmp/draft.md.
const EnvReadme = "SNOWKEY_README"

// repoRoot is the checkout this package is in.
const repoRoot = "../../.."

// TestReadme builds, vets and (where marked run) runs every ```go block of
// README.md, or of the file SNOWKEY_README names, against this checkout.
// Each block is a subtest named by its line.
func TestReadme(t *testing.T) {
	t.Parallel()
	path := os.Getenv(EnvReadme)
	if path == "" {
		path = filepath.Join(repoRoot, "README.md")
	}
	ctx := testenv.Deadline(t, 10*time.Minute)
	if checkFile(t, newModule(t, ctx, repoRoot), path, reportBlock) == 0 {
		t.Fatalf("%s has no go blocks", path)
	}
}

// TestDocs does for every guide in docs/ what TestReadme does for the
// README, against the examples module (examples/go.mod), so that a guide
// may import what teams on other stacks use (bun, the code sqlc
// generates, the Prometheus collector) as well as snowkey. Each file is a
// subtest; a program that reads DATABASE_URL or REDIS_URL runs with a
// fresh database or the shared Redis. A guide with no go block (one of
// shell commands and SQL, say) has nothing to check.
func TestDocs(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no docs/*.md")
	}
	ctx := testenv.Deadline(t, 10*time.Minute)
	m := newModule(t, ctx, filepath.Join(repoRoot, "examples"))
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			if checkFile(t, m, path, reportBlock) == 0 {
				t.Logf("%s has no go blocks", path)
			}
		})
	}
}

// reportBlock fails the test on a block's error and logs what a program
// printed.
func reportBlock(t *testing.T, b readmecheck.Block, out string, err error) {
	if err != nil {
		t.Errorf("%s block at line %d:\n%v", b.Kind, b.Line, err)
	} else if out != "" {
		t.Logf("the program printed:\n%s", out)
	}
}

// TestCheck runs the checker on testdata/blocks.md, whose blocks say on a
// "want:" line before them whether they must pass, and if not, what the
// error says and which line of the block it points at. The blocks that
// must fail are the controls: each shows that a kind of broken snippet
// (an unused variable, a type that does not exist, unformatted code, a
// fragment without its marker, a failing program, a vet finding) is
// caught.
func TestCheck(t *testing.T) {
	t.Parallel()
	md, err := os.ReadFile("testdata/blocks.md")
	if err != nil {
		t.Fatal(err)
	}
	wants, first := wantLines(t, string(md))
	ctx := testenv.Deadline(t, 10*time.Minute)
	n := checkFile(t, newModule(t, ctx, repoRoot), "testdata/blocks.md", func(t *testing.T, b readmecheck.Block, out string, err error) {
		w, ok := wants[b.Line]
		if !ok {
			t.Fatalf("no want line before the block at line %d", b.Line)
		}
		switch {
		case w.ok && err != nil:
			t.Errorf("block at line %d: %v; want it to pass", b.Line, err)
		case w.ok:
		case err == nil:
			t.Errorf("block at line %d passed; want an error saying %q", b.Line, w.says)
		case !strings.Contains(err.Error(), w.says):
			t.Errorf("block at line %d: %v; want an error saying %q", b.Line, err, w.says)
		case w.codeLine > 0 && !strings.Contains(err.Error(), fmt.Sprintf("blocks.md:%d:", b.Line+w.codeLine-1)):
			t.Errorf("block at line %d: %v; want it to point at blocks.md:%d", b.Line, err, b.Line+w.codeLine-1)
		default:
			t.Logf("failed as it must: %v", err)
		}
		if b.Line == first && out != "worker 7\n" {
			t.Errorf("the program printed %q, want %q", out, "worker 7\n")
		}
	})
	if n == 0 {
		t.Fatal("testdata/blocks.md has no go blocks")
	}
}

// newModule makes the scratch module for blocks that build against the
// module in base (repoRoot, or another module of the checkout).
func newModule(t *testing.T, ctx context.Context, base string) *readmecheck.Module {
	t.Helper()
	m, err := readmecheck.NewModuleOf(ctx, t.TempDir(), repoRoot, base)
	if err != nil {
		t.Fatal(err)
	}
	m.BuildFlags = gocmd.Flags()
	return m
}

// checkFile checks every go block of the Markdown file at path in m, each
// in a parallel subtest, and hands the outcome to f. It returns how many blocks
// the file has.
func checkFile(t *testing.T, m *readmecheck.Module, path string, f func(t *testing.T, b readmecheck.Block, out string, err error)) int {
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := readmecheck.Extract(string(md))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, b := range blocks {
		t.Run("line="+strconv.Itoa(b.Line), func(t *testing.T) {
			// Each block builds in a directory of its own; its go
			// commands mostly wait on the linker and the build cache.
			t.Parallel()
			// A budget counted in the machine's own time: blocks build,
			// vet and run four at a time, and a busy machine took over
			// two minutes for one.
			runCtx := testenv.Deadline(t, 3*time.Minute)
			var env []string
			if b.Kind == readmecheck.Program && strings.Contains(b.Code, "DATABASE_URL") {
				env = append(env, "DATABASE_URL="+testenv.Postgres(t))
			}
			if b.Kind == readmecheck.Program && strings.Contains(b.Code, "REDIS_URL") {
				env = append(env, "REDIS_URL=redis://"+testenv.Redis(t)+"/0")
			}
			out, err := m.Check(runCtx, abs, b, env...)
			if err != nil {
				// Name the file as the caller did, not by its absolute path.
				err = fmt.Errorf("%s", strings.ReplaceAll(err.Error(), abs, path))
			}
			f(t, b, out, err)
		})
	}
	return len(blocks)
}

// want is what a block of testdata/blocks.md must give.
type want struct {
	ok       bool
	says     string
	codeLine int // the line of the block the error points at; 0: not checked
}

var wantRe = regexp.MustCompile(`^want: (?:(ok)|error "([^"]+)"(?: at code line (\d+))?)`)

// wantLines reads the want line before each go block of md, keyed by the
// block's first line of code; first is the first block's.
func wantLines(t *testing.T, md string) (wants map[int]want, first int) {
	wants = map[int]want{}
	var cur *want
	prev := "" // the last line that is not blank
	for i, l := range strings.Split(md, "\n") {
		if m := wantRe.FindStringSubmatch(l); m != nil {
			w := want{ok: m[1] == "ok", says: m[2]}
			if m[3] != "" {
				w.codeLine, _ = strconv.Atoi(m[3])
			}
			cur = &w
		}
		// A block that continues a fragment is part of it, not a block
		// with a want of its own.
		if strings.HasPrefix(l, "```go") && prev != "<!-- snippet: continue -->" {
			if cur == nil {
				t.Fatalf("testdata/blocks.md:%d: a go block without a want line", i+1)
			}
			if first == 0 {
				first = i + 2
			}
			wants[i+2] = *cur
			cur = nil
		}
		if strings.TrimSpace(l) != "" {
			prev = l
		}
	}
	return wants, first
}

func TestExtract(t *testing.T) {
	md := strings.Join([]string{
		"# Title",                    // 1
		"",                           // 2
		"```go",                      // 3
		"package main",               // 4
		"```",                        // 5
		"<!-- snippet: fragment -->", // 6
		"```go",                      // 7
		"x := 1",                     // 8
		"_ = x",                      // 9
		"```",                        // 10
		"Then:",                      // 11
		"<!-- snippet: continue -->", // 12
		"```go",                      // 13
		"y := x",                     // 14
		"```",                        // 15
		"<!-- snippet:   fragment( ctx context.Context, db *gorm.DB )  -->", // 16
		"",                      // 17
		"  ```Go",               // 18
		"  gen.Next()",          // 19
		"  ```",                 // 20
		"```sh",                 // 21
		"<!-- snippet: run -->", // 22: inside a sh block, not a marker
		"```",                   // 23
		"<!-- snippet: run -->", // 24
		"````go",                // 25
		"```",                   // 26: too short to close
		"````",                  // 27
	}, "\n")
	got, err := readmecheck.Extract(md)
	if err != nil {
		t.Fatal(err)
	}
	want := []readmecheck.Block{
		{Line: 4, Code: "package main\n", Kind: readmecheck.File},
		{Line: 8, Code: "x := 1\n_ = x\n", Kind: readmecheck.Fragment, MarkerLine: 6,
			More: []readmecheck.Part{{Line: 14, Code: "y := x\n"}}},
		{Line: 19, Code: "gen.Next()\n", Kind: readmecheck.Fragment, Given: "ctx context.Context, db *gorm.DB", MarkerLine: 16},
		{Line: 26, Code: "```\n", Kind: readmecheck.Program, MarkerLine: 24},
	}
	if len(got) != len(want) {
		t.Fatalf("Extract found %d blocks, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("block %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}

	bad := []struct {
		name, md, says string
	}{
		{"unknown marker", "<!-- snippet: fragmnet -->\n```go\nx\n```\n", "line 1: unknown snippet marker"},
		{"run with parameters", "<!-- snippet: run(ctx context.Context) -->\n```go\nx\n```\n", "run takes no parameters"},
		{"continue with parameters", "<!-- snippet: fragment -->\n```go\nx\n```\n<!-- snippet: continue(x int) -->\n```go\nx\n```\n",
			"continue takes no parameters"},
		{"continue first", "<!-- snippet: continue -->\n```go\nx\n```\n", "line 1: snippet marker continue: no fragment before it"},
		{"continue after a file", "```go\npackage p\n```\n<!-- snippet: continue -->\n```go\nx\n```\n", "line 4: snippet marker continue: no fragment"},
		{"marker before text", "<!-- snippet: fragment -->\ntext\n```go\nx\n```\n", "line 1: snippet marker not followed"},
		{"marker at the end", "```go\nx\n```\n<!-- snippet: fragment -->\n", "line 4: snippet marker not followed"},
		{"marker before a sh block", "<!-- snippet: fragment -->\n```sh\nls\n```\n", `followed by a "sh" block`},
		{"two markers", "<!-- snippet: fragment -->\n<!-- snippet: run -->\n```go\nx\n```\n", "another marker at line 2"},
		{"unclosed go block", "text\n```go\nx := 1\n", "line 2: ```go block without a closing fence"},
	}
	for _, tt := range bad {
		if _, err := readmecheck.Extract(tt.md); err == nil || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: Extract = %v, want an error saying %q", tt.name, err, tt.says)
		}
	}
}

func TestSource(t *testing.T) {
	src, err := readmecheck.Source("/x/README.md", readmecheck.Block{
		Line: 20, Kind: readmecheck.Fragment, MarkerLine: 18,
		Given: "ctx context.Context, db, other *gorm.DB",
		Code:  "var tokens []idtype.ID\nerr := gormplugin.New(nil)\nfmt.Println(tokens, err, time.Second, unknownpkg.X)\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"package snippet\n",
		"\tcontext \"context\"\n", "\tfmt \"fmt\"\n", "\tgorm \"gorm.io/gorm\"\n",
		"\tgormplugin \"github.com/snowkeyhq/snowkey/gormplugin\"\n", "\tidtype \"github.com/snowkeyhq/snowkey/idtype\"\n",
		"\ttime \"time\"\n",
		"//line /x/README.md:18:1\nvar ctx context.Context; var db *gorm.DB; var other *gorm.DB\n",
		"func _() {\n//line /x/README.md:20:1\nvar tokens []idtype.ID\n",
	} {
		if !strings.Contains(src, s) {
			t.Errorf("the source lacks %q:\n%s", s, src)
		}
	}
	for _, s := range []string{"snowkey/tokens\"", "unknownpkg\""} {
		if strings.Contains(src, s) {
			t.Errorf("the source imports %s:\n%s", s, src)
		}
	}

	// A part that continues a fragment carries its own line directive.
	src, err = readmecheck.Source("/x/README.md", readmecheck.Block{
		Line: 5, Kind: readmecheck.Fragment, MarkerLine: 4, Code: "x := 1\n",
		More: []readmecheck.Part{{Line: 12, Code: "fmt.Println(x)\n"}},
	})
	if want := "//line /x/README.md:5:1\nx := 1\n//line /x/README.md:12:1\nfmt.Println(x)\n}\n"; err != nil || !strings.Contains(src, want) {
		t.Errorf("a continued fragment: %v\n%s\nwant it to hold\n%s", err, src, want)
	}

	if _, err := readmecheck.Source("/x/README.md", readmecheck.Block{Line: 3, MarkerLine: 2, Kind: readmecheck.Fragment, Given: "ctx"}); err == nil ||
		!strings.Contains(err.Error(), "line 2: snippet marker") {
		t.Errorf("a given list without types: %v", err)
	}
}

// TestCheckSameLineTwoFiles checks, at once in one Module, two Markdown
// files whose program blocks start on the same line: each must build and
// run its own block (TestDocs checks every guide at once, and two guides
// had blocks at line 25).
func TestCheckSameLineTwoFiles(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 5*time.Minute)
	m := newModule(t, ctx, repoRoot)
	dir := t.TempDir()
	paths := []string{filepath.Join(dir, "a.md"), filepath.Join(dir, "b.md")}
	for _, path := range paths {
		md := "# " + filepath.Base(path) + "\n\n<!-- snippet: run -->\n```go\npackage main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"" +
			filepath.Base(path) + "\")\n}\n```\n"
		if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			n := checkFile(t, m, path, func(t *testing.T, b readmecheck.Block, out string, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if want := filepath.Base(path) + "\n"; out != want {
					t.Errorf("the block of %s printed %q, want %q", path, out, want)
				}
			})
			if n != 1 {
				t.Fatalf("%s: %d blocks, want 1", path, n)
			}
		})
	}
}

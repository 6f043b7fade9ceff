package release_test

import (
	"bufio"
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/checks/apifile"
	"github.com/snowkeyhq/snowkey/internal/checks/readmecheck"
	"github.com/snowkeyhq/snowkey/internal/testing/gocmd"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 15*time.Minute))
}

// repoRoot is the checkout this package is in.
const repoRoot = "../../.."

// rootPath is the module path the clone is served as.
const rootPath = "github.com/snowkeyhq/snowkey"

// TestInstallFromTags is the promise that a release installs as a user
// installs it. In a clone of this checkout (its uncommitted changes
// committed there) it runs scripts/release.sh with APPLY=1 for the next
// version, serves the clone to the go command as github.com/snowkeyhq/snowkey
// (GOPRIVATE, and a git url.insteadOf that points the repository's https
// URL at the clone), and in fresh modules that share one module cache,
// empty when the test starts (third-party modules come from the proxy):
//
//   - go get of the root module alone, and of each other released module
//     alone, then a program importing every package of that module, go
//     mod tidy and go build: what the module adds to a consumer's go.sum
//     is the table in docs/operations.md (TestGoSumTable's figures);
//   - go install .../cmd/snowkey@VERSION, whose --version says VERSION;
//   - the README's first program, built and run, and every Go block of
//     README.md and docs/*.md, built from the tags (observability.md's
//     imports extra/snowkeyprom and extra/snowkeyotel, bun.md's and
//     sqlc.md's the examples module).
//
// It prints the install matrix. Its control (subtest control) is the
// fault the release commit mends: extra/snowkeyprom tagged on the commit
// before it, whose go.mod still requires the root module at v0.0.0, which
// a consumer cannot find (its replace line binds only the repository);
// the go command must fail on that version.
func TestInstallFromTags(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 12*time.Minute)
	r := newRelease(ctx, t)
	m := &matrix{}
	defer func() { t.Logf("install matrix of %s:\n%s", r.version, m) }()

	t.Run("modules", func(t *testing.T) {
		for _, mod := range r.released {
			t.Run(mod.Dir, func(t *testing.T) {
				t.Parallel()
				r.installModule(ctx, t, m, mod)
			})
		}
		t.Run("cmd/snowkey", func(t *testing.T) {
			t.Parallel()
			r.installCLI(ctx, t, m)
		})
		t.Run("guides", func(t *testing.T) {
			t.Parallel()
			r.buildGuides(ctx, t, m)
		})
		t.Run("control", func(t *testing.T) {
			t.Parallel()
			r.unreleasedRequirement(ctx, t, m)
		})
	})
	if !t.Failed() {
		checkGoSumTable(t, filepath.Join(repoRoot, "docs", "operations.md"), m)
	}
}

// A release is a clone of the checkout, released at version, served to
// the go command by env.
type release struct {
	clone    string
	version  string
	released []apifile.Module
	env      []string // the go command's environment for consumers
	cache    string   // their module cache
}

// newRelease clones the checkout, releases it, and makes the consumers'
// environment.
func newRelease(ctx context.Context, t *testing.T) *release {
	tmp := t.TempDir()
	r := &release{clone: filepath.Join(tmp, "snowkey"), cache: filepath.Join(tmp, "gomodcache")}
	// gocmd.Env: the script's go commands (its API check) then find
	// in the build cache what this test run compiled.
	gitEnv := append(gocmd.Env(),
		"GIT_AUTHOR_NAME=snowkey release test", "GIT_AUTHOR_EMAIL=release@test.invalid",
		"GIT_COMMITTER_NAME=snowkey release test", "GIT_COMMITTER_EMAIL=release@test.invalid",
		"GIT_CONFIG_GLOBAL="+filepath.Join(tmp, "gitconfig"))
	run(ctx, t, "", gitEnv, "git", "clone", "-q", repoRoot, r.clone)
	copyWorkingTree(ctx, t, r.clone, gitEnv)

	r.version = nextVersion(run(ctx, t, r.clone, gitEnv, "git", "tag", "-l", "v*"))
	start := time.Now()
	out := run(ctx, t, r.clone, append(gitEnv, "APPLY=1"), "bash", "scripts/release.sh", r.version)
	t.Logf("scripts/release.sh %s (%v):\n%s", r.version, time.Since(start).Round(time.Second), out)

	mods, err := apifile.Modules(r.clone)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		if m.Released {
			r.released = append(r.released, m)
		}
	}
	tags := strings.Fields(run(ctx, t, r.clone, gitEnv, "git", "tag", "--points-at", "HEAD"))
	for _, m := range r.released {
		if tag := tagOf(m, r.version); !slices.Contains(tags, tag) {
			t.Fatalf("the release commit has tags %v, lacks %s", tags, tag)
		}
	}

	gitconfig := fmt.Sprintf("[url \"file://%s\"]\n\tinsteadOf = https://%s\n[protocol \"file\"]\n\tallow = always\n", r.clone, rootPath)
	if err := os.WriteFile(filepath.Join(tmp, "gitconfig"), []byte(gitconfig), 0o644); err != nil {
		t.Fatal(err)
	}
	r.env = append(os.Environ(),
		"GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS="+gocmd.GOFLAGS("-mod=mod", "-trimpath"),
		"GOMODCACHE="+r.cache,
		"GOPRIVATE="+rootPath,
		"GIT_CONFIG_GLOBAL="+filepath.Join(tmp, "gitconfig"),
		"GIT_TERMINAL_PROMPT=0")
	t.Cleanup(func() {
		// The module cache is read-only; the go command removes it.
		c := exec.Command("go", "clean", "-modcache")
		c.Env = r.env
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("go clean -modcache: %v\n%s", err, out)
		}
	})
	return r
}

// copyWorkingTree brings the checkout's uncommitted changes into the
// clone as one commit, so that the test releases what is on disk.
func copyWorkingTree(ctx context.Context, t *testing.T, clone string, env []string) {
	changed := strings.Split(run(ctx, t, repoRoot, env, "git", "ls-files", "-z", "-m", "-o", "--exclude-standard"), "\x00")
	deleted := strings.Split(run(ctx, t, repoRoot, env, "git", "ls-files", "-z", "-d"), "\x00")
	n := 0
	for _, f := range changed {
		if f == "" || slices.Contains(deleted, f) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(clone, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
		n++
	}
	for _, f := range deleted {
		if f != "" {
			if err := os.Remove(filepath.Join(clone, f)); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	if n > 0 {
		run(ctx, t, clone, env, "git", "add", "-A")
		run(ctx, t, clone, env, "git", "commit", "-q", "-m", "the working tree of the checkout")
		t.Logf("released the checkout with its %d uncommitted changes", n)
	}
}

// nextVersion is the version the test releases: the next minor version
// after the root module's highest tag, v0.1.0 when there is none.
func nextVersion(tags string) string {
	major, minor, found := 0, 0, false
	for _, tag := range strings.Fields(tags) {
		parts := strings.SplitN(strings.TrimPrefix(tag, "v"), ".", 3)
		if len(parts) != 3 {
			continue
		}
		a, err1 := strconv.Atoi(parts[0])
		b, err2 := strconv.Atoi(parts[1])
		if err1 != nil || err2 != nil {
			continue
		}
		if !found || a > major || (a == major && b > minor) {
			major, minor, found = a, b, true
		}
	}
	if !found {
		return "v0.1.0"
	}
	return fmt.Sprintf("v%d.%d.0", major, minor+1)
}

// tagOf is the tag of module m at version.
func tagOf(m apifile.Module, version string) string {
	if m.Dir == "." {
		return version
	}
	return filepath.ToSlash(m.Dir) + "/" + version
}

// modulePath is the path m is served as.
func modulePath(m apifile.Module) string { return m.Path }

// installModule: go get of the module alone, then a program that imports
// every package of it, go mod tidy and go build; it records the go.sum.
func (r *release) installModule(ctx context.Context, t *testing.T, m *matrix, mod apifile.Module) {
	dir := r.freshModule(ctx, t, "consumer.test/"+strings.ReplaceAll(filepath.Base(mod.Path), ".", "-"))
	name := modulePath(mod)
	if !m.try(t, name, "go get "+name+"@"+r.version, func() (string, error) {
		return r.goCmd(ctx, dir, "get", name+"@"+r.version)
	}) {
		return
	}
	pkgs := r.packagesOf(ctx, t, mod)
	var src strings.Builder
	src.WriteString("// Command consumer imports every package of one module.\npackage main\n\nimport (\n")
	for _, p := range pkgs {
		fmt.Fprintf(&src, "\t_ %q\n", p)
	}
	src.WriteString(")\n\nfunc main() {}\n")
	writeFile(t, dir, "main.go", src.String())
	if !m.try(t, name, fmt.Sprintf("go mod tidy (imports its %d packages)", len(pkgs)), func() (string, error) {
		return r.goCmd(ctx, dir, "mod", "tidy")
	}) {
		return
	}
	if !m.try(t, name, "go build", func() (string, error) { return r.goCmd(ctx, dir, "build", "./...") }) {
		return
	}
	m.weigh(t, name, len(pkgs), filepath.Join(dir, "go.sum"))
	// What the build itself needs, to tell apart the go.sum lines that
	// only the module graph or the imported packages' tests cost.
	if out, err := r.goCmd(ctx, dir, "list", "-deps", "-f", "{{with .Module}}{{.Path}}@{{.Version}}{{end}}", "./..."); err == nil {
		built := slices.Compact(slices.Sorted(slices.Values(strings.Fields(out))))
		t.Logf("the build of a consumer of %s needs %d modules: %s", name, len(built), strings.Join(built, " "))
	}
}

// packagesOf lists the packages a user can import of mod, in the clone.
func (r *release) packagesOf(ctx context.Context, t *testing.T, mod apifile.Module) []string {
	out := run(ctx, t, filepath.Join(r.clone, mod.Dir), append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod"),
		"go", "list", "-f", "{{if and (ne .Name \"main\") .GoFiles}}{{.ImportPath}}{{end}}", "./...")
	var pkgs []string
	for _, p := range strings.Fields(out) {
		if !slices.Contains(strings.Split(p, "/"), "internal") {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) == 0 {
		t.Fatalf("module %s has no package to import", mod.Path)
	}
	return pkgs
}

// installCLI: go install of cmd/snowkey at the version, and --version.
func (r *release) installCLI(ctx context.Context, t *testing.T, m *matrix) {
	bin := t.TempDir()
	target := rootPath + "/cmd/snowkey@" + r.version
	const name = rootPath + "/cmd/snowkey"
	if !m.try(t, name, "go install "+target, func() (string, error) {
		return r.goCmdEnv(ctx, t.TempDir(), []string{"GOBIN=" + bin}, "install", target)
	}) {
		return
	}
	m.try(t, name, "snowkey --version", func() (string, error) {
		c := exec.CommandContext(ctx, filepath.Join(bin, "snowkey"), "--version")
		out, err := c.CombinedOutput()
		if err == nil && !strings.HasPrefix(string(out), "snowkey "+r.version+" ") {
			err = fmt.Errorf("printed %q, want snowkey %s", out, r.version)
		}
		return string(out), err
	})
}

// buildGuides builds every Go block of README.md and docs/*.md of the
// clone in one fresh module that requires every released module at the
// version, each block a package of its own, and runs the README's first
// program.
func (r *release) buildGuides(ctx context.Context, t *testing.T, m *matrix) {
	dir := r.freshModule(ctx, t, "guides.test")
	docs, err := filepath.Glob(filepath.Join(r.clone, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{filepath.Join(r.clone, "README.md")}, docs...)
	needs := map[string]bool{}
	var first string
	blocks := 0
	for _, md := range docs {
		text, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := readmecheck.Extract(string(text))
		if err != nil {
			t.Fatalf("%s: %v", md, err)
		}
		rel, _ := filepath.Rel(r.clone, md)
		for _, b := range bs {
			src, err := readmecheck.Source(rel, b)
			if err != nil {
				t.Fatalf("%s:%d: %v", rel, b.Line, err)
			}
			pkgDir := fmt.Sprintf("%s_%d", strings.NewReplacer("/", "_", ".md", "").Replace(rel), b.Line)
			writeFile(t, filepath.Join(dir, pkgDir), "block.go", src)
			blocks++
			if first == "" && b.Kind == readmecheck.Program {
				first = pkgDir
			}
			f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.ImportsOnly)
			if err != nil {
				t.Fatalf("%s:%d: %v", rel, b.Line, err)
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if mod, ok := r.moduleOf(p); ok {
					needs[mod] = true
				}
			}
		}
	}
	get := []string{"get"}
	for mod := range needs {
		get = append(get, mod+"@"+r.version)
	}
	slices.Sort(get[1:])
	const name = "README.md and docs/*.md"
	ok := m.try(t, name, fmt.Sprintf("go get the %d modules their %d Go blocks import", len(get)-1, blocks), func() (string, error) {
		return r.goCmd(ctx, dir, get...)
	}) && m.try(t, name, "go mod tidy", func() (string, error) {
		return r.goCmd(ctx, dir, "mod", "tidy")
	}) && m.try(t, name, "go build ./... (every block)", func() (string, error) {
		return r.goCmd(ctx, dir, "build", "./...")
	})
	if !ok {
		return
	}
	if first == "" {
		t.Fatal("README.md has no program (a block marked <!-- snippet: run -->)")
	}
	m.try(t, name, "go run the README's first program", func() (string, error) {
		return r.goCmd(ctx, dir, "run", "./"+first)
	})
}

// unreleasedRequirement tags the commit before the release for
// extra/snowkeyprom (a prerelease of the version, so that it is no
// candidate for latest) and checks that a consumer cannot install it.
func (r *release) unreleasedRequirement(ctx context.Context, t *testing.T, m *matrix) {
	const mod = rootPath + "/extra/snowkeyprom"
	tag := "extra/snowkeyprom/" + r.version + "-control"
	run(ctx, t, r.clone, os.Environ(), "git", "tag", tag, "HEAD~1")
	pre := run(ctx, t, r.clone, os.Environ(), "git", "show", "HEAD~1:extra/snowkeyprom/go.mod")
	if !strings.Contains(pre, rootPath+" v0.0.0") {
		t.Fatalf("extra/snowkeyprom/go.mod before the release does not require %s v0.0.0:\n%s", rootPath, pre)
	}
	dir := r.freshModule(ctx, t, "control.test")
	m.try(t, mod+" (control)", "go get "+mod+"@"+r.version+"-control must fail", func() (string, error) {
		out, err := r.goCmd(ctx, dir, "get", mod+"@"+r.version+"-control")
		switch {
		case err == nil:
			return out, fmt.Errorf("go get succeeded: the test does not see a module that requires an unreleased version")
		case !strings.Contains(out, "v0.0.0"):
			return out, fmt.Errorf("go get failed, but not on the v0.0.0 requirement: %v", err)
		}
		t.Logf("as it must, go get of the module that requires v0.0.0 failed:\n%s", out)
		return out, nil
	})
}

// moduleOf returns the released module an import path belongs to (the
// longest module path that prefixes it).
func (r *release) moduleOf(imp string) (string, bool) {
	best := ""
	for _, m := range r.released {
		if (imp == m.Path || strings.HasPrefix(imp, m.Path+"/")) && len(m.Path) > len(best) {
			best = m.Path
		}
	}
	return best, best != ""
}

// freshModule makes an empty module named path in a new directory.
func (r *release) freshModule(ctx context.Context, t *testing.T, path string) string {
	dir := t.TempDir()
	writeFile(t, dir, "go.mod", fmt.Sprintf("module %s\n\ngo %s\n", path, r.goVersion(t)))
	return dir
}

// goVersion is the go directive of the released root module.
func (r *release) goVersion(t *testing.T) string {
	data, err := os.ReadFile(filepath.Join(r.clone, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("the root go.mod has no go directive")
	return ""
}

func (r *release) goCmd(ctx context.Context, dir string, args ...string) (string, error) {
	return r.goCmdEnv(ctx, dir, nil, args...)
}

func (r *release) goCmdEnv(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	c := exec.CommandContext(ctx, "go", args...)
	c.Dir = dir
	c.Env = append(slices.Clone(r.env), env...)
	out, err := c.CombinedOutput()
	return string(out), err
}

// run runs a command that must succeed and returns its standard output.
func run(ctx context.Context, t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	c := exec.CommandContext(ctx, name, args...)
	c.Dir = dir
	c.Env = env
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

func writeFile(t *testing.T, dir, name, text string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A matrix is the install matrix: a row per module and command, with its
// result and time, and the go.sum weight of each module.
type matrix struct {
	mu     sync.Mutex
	rows   []row
	weight map[string]weight
}

type row struct {
	module, command, result string
	took                    time.Duration
}

// A weight is what one module adds to a consumer's go.sum.
type weight struct {
	packages, lines, modules int
	// zips are the modules whose code (not only go.mod) go.sum checks:
	// those the go command downloads whole.
	zips int
}

// try runs one command of the matrix, records its row, and fails t with
// the command's output if it fails.
func (m *matrix) try(t *testing.T, module, command string, f func() (string, error)) bool {
	t.Helper()
	start := time.Now()
	out, err := f()
	result := "ok"
	if err != nil {
		result = "FAILED"
		t.Errorf("%s: %s: %v\n%s", module, command, err, out)
	}
	m.mu.Lock()
	m.rows = append(m.rows, row{module, command, result, time.Since(start)})
	m.mu.Unlock()
	return err == nil
}

// weigh records the go.sum of a consumer of module.
func (m *matrix) weigh(t *testing.T, module string, packages int, gosum string) {
	data, err := os.ReadFile(gosum)
	if err != nil {
		t.Fatal(err)
	}
	lines, zips, mods := 0, 0, map[string]bool{}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) == 3 {
			lines++
			if !strings.HasSuffix(f[1], "/go.mod") {
				zips++
			}
			mods[f[0]+"@"+strings.TrimSuffix(f[1], "/go.mod")] = true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.weight == nil {
		m.weight = map[string]weight{}
	}
	m.weight[module] = weight{packages, lines, len(mods), zips}
	t.Logf("a consumer of %s: %d go.sum lines, %d modules: %s", module, lines, len(mods),
		strings.Join(slices.Sorted(maps.Keys(mods)), " "))
}

func (m *matrix) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	slices.SortStableFunc(m.rows, func(a, b row) int { return strings.Compare(a.module, b.module) })
	for _, r := range m.rows {
		fmt.Fprintf(&b, "  %-52s  %-62s  %-6s  %5.1fs\n", r.module, r.command, r.result, r.took.Seconds())
	}
	return b.String()
}

// The lines of docs/operations.md between these markers are the table of
// what each module adds to a consumer's go.sum.
const (
	tableBegin = "<!-- go.sum weights: checked by internal/checks/release TestInstallFromTags -->"
	tableEnd   = "<!-- end of go.sum weights -->"
)

// checkGoSumTable fails, printing the table it wants, when the table of
// docs/operations.md is not what the consumers' go.sum files held.
func checkGoSumTable(t *testing.T, doc string, m *matrix) {
	var want strings.Builder
	want.WriteString("| module (packages imported) | go.sum lines | modules | whose code tidy downloads |\n| --- | ---: | ---: | ---: |\n")
	names := make([]string, 0, len(m.weight))
	for name := range m.weight {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		w := m.weight[name]
		fmt.Fprintf(&want, "| `%s` (%d) | %d | %d | %d |\n", name, w.packages, w.lines, w.modules, w.zips)
	}
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(data), tableBegin+"\n")
	got, _, ok2 := strings.Cut(rest, tableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no lines %q ... %q around the go.sum table; want there:\n%s", doc, tableBegin, tableEnd, want.String())
	}
	if got != want.String() {
		t.Errorf("the go.sum table of %s is not what consumers get; want:\n%s", doc, want.String())
	}
}

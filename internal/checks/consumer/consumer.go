// Package consumer measures what a user of snowkey's modules downloads:
// it writes a fresh module that imports some of the checkout's packages,
// replaces every module of the checkout by its directory, runs go mod
// tidy, and reads the go.sum that results. Each line of that go.sum is a
// module (or a module's go.mod) that the user's go command fetches and
// checks, so its length is the weight of the import.
//
// go mod tidy records, beside the modules that the imported packages
// build with, those that the imported packages' own tests import (so
// that the user can go test them); a test file of a package is therefore
// part of what the package costs its users.
package consumer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// ModulePath is the module path of the consumer module GoSum writes.
const ModulePath = "consumer.local"

// A Sum is what GoSum found in the consumer's go.sum.
type Sum struct {
	// Lines is the number of lines of go.sum; 0 when go mod tidy wrote
	// none.
	Lines int
	// Modules are the modules go.sum names, as path@version, sorted, each
	// once (a module usually has two lines: its files and its go.mod).
	Modules []string
}

// GoSum writes a consumer module into dir (which should be empty) that
// imports each of imports, with every module found under repo replaced
// by its directory, runs go mod tidy there and reads the go.sum it
// wrote. Each import must be a package of one of repo's modules; the
// consumer requires the module of each.
//
// go.sum starts as the union of the go.sum files of repo's modules, so
// that tidy finds the checksums of what the checkout uses without asking
// the checksum database; tidy drops every line the consumer does not
// need. env is added to the go command's environment (GOPROXY=off keeps
// it off the network); GOWORK=off and GOFLAGS=-mod=mod are always set.
func GoSum(ctx context.Context, dir, repo string, imports []string, env ...string) (Sum, error) {
	repo, err := filepath.Abs(repo)
	if err != nil {
		return Sum{}, err
	}
	mods, err := modules(repo)
	if err != nil {
		return Sum{}, err
	}
	if len(mods) == 0 {
		return Sum{}, fmt.Errorf("consumer: no go.mod under %s", repo)
	}
	goVersion := mods[0].goVersion
	required := map[string]bool{}
	for _, imp := range imports {
		m, ok := owner(mods, imp)
		if !ok {
			return Sum{}, fmt.Errorf("consumer: %s is in none of the modules under %s", imp, repo)
		}
		required[m.path] = true
	}

	var gomod, main strings.Builder
	fmt.Fprintf(&gomod, "module %s\n\ngo %s\n\nrequire (\n", ModulePath, goVersion)
	for _, m := range mods {
		if required[m.path] {
			fmt.Fprintf(&gomod, "\t%s v0.0.0\n", m.path)
		}
	}
	gomod.WriteString(")\n\nreplace (\n")
	for _, m := range mods {
		fmt.Fprintf(&gomod, "\t%s => %s\n", m.path, m.dir)
	}
	gomod.WriteString(")\n")
	main.WriteString("package main\n\nimport (\n")
	for _, imp := range imports {
		fmt.Fprintf(&main, "\t_ %q\n", imp)
	}
	main.WriteString(")\n\nfunc main() {}\n")
	var seed []byte
	seen := map[string]bool{}
	for _, m := range mods {
		b, err := os.ReadFile(filepath.Join(m.dir, "go.sum"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return Sum{}, err
		}
		for _, l := range strings.SplitAfter(string(b), "\n") {
			if strings.TrimSpace(l) != "" && !seen[l] {
				seen[l] = true
				seed = append(seed, l...)
			}
		}
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod.String()), "main.go": []byte(main.String()), "go.sum": seed} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return Sum{}, err
		}
	}

	cmd := exec.CommandContext(ctx, "go", "mod", "tidy")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), env...), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return Sum{}, fmt.Errorf("consumer: go mod tidy for %s: %v\n%s", strings.Join(imports, " "), err, out)
	}
	return readSum(filepath.Join(dir, "go.sum"))
}

// readSum reads a go.sum; a missing one is empty.
func readSum(path string) (Sum, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Sum{}, nil
	} else if err != nil {
		return Sum{}, err
	}
	var s Sum
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		s.Lines++
		if len(f) == 3 {
			m := f[0] + "@" + strings.TrimSuffix(f[1], "/go.mod")
			if !slices.Contains(s.Modules, m) {
				s.Modules = append(s.Modules, m)
			}
		}
	}
	slices.Sort(s.Modules)
	return s, sc.Err()
}

// module is one Go module of a checkout.
type module struct {
	path, dir, goVersion string
}

// modules returns the modules under repo, the one at repo first, then by
// directory; like scripts/lib.sh, it looks into no .git, testdata,
// node_modules, vendor, bin or hidden directory.
func modules(repo string) ([]module, error) {
	var mods []module
	err := filepath.WalkDir(repo, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != repo && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" ||
				name == "vendor" || (name == "bin" && filepath.Dir(path) == repo)) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "go.mod" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		m := module{dir: filepath.Dir(path)}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) == 2 && f[0] == "module":
				m.path = strings.Trim(f[1], `"`)
			case len(f) == 2 && f[0] == "go":
				m.goVersion = f[1]
			}
		}
		if m.path == "" {
			return fmt.Errorf("consumer: %s names no module", path)
		}
		mods = append(mods, m)
		return nil
	})
	slices.SortStableFunc(mods, func(a, b module) int {
		switch {
		case a.dir == repo:
			return -1
		case b.dir == repo:
			return 1
		}
		return strings.Compare(a.dir, b.dir)
	})
	return mods, err
}

// owner returns the module that holds package path: the one with the
// longest module path that is path or a prefix of it.
func owner(mods []module, path string) (module, bool) {
	var best module
	found := false
	for _, m := range mods {
		if (path == m.path || strings.HasPrefix(path, m.path+"/")) && len(m.path) > len(best.path) {
			best, found = m, true
		}
	}
	return best, found
}

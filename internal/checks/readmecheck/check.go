package readmecheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/format"
	"go/parser"
	"go/token"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// modulePath is the path of the scratch module the blocks are built in.
const modulePath = "readmecheck.local"

// A Module is a scratch Go module in a directory of its own that requires
// snowkey, replaced by a checkout of it, with the versions of
// dependencies that the checkout's go.mod selects. Each block is built in
// a package of its own.
type Module struct {
	// BuildFlags go to every go build and go vet, such as -race and
	// -trimpath, so that they find the dependencies compiled by a test
	// run with the same flags in the build cache (GOFLAGS is -mod=mod).
	BuildFlags []string

	dir string
	env []string
}

// NewModuleOf writes the scratch module into dir (which should be empty)
// for blocks that build against base, a module of the snowkey checkout at
// repo: repo itself, or a directory such as repo/examples whose go.mod
// replaces snowkey by the checkout. Its go.mod requires snowkey, replaced
// by repo, and base's module, replaced by base, and every module base
// requires, at the same versions, with base's replacements (relative ones
// resolved against base); its go.sum is a copy of base's. A block can then
// import base's packages and its dependencies as well as snowkey's. The go
// commands it runs use only the local module cache (GOPROXY=off,
// GOWORK=off, GOFLAGS=-mod=mod), so that a block cannot make them download
// anything.
func NewModuleOf(ctx context.Context, dir, repo, base string) (*Module, error) {
	repo, err := filepath.Abs(repo)
	if err != nil {
		return nil, err
	}
	if base, err = filepath.Abs(base); err != nil {
		return nil, err
	}
	m := &Module{dir: dir, env: append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOFLAGS=-mod=mod")}
	root, err := m.readGoMod(ctx, repo)
	if err != nil {
		return nil, err
	}
	mod, err := root, nil
	if base != repo {
		if mod, err = m.readGoMod(ctx, base); err != nil {
			return nil, err
		}
	}
	var gomod strings.Builder
	fmt.Fprintf(&gomod, "module %s\n\ngo %s\n\nrequire (\n\t%s v0.0.0\n", modulePath, mod.Go, mod.Module.Path)
	for _, r := range mod.Require {
		if r.Path != root.Module.Path {
			fmt.Fprintf(&gomod, "\t%s %s\n", r.Path, r.Version)
		}
	}
	if base != repo {
		fmt.Fprintf(&gomod, "\t%s v0.0.0\n", root.Module.Path)
	}
	fmt.Fprintf(&gomod, ")\n\nreplace %s => %s\n", root.Module.Path, repo)
	if base != repo {
		fmt.Fprintf(&gomod, "\nreplace %s => %s\n", mod.Module.Path, base)
	}
	for _, r := range mod.Replace {
		if r.Old.Path == root.Module.Path {
			continue
		}
		to := r.New.Path
		if r.New.Version != "" {
			to += " " + r.New.Version
		} else if !filepath.IsAbs(to) {
			to = filepath.Join(base, to)
		}
		fmt.Fprintf(&gomod, "\nreplace %s => %s\n", r.Old.Path, to)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod.String()), 0o644); err != nil {
		return nil, err
	}
	sum, err := os.ReadFile(filepath.Join(base, "go.sum"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		return nil, err
	}
	return m, nil
}

// goMod is what NewModuleOf reads of a go.mod.
type goMod struct {
	Module  struct{ Path string }
	Go      string
	Require []struct{ Path, Version string }
	Replace []struct {
		Old, New struct{ Path, Version string }
	}
}

// readGoMod reads the go.mod in dir.
func (m *Module) readGoMod(ctx context.Context, dir string) (goMod, error) {
	var mod goMod
	out, err := m.goCmd(ctx, dir, "mod", "edit", "-json")
	if err != nil {
		return mod, fmt.Errorf("readmecheck: read %s/go.mod: %v\n%s", dir, err, out)
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		return mod, fmt.Errorf("readmecheck: read %s/go.mod: %v", dir, err)
	}
	return mod, nil
}

// Check builds block b of the Markdown file mdPath (an absolute path,
// which the errors name) with go build and go vet, and runs it if it is a
// program, with env added to its environment (such as the DATABASE_URL
// of a server for it). A File or Program must also be gofmt-formatted.
// The error holds the go commands' output, with positions in the Markdown
// file; the output is what a Program printed.
func (m *Module) Check(ctx context.Context, mdPath string, b Block, env ...string) (output string, err error) {
	src, err := Source(mdPath, b)
	if err != nil {
		return "", err
	}
	if b.Kind != Fragment {
		f, err := parser.ParseFile(token.NewFileSet(), "", b.Code, parser.PackageClauseOnly)
		switch {
		case err != nil:
			return "", fmt.Errorf("%s:%d: a go block without a marker is a complete file, package clause first, "+
				"or else it needs <!-- snippet: fragment --> on the line before it: %v", mdPath, b.Line, err)
		case b.Kind == Program && f.Name.Name != "main":
			return "", fmt.Errorf("%s:%d: a block marked run must be package main, not %s", mdPath, b.Line, f.Name.Name)
		}
		if formatted, err := format.Source([]byte(b.Code)); err == nil && !bytes.Equal(formatted, []byte(b.Code)) {
			return "", fmt.Errorf("%s:%d: the block is not gofmt-formatted; gofmt makes it:\n%s", mdPath, b.Line, formatted)
		}
	}
	// A package of its own for each file's block, so that blocks of
	// several files can be checked at once in one Module.
	h := fnv.New32a()
	_, _ = h.Write([]byte(mdPath))
	pkg := fmt.Sprintf("b%05d_%08x", b.Line, h.Sum32())
	dir := filepath.Join(m.dir, pkg)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "block.go"), []byte(src), 0o644); err != nil {
		return "", err
	}
	bin := os.DevNull
	if b.Kind == Program {
		bin = filepath.Join(m.dir, pkg+".exe")
	}
	build := append(append([]string{"build"}, m.BuildFlags...), "-o", bin, "./"+pkg)
	if out, err := m.goCmd(ctx, m.dir, build...); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	vet := append(append([]string{"vet"}, m.BuildFlags...), "./"+pkg)
	if out, err := m.goCmd(ctx, m.dir, vet...); err != nil {
		return "", fmt.Errorf("go vet: %v\n%s", err, out)
	}
	if b.Kind != Program {
		return "", nil
	}
	cmd := exec.CommandContext(ctx, bin)
	cmd.Dir = m.dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s:%d: the program failed: %v\n%s", mdPath, b.Line, err, out)
	}
	return string(out), nil
}

// goCmd runs the go command in dir and returns its combined output.
func (m *Module) goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = m.env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return out, fmt.Errorf("readmecheck: run go %s: %w", strings.Join(args, " "), err)
	}
	return out, err
}

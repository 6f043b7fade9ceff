// Package apifile writes down the exported API of a Go module as text, one
// declaration a line, sorted, in the manner of Go's own api/*.txt: a
// change to any exported name, signature, field or constant of a module
// is then a line of a diff that someone reviews.
//
// It finds a module's packages with `go list`, reads their compiled
// export data (go list -export) and prints, for every package that a
// user can import (not internal, not a command):
//
//	pkg P, const C T = V
//	pkg P, var V T
//	pkg P, func F(params) results
//	pkg P, type T struct
//	pkg P, type T struct, F U
//	pkg P, type T struct, embedded U
//	pkg P, type I interface { M1, M2 }
//	pkg P, type I interface, M1(params) results
//	pkg P, method (*T) M(params) results
//	pkg P, type A = U
//	pkg P, type T U
//
// Types of other packages are written with their full import path.
package apifile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// A Module is one Go module of a repository.
type Module struct {
	// Dir is the module's directory, relative to the repository root,
	// "." for the root module.
	Dir string
	// Path is the module path its go.mod declares.
	Path string
	// Released is false when the go.mod says "// Not released" on a line
	// of its own: such a module has no API file and no tag.
	Released bool
}

// File is the API file of the module, relative to the repository root:
// api/snowkey.txt for the root module, api/extra_snowkeyprom.txt for
// extra/snowkeyprom.
func (m Module) File() string {
	if m.Dir == "." {
		return filepath.Join("api", "snowkey.txt")
	}
	return filepath.Join("api", strings.ReplaceAll(filepath.ToSlash(m.Dir), "/", "_")+".txt")
}

// notReleased is the go.mod line that keeps a module out of releases.
const notReleased = "// Not released"

// Modules returns every module under root (each directory with a go.mod,
// skipping .git, testdata, node_modules, vendor and bin), the root module
// first, then by directory.
func Modules(root string) ([]Module, error) {
	var mods []Module
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root {
			switch d.Name() {
			case ".git", "testdata", "node_modules", "vendor", "bin", ".testservers", "bench-results":
				return filepath.SkipDir
			}
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		m := Module{Dir: rel, Released: true}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if p, ok := strings.CutPrefix(line, "module "); ok && m.Path == "" {
				m.Path = strings.Trim(strings.TrimSpace(p), `"`)
			}
			if strings.HasPrefix(line, notReleased) {
				m.Released = false
			}
		}
		if m.Path == "" {
			return fmt.Errorf("apifile: %s declares no module", path)
		}
		mods = append(mods, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(mods, func(a, b Module) int {
		if (a.Dir == ".") != (b.Dir == ".") {
			if a.Dir == "." {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Dir, b.Dir)
	})
	return mods, nil
}

// listed is what API reads of `go list -json`.
type listed struct {
	ImportPath string
	Name       string
	Export     string
	Standard   bool
	Module     *struct{ Path string }
	Error      *struct{ Err string }
}

// API returns the API file's text of the module in dir (whose go.mod
// declares modPath): every line described in the package comment, sorted,
// each ending in a newline. It runs the go command in dir with GOWORK=off,
// so that the module is built with the versions its own go.mod selects.
func API(ctx context.Context, dir, modPath string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-e", "-export", "-deps", "-json=ImportPath,Name,Export,Standard,Module,Error", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("apifile: go list in %s: %v\n%s", dir, err, stderr.Bytes())
	}
	exports := map[string]string{}
	var own []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", fmt.Errorf("apifile: reading go list: %v", err)
		}
		if p.Error != nil {
			return "", fmt.Errorf("apifile: %s: %s", p.ImportPath, p.Error.Err)
		}
		exports[p.ImportPath] = p.Export
		// A package of test files alone (Export empty) exports nothing.
		if p.Module != nil && p.Module.Path == modPath && p.Name != "main" && !internal(p.ImportPath) && p.Export != "" {
			own = append(own, p.ImportPath)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	var lines []string
	for _, path := range own {
		pkg, err := imp.Import(path)
		if err != nil {
			return "", fmt.Errorf("apifile: %s: %v", path, err)
		}
		lines = append(lines, pkgLines(pkg)...)
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	if len(lines) == 0 {
		return "", nil
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// internal reports whether path has an element "internal", which no
// other module can import.
func internal(path string) bool {
	return slices.Contains(strings.Split(path, "/"), "internal")
}

// pkgLines returns the lines of one package's exported names.
func pkgLines(pkg *types.Package) []string {
	qual := func(p *types.Package) string {
		if p == pkg {
			return ""
		}
		return p.Path()
	}
	typ := func(t types.Type) string { return types.TypeString(t, qual) }
	sig := func(s *types.Signature) string { return signature(s, qual) }
	pre := "pkg " + pkg.Path() + ", "
	var out []string
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch o := obj.(type) {
		case *types.Const:
			out = append(out, fmt.Sprintf("%sconst %s %s = %s", pre, name, typ(o.Type()), o.Val().ExactString()))
		case *types.Var:
			out = append(out, fmt.Sprintf("%svar %s %s", pre, name, typ(o.Type())))
		case *types.Func:
			out = append(out, fmt.Sprintf("%sfunc %s%s%s", pre, name, typeParams(o.Type().(*types.Signature).TypeParams(), qual), sig(o.Type().(*types.Signature))))
		case *types.TypeName:
			out = append(out, typeLines(pre, o, qual)...)
		}
	}
	return out
}

// typeParams writes a type parameter list, "[T any, U comparable]", or
// nothing.
func typeParams(tp *types.TypeParamList, qual types.Qualifier) string {
	if tp.Len() == 0 {
		return ""
	}
	parts := make([]string, tp.Len())
	for i := range tp.Len() {
		p := tp.At(i)
		parts[i] = p.Obj().Name() + " " + types.TypeString(p.Constraint(), qual)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// typeLines returns the lines of one exported type: the type, its
// exported fields or interface methods, and its exported methods.
func typeLines(pre string, o *types.TypeName, qual types.Qualifier) []string {
	typ := func(t types.Type) string { return types.TypeString(t, qual) }
	name := o.Name()
	if o.IsAlias() {
		return []string{fmt.Sprintf("%stype %s = %s", pre, name, typ(types.Unalias(o.Type())))}
	}
	named, ok := o.Type().(*types.Named)
	if !ok {
		return []string{fmt.Sprintf("%stype %s %s", pre, name, typ(o.Type()))}
	}
	head := pre + "type " + name + typeParams(named.TypeParams(), qual)
	var out []string
	switch u := named.Underlying().(type) {
	case *types.Struct:
		out = append(out, head+" struct")
		for i := range u.NumFields() {
			f := u.Field(i)
			if !f.Exported() {
				continue
			}
			if f.Embedded() {
				out = append(out, fmt.Sprintf("%s struct, embedded %s", head, typ(f.Type())))
			} else {
				out = append(out, fmt.Sprintf("%s struct, %s %s", head, f.Name(), typ(f.Type())))
			}
		}
	case *types.Interface:
		// The method set, embedded interfaces' methods included; a
		// union or other non-interface element of a constraint by
		// its type; unexported methods, which no other package can
		// implement, as one marker.
		var names []string
		unexported := false
		for i := range u.NumMethods() {
			m := u.Method(i)
			if !m.Exported() {
				unexported = true
				continue
			}
			names = append(names, m.Name())
			out = append(out, fmt.Sprintf("%s interface, %s%s", head, m.Name(),
				signature(m.Type().(*types.Signature), qual)))
		}
		for i := range u.NumEmbeddeds() {
			if e := u.EmbeddedType(i); !types.IsInterface(e) {
				names = append(names, typ(e))
			}
		}
		if unexported {
			names = append(names, "unexported methods")
		}
		out = append(out, fmt.Sprintf("%s interface { %s }", head, strings.Join(names, ", ")))
	default:
		out = append(out, fmt.Sprintf("%s %s", head, typ(u)))
	}
	for i := range named.NumMethods() {
		m := named.Method(i)
		if !m.Exported() {
			continue
		}
		s := m.Type().(*types.Signature)
		recv := name
		if tp := named.TypeParams(); tp.Len() > 0 {
			ps := make([]string, tp.Len())
			for j := range tp.Len() {
				ps[j] = tp.At(j).Obj().Name()
			}
			recv += "[" + strings.Join(ps, ", ") + "]"
		}
		if _, ptr := s.Recv().Type().(*types.Pointer); ptr {
			recv = "*" + recv
		}
		out = append(out, fmt.Sprintf("%smethod (%s) %s%s", pre, recv, m.Name(), signature(s, qual)))
	}
	return out
}

// signature writes a signature's parameter and result types without their
// names, which are no part of the API: "(string, ...int) (ID, error)".
func signature(s *types.Signature, qual types.Qualifier) string {
	list := func(t *types.Tuple, variadic bool) []string {
		parts := make([]string, t.Len())
		for i := range t.Len() {
			ty := t.At(i).Type()
			if variadic && i == t.Len()-1 {
				parts[i] = "..." + types.TypeString(ty.(*types.Slice).Elem(), qual)
				continue
			}
			parts[i] = types.TypeString(ty, qual)
		}
		return parts
	}
	out := "(" + strings.Join(list(s.Params(), s.Variadic()), ", ") + ")"
	switch res := list(s.Results(), false); len(res) {
	case 0:
	case 1:
		out += " " + res[0]
	default:
		out += " (" + strings.Join(res, ", ") + ")"
	}
	return out
}

// Package luakeys finds the Redis scripts in Go source and the keys each
// touches without receiving them in KEYS. Redis documents that a script
// must be given every key it touches: a Cluster checks them against the
// script's slot, Dragonfly refuses undeclared keys, and proxies route by
// them. snowkey's test of that rule (luakeys_test.go) runs Find over the
// repository and Undeclared over every script.
//
// A script is a Go string constant, or a string literal outside any
// constant, whose text calls redis.call or redis.pcall; constants built
// with + from other constants of the package are read whole. The Lua
// reading is deliberately small: it knows the key arguments of the
// commands the scripts use, and follows a local variable through every
// assignment to it. A key argument passes if it is KEYS[...] itself, or a
// variable every assignment of which is KEYS[...]. A line that ends in
// "-- undeclared key: control run" is left out: it exists for a test's
// control run, which must build a key of its own.
package luakeys

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// controlMark ends a line of Lua that only a test's control run takes.
const controlMark = "-- undeclared key: control run"

// A Script is a Redis script found in Go source.
type Script struct {
	// File is the Go file, relative to the directory Find walked.
	File string
	// Name is the constant's name, or "line N" for a literal.
	Name string
	// Source is the Lua text.
	Source string
}

// A Use is a key argument of redis.call or redis.pcall that does not come
// from KEYS.
type Use struct {
	// Line is the line of the script (from 1) where the call is.
	Line int
	// Command is the Redis command, upper case.
	Command string
	// Key is the argument's Lua expression.
	Key string
}

// Find returns the scripts of every Go file under dir but tests, skipping
// directories named testdata, vendor or node_modules and those starting
// with a dot.
func Find(dir string) ([]Script, error) {
	byPkg := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != dir && (name == "testdata" || name == "vendor" || name == "node_modules" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			byPkg[filepath.Dir(path)] = append(byPkg[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []Script
	for _, files := range byPkg {
		s, err := packageScripts(dir, files)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	return out, nil
}

// packageScripts reads the scripts of one directory's files.
func packageScripts(root string, files []string) ([]Script, error) {
	fset := token.NewFileSet()
	type constSpec struct {
		file string
		expr ast.Expr
	}
	consts := map[string]constSpec{}
	var out []Script
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, path)
		inConst := map[ast.Node]bool{}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						consts[n.Name] = constSpec{rel, vs.Values[i]}
						ast.Inspect(vs.Values[i], func(n ast.Node) bool { inConst[n] = true; return true })
					}
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || inConst[lit] {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && isScript(s) {
				out = append(out, Script{File: rel, Name: "line " + strconv.Itoa(fset.Position(lit.Pos()).Line), Source: s})
			}
			return true
		})
	}
	var eval func(e ast.Expr, depth int) (string, bool)
	eval = func(e ast.Expr, depth int) (string, bool) {
		if depth > 50 {
			return "", false
		}
		switch e := e.(type) {
		case *ast.BasicLit:
			if e.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		case *ast.Ident:
			c, ok := consts[e.Name]
			if !ok {
				return "", false
			}
			return eval(c.expr, depth+1)
		case *ast.ParenExpr:
			return eval(e.X, depth+1)
		case *ast.BinaryExpr:
			if e.Op != token.ADD {
				return "", false
			}
			x, ok1 := eval(e.X, depth+1)
			y, ok2 := eval(e.Y, depth+1)
			return x + y, ok1 && ok2
		}
		return "", false
	}
	for name, c := range consts {
		if s, ok := eval(c.expr, 0); ok && isScript(s) {
			out = append(out, Script{File: c.file, Name: name, Source: s})
		}
	}
	return out, nil
}

var callRE = regexp.MustCompile(`redis\.p?call\s*\(`)

func isScript(s string) bool { return callRE.MatchString(s) }

// Commands by where their keys are: none, every argument, or the first.
var (
	keyless = map[string]bool{"TIME": true, "PING": true, "ECHO": true, "INFO": true}
	allKeys = map[string]bool{"DEL": true, "EXISTS": true, "UNLINK": true, "MGET": true, "TOUCH": true}
)

var (
	declaredRE = regexp.MustCompile(`^KEYS\s*\[[^\[\]]+\]$`)
	identRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// An assignment: "local a, b = x, y" or "a = x" (not "==").
	assignRE = regexp.MustCompile(`^\s*(?:local\s+)?([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)\s*=([^=].*)$`)
	// A loop's variables: "for a, b in" or "for i =".
	forRE = regexp.MustCompile(`\bfor\s+([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*)\s*(?:in\b|=)`)
)

// undeclared returns the key arguments of the script's redis.call and
// redis.pcall calls that do not come from KEYS, in the order of the
// calls. A call whose command is not a string literal counts as one, since
// its keys cannot be known.
func undeclared(src string) []Use {
	lines := codeLines(src)
	var out []Use
	for i, line := range lines {
		for _, loc := range callRE.FindAllStringIndex(line, -1) {
			args, ok := callArgs(line[loc[1]:])
			if !ok || len(args) == 0 {
				out = append(out, Use{Line: i + 1, Command: "?", Key: strings.TrimSpace(line[loc[0]:])})
				continue
			}
			cmd, err := strconv.Unquote(strings.ReplaceAll(args[0], "'", `"`))
			if err != nil {
				out = append(out, Use{Line: i + 1, Command: "?", Key: args[0]})
				continue
			}
			cmd = strings.ToUpper(cmd)
			var keys []string
			switch {
			case keyless[cmd]:
			case allKeys[cmd]:
				keys = args[1:]
			case len(args) > 1:
				keys = args[1:2]
			}
			for _, k := range keys {
				if !fromKeys(lines, k, 0) {
					out = append(out, Use{Line: i + 1, Command: cmd, Key: k})
				}
			}
		}
	}
	return out
}

// codeLines splits src into lines without comments, blanking the lines a
// control run alone takes.
func codeLines(src string) []string {
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		if strings.HasSuffix(strings.TrimSpace(l), controlMark) {
			lines[i] = ""
			continue
		}
		lines[i] = stripComment(l)
	}
	return lines
}

// outsideStrings calls f with the place of every byte of s that is not
// inside a Lua string literal, until f returns false.
func outsideStrings(s string, f func(i int) bool) {
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		default:
			if !f(i) {
				return
			}
		}
	}
}

// stripComment cuts a "--" comment off a line, outside string literals.
func stripComment(l string) string {
	cut := len(l)
	outsideStrings(l, func(i int) bool {
		if l[i] == '-' && i+1 < len(l) && l[i+1] == '-' {
			cut = i
			return false
		}
		return true
	})
	return l[:cut]
}

// callArgs splits the arguments of a call whose text starts after its
// "(", at commas outside brackets and strings, up to the closing ")".
func callArgs(s string) (args []string, closed bool) {
	depth, start := 0, 0
	outsideStrings(s, func(i int) bool {
		switch s[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth == 0 {
				if a := strings.TrimSpace(s[start:i]); a != "" || len(args) > 0 {
					args = append(args, a)
				}
				closed = true
				return false
			}
			depth--
		case ',':
			if depth == 0 {
				args = append(args, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
		return true
	})
	if !closed {
		return nil, false
	}
	return args, true
}

// fromKeys reports whether the expression is KEYS[...], or a variable that
// every assignment in the script gives KEYS[...].
func fromKeys(lines []string, expr string, depth int) bool {
	expr = strings.TrimSpace(expr)
	if declaredRE.MatchString(expr) {
		return true
	}
	if !identRE.MatchString(expr) || depth > 10 {
		return false
	}
	found := false
	for _, l := range lines {
		if m := forRE.FindStringSubmatch(l); m != nil && indexOf(m[1], expr) >= 0 {
			return false // a loop variable: a value, not a key of KEYS
		}
		m := assignRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		at := indexOf(m[1], expr)
		if at < 0 {
			continue
		}
		values, ok := callArgs(m[2] + ")")
		if !ok || at >= len(values) || !fromKeys(lines, values[at], depth+1) {
			return false
		}
		found = true
	}
	return found
}

// indexOf returns the place of name in a comma-separated list of names, or
// -1.
func indexOf(list, name string) int {
	for i, n := range strings.Split(list, ",") {
		if strings.TrimSpace(n) == name {
			return i
		}
	}
	return -1
}

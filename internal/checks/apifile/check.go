package apifile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Write writes the API file of every released module under root and
// removes api/*.txt files that belong to no released module. It returns
// the files it wrote, relative to root.
func Write(ctx context.Context, root string) ([]string, error) {
	mods, err := Modules(root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(root, "api"), 0o755); err != nil {
		return nil, err
	}
	var wrote []string
	for _, m := range released(mods) {
		text, err := API(ctx, filepath.Join(root, m.Dir), m.Path)
		if err != nil {
			return wrote, err
		}
		if err := os.WriteFile(filepath.Join(root, m.File()), []byte(text), 0o644); err != nil {
			return wrote, err
		}
		wrote = append(wrote, m.File())
	}
	stale, err := staleFiles(root, mods)
	if err != nil {
		return wrote, err
	}
	for _, f := range stale {
		if err := os.Remove(filepath.Join(root, f)); err != nil {
			return wrote, err
		}
	}
	return wrote, nil
}

// Check compares the API file of every released module under root with
// what the module exports now. It returns one report per file that
// differs (missing, stale, or with lines removed "-" or added "+"), empty
// when every file is current.
func Check(ctx context.Context, root string) ([]string, error) {
	mods, err := Modules(root)
	if err != nil {
		return nil, err
	}
	var reports []string
	for _, m := range released(mods) {
		text, err := API(ctx, filepath.Join(root, m.Dir), m.Path)
		if err != nil {
			return nil, err
		}
		old, err := os.ReadFile(filepath.Join(root, m.File()))
		if errors.Is(err, fs.ErrNotExist) {
			reports = append(reports, fmt.Sprintf("%s: missing (module %s)\n", m.File(), m.Path))
			continue
		} else if err != nil {
			return nil, err
		}
		if d := Diff(string(old), text); d != "" {
			reports = append(reports, fmt.Sprintf("%s (module %s) is not what the code exports:\n%s", m.File(), m.Path, d))
		}
	}
	stale, err := staleFiles(root, mods)
	if err != nil {
		return nil, err
	}
	for _, f := range stale {
		reports = append(reports, fmt.Sprintf("%s: belongs to no released module\n", f))
	}
	return reports, nil
}

// Diff returns the lines of old that new lacks, each after "-", and the
// lines of new that old lacks, each after "+", in order; empty when they
// hold the same lines. API files are sorted sets of lines, so this is
// their whole difference.
func Diff(old, new string) string {
	o, n := lineSet(old), lineSet(new)
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(old, "\n"), "\n") {
		if l != "" && !n[l] {
			fmt.Fprintf(&b, "-%s\n", l)
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(new, "\n"), "\n") {
		if l != "" && !o[l] {
			fmt.Fprintf(&b, "+%s\n", l)
		}
	}
	if b.Len() == 0 && old != new {
		return "(the same lines, in another order or spacing: run make api)\n"
	}
	return b.String()
}

func lineSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(s, "\n") {
		m[l] = true
	}
	return m
}

func released(mods []Module) []Module {
	return slices.DeleteFunc(slices.Clone(mods), func(m Module) bool { return !m.Released })
}

// staleFiles returns the api/*.txt files under root that are no released
// module's file.
func staleFiles(root string, mods []Module) ([]string, error) {
	want := map[string]bool{}
	for _, m := range released(mods) {
		want[m.File()] = true
	}
	found, err := filepath.Glob(filepath.Join(root, "api", "*.txt"))
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, f := range found {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			return nil, err
		}
		if !want[rel] {
			stale = append(stale, rel)
		}
	}
	return stale, nil
}

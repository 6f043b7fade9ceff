package migrations

import (
	"errors"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"
)

// union is the files of several file systems read as one: goose reads
// migrations from one fs.FS, and snowkey's live in two packages (each
// beside the code that uses it). Where two members hold one name, the
// first wins; TestFS checks that none do.
type union []fs.FS

// Open opens name in the first member that has it; "." is the union of
// the members' roots.
func (u union) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		entries, err := u.ReadDir(".")
		if err != nil {
			return nil, err
		}
		return &unionRoot{entries: entries}, nil
	}
	for _, f := range u {
		file, err := f.Open(name)
		if !errors.Is(err, fs.ErrNotExist) {
			return file, err
		}
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// ReadDir lists the directory name of every member that has it, sorted by
// name, a name that repeats listed once.
func (u union) ReadDir(name string) ([]fs.DirEntry, error) {
	var out []fs.DirEntry
	found := false
	for _, f := range u {
		entries, err := fs.ReadDir(f, name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		found = true
		for _, e := range entries {
			if !slices.ContainsFunc(out, func(o fs.DirEntry) bool { return o.Name() == e.Name() }) {
				out = append(out, e)
			}
		}
	}
	if !found {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

// unionRoot is the open root directory of a union.
type unionRoot struct {
	entries []fs.DirEntry
	off     int
}

func (d *unionRoot) Stat() (fs.FileInfo, error) { return rootInfo{}, nil }
func (d *unionRoot) Close() error               { return nil }

func (d *unionRoot) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: ".", Err: errors.New("is a directory")}
}

// ReadDir follows fs.ReadDirFile: n > 0 reads up to n entries and io.EOF
// at the end; n <= 0 reads the rest.
func (d *unionRoot) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.off:]
	if n > 0 {
		if len(rest) == 0 {
			return nil, io.EOF
		}
		rest = rest[:min(n, len(rest))]
	}
	d.off += len(rest)
	return slices.Clone(rest), nil
}

// rootInfo describes a union's root, a read-only directory.
type rootInfo struct{}

func (rootInfo) Name() string       { return "." }
func (rootInfo) Size() int64        { return 0 }
func (rootInfo) Mode() fs.FileMode  { return fs.ModeDir | 0o555 }
func (rootInfo) ModTime() time.Time { return time.Time{} }
func (rootInfo) IsDir() bool        { return true }
func (rootInfo) Sys() any           { return nil }

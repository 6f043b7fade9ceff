package history

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func writeIDs(t *testing.T, path string, ids []int64, partial bool) {
	t.Helper()
	var b []byte
	for _, id := range ids {
		b = AppendID(b, id)
	}
	if partial {
		b = append(b, 1, 2, 3) // a record cut short by a kill
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckUniqueFiles(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	writeIDs(t, a, []int64{1, 5, 9, -3}, true)
	writeIDs(t, b, []int64{2, 9, 7, 7}, false)
	writeIDs(t, c, []int64{1, 100}, true)

	total, dups, err := CheckUniqueFiles(a, b, c)
	if err != nil {
		t.Fatal(err)
	}
	if total != 10 {
		t.Errorf("total %d, want 10", total)
	}
	want := []Dup{{id: 1, sources: []string{a, c}}, {id: 7, sources: []string{b, b}}, {id: 9, sources: []string{a, b}}}
	if !reflect.DeepEqual(dups, want) {
		t.Errorf("dups %v, want %v", dups, want)
	}

	total, dups, err = CheckUniqueFiles(c)
	if err != nil || total != 2 || dups != nil {
		t.Errorf("one file without repeats: %d, %v, %v", total, dups, err)
	}
	ids, err := readIDFile(a)
	if err != nil || !reflect.DeepEqual(ids, []int64{1, 5, 9, -3}) {
		t.Errorf("ReadIDFile: %v, %v", ids, err)
	}
	if _, _, err := CheckUniqueFiles(a, filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestCheckUnique(t *testing.T) {
	src := map[string][]int64{"p1": {3, 1, 2}, "p2": {4, 3}, "p3": {}}
	total, dups := checkUnique(&work{}, src)
	if total != 5 || !reflect.DeepEqual(dups, []Dup{{id: 3, sources: []string{"p1", "p2"}}}) {
		t.Errorf("checkUnique: %d, %v", total, dups)
	}
	if !reflect.DeepEqual(src["p1"], []int64{3, 1, 2}) {
		t.Errorf("checkUnique changed its input: %v", src["p1"])
	}
}

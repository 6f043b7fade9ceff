package history

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
)

// An ID file holds the IDs one process issued, each as 8 bytes,
// little-endian, appended as they are issued. A process killed midway may
// leave a partial last record; readers ignore it.
const idRecord = 8

// AppendID appends id to dst as one record of an ID file.
func AppendID(dst []byte, id int64) []byte {
	return binary.LittleEndian.AppendUint64(dst, uint64(id))
}

// readIDFile returns the IDs in the ID file at path, in file order,
// without a partial last record.
func readIDFile(path string) ([]int64, error) {
	var ids []int64
	if fi, err := os.Stat(path); err == nil {
		ids = make([]int64, 0, fi.Size()/idRecord)
	}
	err := scanIDFile(path, func(id int64) { ids = append(ids, id) })
	return ids, err
}

// scanIDFile calls f with every whole record of the ID file at path.
func scanIDFile(path string, f func(int64)) error {
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("history: read IDs: %w", err)
	}
	defer file.Close()
	r := bufio.NewReaderSize(file, 64<<10)
	var rec [idRecord]byte
	for {
		if _, err := io.ReadFull(r, rec[:]); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil
			}
			return fmt.Errorf("history: read IDs from %s: %w", path, err)
		}
		f(int64(binary.LittleEndian.Uint64(rec[:])))
	}
}

// Dup is an ID issued more than once.
type Dup struct {
	id int64
	// sources names, once per time it was issued, the file (or, for
	// checkUnique, the source) that holds it; a name twice means one
	// process issued it twice.
	sources []string
}

// String names the ID and every source that issued it.
func (d Dup) String() string {
	return fmt.Sprintf("ID %d issued %d times: %v", d.id, len(d.sources), d.sources)
}

// CheckUniqueFiles reads the ID files at paths and returns how many IDs
// they hold in all and every ID found more than once, in ascending order
// of ID. It holds 8 bytes per ID in memory: it sorts all IDs to find the
// repeated ones, then reads the files again to name where each came from:
// O(n log n) steps for n IDs.
func CheckUniqueFiles(paths ...string) (total int, dups []Dup, err error) {
	return checkUniqueFiles(&work{}, paths...)
}

// checkUniqueFiles is CheckUniqueFiles, counting its steps in w.
func checkUniqueFiles(w *work, paths ...string) (total int, dups []Dup, err error) {
	var size int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			size += fi.Size() / idRecord
		}
	}
	all := make([]int64, 0, size)
	for _, p := range paths {
		err := scanIDFile(p, func(id int64) {
			w.steps++
			all = append(all, id)
		})
		if err != nil {
			return 0, nil, err
		}
	}
	repeated := repeatedIDs(w, all)
	if len(repeated) == 0 {
		return len(all), nil, nil
	}
	where := map[int64][]string{}
	for _, p := range paths {
		err := scanIDFile(p, func(id int64) {
			w.steps++
			if repeated[id] {
				where[id] = append(where[id], p)
			}
		})
		if err != nil {
			return 0, nil, err
		}
	}
	return len(all), dupList(w, where), nil
}

// checkUnique is CheckUniqueFiles for IDs held in memory, by source name
// (a process, a goroutine), counting its steps in w. It does not change
// the slices.
func checkUnique(w *work, sources map[string][]int64) (total int, dups []Dup) {
	for _, ids := range sources {
		total += len(ids)
	}
	all := make([]int64, 0, total)
	names := slices.Sorted(maps.Keys(sources))
	for _, name := range names {
		w.steps += int64(len(sources[name]))
		all = append(all, sources[name]...)
	}
	repeated := repeatedIDs(w, all)
	if len(repeated) == 0 {
		return total, nil
	}
	where := map[int64][]string{}
	for _, name := range names {
		for _, id := range sources[name] {
			w.steps++
			if repeated[id] {
				where[id] = append(where[id], name)
			}
		}
	}
	return total, dupList(w, where)
}

// repeatedIDs sorts all in place and returns the IDs in it more than once.
func repeatedIDs(w *work, all []int64) map[int64]bool {
	sortFunc(w, all, cmp.Compare[int64])
	repeated := map[int64]bool{}
	for i := 1; i < len(all); i++ {
		w.steps++
		if all[i] == all[i-1] {
			repeated[all[i]] = true
		}
	}
	return repeated
}

// dupList lists the repeated IDs of where, in ascending order.
func dupList(w *work, where map[int64][]string) []Dup {
	dups := make([]Dup, 0, len(where))
	ids := slices.Collect(maps.Keys(where))
	sortFunc(w, ids, cmp.Compare[int64])
	for _, id := range ids {
		dups = append(dups, Dup{id: id, sources: where[id]})
	}
	return dups
}

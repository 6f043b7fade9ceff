package bulk

import (
	"reflect"
	"unsafe"

	"gorm.io/gorm/schema"
)

// A load writes into the rows it is given: the keys it fills, the foreign
// keys and polymorphic types it sets, GORM's values for zero fields
// (`default:`, autoCreateTime, autoUpdateTime), and the embedded structs it
// allocates on the way to them. A failed load puts every one of them back,
// so that a retry of the same structs writes what db.Create's retry
// writes: a belongs-to or many2many row that kept the key of a load that
// was rolled back would be taken as existing, and never written.
//
// Before each write, the batch notes what the field holds (batch.note). A
// zero field (0, "", nil, the zero time) sets the field's bit in its row's
// mask, one bit per field of node.writes; any other value (a foreign key
// the caller set, a pointer the write goes through) is copied. When the
// batch is done its notes move to the load's log (undoLog.flush), and a
// failed load replays the log backwards, batch by batch (undoLog.restore),
// so that a field two batches wrote ends as it was before the first.
//
// What the log keeps alive: Create's input is the caller's slice, which
// holds every row anyway, so the log keeps the input rows as ranges of
// their indices in it, and a pointer per other row the load wrote into.
// CreateSeq's input may be far larger than memory; once a batch is
// copied, its log keeps only the belongs-to and many2many rows it keyed
// (the rows a retry would take as existing); its input rows and their
// has-one and has-many rows, which a retry writes whatever keys they
// hold, are let go.

// undoLog is what a load wrote into the caller's structs, batch by batch.
// The copier appends to it until it has ended; then the caller's
// goroutine owns it.
type undoLog struct {
	// streamed is true for CreateSeq: a copied batch keeps only its
	// shared rows (see above).
	streamed bool
	// input returns Create's input row i; nil for CreateSeq.
	input func(i int) reflect.Value
	runs  []undoRun
	// rows are the rows of the runs that are not input rows, in chunks
	// that are never copied as they fill up.
	rows  [][]unsafe.Pointer
	nrows int
	olds  []oldValue
	// marks[k] says where batch k's runs, rows and olds end.
	marks []undoMark
}

// undoRun is rows of one table whose mask is the same: each of the fields
// of the mask's bits was zero before the load wrote it.
type undoRun struct {
	node *node
	typ  reflect.Type
	mask uint64
	// first is the input index of the run's first row when its rows are
	// consecutive input rows of Create, and -1 when they are in rows.
	first int
	n     int
}

// oldValue is a location in a row and what it held before the load wrote
// it: a field that was not zero, or a nil embedded pointer the write
// allocated.
type oldValue struct {
	at  reflect.Value // addressable
	old reflect.Value // a copy; invalid for the zero value
}

type undoMark struct{ runs, rows, olds int }

// undoChunk is the number of rows in a chunk of undoLog.rows.
const undoChunk = 4096

// addRow appends row p to rows.
func (u *undoLog) addRow(p unsafe.Pointer) {
	if u.nrows%undoChunk == 0 {
		u.rows = append(u.rows, make([]unsafe.Pointer, 0, undoChunk))
	}
	u.rows[len(u.rows)-1] = append(u.rows[len(u.rows)-1], p)
	u.nrows++
}

// batchOld is an oldValue noted by a batch, with the row it is in.
type batchOld struct {
	row int32
	oldValue
}

// note records, before the load writes field f of row i, what the field
// holds, unless the batch noted it already or the row is one the load
// made (a join row, which no one else sees).
func (b *batch) note(i int32, f *schema.Field) {
	bit, tracked := b.rows[i].node.bit[f]
	if !tracked {
		b.noteBit(i, f, -1)
		return
	}
	b.noteBit(i, f, int(bit))
}

// noteBit is note for a field whose place in node.writes the caller
// knows: bit, or -1 (or 64 and more) for a field that has none.
func (b *batch) noteBit(i int32, f *schema.Field, bit int) {
	row := &b.rows[i]
	if row.made {
		return
	}
	tracked := bit >= 0 && bit < 64
	if tracked && row.wrote&(1<<bit) != 0 {
		return
	}
	at, ok := fieldAt(row.v, f)
	switch {
	case !ok:
		// A nil embedded struct on the way, which the write allocates.
		b.olds = append(b.olds, batchOld{i, oldValue{at: at}})
	case tracked && at.IsZero():
		row.wrote |= 1 << bit
	default:
		b.noteValue(i, at)
	}
}

// noteValue copies what at holds, and what each pointer it holds points
// to down to the first nil: GORM's Set writes through a pointer that is
// set (into memory that other rows may share) and allocates one that is
// nil.
func (b *batch) noteValue(i int32, at reflect.Value) {
	for {
		var old reflect.Value
		if !at.IsZero() {
			old = reflect.New(at.Type()).Elem()
			old.Set(at)
		}
		b.olds = append(b.olds, batchOld{i, oldValue{at: at, old: old}})
		if at.Kind() != reflect.Pointer || at.IsNil() {
			return
		}
		at = at.Elem()
	}
}

// fieldAt returns the location of field f in row v, without allocating:
// GORM's ReflectValueOf makes a nil embedded struct on the way to a field
// in it, where fieldAt returns the nil pointer and false.
func fieldAt(v reflect.Value, f *schema.Field) (reflect.Value, bool) {
	idx := f.StructField.Index
	for k, x := range idx {
		if x >= 0 {
			v = v.Field(x)
			continue
		}
		// GORM's mark of an embedded struct held by pointer.
		v = v.Field(-x - 1)
		if k < len(idx)-1 {
			if v.IsNil() {
				return v, false
			}
			v = v.Elem()
		}
	}
	return v, true
}

// flush moves the batch's notes to the log, before the batch is emptied.
// copied says whether the batch was copied and the load had not failed:
// a streamed load then keeps only the notes of its shared rows.
func (u *undoLog) flush(b *batch, copied bool) {
	shared := func(row *batchRow) bool {
		return row.rel != nil && (row.rel.Type == schema.BelongsTo || row.rel.Type == schema.Many2Many)
	}
	keep := func(row *batchRow) bool { return !u.streamed || !copied || shared(row) }
	batchRuns := 0
	if len(u.marks) > 0 {
		batchRuns = u.marks[len(u.marks)-1].runs
	}
	for _, n := range b.l.plan.nodes {
		var typ reflect.Type // every row of a table is a struct of one type
		for _, i := range b.nodes[n.idx] {
			row := &b.rows[i]
			if row.wrote == 0 || !keep(row) {
				continue
			}
			if typ == nil {
				typ = row.v.Type()
			}
			first := -1
			if u.input != nil && row.from < 0 {
				first = b.first + int(row.pos)
			}
			if k := len(u.runs) - 1; k < batchRuns || u.runs[k].node != n || u.runs[k].mask != row.wrote ||
				u.runs[k].typ != typ || (u.runs[k].first < 0) != (first < 0) ||
				first >= 0 && u.runs[k].first+u.runs[k].n != first {
				u.runs = append(u.runs, undoRun{node: n, typ: typ, mask: row.wrote, first: first})
			}
			u.runs[len(u.runs)-1].n++
			if first < 0 {
				u.addRow(row.v.Addr().UnsafePointer())
			}
		}
	}
	for _, o := range b.olds {
		if keep(&b.rows[o.row]) {
			u.olds = append(u.olds, o.oldValue)
		}
	}
	u.marks = append(u.marks, undoMark{runs: len(u.runs), rows: u.nrows, olds: len(u.olds)})
}

// restore puts back everything the log holds, the last batch first.
func (u *undoLog) restore() {
	for m := len(u.marks) - 1; m >= 0; m-- {
		var from undoMark
		if m > 0 {
			from = u.marks[m-1]
		}
		to := u.marks[m]
		for k := to.olds - 1; k >= from.olds; k-- {
			if o := u.olds[k]; o.old.IsValid() {
				o.at.Set(o.old)
			} else {
				o.at.SetZero()
			}
		}
		next := from.rows
		for _, run := range u.runs[from.runs:to.runs] {
			for k := range run.n {
				var v reflect.Value
				if run.first >= 0 {
					v = u.input(run.first + k)
				} else {
					v = reflect.NewAt(run.typ, u.rows[next/undoChunk][next%undoChunk]).Elem()
					next++
				}
				for bit, f := range run.node.writes {
					if run.mask&(1<<bit) == 0 {
						continue
					}
					// An embedded struct the load allocated is set back to
					// nil by an oldValue, restored first.
					if at, ok := fieldAt(v, f); ok {
						at.SetZero()
					}
				}
			}
		}
	}
	*u = undoLog{streamed: u.streamed, input: u.input}
}

// keyIsZero reports whether an integer key field, or a pointer (of any
// depth) to one, holds no key yet: zero or nil.
func keyIsZero(v reflect.Value) bool {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return true
		}
		v = v.Elem()
	}
	return v.Int() == 0
}

// setKey stores n in an integer key field, allocating through nil
// pointers.
func setKey(v reflect.Value, n int64) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	v.SetInt(n)
}

package bulk

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"gorm.io/gorm/schema"

	"github.com/snowkeyhq/snowkey/idtype"
)

// batch is BatchSize input rows and every row they reach, on their
// way to the database: collected by addRoot, keyed and linked by prepare,
// copied by copyAll, emptied by reset and used again.
type batch struct {
	l     *load
	rows  []batchRow
	deps  []dep
	joins []joinPair
	// nodes lists the rows of each table, by node.idx: indices into
	// rows.
	nodes [][]int32
	// seen maps the address of every row reached through a pointer, and
	// of every input row, to its index in rows, so that a row two others
	// share is written once (when the load tracks addresses).
	seen  map[unsafe.Pointer]int32
	roots int // input rows in the batch
	first int // input index of the batch's first row
	// olds are the values the batch wrote over that were not zero (see
	// note, in undo.go).
	olds []batchOld
}

// batchRow is one row of a batch.
type batchRow struct {
	v    reflect.Value // an addressable struct
	node *node
	// from is the index of the row this one was reached from, through
	// rel, at position pos of the association; -1 for an input row, whose
	// pos is its index in the input less the batch's first.
	from int32
	rel  *schema.Relationship
	pos  int32
	// wrote has a bit for each field of node.writes that was zero before
	// the batch wrote it (see note, in undo.go).
	wrote uint64
	// made is true for a row the load made itself (a join row): no one
	// else sees it, so nothing written into it is noted.
	made bool
}

// dep is a belongs-to reference: row dep takes its foreign key from
// owner, a row of the batch (row >= 0) or one taken as existing (-1).
type dep struct {
	rel   *schema.Relationship
	owner reflect.Value
	row   int32
	dep   int32
}

// joinPair is a many2many pair to write to r's join table.
type joinPair struct {
	r      *relation
	owner  int32
	target reflect.Value
	row    int32 // the target's row, or -1 for a target taken as existing
	pos    int32
}

func (l *load) newBatch() *batch {
	b := &batch{l: l, nodes: make([][]int32, len(l.plan.nodes))}
	if l.track {
		b.seen = map[unsafe.Pointer]int32{}
	}
	return b
}

// reset empties the batch, dropping every reference into it so that its
// rows can be collected.
func (b *batch) reset() {
	clear(b.rows)
	clear(b.deps)
	clear(b.joins)
	clear(b.seen)
	clear(b.olds)
	b.rows, b.deps, b.joins, b.olds = b.rows[:0], b.deps[:0], b.joins[:0], b.olds[:0]
	for i := range b.nodes {
		b.nodes[i] = b.nodes[i][:0]
	}
	b.roots = 0
}

// addRoot adds input row n and everything it reaches to the batch.
func (b *batch) addRoot(v reflect.Value, n int) {
	if b.roots == 0 {
		b.first = n
	}
	b.roots++
	if i, added := b.add(b.l.plan.root, v, true, -1, nil, int32(n-b.first)); added {
		b.walk(i)
	}
}

// add appends v, a row of n, to the batch, unless the batch holds it
// already (reached through a pointer, or an input row), and returns its
// index and whether it was added.
func (b *batch) add(n *node, v reflect.Value, tracked bool, from int32, rel *schema.Relationship, pos int32) (int32, bool) {
	var p unsafe.Pointer
	if tracked && b.seen != nil {
		p = v.Addr().UnsafePointer()
		if i, ok := b.seen[p]; ok {
			return i, false
		}
	}
	i := int32(len(b.rows))
	b.rows = append(b.rows, batchRow{v: v, node: n, from: from, rel: rel, pos: pos})
	b.nodes[n.idx] = append(b.nodes[n.idx], i)
	if p != nil {
		b.seen[p] = i
	}
	return i, true
}

// walk adds the associations of row i that a create saves.
func (b *batch) walk(i int32) {
	ctx := b.l.ctx
	row := b.rows[i]
	for k := range row.node.rels {
		r := &row.node.rels[k]
		fv, ok := fieldAt(row.v, r.rel.Field)
		if !ok || fv.IsZero() {
			continue
		}
		switch r.rel.Type {
		case schema.BelongsTo:
			owner, ptr, ok := elemOf(fv)
			if !ok {
				continue
			}
			d := dep{rel: r.rel, owner: owner, row: -1, dep: i}
			if !hasKey(ctx, r.to.s, owner) {
				var added bool
				if d.row, added = b.add(r.to, owner, ptr, i, r.rel, 0); added {
					b.walk(d.row)
				}
			}
			b.deps = append(b.deps, d)
		case schema.HasOne:
			if child, ptr, ok := elemOf(fv); ok {
				if j, added := b.add(r.to, child, ptr, i, r.rel, 0); added {
					b.walk(j)
				}
			}
		case schema.HasMany, schema.Many2Many:
			list := reflect.Indirect(fv)
			for k := 0; k < list.Len(); k++ {
				elem, ptr, ok := elemOf(list.Index(k))
				if !ok {
					continue
				}
				if r.rel.Type == schema.HasMany {
					if j, added := b.add(r.to, elem, ptr, i, r.rel, int32(k)); added {
						b.walk(j)
					}
					continue
				}
				jn := joinPair{r: r, owner: i, target: elem, row: -1, pos: int32(k)}
				if !hasKey(ctx, r.to.s, elem) {
					var added bool
					if jn.row, added = b.add(r.to, elem, ptr, i, r.rel, int32(k)); added {
						b.walk(jn.row)
					}
				}
				b.joins = append(b.joins, jn)
			}
		}
	}
}

// elemOf follows pointers from v to a struct, reporting whether it went
// through one and false for nil.
func elemOf(v reflect.Value) (elem reflect.Value, ptr, ok bool) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return v, ptr, false
		}
		ptr = ptr || v.Kind() == reflect.Pointer
		v = v.Elem()
	}
	return v, ptr, v.Kind() == reflect.Struct && v.CanAddr()
}

// hasKey reports whether every primary key field of v is set: an
// associated row that a load takes as existing.
func hasKey(ctx context.Context, s *schema.Schema, v reflect.Value) bool {
	if len(s.PrimaryFields) == 0 {
		return false
	}
	for _, f := range s.PrimaryFields {
		if _, zero := f.ValueOf(ctx, v); zero {
			return false
		}
	}
	return true
}

// prepare keys and links the batch: everything before it can be copied.
// The join rows of many2many associations are made from the keys of the
// rows they join, so they get their own keys (a join model's key, a
// `snowflake` field) afterwards, with a NextN of their own.
func (b *batch) prepare() error {
	if err := b.l.ctx.Err(); err != nil {
		return err
	}
	if err := b.fill(0); err != nil {
		return err
	}
	if err := b.link(); err != nil {
		return err
	}
	joins := int32(len(b.rows))
	if err := b.makeJoins(); err != nil {
		return err
	}
	return b.fill(joins)
}

// fill gives every zero key of the batch's rows from index from on an ID,
// all with one NextN, in load order: table by table, row by row.
func (b *batch) fill(from int32) error {
	l := b.l
	total := 0
	for _, n := range l.plan.nodes {
		for _, i := range b.nodes[n.idx] {
			if i < from {
				continue
			}
			for _, f := range n.keys {
				if fv, ok := fieldAt(b.rows[i].v, f); !ok || keyIsZero(fv) {
					total++
				}
			}
		}
	}
	if total == 0 {
		return nil
	}
	if cap(l.ids) < total {
		l.ids = make([]idtype.ID, total)
	}
	ids := l.ids[:total]
	if err := l.src.NextN(ids); err != nil {
		return fmt.Errorf("%w: %d IDs for a batch of %d input rows: %w", ErrGenerate, total, b.roots, err)
	}
	next := 0
	for _, n := range l.plan.nodes {
		for _, i := range b.nodes[n.idx] {
			if i < from {
				continue
			}
			for k, f := range n.keys {
				if fv, ok := fieldAt(b.rows[i].v, f); !ok || keyIsZero(fv) {
					b.noteBit(i, f, k) // keys come first in node.writes
					if !ok {
						fv = f.ReflectValueOf(l.ctx, b.rows[i].v) // makes the embedded struct
					}
					setKey(fv, int64(ids[next]))
					next++
				}
			}
		}
	}
	return nil
}

// link sets the foreign keys of the batch's rows from the keys of the
// rows they refer to, table by table in load order, so that a key that
// is itself a foreign key (a has-one sharing its owner's key) is final
// before anything copies it.
func (b *batch) link() error {
	ctx := b.l.ctx
	for _, n := range b.l.plan.nodes {
		for _, i := range b.nodes[n.idx] {
			row := &b.rows[i]
			if row.rel == nil || (row.rel.Type != schema.HasOne && row.rel.Type != schema.HasMany) {
				continue
			}
			parent := b.rows[row.from].v
			for _, ref := range row.rel.References {
				switch {
				case ref.OwnPrimaryKey:
					zero, err := b.copyKey(ctx, ref, i, parent)
					if zero {
						return b.keyError(row.from, ref.PrimaryKey)
					}
					if err != nil {
						return b.setError(i, ref.ForeignKey, err)
					}
				case ref.PrimaryValue != "":
					b.note(i, ref.ForeignKey)
					if err := ref.ForeignKey.Set(ctx, row.v, ref.PrimaryValue); err != nil {
						return b.setError(i, ref.ForeignKey, err)
					}
				}
			}
		}
		for _, d := range b.deps {
			if b.rows[d.dep].node != n {
				continue
			}
			for _, ref := range d.rel.References {
				if ref.OwnPrimaryKey {
					continue
				}
				zero, err := b.copyKey(ctx, ref, d.dep, d.owner)
				if zero {
					return b.ownerKeyError(d.row, d.dep, d.rel, ref.PrimaryKey)
				}
				if err != nil {
					return b.setError(d.dep, ref.ForeignKey, err)
				}
			}
		}
	}
	return nil
}

// copyKey sets ref's foreign key in row dst to ref's primary key in src,
// reporting a zero key instead. Fields of one type are copied as they are;
// others go through GORM's Set, which converts, as db.Create's do.
func (b *batch) copyKey(ctx context.Context, ref *schema.Reference, dst int32, src reflect.Value) (zero bool, err error) {
	dv := b.rows[dst].v
	if ref.ForeignKey.FieldType == ref.PrimaryKey.FieldType && ref.PrimaryKey.FieldType.Kind() != reflect.Pointer {
		pv, ok := fieldAt(src, ref.PrimaryKey)
		if !ok || pv.IsZero() {
			return true, nil
		}
		b.note(dst, ref.ForeignKey)
		ref.ForeignKey.ReflectValueOf(ctx, dv).Set(pv)
		return false, nil
	}
	pv, zero := ref.PrimaryKey.ValueOf(ctx, src)
	if zero {
		return true, nil
	}
	b.note(dst, ref.ForeignKey)
	return false, ref.ForeignKey.Set(ctx, dv, pv)
}

// makeJoins adds a join row for every many2many pair of the batch, as
// db.Create does, and leaves out a row that repeats an earlier one in a
// unique constraint made of the join's foreign keys (the pair, for
// GORM's own join tables): db.Create inserts join rows with ON CONFLICT
// DO NOTHING, which keeps the first.
func (b *batch) makeJoins() error {
	ctx := b.l.ctx
	type uniqueKey struct {
		r    *relation
		set  int
		vals [4]any
	}
	var seen map[uniqueKey]struct{}
	var vals []any
	var keys []uniqueKey
	for _, j := range b.joins {
		rel := j.r.rel
		jv := reflect.New(rel.JoinTable.ModelType).Elem()
		vals = vals[:0]
		for _, ref := range rel.References {
			var val any
			switch {
			case ref.OwnPrimaryKey:
				pv, zero := ref.PrimaryKey.ValueOf(ctx, b.rows[j.owner].v)
				if zero {
					return b.keyError(j.owner, ref.PrimaryKey)
				}
				val = pv
			case ref.PrimaryValue != "":
				val = ref.PrimaryValue
			default:
				pv, zero := ref.PrimaryKey.ValueOf(ctx, j.target)
				if zero {
					if j.row >= 0 {
						return b.keyError(j.row, ref.PrimaryKey)
					}
					return b.ownerKeyError(-1, j.owner, rel, ref.PrimaryKey)
				}
				val = pv
			}
			if err := ref.ForeignKey.Set(ctx, jv, val); err != nil {
				return fmt.Errorf("%w: join table %s: set %s: %w", ErrModel, rel.JoinTable.Table, ref.ForeignKey.Name, err)
			}
			vals = append(vals, val)
		}
		keys = keys[:0]
		dup := false
		for u, set := range j.r.unique {
			k := uniqueKey{r: j.r, set: u}
			usable := len(set) <= len(k.vals)
			for x, idx := range set {
				if !usable {
					break
				}
				v := vals[idx]
				usable = v != nil && reflect.TypeOf(v).Comparable()
				if usable {
					k.vals[x] = v
				}
			}
			if !usable {
				continue
			}
			if _, found := seen[k]; found {
				dup = true
				break
			}
			keys = append(keys, k)
		}
		if dup {
			continue
		}
		if seen == nil && len(keys) > 0 {
			seen = map[uniqueKey]struct{}{}
		}
		for _, k := range keys {
			seen[k] = struct{}{}
		}
		k, _ := b.add(j.r.join, jv, false, j.owner, rel, j.pos)
		b.rows[k].made = true
	}
	return nil
}

// path names row i by its index in the input and the associations that
// lead to it: "row 12", "row 12, Books[3].Chapters[0]", "row 12, Author".
func (b *batch) path(i int32) string {
	var parts []string
	root := 0
	for i >= 0 {
		row := b.rows[i]
		if row.from < 0 {
			root = b.first + int(row.pos)
			break
		}
		part := row.rel.Name
		if row.rel.Type == schema.HasMany || row.rel.Type == schema.Many2Many {
			part += "[" + strconv.Itoa(int(row.pos)) + "]"
		}
		if row.rel.Type == schema.Many2Many && row.node.s == row.rel.JoinTable {
			part += " (join table " + row.node.table + ")"
		}
		parts = append(parts, part)
		i = row.from
	}
	if len(parts) == 0 {
		return "row " + strconv.Itoa(root)
	}
	slices.Reverse(parts)
	return "row " + strconv.Itoa(root) + ", " + strings.Join(parts, ".")
}

func (b *batch) keyError(i int32, f *schema.Field) error {
	n := b.rows[i].node
	return fmt.Errorf("%w: %s.%s of %s is zero, and the load does not fill it (it is left to the database); "+
		"set it, or make it an idtype.ID key or a `gorm:\"snowflake\"` field", ErrKey, n.s.Name, f.Name, b.path(i))
}

// ownerKeyError reports an associated row, owner (its index, or -1 when it
// is taken as existing and so is not in the batch), without a key that
// row dep needs.
func (b *batch) ownerKeyError(owner, dep int32, rel *schema.Relationship, f *schema.Field) error {
	if owner >= 0 {
		return b.keyError(owner, f)
	}
	return fmt.Errorf("%w: %s.%s of %s's %s is zero, and the load does not fill it", ErrKey,
		rel.FieldSchema.Name, f.Name, b.path(dep), rel.Name)
}

func (b *batch) setError(i int32, f *schema.Field, err error) error {
	return fmt.Errorf("%w: set %s.%s of %s: %w", ErrModel, b.rows[i].node.s.Name, f.Name, b.path(i), err)
}

package pgkit

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/snowkeyhq/snowkey/idtype"
)

// bulkLoad is one call of BulkCreate or BulkCreateSeq.
type bulkLoad struct {
	ctx    context.Context
	db     *gorm.DB
	src    idtype.Source
	o      BulkOptions
	plan   *bulkPlan
	model  reflect.Type // the input's struct type
	conn   *pgx.Conn
	result BulkResult

	// The batch being built; reused from batch to batch.
	rows  []bulkRow
	deps  []bulkDep
	joins []bulkJoin
	// seen maps the address of every row reached through a pointer, and
	// of every input row, to its index in rows, so that a row two others
	// share is written once; kept only when the models have belongs-to or
	// many2many associations (track).
	seen  map[unsafe.Pointer]int32
	track bool
	roots int // input rows in the batch
	first int // input index of the batch's first row
	ids   []idtype.ID
	vals  []any
}

// bulkRow is one row of a batch.
type bulkRow struct {
	v    reflect.Value // an addressable struct
	node *bulkNode
	// from is the index of the row this one was reached from, through
	// rel, at position pos of the association; -1 for an input row, whose
	// pos is its index in the input less the batch's first.
	from int32
	rel  *schema.Relationship
	pos  int32
}

// bulkDep is a belongs-to reference: row dep takes its foreign key from
// owner, a row of the batch (row >= 0) or one taken as existing (-1).
type bulkDep struct {
	rel   *schema.Relationship
	owner reflect.Value
	row   int32
	dep   int32
}

// bulkJoin is a many2many pair to write to r's join table.
type bulkJoin struct {
	r      *bulkRel
	owner  int32
	target reflect.Value
	row    int32 // the target's row, or -1 for a target taken as existing
	pos    int32
}

func newBulkLoad[T any](ctx context.Context, db *gorm.DB, src idtype.Source, opts []BulkOptions) (*bulkLoad, error) {
	o, err := bulkOptionsOf(opts)
	if err != nil {
		return nil, err
	}
	model := reflect.TypeFor[T]()
	for model.Kind() == reflect.Pointer {
		model = model.Elem()
	}
	switch {
	case db == nil:
		return nil, fmt.Errorf("%w: db is nil", ErrBulkConn)
	case src == nil:
		return nil, fmt.Errorf("%w: src is nil", ErrBulkGenerate)
	case model.Kind() != reflect.Struct:
		return nil, fmt.Errorf("%w: rows of %s: want structs or pointers to structs", ErrBulkModel, reflect.TypeFor[T]())
	case len(db.Statement.Selects) > 0 || len(db.Statement.Omits) > 0:
		return nil, fmt.Errorf("%w: db has Select or Omit, which a bulk load does not take: it writes every column Create would", ErrBulkModel)
	}
	plan, err := newBulkPlan(db, model, o)
	if err != nil {
		return nil, err
	}
	l := &bulkLoad{ctx: ctx, db: db, src: src, o: o, plan: plan, model: model,
		result: BulkResult{Tables: map[string]int64{}}}
	// Only a belongs-to or many2many row is likely to be shared by
	// several rows (or to be an input row as well); without such
	// associations no address is kept.
	for _, n := range plan.nodes {
		for _, r := range n.rels {
			l.track = l.track || r.rel.Type == schema.BelongsTo || r.rel.Type == schema.Many2Many
		}
	}
	if l.track {
		l.seen = map[unsafe.Pointer]int32{}
	}
	return l, nil
}

// run loads every row that input yields, in batches, in one transaction.
func (l *bulkLoad) run(ctx context.Context, input func(yield func(reflect.Value) error) error) error {
	return l.inTx(ctx, func() error {
		n := 0
		err := input(func(v reflect.Value) error {
			for v.Kind() == reflect.Pointer {
				if v.IsNil() {
					return fmt.Errorf("%w: row %d is a nil pointer", ErrBulkModel, n)
				}
				v = v.Elem()
			}
			l.addRoot(v, n)
			n++
			if l.roots >= l.o.BatchSize && !l.o.defences.unbounded {
				return l.flush()
			}
			return nil
		})
		if err != nil {
			return err
		}
		return l.flush()
	})
}

// inTx runs fn with l.conn set, in a transaction: the caller's (in a
// savepoint) or one of its own on a connection of db's pool.
func (l *bulkLoad) inTx(ctx context.Context, fn func() error) error {
	if l.o.Tx != nil {
		sp, err := l.o.Tx.Begin(ctx)
		if err != nil {
			return fmt.Errorf("pgkit: bulk load: savepoint: %w", err)
		}
		l.conn = sp.Conn()
		return bulkFinish(ctx, sp, fn())
	}
	pool := l.db.Statement.ConnPool
	if pool == nil {
		pool = l.db.ConnPool
	}
	var sqlDB *sql.DB
	switch p := pool.(type) {
	case *sql.DB:
		sqlDB = p
	case gorm.TxCommitter:
		return fmt.Errorf("%w: db is in a database/sql transaction, whose connection is out of reach; "+
			"load outside it, or in a pgx transaction passed as BulkOptions.Tx", ErrBulkConn)
	case gorm.GetDBConnector:
		var err error
		if sqlDB, err = p.GetDBConn(); err != nil {
			return fmt.Errorf("%w: %w", ErrBulkConn, err)
		}
	default:
		return fmt.Errorf("%w: db's connection pool is a %T", ErrBulkConn, pool)
	}
	c, err := sqlDB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("pgkit: bulk load: connect: %w", err)
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("%w: db's driver connection is a %T, not pgx's (gorm.io/driver/postgres uses pgx)", ErrBulkConn, dc)
		}
		l.conn = sc.Conn()
		if l.o.defences.noTx {
			return fn()
		}
		tx, err := l.conn.Begin(ctx)
		if err != nil {
			return fmt.Errorf("pgkit: bulk load: begin: %w", err)
		}
		return bulkFinish(ctx, tx, fn())
	})
}

// bulkFinish commits tx when err is nil and rolls it back otherwise.
func bulkFinish(ctx context.Context, tx pgx.Tx, err error) error {
	if err != nil {
		// The load may have failed because ctx ended; the rollback still
		// gets a few seconds, so the connection goes back to the pool clean.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgkit: bulk load: commit: %w", err)
	}
	return nil
}

// addRoot adds input row n and everything it reaches to the batch.
func (l *bulkLoad) addRoot(v reflect.Value, n int) {
	if l.roots == 0 {
		l.first = n
	}
	l.roots++
	if i, added := l.add(l.plan.root, v, true, -1, nil, int32(n-l.first)); added {
		l.walk(i)
	}
}

// add appends v, a row of n, to the batch, unless the batch holds it
// already (reached through a pointer, or an input row), and returns its
// index and whether it was added.
func (l *bulkLoad) add(n *bulkNode, v reflect.Value, tracked bool, from int32, rel *schema.Relationship, pos int32) (int32, bool) {
	var p unsafe.Pointer
	if tracked && l.track {
		p = v.Addr().UnsafePointer()
		if i, ok := l.seen[p]; ok {
			return i, false
		}
	}
	i := int32(len(l.rows))
	l.rows = append(l.rows, bulkRow{v: v, node: n, from: from, rel: rel, pos: pos})
	n.rows = append(n.rows, i)
	if p != nil {
		l.seen[p] = i
	}
	return i, true
}

// walk adds the associations of row i that a create saves.
func (l *bulkLoad) walk(i int32) {
	row := l.rows[i]
	for k := range row.node.rels {
		r := &row.node.rels[k]
		fv := r.rel.Field.ReflectValueOf(l.ctx, row.v)
		if fv.IsZero() {
			continue
		}
		switch r.rel.Type {
		case schema.BelongsTo:
			owner, ptr, ok := bulkElem(fv)
			if !ok {
				continue
			}
			d := bulkDep{rel: r.rel, owner: owner, row: -1, dep: i}
			if !bulkHasKey(l.ctx, r.to.s, owner) {
				var added bool
				if d.row, added = l.add(r.to, owner, ptr, i, r.rel, 0); added {
					l.walk(d.row)
				}
			}
			l.deps = append(l.deps, d)
		case schema.HasOne:
			if child, ptr, ok := bulkElem(fv); ok {
				if j, added := l.add(r.to, child, ptr, i, r.rel, 0); added {
					l.walk(j)
				}
			}
		case schema.HasMany, schema.Many2Many:
			list := reflect.Indirect(fv)
			for k := 0; k < list.Len(); k++ {
				elem, ptr, ok := bulkElem(list.Index(k))
				if !ok {
					continue
				}
				if r.rel.Type == schema.HasMany {
					if j, added := l.add(r.to, elem, ptr, i, r.rel, int32(k)); added {
						l.walk(j)
					}
					continue
				}
				jn := bulkJoin{r: r, owner: i, target: elem, row: -1, pos: int32(k)}
				if !bulkHasKey(l.ctx, r.to.s, elem) {
					var added bool
					if jn.row, added = l.add(r.to, elem, ptr, i, r.rel, int32(k)); added {
						l.walk(jn.row)
					}
				}
				l.joins = append(l.joins, jn)
			}
		}
	}
}

// bulkElem follows pointers from v to a struct, reporting whether it went
// through one and false for nil.
func bulkElem(v reflect.Value) (elem reflect.Value, ptr, ok bool) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return v, ptr, false
		}
		ptr = ptr || v.Kind() == reflect.Pointer
		v = v.Elem()
	}
	return v, ptr, v.Kind() == reflect.Struct && v.CanAddr()
}

// bulkHasKey reports whether every primary key field of v is set: an
// associated row that a load takes as existing.
func bulkHasKey(ctx context.Context, s *schema.Schema, v reflect.Value) bool {
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

// flush keys, links and copies the batch, then empties it.
func (l *bulkLoad) flush() error {
	if len(l.rows) == 0 {
		return nil
	}
	if err := l.ctx.Err(); err != nil {
		return err
	}
	err := l.fill()
	if err == nil {
		err = l.link()
	}
	if err == nil {
		err = l.copyAll()
	}
	// Drop every reference into the batch, so that its rows can be
	// collected while the next one is read.
	clear(l.rows)
	clear(l.deps)
	clear(l.joins)
	clear(l.seen)
	l.rows, l.deps, l.joins = l.rows[:0], l.deps[:0], l.joins[:0]
	for _, n := range l.plan.nodes {
		n.rows = n.rows[:0]
	}
	l.roots = 0
	return err
}

// fill gives every zero key of the batch an ID, all with one NextN, in
// load order: table by table, row by row.
func (l *bulkLoad) fill() error {
	total := 0
	for _, n := range l.plan.nodes {
		for _, i := range n.rows {
			for _, f := range n.keys {
				if bulkZeroInt(f.ReflectValueOf(l.ctx, l.rows[i].v)) {
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
		return fmt.Errorf("%w: %d IDs for a batch of %d input rows: %w", ErrBulkGenerate, total, l.roots, err)
	}
	next := 0
	for _, n := range l.plan.nodes {
		for _, i := range n.rows {
			for _, f := range n.keys {
				if fv := f.ReflectValueOf(l.ctx, l.rows[i].v); bulkZeroInt(fv) {
					bulkSetInt(fv, int64(ids[next]))
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
// before anything copies it; then it makes the join rows.
func (l *bulkLoad) link() error {
	for _, n := range l.plan.nodes {
		for _, i := range n.rows {
			row := &l.rows[i]
			if row.rel == nil || (row.rel.Type != schema.HasOne && row.rel.Type != schema.HasMany) {
				continue
			}
			parent := l.rows[row.from].v
			for _, ref := range row.rel.References {
				var val any
				switch {
				case ref.OwnPrimaryKey:
					pv, zero := ref.PrimaryKey.ValueOf(l.ctx, parent)
					if zero {
						return l.keyError(row.from, ref.PrimaryKey)
					}
					val = pv
				case ref.PrimaryValue != "":
					val = ref.PrimaryValue
				default:
					continue
				}
				if err := ref.ForeignKey.Set(l.ctx, row.v, val); err != nil {
					return l.setError(i, ref.ForeignKey, err)
				}
			}
		}
		for _, d := range l.deps {
			if l.rows[d.dep].node != n {
				continue
			}
			for _, ref := range d.rel.References {
				if ref.OwnPrimaryKey {
					continue
				}
				pv, zero := ref.PrimaryKey.ValueOf(l.ctx, d.owner)
				if zero {
					return l.ownerKeyError(d.row, d.dep, d.rel, ref.PrimaryKey)
				}
				if err := ref.ForeignKey.Set(l.ctx, l.rows[d.dep].v, pv); err != nil {
					return l.setError(d.dep, ref.ForeignKey, err)
				}
			}
		}
	}
	return l.makeJoins()
}

// makeJoins adds a join row for every many2many pair of the batch, once
// each: Create inserts them with ON CONFLICT DO NOTHING, so a pair given
// twice is one row.
func (l *bulkLoad) makeJoins() error {
	var dups map[[4]any]struct{}
	for _, j := range l.joins {
		rel := j.r.rel
		jv := reflect.New(rel.JoinTable.ModelType).Elem()
		var key [4]any
		comparable := len(rel.References) <= len(key)
		for k, ref := range rel.References {
			var val any
			switch {
			case ref.OwnPrimaryKey:
				pv, zero := ref.PrimaryKey.ValueOf(l.ctx, l.rows[j.owner].v)
				if zero {
					return l.keyError(j.owner, ref.PrimaryKey)
				}
				val = pv
			case ref.PrimaryValue != "":
				val = ref.PrimaryValue
			default:
				pv, zero := ref.PrimaryKey.ValueOf(l.ctx, j.target)
				if zero {
					if j.row >= 0 {
						return l.keyError(j.row, ref.PrimaryKey)
					}
					return l.ownerKeyError(-1, j.owner, rel, ref.PrimaryKey)
				}
				val = pv
			}
			if err := ref.ForeignKey.Set(l.ctx, jv, val); err != nil {
				return fmt.Errorf("%w: join table %s: set %s: %w", ErrBulkModel, rel.JoinTable.Table, ref.ForeignKey.Name, err)
			}
			if comparable && k < len(key) && val != nil && reflect.TypeOf(val).Comparable() {
				key[k] = val
			} else {
				comparable = false
			}
		}
		if comparable {
			if dups == nil {
				dups = map[[4]any]struct{}{}
			}
			if _, dup := dups[key]; dup {
				continue
			}
			dups[key] = struct{}{}
		}
		l.add(j.r.join, jv, false, j.owner, rel, j.pos)
	}
	return nil
}

// copyAll copies the batch's rows, table by table in load order; rows of
// one table that leave different columns to their database defaults go
// in separate COPYs, one for each set of columns.
func (l *bulkLoad) copyAll() error {
	now := l.db.NowFunc()
	for _, n := range l.plan.nodes {
		if len(n.rows) == 0 {
			continue
		}
		groups, masks := l.groups(n)
		for g, rows := range groups {
			if err := l.copyGroup(n, masks[g], rows, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// groups splits n's rows by which of its database-default columns they
// set (the mask's bits), in the order each set first appears.
func (l *bulkLoad) groups(n *bulkNode) ([][]int32, []uint64) {
	if len(n.dflt) == 0 {
		return [][]int32{n.rows}, []uint64{0}
	}
	var groups [][]int32
	var masks []uint64
	at := map[uint64]int{}
	for _, i := range n.rows {
		var mask uint64
		for k, f := range n.dflt {
			if _, zero := f.ValueOf(l.ctx, l.rows[i].v); !zero {
				mask |= 1 << k
			}
		}
		g, ok := at[mask]
		if !ok {
			g = len(groups)
			at[mask] = g
			groups = append(groups, nil)
			masks = append(masks, mask)
		}
		groups[g] = append(groups[g], i)
	}
	return groups, masks
}

// copyGroup copies rows of n with the columns of mask.
func (l *bulkLoad) copyGroup(n *bulkNode, mask uint64, rows []int32, now time.Time) error {
	cols := n.cols
	if mask != 0 {
		cols = append(make([]*schema.Field, 0, len(n.cols)+len(n.dflt)), n.cols...)
		for k, f := range n.dflt {
			if mask&(1<<k) != 0 {
				cols = append(cols, f)
			}
		}
	}
	names := make([]string, len(cols))
	for k, f := range cols {
		names[k] = f.DBName
	}
	if _, ok := n.oids[mask]; !ok {
		// The column types, for naming a field whose value pgx cannot
		// encode: after a failed COPY the transaction takes no queries.
		sd, err := l.conn.Prepare(l.ctx, "", "SELECT "+bulkQuoteCols(names)+" FROM "+n.ident.Sanitize())
		if err != nil {
			return fmt.Errorf("pgkit: bulk load: table %s: %w", n.table, err)
		}
		oids := make([]uint32, len(sd.Fields))
		for k, fd := range sd.Fields {
			oids[k] = fd.DataTypeOID
		}
		n.oids[mask] = oids
	}
	if cap(l.vals) < len(cols) {
		l.vals = make([]any, len(cols))
	}
	s := &bulkSource{l: l, n: n, rows: rows, cols: cols, vals: l.vals[:len(cols)], now: now, pos: -1}
	count, err := l.conn.CopyFrom(l.ctx, n.ident, names, s)
	if err != nil {
		return l.copyError(s, mask, err)
	}
	l.result.Rows += count
	l.result.Tables[n.table] += count
	return nil
}

// bulkSource hands a group's rows to pgx's CopyFrom, one []any a row, as
// Create would bind them.
type bulkSource struct {
	l    *bulkLoad
	n    *bulkNode
	rows []int32
	cols []*schema.Field
	vals []any
	now  time.Time
	pos  int
	err  error
}

func (s *bulkSource) Next() bool {
	s.pos++
	return s.pos < len(s.rows)
}

// Values returns the row's values. As Create does, a zero field with a
// `default:` value GORM parsed, or with autoCreateTime or
// autoUpdateTime, is set in the struct first, and the value sent is the
// field's new one.
func (s *bulkSource) Values() ([]any, error) {
	ctx := s.l.ctx
	rv := s.l.rows[s.rows[s.pos]].v
	for k, f := range s.cols {
		v, zero := f.ValueOf(ctx, rv)
		if zero && k < len(s.n.cols) {
			switch {
			case f.DefaultValueInterface != nil:
				v = f.DefaultValueInterface
				if err := f.Set(ctx, rv, v); err != nil {
					s.err = s.l.setError(s.rows[s.pos], f, err)
					return nil, s.err
				}
			case f.AutoCreateTime > 0 || f.AutoUpdateTime > 0:
				if err := f.Set(ctx, rv, s.now); err != nil {
					s.err = s.l.setError(s.rows[s.pos], f, err)
					return nil, s.err
				}
				v, _ = f.ValueOf(ctx, rv)
			}
		}
		s.vals[k] = v
	}
	return s.vals, nil
}

func (s *bulkSource) Err() error { return s.err }

// copyError explains a failed COPY: the field pgx could not encode,
// found by encoding the last row's values again, one by one, as pgx does
// (pgx reports its own failure as the server's answer to the COPY it
// aborts), or else the server's error with the table it hit.
func (l *bulkLoad) copyError(s *bulkSource, mask uint64, err error) error {
	if s.err != nil {
		return s.err
	}
	if s.pos >= 0 && s.pos < len(s.rows) {
		m := l.conn.TypeMap()
		oids := s.n.oids[mask]
		for k, v := range s.vals {
			if k >= len(oids) {
				break
			}
			encErr := bulkEncodes(m, oids[k], v)
			if encErr == nil {
				continue
			}
			f := s.cols[k]
			typ := strconv.FormatUint(uint64(oids[k]), 10)
			if t, ok := m.TypeForOID(oids[k]); ok {
				typ = t.Name
			}
			return fmt.Errorf("%w: %s.%s (column %s, %s) of %s, a %T: %w",
				ErrBulkEncode, s.n.s.Name, f.Name, f.DBName, typ, l.path(s.rows[s.pos]), v, encErr)
		}
	}
	return fmt.Errorf("pgkit: bulk load: copy into %s: %w", s.n.table, err)
}

// path names row i by its index in the input and the associations that
// lead to it: "row 12", "row 12, Books[3].Chapters[0]", "row 12, Author".
func (l *bulkLoad) path(i int32) string {
	var parts []string
	root := 0
	for i >= 0 {
		row := l.rows[i]
		if row.from < 0 {
			root = l.first + int(row.pos)
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

func (l *bulkLoad) keyError(i int32, f *schema.Field) error {
	n := l.rows[i].node
	return fmt.Errorf("%w: %s.%s of %s is zero, and the load does not fill it (it is left to the database); "+
		"set it, or make it an idtype.ID key or a `gorm:\"snowflake\"` field", ErrBulkKey, n.s.Name, f.Name, l.path(i))
}

// ownerKeyError reports an associated row, owner (its index, or -1 when it
// is taken as existing and so is not in the batch), without a key that
// row dep needs.
func (l *bulkLoad) ownerKeyError(owner, dep int32, rel *schema.Relationship, f *schema.Field) error {
	if owner >= 0 {
		return l.keyError(owner, f)
	}
	return fmt.Errorf("%w: %s.%s of %s's %s is zero, and the load does not fill it", ErrBulkKey,
		rel.FieldSchema.Name, f.Name, l.path(dep), rel.Name)
}

func (l *bulkLoad) setError(i int32, f *schema.Field, err error) error {
	return fmt.Errorf("%w: set %s.%s of %s: %w", ErrBulkModel, l.rows[i].node.s.Name, f.Name, l.path(i), err)
}

// bulkEncodes returns nil when pgx's COPY can encode v for a column of
// type oid: in binary, or else through its text form, as pgx tries; and
// otherwise the binary encoder's error.
func bulkEncodes(m *pgtype.Map, oid uint32, v any) error {
	_, err := m.Encode(oid, pgtype.BinaryFormatCode, v, nil)
	if err == nil {
		return nil
	}
	s, ok := v.(string)
	if !ok {
		text, terr := m.Encode(oid, pgtype.TextFormatCode, v, nil)
		if terr != nil {
			return err
		}
		s = string(text)
	}
	var scanned any
	if m.Scan(oid, pgtype.TextFormatCode, []byte(s), &scanned) != nil {
		return err
	}
	if _, serr := m.Encode(oid, pgtype.BinaryFormatCode, scanned, nil); serr != nil {
		return err
	}
	return nil
}

func bulkQuoteCols(names []string) string {
	var b strings.Builder
	for k, name := range names {
		if k > 0 {
			b.WriteString(", ")
		}
		b.WriteString(pgx.Identifier{name}.Sanitize())
	}
	return b.String()
}

// bulkZeroInt reports whether an integer field, or a pointer to one,
// holds no key yet: zero or nil.
func bulkZeroInt(v reflect.Value) bool {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return true
		}
		v = v.Elem()
	}
	return v.Int() == 0
}

// bulkSetInt stores n in an integer field, allocating through nil
// pointers.
func bulkSetInt(v reflect.Value, n int64) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	v.SetInt(n)
}

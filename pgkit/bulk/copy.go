package bulk

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"gorm.io/gorm/schema"
)

// copyAll copies the batch's rows, table by table in load order; rows of
// one table that leave different columns to their database defaults go
// in separate COPYs, one for each set of columns. It runs on the copier.
func (b *batch) copyAll() error {
	now := b.l.db.NowFunc()
	for _, n := range b.l.plan.nodes {
		rows := b.nodes[n.idx]
		if len(rows) == 0 {
			continue
		}
		groups, masks := b.groups(n, rows)
		for g, rows := range groups {
			if err := b.copyGroup(n, masks[g], rows, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// groups splits rows of n by which of n's database-default columns they
// set (the mask's bits), in the order each set first appears.
func (b *batch) groups(n *node, rows []int32) ([][]int32, []uint64) {
	if len(n.dflt) == 0 {
		return [][]int32{rows}, []uint64{0}
	}
	var groups [][]int32
	var masks []uint64
	at := map[uint64]int{}
	for _, i := range rows {
		var mask uint64
		for k, f := range n.dflt {
			if _, zero := f.ValueOf(b.l.ctx, b.rows[i].v); !zero {
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
func (b *batch) copyGroup(n *node, mask uint64, rows []int32, now time.Time) error {
	l := b.l
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
		sd, err := l.conn.Prepare(l.ctx, "", "SELECT "+quoteCols(names)+" FROM "+n.ident.Sanitize())
		if err != nil {
			return fmt.Errorf("bulk: table %s: %w", n.table, err)
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
	s := &copySource{b: b, n: n, rows: rows, cols: cols, vals: l.vals[:len(cols)], now: now, pos: -1,
		direct: make([]int, len(cols)), filled: make([]bool, len(cols))}
	for k, f := range cols {
		// Only the columns every row sends get GORM's values for zero
		// fields; a database-default column is sent only when set.
		s.filled[k] = k < len(n.cols) && (f.DefaultValueInterface != nil || f.AutoCreateTime > 0 || f.AutoUpdateTime > 0)
		s.direct[k] = n.direct[f]
		if s.filled[k] {
			s.direct[k] = -1
		}
	}
	count, err := l.conn.CopyFrom(l.ctx, n.ident, names, s)
	if err != nil {
		return b.copyError(s, mask, err)
	}
	l.result.Rows += count
	l.result.Tables[n.table] += count
	return nil
}

// copySource hands a group's rows to pgx's CopyFrom, one []any a row, as
// db.Create would bind them.
type copySource struct {
	b    *batch
	n    *node
	rows []int32
	cols []*schema.Field
	// direct is each column's index in the struct, when it is read
	// directly (see node.direct), or -1; filled says whether a zero
	// field of the column gets a value from GORM's rules.
	direct []int
	filled []bool
	vals   []any
	now    time.Time
	pos    int
	err    error
}

func (s *copySource) Next() bool {
	s.pos++
	return s.pos < len(s.rows)
}

// Values returns the row's values, each as the field's ValueOf gives it
// to db.Create. As db.Create does, a zero field with a `default:` value GORM
// parsed, or with autoCreateTime or autoUpdateTime, is set in the struct
// first, and the value sent is the field's new one. A field of the struct
// itself without a serializer is read directly, as ValueOf reads it.
func (s *copySource) Values() ([]any, error) {
	ctx := s.b.l.ctx
	rv := s.b.rows[s.rows[s.pos]].v
	for k, f := range s.cols {
		if idx := s.direct[k]; idx >= 0 {
			s.vals[k] = rv.Field(idx).Interface()
			continue
		}
		v, zero := f.ValueOf(ctx, rv)
		if zero && s.filled[k] {
			s.b.note(s.rows[s.pos], f)
			switch {
			case f.DefaultValueInterface != nil:
				v = f.DefaultValueInterface
				if err := f.Set(ctx, rv, v); err != nil {
					s.err = s.b.setError(s.rows[s.pos], f, err)
					return nil, s.err
				}
			default:
				if err := f.Set(ctx, rv, s.now); err != nil {
					s.err = s.b.setError(s.rows[s.pos], f, err)
					return nil, s.err
				}
				v, _ = f.ValueOf(ctx, rv)
			}
		}
		s.vals[k] = v
	}
	return s.vals, nil
}

func (s *copySource) Err() error { return s.err }

// copyError explains a failed COPY: the field pgx could not encode,
// found by encoding the last row's values again, one by one, as pgx does
// (pgx reports its own failure as the server's answer to the COPY it
// aborts), or else the server's error with the table it hit.
func (b *batch) copyError(s *copySource, mask uint64, err error) error {
	if s.err != nil {
		return s.err
	}
	if s.pos >= 0 && s.pos < len(s.rows) {
		m := b.l.conn.TypeMap()
		oids := s.n.oids[mask]
		for k, v := range s.vals {
			if k >= len(oids) {
				break
			}
			encErr := encodes(m, oids[k], v)
			if encErr == nil {
				continue
			}
			f := s.cols[k]
			typ := strconv.FormatUint(uint64(oids[k]), 10)
			if t, ok := m.TypeForOID(oids[k]); ok {
				typ = t.Name
			}
			return fmt.Errorf("%w: %s.%s (column %s, %s) of %s, a %T: %w",
				ErrEncode, s.n.s.Name, f.Name, f.DBName, typ, b.path(s.rows[s.pos]), v, encErr)
		}
	}
	if ctxErr := b.l.ctx.Err(); ctxErr != nil {
		// pgx ends a COPY whose context ends by closing the connection,
		// and reports the closed connection.
		return fmt.Errorf("bulk: copy into %s: %w: %w", s.n.table, ctxErr, err)
	}
	return fmt.Errorf("bulk: copy into %s: %w", s.n.table, err)
}

// encodes returns nil when pgx's COPY can encode v for a column of
// type oid: in binary, or else through its text form, as pgx tries; and
// otherwise the binary encoder's error.
func encodes(m *pgtype.Map, oid uint32, v any) error {
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

func quoteCols(names []string) string {
	var sb strings.Builder
	for k, name := range names {
		if k > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(pgx.Identifier{name}.Sanitize())
	}
	return sb.String()
}

package adopt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// relation is a table named to adopt, resolved.
type relation struct {
	oid         int64
	name        string // schema-qualified, quoted as needed
	partitioned bool
}

// target is a table to adopt.
type target struct {
	relation
	key      column
	identity bool
	def      string // the default expression, "" for none
	seq      string // the sequence the key owns (serial or identity), "" for none
	maxKey   int64
	refs     []*column // columns that hold its keys, as found (the referrers of Table)
}

// resolveTables finds the tables named, under the caller's search_path,
// and checks that each is one adopt works on.
func (b *planner) resolveTables(ctx context.Context) error {
	for _, name := range b.names {
		rel, err := b.resolve(ctx, name)
		if err != nil {
			if !errors.Is(err, ErrTable) {
				return err
			}
			b.refuse(err)
			continue
		}
		if !slices.ContainsFunc(b.rels, func(r relation) bool { return r.oid == rel.oid }) {
			b.rels = append(b.rels, rel)
		}
	}
	b.names = b.names[:0:0]
	for _, r := range b.rels {
		b.names = append(b.names, r.name)
	}
	return b.allowTriggers(ctx)
}

// resolve finds the table name names and checks that it is an ordinary
// or a partitioned table, not a partition (its parent is adopted) nor in
// an inheritance tree (whose keys PostgreSQL does not keep unique).
func (b *planner) resolve(ctx context.Context, name string) (relation, error) {
	var (
		oid                   sql.NullInt64
		r                     relation
		kind, parent          string
		inherits, isPartition bool
	)
	err := b.q.QueryRowContext(ctx, `SELECT c.oid::int8, format('%I.%I', n.nspname, c.relname), c.relkind::text, c.relispartition,
			coalesce((SELECT format('%I.%I', pn.nspname, p.relname) FROM pg_catalog.pg_inherits i
				JOIN pg_catalog.pg_class p ON p.oid = i.inhparent JOIN pg_catalog.pg_namespace pn ON pn.oid = p.relnamespace
				WHERE i.inhrelid = c.oid LIMIT 1), ''),
			EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class k ON k.oid = i.inhrelid
				WHERE (i.inhrelid = c.oid OR i.inhparent = c.oid) AND NOT k.relispartition)
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid = pg_catalog.to_regclass($1)`, name).Scan(&oid, &r.name, &kind, &isPartition, &parent, &inherits)
	r.oid = oid.Int64
	r.partitioned = kind == "p"
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return r, fmt.Errorf("%w %q: no such table", ErrTable, name)
	case err != nil:
		return r, fmt.Errorf("%w %q: %w", ErrTable, name, err)
	case kind != "r" && kind != "p":
		return r, fmt.Errorf("%w %s: not a table (relkind %q): views and foreign tables are not adopted", ErrTable, r.name, kind)
	case isPartition:
		return r, fmt.Errorf("%w %s: it is a partition of %s: adopt %s, which adopts every partition", ErrTable, r.name, parent, parent)
	case inherits:
		return r, fmt.Errorf("%w %s: it has inheritance parents or children, whose keys PostgreSQL does not keep unique", ErrTable, r.name)
	}
	return r, nil
}

// readTargets reads each table's key, its default, its sequence and its
// largest key.
func (b *planner) readTargets(ctx context.Context) error {
	for _, rel := range b.rels {
		t, err := b.readTarget(ctx, rel)
		if err != nil {
			if !errors.Is(err, ErrTable) && !errors.Is(err, ErrDefault) {
				return err
			}
			b.refuse(err)
			continue
		}
		b.targets = append(b.targets, t)
	}
	return nil
}

// keyColumn is a column of a primary key, as readTarget weighs it.
type keyColumn struct {
	attnum              int64
	name                string
	identity, generated bool
	def                 string
}

// fromSequence reports whether the column's values come from a sequence,
// an identity or snowflake_id(): the column that takes a table's keys.
func (k keyColumn) fromSequence() bool {
	return k.identity || strings.HasPrefix(k.def, "nextval(") || snowflakeDefault.MatchString(k.def)
}

// readTarget reads table rel's key: its one-column primary key, or the
// one column of a composite key whose values come from a sequence, an
// identity or snowflake_id() (PRIMARY KEY (tenant_id, id), or a
// partitioned table's (created_at, id)).
func (b *planner) readTarget(ctx context.Context, rel relation) (*target, error) {
	rows, err := b.q.QueryContext(ctx, `SELECT a.attnum::int8, quote_ident(a.attname), a.attidentity <> '', a.attgenerated <> '',
			coalesce(pg_catalog.pg_get_expr(d.adbin, d.adrelid), '')
		FROM pg_catalog.pg_constraint con
			JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = ANY (con.conkey)
			LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE con.conrelid = $1 AND con.contype = 'p'
		ORDER BY pg_catalog.array_position(con.conkey, a.attnum)`, rel.oid)
	if err != nil {
		return nil, fmt.Errorf("adopt: %s: %w", rel.name, err)
	}
	var cols []keyColumn
	for rows.Next() {
		var k keyColumn
		if err := rows.Scan(&k.attnum, &k.name, &k.identity, &k.generated, &k.def); err != nil {
			rows.Close()
			return nil, err
		}
		cols = append(cols, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var key keyColumn
	switch seqs := slices.DeleteFunc(slices.Clone(cols), func(k keyColumn) bool { return !k.fromSequence() }); {
	case len(cols) == 0:
		return nil, fmt.Errorf("%w %s: it has no primary key", ErrTable, rel.name)
	case len(cols) == 1:
		key = cols[0]
	case len(seqs) == 1:
		key = seqs[0]
	default:
		var names []string
		for _, k := range cols {
			names = append(names, k.name)
		}
		return nil, fmt.Errorf("%w %s: its primary key (%s) is composite, and %d of its columns take values from a sequence, "+
			"an identity or snowflake_id(), not one: adopt cannot tell which holds the keys", ErrTable, rel.name,
			strings.Join(names, ", "), len(seqs))
	}
	t := &target{relation: rel, identity: key.identity, def: key.def}
	col, err := b.readColumn(ctx, rel.oid, key.attnum, `, coalesce(pg_catalog.pg_get_serial_sequence(format('%I.%I', n.nspname, c.relname), a.attname), '')`,
		&t.seq)
	if err != nil {
		return nil, err
	}
	t.key = *col
	switch {
	case key.generated:
		return nil, fmt.Errorf("%w %s: its key %s is a generated column", ErrTable, rel.name, col.name)
	case col.base() != "smallint" && col.base() != "integer" && col.base() != "bigint":
		return nil, fmt.Errorf("%w %s: its key %s is %s, not an integer", ErrTable, rel.name, col.name, col.typ)
	case t.def == "" && col.domain != nil && col.domain.def != "" && !snowflakeDefault.MatchString(col.domain.def):
		return nil, fmt.Errorf("%w: %s: key %s takes its default from its domain %s (%s); set the default on the "+
			"column, or drop the domain's, before adopting", ErrDefault, rel.name, col.name, col.domain.name, col.domain.def)
	case t.identity, t.def == "", strings.HasPrefix(t.def, "nextval("), snowflakeDefault.MatchString(t.def):
	default:
		return nil, fmt.Errorf("%w: %s: the default of key %s is %s; set it to a sequence, or drop it, before adopting",
			ErrDefault, rel.name, col.name, t.def)
	}
	return t, nil
}

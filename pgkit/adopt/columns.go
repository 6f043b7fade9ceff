package adopt

import (
	"context"
	"fmt"
	"strings"
)

// column is a column found in the catalog.
type column struct {
	rel     int64  // the table's pg_class oid
	attnum  int64  // the column's number
	table   string // the table, schema-qualified and quoted as needed
	relname string // the table's name alone, unquoted
	name    string // the column, quoted as needed
	attname string // the column, unquoted
	typ     string // its type, as format_type prints it
	wide    bool   // not smallint or integer (nor a domain over them): left as it is
	// inherited says the column comes from a parent table (a partition's
	// from its partitioned table, an inheritance child's from its
	// parent): PostgreSQL changes its type only on the parent.
	inherited bool
	// domain is the column's domain, when its type is one: the column is
	// widened to a domain over bigint with the same constraints.
	domain *domain
	// family is the column itself and the same column of every partition
	// and inheritance child of its table, at any depth, which changing
	// its type changes too. Read by findHolders for the columns it widens.
	family []member
	// Why PostgreSQL would refuse to change the column's type, or "".
	refusal string
}

// member is one table's column of a family.
type member struct {
	rel, attnum int64
	table       string
}

func (c *column) String() string { return c.table + "." + c.name }

// base is the column's type, or its domain's base type.
func (c *column) base() string {
	if c.domain != nil {
		return c.domain.base
	}
	return c.typ
}

// readColumn reads column attnum of table rel, and the extra expressions
// over a (pg_attribute), d (pg_attrdef), c and n into dst.
func (b *planner) readColumn(ctx context.Context, rel, attnum int64, extra string, dst ...any) (*column, error) {
	c := &column{rel: rel, attnum: attnum}
	var (
		typoid, baseoid, inherited, domainOID int64
		typtype, base, domainName, domainDef  string
		baseIsDomain                          bool
	)
	args := append([]any{&c.table, &c.relname, &c.name, &c.attname, &c.typ, &typoid, &typtype, &baseoid, &base, &baseIsDomain,
		&domainOID, &domainName, &domainDef, &inherited}, dst...)
	err := b.q.QueryRowContext(ctx, `SELECT format('%I.%I', n.nspname, c.relname), c.relname::text, quote_ident(a.attname), a.attname::text,
			pg_catalog.format_type(a.atttypid, a.atttypmod), a.atttypid::int8, ty.typtype::text,
			coalesce(bt.oid, 0)::int8, coalesce(pg_catalog.format_type(bt.oid, NULL), ''), coalesce(bt.typtype = 'd', false),
			CASE WHEN ty.typtype = 'd' THEN ty.oid ELSE 0 END::int8,
			CASE WHEN ty.typtype = 'd' THEN format('%I.%I', tn.nspname, ty.typname) ELSE '' END,
			coalesce(pg_catalog.pg_get_expr(ty.typdefaultbin, 0), ''),
			a.attinhcount::int8`+extra+`
		FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
			JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			JOIN pg_catalog.pg_type ty ON ty.oid = a.atttypid
			JOIN pg_catalog.pg_namespace tn ON tn.oid = ty.typnamespace
			LEFT JOIN pg_catalog.pg_type bt ON ty.typtype = 'd' AND bt.oid = ty.typbasetype
			LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE a.attrelid = $1 AND a.attnum = $2`, rel, attnum).Scan(args...)
	if err != nil {
		return nil, fmt.Errorf("adopt: column %d of table %d: %w", attnum, rel, err)
	}
	// Only smallint and integer columns (or domains over them) are
	// widened: bigint holds every key, and a column of another type that
	// a foreign key allows (numeric, say) holds them too.
	narrow := typoid == 21 || typoid == 23
	if typtype == "d" {
		c.domain = &domain{oid: domainOID, name: domainName, base: base, def: domainDef}
		narrow = baseoid == 21 || baseoid == 23
		if baseIsDomain {
			c.refusal = fmt.Sprintf("(its type %s is a domain over the domain %s, which adopt does not widen)", domainName, base)
		}
	}
	c.wide = !narrow
	c.inherited = inherited > 0
	return c, nil
}

// findHolders finds every column that holds each target's keys,
// following foreign keys to foreign keys (a referrer that is itself a key
// holds the same values), and where to widen those that are smallint or
// integer: a column a partition or an inheritance child has from its
// parent is widened on the topmost parent that has it, which changes it
// on every partition and child.
func (b *planner) findHolders(ctx context.Context) error {
	b.holders = map[string]bool{}
	b.holderRels = map[string]bool{}
	at := map[[2]int64]*column{} // every family member of a column to widen, by (rel, attnum)
	add := func(c *column) error {
		b.holderCols = append(b.holderCols, c)
		b.holders[c.attname] = true
		b.holderRels[c.relname] = true
		if c.wide {
			return nil
		}
		root := c
		if c.inherited && !b.defences.noParentColumns {
			r, err := b.root(ctx, c)
			if err != nil {
				return err
			}
			root = r
		}
		if at[[2]int64{root.rel, root.attnum}] != nil {
			return nil
		}
		if root.family == nil {
			if err := b.readFamily(ctx, root); err != nil {
				return err
			}
		}
		for _, m := range root.family {
			at[[2]int64{m.rel, m.attnum}] = root
		}
		b.widen = append(b.widen, root)
		return nil
	}
	for _, t := range b.targets {
		if err := add(&t.key); err != nil {
			return err
		}
		if t.key.family == nil {
			if err := b.readFamily(ctx, &t.key); err != nil {
				return err
			}
		}
		done := map[[2]int64]bool{{t.key.rel, t.key.attnum}: true}
		work := []*column{&t.key}
		for len(work) > 0 {
			c := work[0]
			work = work[1:]
			refs, err := b.referrers(ctx, c)
			if err != nil {
				return err
			}
			for _, r := range refs {
				k := [2]int64{r.rel, r.attnum}
				if done[k] {
					continue
				}
				done[k] = true
				t.refs = append(t.refs, r)
				if err := add(r); err != nil {
					return err
				}
				work = append(work, r)
			}
		}
	}
	return nil
}

// root returns the column of the topmost parent table that c's column
// comes from. A column that comes from several parents (multiple
// inheritance) is returned as it is, with the refusal that says so.
func (b *planner) root(ctx context.Context, c *column) (*column, error) {
	rows, err := b.q.QueryContext(ctx, `WITH RECURSIVE up(rel, inh) AS (
			SELECT a.attrelid, a.attinhcount FROM pg_catalog.pg_attribute a WHERE a.attrelid = $1 AND a.attnum = $2
			UNION
			SELECT i.inhparent, pa.attinhcount
			FROM up JOIN pg_catalog.pg_inherits i ON i.inhrelid = up.rel
				JOIN pg_catalog.pg_attribute pa ON pa.attrelid = i.inhparent AND pa.attname = $3 AND NOT pa.attisdropped
			WHERE up.inh > 0)
		SELECT up.rel::int8, a.attnum::int8 FROM up JOIN pg_catalog.pg_attribute a ON a.attrelid = up.rel AND a.attname = $3
		WHERE up.inh = 0 ORDER BY 1`, c.rel, c.attnum, c.attname)
	if err != nil {
		return nil, fmt.Errorf("adopt: parents of %s: %w", c, err)
	}
	var roots [][2]int64
	for rows.Next() {
		var r [2]int64
		if err := rows.Scan(&r[0], &r[1]); err != nil {
			rows.Close()
			return nil, err
		}
		roots = append(roots, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(roots) != 1 {
		c.refusal = fmt.Sprintf("(it is inherited from %d parent tables; PostgreSQL changes an inherited column only on its parent)", len(roots))
		return c, nil
	}
	return b.readColumn(ctx, roots[0][0], roots[0][1], "")
}

// readFamily reads c's family: the same column of every partition and
// inheritance child of its table, at any depth; and sets c's refusal when
// PostgreSQL would refuse to change the type of one of them: part of a
// partition key (SQLSTATE 42P16), of a typed table, or inherited from
// more than one parent.
func (b *planner) readFamily(ctx context.Context, c *column) error {
	rows, err := b.q.QueryContext(ctx, `WITH RECURSIVE down(rel) AS (
			SELECT $1::oid
			UNION
			SELECT i.inhrelid FROM down JOIN pg_catalog.pg_inherits i ON i.inhparent = down.rel)
		SELECT d.rel::int8, a.attnum::int8, format('%I.%I', n.nspname, k.relname), a.attinhcount::int8,
			EXISTS (SELECT 1 FROM pg_catalog.pg_partitioned_table pt WHERE pt.partrelid = k.oid
				AND a.attnum = ANY (pt.partattrs::int2[])),
			k.reloftype <> 0
		FROM down d JOIN pg_catalog.pg_class k ON k.oid = d.rel
			JOIN pg_catalog.pg_namespace n ON n.oid = k.relnamespace
			JOIN pg_catalog.pg_attribute a ON a.attrelid = d.rel AND a.attname = $2 AND NOT a.attisdropped
		ORDER BY d.rel = $1::oid DESC, 3`, c.rel, c.attname)
	if err != nil {
		return fmt.Errorf("adopt: partitions and children of %s: %w", c.table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var m member
		var inh int64
		var partKey, typed bool
		if err := rows.Scan(&m.rel, &m.attnum, &m.table, &inh, &partKey, &typed); err != nil {
			return err
		}
		c.family = append(c.family, m)
		if c.refusal != "" {
			continue
		}
		switch {
		case partKey && m.rel == c.rel:
			c.refusal = "(it is part of its table's partition key)"
		case partKey:
			c.refusal = fmt.Sprintf("(it is part of the partition key of %s, a partition of %s)", m.table, c.table)
		case typed:
			c.refusal = fmt.Sprintf("(%s is a typed table, CREATE TABLE OF a type)", m.table)
		case inh > 1:
			c.refusal = fmt.Sprintf("(%s has it from more than one parent)", m.table)
		case b.defences.noParentColumns && m.rel == c.rel && inh > 0:
			c.refusal = "(it is inherited from a parent table)"
		}
	}
	return rows.Err()
}

// referrers lists the columns whose foreign keys refer to c or to the
// same column of one of its partitions or children. Constraints that a
// partitioned table's partitions have from it are left out: changing the
// partitioned table's column changes theirs.
func (b *planner) referrers(ctx context.Context, c *column) ([]*column, error) {
	rels, nums := []int64{}, []int64{}
	for _, m := range c.family {
		rels, nums = append(rels, m.rel), append(nums, m.attnum)
	}
	if len(rels) == 0 {
		rels, nums = []int64{c.rel}, []int64{c.attnum}
	}
	rows, err := b.q.QueryContext(ctx, `SELECT DISTINCT con.conrelid::int8, con.conkey[i]::int8, con.conrelid::pg_catalog.regclass::text, con.conname
		FROM pg_catalog.pg_constraint con, pg_catalog.generate_subscripts(con.confkey, 1) AS i,
			unnest($1::int8[], $2::int8[]) AS f(rel, attnum)
		WHERE con.contype = 'f' AND con.conparentid = 0 AND con.confrelid = f.rel::oid AND con.confkey[i] = f.attnum
		ORDER BY 3, 4, 2`, rels, nums)
	if err != nil {
		return nil, fmt.Errorf("adopt: foreign keys to %s: %w", c, err)
	}
	var pairs [][2]int64
	for rows.Next() {
		var p [2]int64
		if err := rows.Scan(&p[0], &p[1], new(string), new(string)); err != nil {
			rows.Close()
			return nil, err
		}
		pairs = append(pairs, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []*column
	for _, p := range pairs {
		r, err := b.readColumn(ctx, p[0], p[1], "")
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// checkColumns refuses the columns PostgreSQL will not change the type
// of (ErrColumn), each with why.
func (b *planner) checkColumns(context.Context) error {
	if b.defences.noColumnCheck {
		return nil
	}
	var refused []string
	for _, c := range b.widen {
		if c.refusal != "" {
			refused = append(refused, c.String()+" "+c.refusal)
		}
	}
	if len(refused) > 0 {
		b.refuse(fmt.Errorf("%w: PostgreSQL cannot change these columns to bigint: %s", ErrColumn, strings.Join(refused, "; ")))
	}
	return nil
}

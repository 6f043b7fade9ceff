package partition

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// querier is what reading the catalog needs of a transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// partition is one partition of the table, as the catalog says.
type partition struct {
	oid          int64
	schema, name string
	lo, hi       bound
}

// ident is the partition's name as SQL takes it.
func (pt partition) ident() string { return pgx.Identifier{pt.schema, pt.name}.Sanitize() }

// tableState is what a step reads of the table under the lock.
type tableState struct {
	oid          int64
	schema, name string
	key          string // the key column
	keyNum       int16  // its attnum
	version      int    // server_version_num
	def          *partition
	parts        []partition // range partitions, by lower bound
	// replica says the current user may set session_replication_role,
	// which moves rows without firing triggers or foreign-key actions.
	replica bool
}

// ident is the table's name as SQL takes it.
func (st *tableState) ident() string { return pgx.Identifier{st.schema, st.name}.Sanitize() }

// defaultTarget is what a read of the keys in the default partition
// reads.
func (st *tableState) defaultTarget() []target {
	return []target{{rel: st.def.oid, cols: []string{st.key}}}
}

// quoted is the table's name as SQL takes it.
func (p *Table) quoted() string {
	if p.schema == "" {
		return pgx.Identifier{p.table}.Sanitize()
	}
	return pgx.Identifier{p.schema, p.table}.Sanitize()
}

// readState reads the table's partition key and partitions from the
// catalog, and checks that Maintain can work on it.
func (p *Table) readState(ctx context.Context, q querier, oid uint32) (*tableState, error) {
	st := &tableState{oid: int64(oid)}
	var strat, keyType, key sql.NullString
	var natts, keyNum sql.NullInt64
	var super bool
	err := q.QueryRowContext(ctx, `
		SELECT n.nspname, c.relname, current_setting('server_version_num')::int,
		       pt.partstrat::text, pt.partnatts, a.attname, a.attnum, format_type(a.atttypid, a.atttypmod),
		       (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user)
		FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_catalog.pg_partitioned_table pt ON pt.partrelid = c.oid
		LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = pt.partattrs[0]
		WHERE c.oid = $1`, int64(oid)).Scan(&st.schema, &st.name, &st.version, &strat, &natts, &key, &keyNum, &keyType, &super)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("%w: table %s no longer exists", ErrNotPartitioned, p.Name())
	case err != nil:
		return nil, fmt.Errorf("partition: table %s: read catalog: %w", p.Name(), err)
	case st.version < 110000:
		return nil, fmt.Errorf("%w: table %s: the server is PostgreSQL %d; partitions by key time need 11 or later (default partition)",
			ErrServer, p.Name(), st.version/10000)
	case !strat.Valid:
		return nil, fmt.Errorf("%w: table %s is a plain table; PostgreSQL cannot partition a table in place: "+
			"make a partitioned table (Create) and move the rows into it", ErrNotPartitioned, p.Name())
	case strat.String != "r":
		return nil, fmt.Errorf("%w: table %s is partitioned by %s, not by range", ErrNotPartitioned, p.Name(),
			map[string]string{"l": "list", "h": "hash"}[strat.String])
	case natts.Int64 != 1 || !key.Valid:
		return nil, fmt.Errorf("%w: table %s is partitioned by %d key columns or an expression, not by its key column alone",
			ErrNotPartitioned, p.Name(), natts.Int64)
	case keyType.String != "bigint":
		return nil, fmt.Errorf("%w: table %s is partitioned by %s of type %s, not bigint", ErrNotPartitioned, p.Name(),
			key.String, keyType.String)
	}
	st.key, st.keyNum = key.String, int16(keyNum.Int64)
	st.replica = super
	if !super && st.version >= 150000 {
		// PostgreSQL 15 lets a superuser grant the setting:
		// GRANT SET ON PARAMETER session_replication_role TO role.
		if err := q.QueryRowContext(ctx, "SELECT has_parameter_privilege('session_replication_role', 'SET')").Scan(&st.replica); err != nil {
			return nil, fmt.Errorf("partition: table %s: %w", p.Name(), err)
		}
	}
	rows, err := q.QueryContext(ctx, `
		SELECT c.oid::int8, n.nspname, c.relname, pg_get_expr(c.relpartbound, c.oid)
		FROM pg_catalog.pg_inherits i
		JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE i.inhparent = $1`, int64(oid))
	if err != nil {
		return nil, fmt.Errorf("partition: table %s: read partitions: %w", p.Name(), err)
	}
	defer rows.Close()
	for rows.Next() {
		var pt partition
		var expr string
		if err := rows.Scan(&pt.oid, &pt.schema, &pt.name, &expr); err != nil {
			return nil, fmt.Errorf("partition: table %s: read partitions: %w", p.Name(), err)
		}
		isDefault, lo, hi, err := parseBound(expr)
		if err != nil {
			return nil, fmt.Errorf("table %s, partition %s: %w", p.Name(), pt.name, err)
		}
		if isDefault {
			st.def = &pt
			continue
		}
		pt.lo, pt.hi = lo, hi
		st.parts = append(st.parts, pt)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("partition: table %s: read partitions: %w", p.Name(), err)
	}
	slices.SortFunc(st.parts, func(a, b partition) int { return a.lo.cmp(b.lo) })
	return st, nil
}

// foreignKey is a foreign key that refers to the table's rows.
type foreignKey struct {
	name  string   // the constraint
	table string   // the referring table, as SQL takes it
	rel   int64    // its OID
	cols  []string // its referring columns, unquoted
	// col is the referring column that holds the table's key; others are
	// its other columns, a row with NULL in any of which refers to
	// nothing (MATCH SIMPLE; MATCH FULL allows only all or none).
	col    string
	others []string
	label  string // schema.table.col (constraint), for reports
}

// referringKeys lists the foreign keys that refer to the table (or
// directly to its default partition) through its key column: those whose
// rows a move or a removal could break or fire. A foreign key that refers
// to the default partition by other columns alone is returned with col
// "" (any row of it may refer to any row).
func referringKeys(ctx context.Context, q querier, st *tableState) ([]foreignKey, error) {
	refs := []int64{st.oid}
	if st.def != nil {
		refs = append(refs, st.def.oid)
	}
	rows, err := q.QueryContext(ctx, `
		SELECT con.conname, format('%I.%I', n.nspname, c.relname),
		       coalesce((SELECT quote_ident(a.attname) FROM pg_catalog.generate_subscripts(con.confkey, 1) i
		                 JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = con.conkey[i]
		                 WHERE con.confkey[i] = $2), ''),
		       coalesce((SELECT json_agg(quote_ident(a.attname) ORDER BY i) FROM pg_catalog.generate_subscripts(con.confkey, 1) i
		                 JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = con.conkey[i]
		                 WHERE con.confkey[i] <> $2), '[]')::text,
		       format('%I.%I.', n.nspname, c.relname), con.conrelid::int8,
		       (SELECT json_agg(a.attname ORDER BY i) FROM pg_catalog.generate_subscripts(con.conkey, 1) i
		        JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = con.conkey[i])::text
		FROM pg_catalog.pg_constraint con
		JOIN pg_catalog.pg_class c ON c.oid = con.conrelid
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE con.contype = 'f' AND con.conparentid = 0 AND con.confrelid = ANY ($1::int8[]::oid[])
		ORDER BY 2, 1`, refs, st.keyNum)
	if err != nil {
		return nil, fmt.Errorf("foreign keys that refer to %s: %w", st.name, err)
	}
	defer rows.Close()
	var out []foreignKey
	for rows.Next() {
		var fk foreignKey
		var others, prefix, cols string
		if err := rows.Scan(&fk.name, &fk.table, &fk.col, &others, &prefix, &fk.rel, &cols); err != nil {
			return nil, fmt.Errorf("foreign keys that refer to %s: %w", st.name, err)
		}
		if err := json.Unmarshal([]byte(others), &fk.others); err != nil {
			return nil, fmt.Errorf("foreign key %s: %w", fk.name, err)
		}
		if err := json.Unmarshal([]byte(cols), &fk.cols); err != nil {
			return nil, fmt.Errorf("foreign key %s: %w", fk.name, err)
		}
		fk.label = fmt.Sprintf("%s%s (%s)", prefix, fk.col, fk.name)
		if fk.col == "" {
			fk.label = fmt.Sprintf("%s%s (%s)", prefix, strings.Join(fk.others, ", "), fk.name)
		}
		out = append(out, fk)
	}
	return out, rows.Err()
}

// referrers counts, for each foreign key, the rows that refer to the
// table's rows whose keys lie in [lo, hi), and returns the keys that
// have some, as Report labels them, with the total. By the foreign
// key's own guarantee, a referring value in the range refers to a row in
// the range, so the count reads the referring table alone (through its
// index on the column, if it has one). A foreign key on other columns
// than the key counts every referring row.
//
// A count that PostgreSQL refuses (a policy would filter it, or a
// privilege is missing; guarded) is no count: the others are made, and
// the refusals are returned together, wrapping ErrRowSecurity or
// ErrPrivilege, with the labels and total of the counts made.
func (m *maintenance) referrers(ctx context.Context, q querier, fks []foreignKey, lo, hi bound) ([]string, int64, error) {
	var labels []string
	var total int64
	var refusals []error
	for _, fk := range fks {
		var conds []string
		if fk.col != "" {
			if lo.inf == 0 {
				conds = append(conds, fk.col+" >= "+lo.sql())
			}
			if hi.inf == 0 {
				conds = append(conds, fk.col+" < "+hi.sql())
			}
			conds = append(conds, fk.col+" IS NOT NULL")
		}
		for _, c := range fk.others {
			conds = append(conds, c+" IS NOT NULL")
		}
		query := "SELECT count(*) FROM " + fk.table
		if len(conds) > 0 {
			query += " WHERE " + strings.Join(conds, " AND ")
		}
		var n int64
		err := m.guarded(ctx, q, []target{{rel: fk.rel, cols: fk.cols}}, func() error {
			return q.QueryRowContext(ctx, query).Scan(&n)
		})
		switch {
		case refused(err):
			refusals = append(refusals, fmt.Errorf("rows that refer through %s: %w", fk.label, err))
			continue
		case err != nil:
			return nil, 0, fmt.Errorf("rows that refer through %s: %w", fk.label, err)
		}
		if n > 0 {
			labels = append(labels, fmt.Sprintf("%s: %d rows", fk.label, n))
			total += n
		}
	}
	if len(refusals) > 0 {
		return labels, total, joinLine(refusals)
	}
	return labels, total, nil
}

// trigger is a user's trigger on a partition, and the state it was in.
type trigger struct {
	table, name string // as SQL takes them
	enabled     string // pg_trigger.tgenabled: O, A or R
}

// firingTriggers lists the user's triggers on table rel that fire in the
// session's replication role: origin fires those enabled O (the default)
// and A (ALWAYS), replica those enabled R (REPLICA) and A. Internal
// triggers (foreign keys' and deferred unique constraints') are not the
// user's and are left out.
func firingTriggers(ctx context.Context, q querier, rel int64, ident string, replica bool) ([]trigger, error) {
	modes := []string{"O", "A"}
	if replica {
		modes = []string{"R", "A"}
	}
	rows, err := q.QueryContext(ctx, `SELECT quote_ident(tgname), tgenabled::text FROM pg_catalog.pg_trigger
		WHERE tgrelid = $1::int8::oid AND NOT tgisinternal AND tgenabled::text = ANY ($2::text[]) ORDER BY tgname`, rel, modes)
	if err != nil {
		return nil, fmt.Errorf("triggers of %s: %w", ident, err)
	}
	defer rows.Close()
	var out []trigger
	for rows.Next() {
		t := trigger{table: ident}
		if err := rows.Scan(&t.name, &t.enabled); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// enable is the statement that puts t back as it was.
func (t trigger) enable() string {
	how := ""
	switch t.enabled {
	case "A":
		how = "ALWAYS "
	case "R":
		how = "REPLICA "
	}
	return "ALTER TABLE " + t.table + " ENABLE " + how + "TRIGGER " + t.name
}

// columns lists the table's columns that an INSERT may set, quoted and
// joined: all but dropped and generated ones.
func columns(ctx context.Context, q querier, st *tableState) (string, error) {
	generated := "a.attgenerated <> ''"
	if st.version < 120000 { // no generated columns before PostgreSQL 12
		generated = "false"
	}
	rows, err := q.QueryContext(ctx, `SELECT a.attname FROM pg_catalog.pg_attribute a
		WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped AND NOT (`+generated+`)
		ORDER BY a.attnum`, st.oid)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return "", err
		}
		cols = append(cols, pgx.Identifier{c}.Sanitize())
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	return strings.Join(cols, ", "), nil
}

package adopt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// querier is what planning reads the catalog through: a *sql.DB for
// NewPlan, the transaction for Apply's second look under the locks.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// column is a column found in the catalog.
type column struct {
	rel    int64  // the table's pg_class oid
	attnum int64  // the column's number
	table  string // the table, schema-qualified and quoted as needed
	name   string // the column, quoted as needed
	typ    string // its type, as format_type prints it
	wide   bool   // bigint already
}

func (c *column) String() string { return c.table + "." + c.name }

// target is a table to adopt.
type target struct {
	key      column
	identity bool
	def      string // the default expression, "" for none
	seq      string // the serial sequence the key owns, "" for none
	maxKey   int64
	refs     []*column // columns that hold its keys
}

// view is a plain view to drop and create again around the type
// changes.
type view struct {
	oid    int64
	name   string
	create []string // CREATE VIEW, then owner, comments and grants
}

// snowflakeDefault matches a default that is snowflake_id() itself,
// schema-qualified or not.
var snowflakeDefault = regexp.MustCompile(`^(?:(?:"[^"]+"|[^".()]+)\.)?snowflake_id\(\)$`)

// buildPlan reads the catalog and builds the plan for names.
func buildPlan(ctx context.Context, q querier, names []string, o Options, d defences) (*Plan, error) {
	p := &Plan{names: names, o: o, d: d}
	var errs []error

	fn := ""
	if !o.AppKeys {
		err := q.QueryRowContext(ctx, `SELECT format('%I.%I', n.nspname, f.proname)
			FROM pg_proc f JOIN pg_namespace n ON n.oid = f.pronamespace
			WHERE f.oid = to_regprocedure('snowflake_id()')`).Scan(&fn)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			errs = append(errs, fmt.Errorf("%w (no snowflake_id() on the search_path): run migrations.Up first, "+
				"or adopt with app-side keys (AppKeys, --app-keys)", ErrFunction))
		case err != nil:
			return nil, fmt.Errorf("adopt: %w", err)
		}
	}

	var targets []*target
	seen := map[int64]bool{}
	for _, name := range names {
		t, err := readTarget(ctx, q, name)
		if err != nil {
			if !errors.Is(err, ErrTable) && !errors.Is(err, ErrDefault) {
				return nil, err
			}
			errs = append(errs, err)
			continue
		}
		if seen[t.key.rel] {
			continue
		}
		seen[t.key.rel] = true
		targets = append(targets, t)
	}

	// Every column that holds a target's keys, following foreign keys to
	// foreign keys: a referrer that is itself a key holds the same values.
	widen := map[[2]int64]*column{}
	var widenOrder []*column
	for _, t := range targets {
		if k := [2]int64{t.key.rel, t.key.attnum}; !t.key.wide && widen[k] == nil {
			widen[k] = &t.key
			widenOrder = append(widenOrder, &t.key)
		}
		done := map[[2]int64]bool{{t.key.rel, t.key.attnum}: true}
		work := []*column{&t.key}
		for len(work) > 0 {
			c := work[0]
			work = work[1:]
			refs, err := referrers(ctx, q, c)
			if err != nil {
				return nil, err
			}
			for _, r := range refs {
				k := [2]int64{r.rel, r.attnum}
				if done[k] {
					continue
				}
				done[k] = true
				t.refs = append(t.refs, r)
				work = append(work, r)
				if !r.wide && widen[k] == nil {
					widen[k] = r
					widenOrder = append(widenOrder, r)
				}
			}
		}
	}

	// What depends on the columns to widen.
	var views []*view
	viewSeen := map[int64]bool{}
	if !d.noDependents {
		for _, c := range widenOrder {
			vs, err := dependents(ctx, q, c)
			if err != nil {
				if !errors.Is(err, ErrDependents) {
					return nil, err
				}
				errs = append(errs, err)
				continue
			}
			for _, v := range vs {
				if !viewSeen[v.oid] {
					viewSeen[v.oid] = true
					views = append(views, v)
				}
			}
		}
	}

	first := o.Layout.FirstID(time.Now())
	for _, t := range targets {
		if !d.noKeyRange && t.maxKey >= int64(first) {
			errs = append(errs, fmt.Errorf("%w: %s holds key %d, not below %d, the first snowflake of now: "+
				"new keys would not all be greater than the old ones", ErrKeyRange, t.key.table, t.maxKey, first))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	locks := map[string]bool{}
	for _, v := range views {
		p.Steps = append(p.Steps, Step{SQL: "DROP VIEW " + v.name,
			Locks: "view " + v.name + ": dropped, and created again below with its definition, owner, comments and privileges; catalog only"})
		locks[v.name] = true
	}
	for _, t := range targets {
		if t.identity {
			p.Steps = append(p.Steps, Step{SQL: fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s DROP IDENTITY", t.key.table, t.key.name),
				Locks: t.key.table + ": drops the key's identity and its sequence; catalog only, instant"})
			locks[t.key.table] = true
		}
	}
	// One ALTER TABLE a table, so that each is rewritten once; the
	// targets' own tables first, then the referrers, as found.
	var tables []string
	cols := map[string][]*column{}
	for _, c := range widenOrder {
		if cols[c.table] == nil {
			tables = append(tables, c.table)
		}
		cols[c.table] = append(cols[c.table], c)
	}
	for _, table := range tables {
		var parts, names []string
		for _, c := range cols[table] {
			parts = append(parts, fmt.Sprintf("ALTER COLUMN %s TYPE bigint", c.name))
			names = append(names, fmt.Sprintf("%s %s", c.name, c.typ))
		}
		p.Steps = append(p.Steps, Step{SQL: fmt.Sprintf("ALTER TABLE %s %s", table, strings.Join(parts, ", ")),
			Locks: fmt.Sprintf("%s: %s to bigint; rewrites the table and rebuilds its indexes, and checks again "+
				"the foreign keys on these columns (reading the tables they join): time grows with the table's size",
				table, strings.Join(names, ", "))})
		locks[table] = true
	}
	for _, t := range targets {
		switch {
		case t.def == "" && !t.identity:
			// Keys without a default come from the app, or from another
			// table's key (a one-to-one key that is a foreign key): adopt
			// replaces a default, it does not add one.
		case !o.AppKeys && snowflakeDefault.MatchString(t.def):
		case !o.AppKeys:
			p.Steps = append(p.Steps, Step{SQL: fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s SET DEFAULT %s()", t.key.table, t.key.name, fn),
				Locks: t.key.table + ": new rows get snowflake_id() keys; catalog only, instant"})
			locks[t.key.table] = true
		case t.def != "":
			p.Steps = append(p.Steps, Step{SQL: fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s DROP DEFAULT", t.key.table, t.key.name),
				Locks: t.key.table + ": new rows must bring their keys (gormplugin fills them); catalog only, instant"})
			locks[t.key.table] = true
		}
		if t.seq != "" && !t.identity {
			p.Steps = append(p.Steps, Step{SQL: fmt.Sprintf("ALTER SEQUENCE %s OWNED BY NONE", t.seq),
				Locks: "sequence " + t.seq + ": detached from the key and kept, unused (drop it once nothing calls nextval on it); catalog only"})
		}
	}
	for _, v := range views {
		for _, stmt := range v.create {
			p.Steps = append(p.Steps, Step{SQL: stmt, Locks: "view " + v.name + ": catalog only"})
		}
	}
	for l := range locks {
		p.Locks = append(p.Locks, l)
	}
	slices.Sort(p.Locks)

	for _, t := range targets {
		at := Table{Name: t.key.table, Key: t.key.name, Type: t.key.typ, Default: t.def, MaxKey: t.maxKey}
		if t.identity {
			at.Default = "identity"
		}
		for _, r := range t.refs {
			at.Referrers = append(at.Referrers, r.String())
		}
		p.Tables = append(p.Tables, at)
	}
	return p, nil
}

// readTarget finds the table name and its key.
func readTarget(ctx context.Context, q querier, name string) (*target, error) {
	var (
		rel       sql.NullInt64
		qualified string
		kind      string
		inherits  bool
	)
	err := q.QueryRowContext(ctx, `SELECT c.oid::int8, format('%I.%I', n.nspname, c.relname), c.relkind::text,
			EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid OR i.inhparent = c.oid)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid = to_regclass($1)`, name).Scan(&rel, &qualified, &kind, &inherits)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("%w %q: no such table", ErrTable, name)
	case err != nil:
		return nil, fmt.Errorf("%w %q: %w", ErrTable, name, err)
	case kind != "r":
		return nil, fmt.Errorf("%w %s: not an ordinary table (relkind %q): views, partitioned and foreign tables are not adopted", ErrTable, qualified, kind)
	case inherits:
		return nil, fmt.Errorf("%w %s: it has inheritance parents or children", ErrTable, qualified)
	}
	var nkeys, attnum sql.NullInt64
	var keyNames string
	err = q.QueryRowContext(ctx, `SELECT array_length(con.conkey, 1), con.conkey[1],
			(SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) FROM pg_attribute a
			 WHERE a.attrelid = con.conrelid AND a.attnum = ANY (con.conkey))
		FROM pg_constraint con WHERE con.conrelid = $1 AND con.contype = 'p'`, rel.Int64).Scan(&nkeys, &attnum, &keyNames)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("%w %s: it has no primary key", ErrTable, qualified)
	case err != nil:
		return nil, fmt.Errorf("adopt: %s: %w", qualified, err)
	case nkeys.Int64 != 1:
		return nil, fmt.Errorf("%w %s: its primary key (%s) is composite; only one-column keys are adopted", ErrTable, qualified, keyNames)
	}
	t := &target{}
	var identity, generated string
	col, err := readColumn(ctx, q, rel.Int64, attnum.Int64, `, a.attidentity::text, a.attgenerated::text,
			coalesce(pg_get_expr(d.adbin, d.adrelid), ''),
			coalesce(pg_get_serial_sequence(format('%I.%I', n.nspname, c.relname), a.attname), '')`,
		&identity, &generated, &t.def, &t.seq)
	if err != nil {
		return nil, err
	}
	t.key = *col
	t.identity = identity != ""
	switch {
	case generated != "":
		return nil, fmt.Errorf("%w %s: its key %s is a generated column", ErrTable, qualified, col.name)
	case col.typ != "smallint" && col.typ != "integer" && col.typ != "bigint":
		return nil, fmt.Errorf("%w %s: its key %s is %s, not an integer", ErrTable, qualified, col.name, col.typ)
	case t.identity, t.def == "", strings.HasPrefix(t.def, "nextval("), snowflakeDefault.MatchString(t.def):
	default:
		return nil, fmt.Errorf("%w: %s: the default of key %s is %s; set it to a sequence, or drop it, before adopting",
			ErrDefault, qualified, col.name, t.def)
	}
	if err := q.QueryRowContext(ctx, fmt.Sprintf("SELECT coalesce(max(%s), 0)::int8 FROM %s", col.name, qualified)).Scan(&t.maxKey); err != nil {
		return nil, fmt.Errorf("adopt: largest key of %s: %w", qualified, err)
	}
	return t, nil
}

// readColumn reads column attnum of table rel, and the extra
// expressions over a (pg_attribute), d (pg_attrdef), c and n into dst.
func readColumn(ctx context.Context, q querier, rel, attnum int64, extra string, dst ...any) (*column, error) {
	c := &column{rel: rel, attnum: attnum}
	var typoid int64
	args := append([]any{&c.table, &c.name, &c.typ, &typoid}, dst...)
	err := q.QueryRowContext(ctx, `SELECT format('%I.%I', n.nspname, c.relname), quote_ident(a.attname),
			format_type(a.atttypid, a.atttypmod), a.atttypid::int8`+extra+`
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
			LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE a.attrelid = $1 AND a.attnum = $2`, rel, attnum).Scan(args...)
	if err != nil {
		return nil, fmt.Errorf("adopt: column %d of table %d: %w", attnum, rel, err)
	}
	c.wide = typoid == 20 // int8
	return c, nil
}

// referrers lists the columns whose foreign keys refer to c.
// Constraints that a partitioned table's partitions inherit are left out:
// changing the partitioned table's column changes theirs.
func referrers(ctx context.Context, q querier, c *column) ([]*column, error) {
	rows, err := q.QueryContext(ctx, `SELECT con.conrelid::int8, con.conkey[i]::int8
		FROM pg_constraint con, generate_subscripts(con.confkey, 1) AS i
		WHERE con.contype = 'f' AND con.conparentid = 0 AND con.confrelid = $1 AND con.confkey[i] = $2
		ORDER BY con.conrelid, con.conname`, c.rel, c.attnum)
	if err != nil {
		return nil, fmt.Errorf("adopt: foreign keys to %s: %w", c, err)
	}
	var pairs [][2]int64
	for rows.Next() {
		var p [2]int64
		if err := rows.Scan(&p[0], &p[1]); err != nil {
			rows.Close()
			return nil, err
		}
		pairs = append(pairs, p)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	var out []*column
	for _, p := range pairs {
		r, err := readColumn(ctx, q, p[0], p[1], "")
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// dependents lists what depends on column c. PostgreSQL changes a
// column's type under its indexes, constraints, defaults, owned sequences
// and extended statistics by itself; plain views with nothing on them are
// dropped and created again; anything else is refused, by name.
func dependents(ctx context.Context, q querier, c *column) ([]*view, error) {
	rows, err := q.QueryContext(ctx, `SELECT d.classid::regclass::text, d.objid::int8, d.objsubid::int8,
			CASE d.classid
			WHEN 'pg_rewrite'::regclass THEN (SELECT format('%s|%s|%s', r.ev_class::int8, r.rulename, v.relkind)
				FROM pg_rewrite r JOIN pg_class v ON v.oid = r.ev_class WHERE r.oid = d.objid)
			WHEN 'pg_trigger'::regclass THEN (SELECT format('trigger %I on %s', t.tgname, t.tgrelid::regclass)
				FROM pg_trigger t WHERE t.oid = d.objid)
			WHEN 'pg_policy'::regclass THEN (SELECT format('policy %I on %s', p.polname, p.polrelid::regclass)
				FROM pg_policy p WHERE p.oid = d.objid)
			WHEN 'pg_class'::regclass THEN (SELECT k.relkind::text FROM pg_class k WHERE k.oid = d.objid)
			ELSE '' END
		FROM pg_depend d
		WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = $1 AND d.refobjsubid = $2
		ORDER BY d.classid, d.objid`, c.rel, c.attnum)
	if err != nil {
		return nil, fmt.Errorf("adopt: objects on %s: %w", c, err)
	}
	type dep struct {
		class       string
		objid, sub  int64
		description string
	}
	var deps []dep
	for rows.Next() {
		var d dep
		var desc sql.NullString
		if err := rows.Scan(&d.class, &d.objid, &d.sub, &desc); err != nil {
			rows.Close()
			return nil, err
		}
		d.description = desc.String
		deps = append(deps, d)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()

	var views []*view
	var refused []string
	for _, d := range deps {
		switch d.class {
		case "pg_attrdef", "pg_constraint", "pg_statistic_ext":
		case "pg_class":
			switch {
			case d.objid == c.rel && d.sub != 0:
				refused = append(refused, fmt.Sprintf("a generated column of %s", c.table))
			case d.description == "i" || d.description == "I" || d.description == "S":
			default:
				refused = append(refused, fmt.Sprintf("relation %d (relkind %q)", d.objid, d.description))
			}
		case "pg_rewrite":
			parts := strings.SplitN(d.description, "|", 3)
			if len(parts) != 3 {
				refused = append(refused, "a rule")
				continue
			}
			var vrel int64
			fmt.Sscan(parts[0], &vrel)
			switch {
			case parts[2] == "v" && parts[1] == "_RETURN":
				v, why, err := readView(ctx, q, vrel)
				if err != nil {
					return nil, err
				}
				if why != "" {
					refused = append(refused, why)
					continue
				}
				views = append(views, v)
			case parts[2] == "m":
				refused = append(refused, fmt.Sprintf("materialized view %s", relName(ctx, q, vrel)))
			default:
				refused = append(refused, fmt.Sprintf("rule %s on %s", parts[1], relName(ctx, q, vrel)))
			}
		case "pg_trigger", "pg_policy":
			refused = append(refused, d.description)
		default:
			refused = append(refused, fmt.Sprintf("a %s object (oid %d)", d.class, d.objid))
		}
	}
	if len(refused) > 0 {
		slices.Sort(refused)
		refused = slices.Compact(refused)
		return nil, fmt.Errorf("%w: %s must become bigint, and PostgreSQL cannot change its type under %s: "+
			"drop them, adopt, and create them again", ErrDependents, c, strings.Join(refused, ", "))
	}
	return views, nil
}

// relName names a relation by oid, schema-qualified.
func relName(ctx context.Context, q querier, rel int64) string {
	var name string
	if err := q.QueryRowContext(ctx, `SELECT format('%I.%I', n.nspname, c.relname)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`, rel).Scan(&name); err != nil {
		return fmt.Sprint(rel)
	}
	return name
}

// readView reads what it takes to create view rel again, or says why
// it cannot be: other objects depend on it (views, rules, triggers), or
// it carries what CREATE VIEW does not restore (column privileges or
// defaults).
func readView(ctx context.Context, q querier, rel int64) (*view, string, error) {
	v := &view{oid: rel}
	var (
		def, owner, comment, reloptions string
		dependents, triggers, rules     int
		colACL, colDefaults             bool
	)
	err := q.QueryRowContext(ctx, `SELECT format('%I.%I', n.nspname, c.relname),
			rtrim(pg_get_viewdef(c.oid), ';'),
			coalesce(array_to_string(c.reloptions, ', '), ''),
			CASE WHEN c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user) THEN ''
				ELSE quote_ident(pg_get_userbyid(c.relowner)) END,
			coalesce(obj_description(c.oid, 'pg_class'), ''),
			(SELECT count(DISTINCT r.ev_class) FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
				WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
				AND d.refobjid = c.oid AND r.ev_class <> c.oid),
			(SELECT count(*) FROM pg_trigger t WHERE t.tgrelid = c.oid),
			(SELECT count(*) FROM pg_rewrite r WHERE r.ev_class = c.oid AND r.rulename <> '_RETURN'),
			EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attacl IS NOT NULL),
			EXISTS (SELECT 1 FROM pg_attrdef d WHERE d.adrelid = c.oid)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`, rel).Scan(
		&v.name, &def, &reloptions, &owner, &comment, &dependents, &triggers, &rules, &colACL, &colDefaults)
	if err != nil {
		return nil, "", fmt.Errorf("adopt: view %d: %w", rel, err)
	}
	switch {
	case dependents > 0:
		return nil, fmt.Sprintf("view %s (%d other views or rules depend on it)", v.name, dependents), nil
	case triggers > 0:
		return nil, fmt.Sprintf("view %s (it has triggers)", v.name), nil
	case rules > 0:
		return nil, fmt.Sprintf("view %s (it has rules)", v.name), nil
	case colACL:
		return nil, fmt.Sprintf("view %s (it has column privileges)", v.name), nil
	case colDefaults:
		return nil, fmt.Sprintf("view %s (its columns have defaults)", v.name), nil
	}
	create := "CREATE VIEW " + v.name
	if reloptions != "" {
		create += " WITH (" + reloptions + ")"
	}
	v.create = append(v.create, create+" AS"+def)
	if owner != "" {
		v.create = append(v.create, fmt.Sprintf("ALTER VIEW %s OWNER TO %s", v.name, owner))
	}
	if comment != "" {
		var lit string
		if err := q.QueryRowContext(ctx, "SELECT quote_literal($1::text)", comment).Scan(&lit); err != nil {
			return nil, "", err
		}
		v.create = append(v.create, fmt.Sprintf("COMMENT ON VIEW %s IS %s", v.name, lit))
	}
	more, err := queryStrings(ctx, q, `SELECT format('COMMENT ON COLUMN %I.%I.%I IS %L', n.nspname, c.relname, a.attname, ds.description)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			JOIN pg_description ds ON ds.classoid = 'pg_class'::regclass AND ds.objoid = c.oid AND ds.objsubid > 0
			JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ds.objsubid
		WHERE c.oid = $1 ORDER BY a.attnum`, rel)
	if err != nil {
		return nil, "", err
	}
	v.create = append(v.create, more...)
	more, err = queryStrings(ctx, q, `SELECT format('GRANT %s ON %I.%I TO %s%s', a.privilege_type, n.nspname, c.relname,
			CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END,
			CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, aclexplode(c.relacl) a
		WHERE c.oid = $1 AND a.grantee <> c.relowner ORDER BY a.grantee, a.privilege_type`, rel)
	if err != nil {
		return nil, "", err
	}
	v.create = append(v.create, more...)
	return v, "", nil
}

// queryStrings returns the one text column of every row of query.
func queryStrings(ctx context.Context, q querier, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("adopt: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

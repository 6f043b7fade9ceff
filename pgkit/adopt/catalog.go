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

	"github.com/snowkeyhq/snowkey/idtype"
)

// querier is what planning reads the catalog through: NewPlan's read-only
// transaction, or Apply's, for its second look under the locks.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// pinnedPath is the search_path under which a plan reads definitions
// (views, domain constraints) and under which Apply and the script run:
// with nothing of the user's on it, PostgreSQL prints every name
// schema-qualified, so the statements mean the same whatever search_path
// the script is later run under.
const pinnedPath = "pg_catalog, pg_temp"

// column is a column found in the catalog.
type column struct {
	rel    int64  // the table's pg_class oid
	attnum int64  // the column's number
	table  string // the table, schema-qualified and quoted as needed
	name   string // the column, quoted as needed
	typ    string // its type, as format_type prints it
	wide   bool   // not smallint or integer (nor a domain over them): left as it is
	// domain is the column's domain, when its type is one: the column is
	// widened to a domain over bigint with the same constraints.
	domain *domain
	// Why PostgreSQL would refuse to change the column's type, or "".
	refusal string
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

// view is a plain view to drop and create again around the type changes.
type view struct {
	oid    int64
	name   string
	create []string // CREATE VIEW, then owner, comments and grants
}

// snowflakeDefault matches a default that is snowflake_id() itself,
// schema-qualified or not.
var snowflakeDefault = regexp.MustCompile(`^(?:(?:"[^"]+"|[^".()]+)\.)?snowflake_id\(\)$`)

// buildPlan reads the catalog and builds the plan for names. q is a
// transaction: planning pins its search_path (pinnedPath) once it has
// resolved the names and snowflake_id(), the function fn names if set (as
// an earlier plan found it), else the one on the caller's search_path.
func buildPlan(ctx context.Context, q querier, names []string, fn string, o Options, d defences) (*Plan, error) {
	p := &Plan{o: o, defences: d}
	var errs []error

	// The names, under the caller's search_path.
	var rels []relation
	var qualified []string
	for _, name := range names {
		rel, err := resolve(ctx, q, name)
		if err != nil {
			if !errors.Is(err, ErrTable) {
				return nil, err
			}
			errs = append(errs, err)
			continue
		}
		if !slices.ContainsFunc(rels, func(r relation) bool { return r.oid == rel.oid }) {
			rels = append(rels, rel)
			qualified = append(qualified, rel.name)
		}
	}
	p.names = qualified
	if !o.AppKeys {
		name := "snowflake_id()"
		if fn != "" {
			name = fn + "()"
		}
		err := q.QueryRowContext(ctx, `SELECT format('%I.%I', n.nspname, f.proname)
			FROM pg_catalog.pg_proc f JOIN pg_catalog.pg_namespace n ON n.oid = f.pronamespace
			WHERE f.oid = pg_catalog.to_regprocedure($1)`, name).Scan(&fn)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			errs = append(errs, fmt.Errorf("%w (no snowflake_id() on the search_path): run migrations.Up first, "+
				"or adopt with app-side keys (AppKeys, --app-keys)", ErrFunction))
		case err != nil:
			return nil, fmt.Errorf("adopt: %w", err)
		}
		p.fn = fn
	}
	// In one round trip, as Apply re-plans under its locks: the
	// search_path pinned (unless the control leaves it as it is), and the
	// database's time, for the keys snowflake_id() makes.
	path := pinnedPath
	if d.unqualified {
		path = ""
	}
	var dbNow time.Time
	if err := q.QueryRowContext(ctx, `SELECT CASE WHEN $1 = '' THEN '' ELSE pg_catalog.set_config('search_path', $1, true) END,
		pg_catalog.statement_timestamp()`, path).Scan(new(string), &dbNow); err != nil {
		return nil, fmt.Errorf("adopt: %w", err)
	}

	var targets []*target
	for _, rel := range rels {
		t, err := readTarget(ctx, q, rel.oid, rel.name, d)
		if err != nil {
			if !errors.Is(err, ErrTable) && !errors.Is(err, ErrDefault) && !errors.Is(err, ErrTrigger) {
				return nil, err
			}
			errs = append(errs, err)
			continue
		}
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

	// What PostgreSQL would refuse: columns it cannot change the type of,
	// objects that depend on them, domains it cannot make.
	if !d.noColumnCheck {
		var refused []string
		for _, c := range widenOrder {
			if c.refusal != "" {
				refused = append(refused, c.String()+" "+c.refusal)
			}
		}
		if len(refused) > 0 {
			errs = append(errs, fmt.Errorf("%w: PostgreSQL cannot change these columns to bigint: %s",
				ErrColumn, strings.Join(refused, "; ")))
		}
	}
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
	var twins []*twin
	twinOf := map[int64]*twin{}
	if !d.noDomains {
		for _, c := range widenOrder {
			if c.domain == nil || twinOf[c.domain.oid] != nil {
				continue
			}
			tw, err := readTwin(ctx, q, c.domain)
			if err != nil {
				if !errors.Is(err, ErrColumn) {
					return nil, err
				}
				errs = append(errs, err)
				continue
			}
			twinOf[c.domain.oid] = tw
			twins = append(twins, tw)
		}
	}
	if !d.noOwnerCheck {
		if err := checkOwners(ctx, q, widenOrder, views, targets, twins); err != nil {
			if !errors.Is(err, ErrColumn) {
				return nil, err
			}
			errs = append(errs, err)
		}
	}

	// The keys to come: snowflake_id()'s, on the database's clock, unless
	// AppKeys; and the app's, in Options.Layout on this clock, always
	// (gormplugin inserts its own keys either way).
	if !d.noKeyRange {
		type bound struct {
			first idtype.ID
			what  string
		}
		var bounds []bound
		if !o.AppKeys && !d.appLayoutOnly {
			bounds = append(bounds, bound{idtype.DefaultLayout.FirstID(dbNow),
				"the first key snowflake_id() makes now (idtype.DefaultLayout, on the database's clock)"})
		}
		bounds = append(bounds, bound{o.Layout.FirstID(time.Now()),
			fmt.Sprintf("the first key of Options.Layout (epoch %s) now", o.Layout.Epoch.UTC().Format(time.RFC3339))})
		for _, t := range targets {
			for _, b := range bounds {
				if t.maxKey >= int64(b.first) {
					errs = append(errs, fmt.Errorf("%w: %s holds key %d, not below %d, %s: new keys would not all be "+
						"greater than the old ones", ErrKeyRange, t.key.table, t.maxKey, b.first, b.what))
					break
				}
			}
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
	for _, tw := range twins {
		if tw.exists {
			continue
		}
		for _, stmt := range tw.create {
			p.Steps = append(p.Steps, Step{SQL: stmt, Locks: "domain " + tw.name + ", a twin of " + tw.of.name +
				" over bigint with its default and constraints, for the columns of that domain below; catalog only"})
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
			to := "bigint"
			if c.domain != nil && twinOf[c.domain.oid] != nil {
				to = twinOf[c.domain.oid].name
			}
			parts = append(parts, fmt.Sprintf("ALTER COLUMN %s TYPE %s", c.name, to))
			names = append(names, fmt.Sprintf("%s %s to %s", c.name, c.typ, to))
		}
		p.Steps = append(p.Steps, Step{SQL: fmt.Sprintf("ALTER TABLE %s %s", table, strings.Join(parts, ", ")),
			Locks: fmt.Sprintf("%s: %s; rewrites the table and rebuilds its indexes, and checks again "+
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

// relation is a table named to adopt, resolved.
type relation struct {
	oid  int64
	name string // schema-qualified, quoted as needed
}

// resolve finds the table name names under the caller's search_path and
// checks that it is one adopt works on.
func resolve(ctx context.Context, q querier, name string) (relation, error) {
	var (
		rel      sql.NullInt64
		r        relation
		kind     string
		inherits bool
	)
	err := q.QueryRowContext(ctx, `SELECT c.oid::int8, format('%I.%I', n.nspname, c.relname), c.relkind::text,
			EXISTS (SELECT 1 FROM pg_catalog.pg_inherits i WHERE i.inhrelid = c.oid OR i.inhparent = c.oid)
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.oid = pg_catalog.to_regclass($1)`, name).Scan(&rel, &r.name, &kind, &inherits)
	r.oid = rel.Int64
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return r, fmt.Errorf("%w %q: no such table", ErrTable, name)
	case err != nil:
		return r, fmt.Errorf("%w %q: %w", ErrTable, name, err)
	case kind != "r":
		return r, fmt.Errorf("%w %s: not an ordinary table (relkind %q): views, partitioned and foreign tables are not adopted", ErrTable, r.name, kind)
	case inherits:
		return r, fmt.Errorf("%w %s: it has inheritance parents or children", ErrTable, r.name)
	}
	return r, nil
}

// readTarget reads table rel's key, its default and what else gives it
// values.
func readTarget(ctx context.Context, q querier, rel int64, qualified string, d defences) (*target, error) {
	var nkeys, attnum sql.NullInt64
	var keyNames string
	err := q.QueryRowContext(ctx, `SELECT array_length(con.conkey, 1), con.conkey[1],
			(SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) FROM pg_catalog.pg_attribute a
			 WHERE a.attrelid = con.conrelid AND a.attnum = ANY (con.conkey))
		FROM pg_catalog.pg_constraint con WHERE con.conrelid = $1 AND con.contype = 'p'`, rel).Scan(&nkeys, &attnum, &keyNames)
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
	col, err := readColumn(ctx, q, rel, attnum.Int64, `, a.attidentity::text, a.attgenerated::text,
			coalesce(pg_catalog.pg_get_expr(d.adbin, d.adrelid), ''),
			coalesce(pg_catalog.pg_get_serial_sequence(format('%I.%I', n.nspname, c.relname), a.attname), '')`,
		&identity, &generated, &t.def, &t.seq)
	if err != nil {
		return nil, err
	}
	t.key = *col
	t.identity = identity != ""
	switch {
	case generated != "":
		return nil, fmt.Errorf("%w %s: its key %s is a generated column", ErrTable, qualified, col.name)
	case col.base() != "smallint" && col.base() != "integer" && col.base() != "bigint":
		return nil, fmt.Errorf("%w %s: its key %s is %s, not an integer", ErrTable, qualified, col.name, col.typ)
	case t.def == "" && col.domain != nil && col.domain.def != "" && !snowflakeDefault.MatchString(col.domain.def):
		return nil, fmt.Errorf("%w: %s: key %s takes its default from its domain %s (%s); set the default on the "+
			"column, or drop the domain's, before adopting", ErrDefault, qualified, col.name, col.domain.name, col.domain.def)
	case t.identity, t.def == "", strings.HasPrefix(t.def, "nextval("), snowflakeDefault.MatchString(t.def):
	default:
		return nil, fmt.Errorf("%w: %s: the default of key %s is %s; set it to a sequence, or drop it, before adopting",
			ErrDefault, qualified, col.name, t.def)
	}
	if !d.noTriggerCheck {
		if err := keyTriggers(ctx, q, rel, qualified, col); err != nil {
			return nil, err
		}
	}
	if err := q.QueryRowContext(ctx, fmt.Sprintf("SELECT coalesce(max(%s), 0)::int8 FROM %s", col.name, qualified)).Scan(&t.maxKey); err != nil {
		return nil, fmt.Errorf("adopt: largest key of %s: %w", qualified, err)
	}
	return t, nil
}

// keyAssignment matches, in a PL/pgSQL function's source, what sets a
// trigger's new row or the column named by the one %s: an assignment to
// NEW.col or to NEW, or SELECT ... INTO NEW.col or INTO NEW.
const keyAssignment = `(?is)(\bnew\s*\.\s*(?:"%[1]s"|%[1]s)\s*:?=[^=]|\bnew\s*:?=[^=]|\binto\s+(?:strict\s+)?new\s*(?:\.\s*(?:"%[1]s"|%[1]s)\b|[^.\w]|$))`

// keyTriggers refuses a table whose enabled BEFORE INSERT row triggers
// may set its key (ErrTrigger): adopting changes the key's default, which
// such a trigger overrides, so the table would go on issuing the keys the
// trigger makes. A PL/pgSQL function is read; a function in another
// language, which adopt cannot read, is refused too, except PostgreSQL's
// own (language internal), which set no keys.
func keyTriggers(ctx context.Context, q querier, rel int64, table string, key *column) error {
	rows, err := q.QueryContext(ctx, `SELECT t.tgname, format('%I.%I', fn.nspname, f.proname), l.lanname, f.prosrc
		FROM pg_catalog.pg_trigger t
			JOIN pg_catalog.pg_proc f ON f.oid = t.tgfoid
			JOIN pg_catalog.pg_namespace fn ON fn.oid = f.pronamespace
			JOIN pg_catalog.pg_language l ON l.oid = f.prolang
		WHERE t.tgrelid = $1 AND NOT t.tgisinternal AND t.tgenabled <> 'D'
			AND t.tgtype & 1 = 1 AND t.tgtype & 2 = 2 AND t.tgtype & 4 = 4
		ORDER BY t.tgname`, rel)
	if err != nil {
		return fmt.Errorf("adopt: triggers of %s: %w", table, err)
	}
	defer rows.Close()
	var unquoted string
	if strings.HasPrefix(key.name, `"`) {
		unquoted = strings.ReplaceAll(strings.Trim(key.name, `"`), `""`, `"`)
	} else {
		unquoted = key.name
	}
	assigns := regexp.MustCompile(fmt.Sprintf(keyAssignment, regexp.QuoteMeta(unquoted)))
	var found []string
	for rows.Next() {
		var name, fn, lang, src string
		if err := rows.Scan(&name, &fn, &lang, &src); err != nil {
			return err
		}
		switch lang {
		case "internal":
		case "plpgsql":
			if assigns.MatchString(src) {
				found = append(found, fmt.Sprintf("trigger %s (function %s) sets the key", name, fn))
			}
		default:
			found = append(found, fmt.Sprintf("trigger %s (function %s, language %s, which adopt cannot read) may set the key",
				name, fn, lang))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(found) > 0 {
		return fmt.Errorf("%w: %s: %s: the table would go on issuing the trigger's keys; drop the trigger, or make it "+
			"leave %s alone, before adopting", ErrTrigger, table, strings.Join(found, ", "), key.name)
	}
	return nil
}

// base is the column's type, or its domain's base type.
func (c *column) base() string {
	if c.domain != nil {
		return c.domain.base
	}
	return c.typ
}

// readColumn reads column attnum of table rel, and the extra expressions
// over a (pg_attribute), d (pg_attrdef), c and n into dst.
func readColumn(ctx context.Context, q querier, rel, attnum int64, extra string, dst ...any) (*column, error) {
	c := &column{rel: rel, attnum: attnum}
	var (
		typoid, baseoid, inherited, domainOID int64
		typtype, base, domainName, domainDef  string
		typed, partKey                        bool
	)
	args := append([]any{&c.table, &c.name, &c.typ, &typoid, &typtype, &baseoid, &base, &domainOID, &domainName,
		&domainDef, &inherited, &typed, &partKey}, dst...)
	err := q.QueryRowContext(ctx, `SELECT format('%I.%I', n.nspname, c.relname), quote_ident(a.attname),
			pg_catalog.format_type(a.atttypid, a.atttypmod), a.atttypid::int8, ty.typtype::text,
			coalesce(bt.oid, 0)::int8, coalesce(pg_catalog.format_type(bt.oid, NULL), ''),
			CASE WHEN ty.typtype = 'd' THEN ty.oid ELSE 0 END::int8,
			CASE WHEN ty.typtype = 'd' THEN format('%I.%I', tn.nspname, ty.typname) ELSE '' END,
			coalesce(pg_catalog.pg_get_expr(ty.typdefaultbin, 0), ''),
			a.attinhcount::int8, c.reloftype <> 0,
			EXISTS (SELECT 1 FROM pg_catalog.pg_partitioned_table pt WHERE pt.partrelid = c.oid
				AND a.attnum = ANY (pt.partattrs::int2[]))`+extra+`
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
	}
	c.wide = !narrow
	switch {
	case partKey:
		c.refusal = "(it is part of its table's partition key)"
	case inherited > 0:
		c.refusal = "(it is inherited from a parent table; adopt the parent's column)"
	case typed:
		c.refusal = "(its table is a typed table, CREATE TABLE OF a type)"
	}
	return c, nil
}

// referrers lists the columns whose foreign keys refer to c. Constraints
// that a partitioned table's partitions inherit are left out: changing the
// partitioned table's column changes theirs.
func referrers(ctx context.Context, q querier, c *column) ([]*column, error) {
	rows, err := q.QueryContext(ctx, `SELECT con.conrelid::int8, con.conkey[i]::int8
		FROM pg_catalog.pg_constraint con, pg_catalog.generate_subscripts(con.confkey, 1) AS i
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
	rows, err := q.QueryContext(ctx, `SELECT d.classid::pg_catalog.regclass::text, d.objid::int8, d.objsubid::int8,
			CASE d.classid
			WHEN 'pg_catalog.pg_rewrite'::pg_catalog.regclass THEN (SELECT format('%s|%s|%s', r.ev_class::int8, r.rulename, v.relkind)
				FROM pg_catalog.pg_rewrite r JOIN pg_catalog.pg_class v ON v.oid = r.ev_class WHERE r.oid = d.objid)
			WHEN 'pg_catalog.pg_trigger'::pg_catalog.regclass THEN (SELECT format('trigger %I on %s', t.tgname, t.tgrelid::pg_catalog.regclass)
				FROM pg_catalog.pg_trigger t WHERE t.oid = d.objid)
			WHEN 'pg_catalog.pg_policy'::pg_catalog.regclass THEN (SELECT format('policy %I on %s', p.polname, p.polrelid::pg_catalog.regclass)
				FROM pg_catalog.pg_policy p WHERE p.oid = d.objid)
			WHEN 'pg_catalog.pg_class'::pg_catalog.regclass THEN (SELECT k.relkind::text FROM pg_catalog.pg_class k WHERE k.oid = d.objid)
			ELSE '' END
		FROM pg_catalog.pg_depend d
		WHERE d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refobjid = $1 AND d.refobjsubid = $2
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
		switch strings.TrimPrefix(d.class, "pg_catalog.") {
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
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`, rel).Scan(&name); err != nil {
		return fmt.Sprint(rel)
	}
	return name
}

// readView reads what it takes to create view rel again, or says why it
// cannot be: other objects depend on it (views, rules, triggers), or it
// carries what CREATE VIEW does not restore (column privileges or
// defaults). Its definition is read under the plan's pinned search_path,
// so every name in it is schema-qualified.
func readView(ctx context.Context, q querier, rel int64) (*view, string, error) {
	v := &view{oid: rel}
	var (
		def, owner, comment, reloptions string
		dependents, triggers, rules     int
		colACL, colDefaults             bool
	)
	err := q.QueryRowContext(ctx, `SELECT format('%I.%I', n.nspname, c.relname),
			pg_catalog.rtrim(pg_catalog.pg_get_viewdef(c.oid), ';'),
			coalesce(pg_catalog.array_to_string(c.reloptions, ', '), ''),
			CASE WHEN c.relowner = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN ''
				ELSE quote_ident(pg_catalog.pg_get_userbyid(c.relowner)) END,
			coalesce(pg_catalog.obj_description(c.oid, 'pg_class'), ''),
			(SELECT count(DISTINCT r.ev_class) FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid
				WHERE d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
				AND d.refobjid = c.oid AND r.ev_class <> c.oid),
			(SELECT count(*) FROM pg_catalog.pg_trigger t WHERE t.tgrelid = c.oid),
			(SELECT count(*) FROM pg_catalog.pg_rewrite r WHERE r.ev_class = c.oid AND r.rulename <> '_RETURN'),
			EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = c.oid AND a.attacl IS NOT NULL),
			EXISTS (SELECT 1 FROM pg_catalog.pg_attrdef d WHERE d.adrelid = c.oid)
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`, rel).Scan(
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
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			JOIN pg_catalog.pg_description ds ON ds.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND ds.objoid = c.oid AND ds.objsubid > 0
			JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = ds.objsubid
		WHERE c.oid = $1 ORDER BY a.attnum`, rel)
	if err != nil {
		return nil, "", err
	}
	v.create = append(v.create, more...)
	more, err = queryStrings(ctx, q, `SELECT format('GRANT %s ON %I.%I TO %s%s', a.privilege_type, n.nspname, c.relname,
			CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END,
			CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace, pg_catalog.aclexplode(c.relacl) a
		WHERE c.oid = $1 AND a.grantee <> c.relowner ORDER BY a.grantee, a.privilege_type`, rel)
	if err != nil {
		return nil, "", err
	}
	v.create = append(v.create, more...)
	return v, "", nil
}

// checkOwners refuses, naming them (ErrColumn), the objects the plan
// changes that the current user may not change: the tables it alters,
// the views it drops and creates again and the sequences it detaches
// need their owner's role (or one that is a member of it); a twin domain
// needs CREATE on its schema.
func checkOwners(ctx context.Context, q querier, cols []*column, views []*view, targets []*target, twins []*twin) error {
	var rels []int64
	for _, c := range cols {
		rels = append(rels, c.rel)
	}
	for _, v := range views {
		rels = append(rels, v.oid)
	}
	for _, t := range targets {
		rels = append(rels, t.key.rel)
	}
	var seqs, schemas []string
	for _, t := range targets {
		if t.seq != "" {
			seqs = append(seqs, t.seq)
		}
	}
	for _, tw := range twins {
		if !tw.exists {
			schemas = append(schemas, tw.schema)
		}
	}
	refused, err := queryStrings(ctx, q, `SELECT format('%s %I.%I (owned by %I)',
			CASE c.relkind WHEN 'v' THEN 'view' WHEN 'S' THEN 'sequence' ELSE 'table' END,
			n.nspname, c.relname, pg_catalog.pg_get_userbyid(c.relowner))
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE (c.oid = ANY ($1::int8[]::oid[]) OR c.oid = ANY (SELECT pg_catalog.to_regclass(s)::oid FROM unnest($2::text[]) s))
			AND NOT pg_catalog.pg_has_role(c.relowner, 'USAGE')
		UNION ALL
		SELECT format('schema %s (no CREATE privilege, for a twin domain)', s)
		FROM unnest($3::text[]) s WHERE NOT pg_catalog.has_schema_privilege(s, 'CREATE')
		ORDER BY 1`, rels, seqs, schemas)
	if err != nil {
		return err
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w: the current user may not change %s: adopt as their owner", ErrColumn, strings.Join(slices.Compact(refused), ", "))
	}
	return nil
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

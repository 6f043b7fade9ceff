package adopt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/pgkit/partition"
)

// The corpus: schemas written for these tests in the shapes production
// schemas take (testdata/corpus/NAME/schema.sql), each adopted end to end
// as its owner, then maintained by pgkit/partition (a table partitioned by
// the time in its snowflake keys, made by maintain.sql, and Maintain), and
// then checked: every row kept; every object created again with its
// owner, comments and privileges; every foreign key valid, with no row
// that refers to nothing, and every column of one as wide as the key it
// refers to; every materialized view populated as it was and equal to its
// query; every view readable; and after.sql, which runs new snowflake keys
// far above 2^31 through every table, function, procedure, trigger, view
// and materialized view, and checks the privileges as roles that are no
// superusers.

// corpusCase is a schema of the corpus and how to adopt it.
type corpusCase struct {
	name   string
	tables []string // to adopt, as named on the owner's search_path
	allow  []string // Options.AllowTriggers
	// forced says tables FORCE ROW LEVEL SECURITY: planning as their owner
	// is refused (ErrHidden), and the owner adopts with BYPASSRLS.
	forced bool
	// maintain is the table maintain.sql makes, partitioned by its
	// snowflake key, which Maintain keeps by period.
	maintain string
	period   partition.Period
}

var corpus = []corpusCase{
	{name: "store", maintain: "rental_events", period: partition.Day, tables: []string{"countries", "cities", "addresses",
		"stores", "staff", "customers", "films", "categories", "inventory", "rentals", "payments"}},
	{name: "saas", forced: true, maintain: "app.activity", period: partition.Week, tables: []string{"app.tenants", "app.users",
		"app.projects", "app.tasks", "app.resources", "app.bookings", "app.audit_log"}},
	{name: "events", maintain: "events", period: partition.Month, tables: []string{"accounts", "streams", "events",
		"event_links"}},
	{name: "forum", maintain: "forum.post_events", period: partition.Day, allow: []string{"forum.posts.check_post"}, tables: []string{`forum."Boards"`, "forum.members",
		"forum.threads", "forum.posts", "forum.moderation_queue"}},
}

// The checks of a run, in order.
const (
	checkHidden   = "hidden"   // the owner without BYPASSRLS is refused, if tables FORCE ROW LEVEL SECURITY
	checkPlan     = "plan"     // NewPlan passes
	checkApply    = "apply"    // Apply passes
	checkRows     = "rows"     // every row as it was
	checkCatalog  = "catalog"  // objects created again as they were (catalogSnapshot)
	checkTypes    = "types"    // keys bigint with snowflake_id(), every foreign-key column as wide as its key
	checkFKs      = "fks"      // every foreign key valid, no row referring to nothing
	checkMatviews = "matviews" // populated as they were, equal to their queries
	checkViews    = "views"    // every view readable
	checkMaintain = "maintain" // partition's Maintain made the periods and left nothing
	checkAfter    = "after"    // after.sql: new keys through everything, privileges
	checkCoverage = "coverage" // after.sql calls every function and inserts into every table that holds keys
)

var allChecks = []string{checkHidden, checkPlan, checkApply, checkRows, checkCatalog, checkTypes, checkFKs, checkMatviews,
	checkViews, checkMaintain, checkAfter, checkCoverage}

// corpusRun is what a run of a corpus schema found.
type corpusRun struct {
	verdict  string
	apply    time.Duration
	features []string
	ran      []string          // the checks run
	failed   map[string]string // check: what failed
}

func (r *corpusRun) fail(check, format string, args ...any) {
	if r.failed[check] == "" {
		r.failed[check] = fmt.Sprintf(format, args...)
	}
}

// runCorpus adopts a corpus schema with the defences in off switched off,
// runs tamper (as a superuser) after Apply, and runs the checks up to the
// one named last (every check when it is ""), returning what failed
// rather than failing t: the controls expect failures.
func runCorpus(t *testing.T, ctx context.Context, c corpusCase, off defences, tamper, last string) *corpusRun {
	t.Helper()
	run := &corpusRun{failed: map[string]string{}}
	dir := filepath.Join("testdata", "corpus", c.name)
	db := openDB(t, ctx, "")
	roles := map[string]string{}
	for _, r := range []string{"owner", "app", "reporting"} {
		roles[r] = testRole(t, ctx, db, "c_"+r, "LOGIN")
	}
	read := func(file string) string {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if errors.Is(err, os.ErrNotExist) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		for r, name := range roles {
			s = strings.ReplaceAll(s, "{{"+r+"}}", name)
		}
		return s
	}
	if err := runScript(ctx, db, read("schema.sql")); err != nil {
		t.Fatalf("%s: schema.sql: %v", c.name, err)
	}
	run.features = corpusFeatures(t, ctx, db)
	rowsBefore := tableRows(t, ctx, db)
	catalogBefore := normalized(catalogSnapshot(t, ctx, db))
	populated := queryList(t, ctx, db, "SELECT oid::regclass::text FROM pg_class WHERE relkind = 'm' AND relispopulated ORDER BY 1")
	owner := asRole(t, ctx, db, roles["owner"])
	opts := Options{AllowTriggers: c.allow}

	if c.forced {
		run.ran = append(run.ran, checkHidden)
		_, err := newPlanWithout(ctx, owner, c.tables, opts, off)
		if !errors.Is(err, ErrHidden) {
			run.fail(checkHidden, "planning as the owner, without BYPASSRLS, on tables that FORCE ROW LEVEL SECURITY: %v; want ErrHidden", err)
		}
		mustExec(t, ctx, db, "ALTER ROLE "+roles["owner"]+" BYPASSRLS")
	}
	run.ran = append(run.ran, checkPlan)
	plan, err := newPlanWithout(ctx, owner, c.tables, opts, off)
	if err != nil {
		run.verdict = "refused: " + strings.SplitN(err.Error(), ":", 3)[1]
		run.fail(checkPlan, "%v", err)
		return run
	}
	run.verdict = fmt.Sprintf("%d steps on %d locks", len(plan.Steps), len(plan.Locks))
	run.ran = append(run.ran, checkApply)
	start := time.Now()
	err = plan.Apply(ctx, owner)
	run.apply = time.Since(start)
	if err != nil {
		run.fail(checkApply, "%v", err)
		return run
	}
	if tamper != "" {
		for r, name := range roles {
			tamper = strings.ReplaceAll(tamper, "{{"+r+"}}", name)
		}
		mustExec(t, ctx, db, tamper)
	}

	run.ran = append(run.ran, checkRows, checkCatalog, checkTypes, checkFKs, checkMatviews, checkViews)
	if rows := tableRows(t, ctx, db); !slices.Equal(rows, rowsBefore) {
		run.fail(checkRows, "%s", difference(rowsBefore, rows))
	}
	if cat := normalized(catalogSnapshot(t, ctx, db)); !slices.Equal(cat, catalogBefore) {
		run.fail(checkCatalog, "%s", difference(catalogBefore, cat))
	}
	if bad := queryList(t, ctx, db, narrowReferrers); len(bad) > 0 {
		run.fail(checkTypes, "foreign-key columns narrower than their keys: %s", strings.Join(bad, "; "))
	}
	for _, tbl := range plan.Tables {
		var typ, def string
		if err := db.QueryRowContext(ctx, `SELECT format_type(coalesce(nullif(ty.typbasetype, 0), ty.oid), NULL),
				coalesce(pg_get_expr(d.adbin, d.adrelid), '')
			FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid
				LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
			WHERE a.attrelid = $1::regclass AND a.attname = $2`, tbl.Name, strings.Trim(tbl.Key, `"`)).Scan(&typ, &def); err != nil {
			t.Fatal(err)
		}
		if typ != "bigint" || tbl.Default != "" && !strings.HasSuffix(def, "snowflake_id()") {
			run.fail(checkTypes, "%s's key %s is %s %s after adopting", tbl.Name, tbl.Key, typ, def)
		}
	}
	if bad := queryList(t, ctx, db, "SELECT conname || ' on ' || conrelid::regclass FROM pg_constraint WHERE contype = 'f' AND NOT convalidated"); len(bad) > 0 {
		run.fail(checkFKs, "not valid: %s", strings.Join(bad, ", "))
	}
	for _, q := range queryList(t, ctx, db, orphanQueries) {
		if n := scalar[int64](t, ctx, db, q); n != 0 {
			run.fail(checkFKs, "%d rows refer to nothing: %s", n, q)
		}
	}
	for _, mv := range queryList(t, ctx, db, "SELECT oid::regclass::text FROM pg_class WHERE relkind = 'm' ORDER BY 1") {
		now := scalar[bool](t, ctx, db, "SELECT relispopulated FROM pg_class WHERE oid = $1::regclass", mv)
		if now != slices.Contains(populated, mv) {
			run.fail(checkMatviews, "%s populated: %v before adopting, %v after", mv, !now, now)
			continue
		}
		if !now {
			continue
		}
		def := strings.TrimSuffix(strings.TrimSpace(scalar[string](t, ctx, db, "SELECT pg_get_viewdef($1::regclass)", mv)), ";")
		n, err := scalarErr[int64](ctx, db, fmt.Sprintf("SELECT count(*) FROM ((TABLE %s EXCEPT (%s)) UNION ALL ((%s) EXCEPT TABLE %s)) d", mv, def, def, mv))
		switch {
		case err != nil:
			run.fail(checkMatviews, "%s: %v", mv, err)
		case n != 0:
			run.fail(checkMatviews, "%s differs from its query in %d rows", mv, n)
		}
	}
	for _, v := range queryList(t, ctx, db, `SELECT oid::regclass::text FROM pg_class WHERE relkind = 'v'
		AND relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace) ORDER BY 1`) {
		if _, err := scalarErr[int64](ctx, db, "SELECT count(*) FROM "+v); err != nil {
			run.fail(checkViews, "%s: %v", v, err)
		}
	}

	if slices.Index(allChecks, last) >= 0 && slices.Index(allChecks, last) < slices.Index(allChecks, checkMaintain) {
		return run
	}
	run.ran = append(run.ran, checkMaintain)
	if err := runScript(ctx, db, read("maintain.sql")); err != nil {
		t.Fatalf("%s: maintain.sql: %v", c.name, err)
	}
	parts, err := partition.New(c.maintain, idtype.DefaultLayout, partition.Options{Period: c.period, Premake: 2, Retention: 60 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	report, err := parts.Maintain(ctx, owner)
	switch {
	case err != nil:
		run.fail(checkMaintain, "Maintain: %v", err)
	case len(report.Left) > 0 || len(report.Kept) > 0:
		run.fail(checkMaintain, "Maintain left %v, kept %v", report.Left, report.Kept)
	case len(report.Created) < 3:
		run.fail(checkMaintain, "Maintain made %v; want the current period and two ahead", report.Created)
	}

	run.ran = append(run.ran, checkAfter, checkCoverage)
	after := read("after.sql")
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := runScript(ctx, conn, after); err != nil {
		run.fail(checkAfter, "%v", err)
	} else if bad := queryList(t, ctx, conn, "SELECT name || ' ' || id FROM new_keys WHERE id <= 2147483647 ORDER BY 1"); len(bad) > 0 {
		run.fail(checkAfter, "new keys that are no snowflakes: %s", strings.Join(bad, ", "))
	}
	// Every row of the maintained table is in a partition Maintain made.
	if n, err := scalarErr[int64](ctx, db, fmt.Sprintf(`SELECT count(*) FROM %s t JOIN pg_class p ON p.oid = t.tableoid
		WHERE t.id >= %d AND p.relname !~ '_p[0-9]{6,8}$'`, c.maintain, idtype.DefaultLayout.FirstID(time.Now().Add(-time.Hour)))); err != nil || n != 0 {
		run.fail(checkMaintain, "%d new rows of %s are not in a partition Maintain made (%v)", n, c.maintain, err)
	}
	run.coverage(t, ctx, db, after)
	return run
}

// coverage checks that after.sql calls every function and procedure of the
// schema's (but trigger functions, which inserts fire) and inserts into
// every table that holds keys (adopted, or referring to one), or into its
// parent.
func (run *corpusRun) coverage(t *testing.T, ctx context.Context, db *sql.DB, after string) {
	toks, err := lex(after)
	if err != nil {
		t.Fatal(err)
	}
	// The bodies of DO blocks are read too.
	for i := 0; i < len(toks); i++ {
		if toks[i].kind == tokString && i > 0 && toks[i-1].is("do") {
			body := after[toks[i].pos:toks[i].end]
			if open := strings.Index(body[1:], "$"); open >= 0 && strings.HasPrefix(body, "$") {
				inner, err := lex(body[open+2 : len(body)-open-2])
				if err == nil {
					for k := range inner {
						inner[k].pos, inner[k].end = 0, 0
					}
					toks = append(toks, inner...)
				}
			}
		}
	}
	called, inserted := map[string]bool{}, map[string]bool{}
	for i, tk := range toks {
		if tk.isName() && i+1 < len(toks) && toks[i+1].isPunct("(") {
			called[tk.val] = true
		}
		if tk.is("into") && i > 0 && toks[i-1].is("insert") && i+1 < len(toks) {
			k := i + 1
			for k+2 < len(toks) && toks[k+1].isPunct(".") {
				k += 2
			}
			inserted[toks[k].val] = true
		}
	}
	for _, f := range queryList(t, ctx, db, `SELECT proname FROM pg_proc f WHERE pronamespace NOT IN ('pg_catalog'::regnamespace,
		'information_schema'::regnamespace) AND prorettype <> 'trigger'::regtype AND prokind IN ('f', 'p')
		AND proname <> 'snowflake_id' AND pronamespace::regnamespace::text NOT LIKE 'pg_temp%'
		AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = f.oid AND d.deptype IN ('e', 'i'))
		AND NOT EXISTS (SELECT 1 FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid WHERE d.objid = f.oid AND e.extname = 'snowkey')
		ORDER BY 1`) {
		if !called[f] && !strings.HasPrefix(f, "snowflake_") && !strings.HasPrefix(f, "snowkey_") {
			run.fail(checkCoverage, "after.sql does not call %s", f)
		}
	}
	for _, tbl := range queryList(t, ctx, db, `SELECT DISTINCT c.relname FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
		WHERE con.contype = 'f' AND NOT c.relispartition
			AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)
			AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = con.confrelid AND a.attnum = ANY (con.confkey)
				AND a.atttypid IN ('bigint'::regtype) OR EXISTS (SELECT 1 FROM pg_type t WHERE t.oid = a.atttypid AND t.typbasetype = 'bigint'::regtype))
		ORDER BY 1`) {
		if !inserted[tbl] {
			run.fail(checkCoverage, "after.sql inserts nothing into %s", tbl)
		}
	}
}

// runScript runs a script statement by statement on one connection
// (SET ROLE and temporary tables last across statements). A statement
// after a line "-- expect SQLSTATE" must fail with that SQLSTATE.
func runScript(ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, script string) error {
	if script == "" {
		return nil
	}
	stmts, err := splitStatements(script)
	if err != nil {
		return err
	}
	expect := regexp.MustCompile(`--\s*expect\s+([0-9A-Z]{5})\s*$`)
	at := 0
	if c, ok := db.(*sql.DB); ok {
		conn, err := c.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		db = conn
	}
	for _, s := range stmts {
		i := strings.Index(script[at:], s)
		gap := script[at : at+i]
		at += i + len(s)
		want := ""
		if lines := strings.Split(strings.TrimSpace(gap), "\n"); len(lines) > 0 {
			if m := expect.FindStringSubmatch(strings.TrimSpace(lines[len(lines)-1])); m != nil {
				want = m[1]
			}
		}
		_, err := db.ExecContext(ctx, s)
		var pgErr *pgconn.PgError
		switch {
		case want == "" && err != nil:
			return fmt.Errorf("%s: %w", s, err)
		case want != "" && err == nil:
			return fmt.Errorf("%s: passed; want SQLSTATE %s", s, want)
		case want != "" && (!errors.As(err, &pgErr) || pgErr.Code != want):
			return fmt.Errorf("%s: %w; want SQLSTATE %s", s, err, want)
		}
	}
	return nil
}

// tableRows returns every row of every table of the user's, each once
// (FROM ONLY, so that a parent's rows are not its partitions' and
// children's too), as JSON: a key reads the same as integer and bigint.
func tableRows(t *testing.T, ctx context.Context, db *sql.DB) []string {
	var out []string
	for _, tbl := range queryList(t, ctx, db, `SELECT c.oid::regclass::text FROM pg_class c
		WHERE c.relkind = 'r' AND c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace, 'pg_toast'::regnamespace)
		ORDER BY 1`) {
		for _, r := range queryList(t, ctx, db, fmt.Sprintf("SELECT to_jsonb(t)::text FROM ONLY %s t ORDER BY 1", tbl)) {
			out = append(out, tbl+" "+r)
		}
	}
	return out
}

// narrowReferrers lists the foreign-key columns that are narrower than
// the key they refer to (integer referring to bigint, say), by base type.
const narrowReferrers = `
	WITH pairs AS (
		SELECT con.conname, con.conrelid, a.attname, fa.attname AS fname,
			(SELECT coalesce(nullif(t.typbasetype, 0), t.oid) FROM pg_type t WHERE t.oid = a.atttypid) AS typ,
			(SELECT coalesce(nullif(t.typbasetype, 0), t.oid) FROM pg_type t WHERE t.oid = fa.atttypid) AS ftyp
		FROM pg_constraint con, generate_subscripts(con.conkey, 1) i
			JOIN pg_attribute a ON true JOIN pg_attribute fa ON true
		WHERE con.contype = 'f' AND a.attrelid = con.conrelid AND a.attnum = con.conkey[i]
			AND fa.attrelid = con.confrelid AND fa.attnum = con.confkey[i])
	SELECT format('%s.%s (%s) refers to %s (%s)', conrelid::regclass, attname, typ::regtype, fname, ftyp::regtype)
	FROM pairs WHERE ftyp = 'bigint'::regtype AND typ IN ('smallint'::regtype, 'integer'::regtype) ORDER BY 1`

// orphanQueries writes, for every foreign key, the query that counts its
// rows whose columns are all set and refer to no row.
const orphanQueries = `
	SELECT format('SELECT count(*) FROM %s %s c WHERE %s AND NOT EXISTS (SELECT 1 FROM %s p WHERE %s)',
		CASE WHEN k.relkind = 'p' THEN '' ELSE 'ONLY' END, con.conrelid::regclass,
		string_agg(format('c.%I IS NOT NULL', a.attname), ' AND '), con.confrelid::regclass,
		string_agg(format('p.%I = c.%I', fa.attname, a.attname), ' AND '))
	FROM pg_constraint con JOIN pg_class k ON k.oid = con.conrelid, generate_subscripts(con.conkey, 1) i, pg_attribute a, pg_attribute fa
	WHERE con.contype = 'f' AND con.conparentid = 0 AND a.attrelid = con.conrelid AND a.attnum = con.conkey[i]
		AND fa.attrelid = con.confrelid AND fa.attnum = con.confkey[i]
	GROUP BY con.oid, con.conrelid, con.confrelid, k.relkind ORDER BY 1`

// normalized writes integer types as bigint in a catalog snapshot: the
// casts of policies and the argument types of functions are widened on
// purpose.
func normalized(snap []string) []string {
	out := make([]string, len(snap))
	for i, s := range snap {
		out[i] = strings.NewReplacer("integer", "bigint", "smallint", "bigint").Replace(s)
	}
	return out
}

// difference says what is in one list and not the other, briefly.
func difference(before, after []string) string {
	var lost, added []string
	for _, s := range before {
		if !slices.Contains(after, s) {
			lost = append(lost, s)
		}
	}
	for _, s := range after {
		if !slices.Contains(before, s) {
			added = append(added, s)
		}
	}
	clip := func(l []string) []string {
		if len(l) > 3 {
			return append(l[:3:3], fmt.Sprintf("and %d more", len(l)-3))
		}
		return l
	}
	return fmt.Sprintf("lost %q; new %q", clip(lost), clip(added))
}

// queryList returns the one text column of every row of query.
func queryList(t *testing.T, ctx context.Context, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, query string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// scalarErr returns the one value of query, or its error.
func scalarErr[T any](ctx context.Context, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, query string, args ...any) (T, error) {
	var v T
	err := db.QueryRowContext(ctx, query, args...).Scan(&v)
	return v, err
}

// corpusFeatures lists the features of a production schema that the
// database holds, with how many of each.
func corpusFeatures(t *testing.T, ctx context.Context, db *sql.DB) []string {
	return queryList(t, ctx, db, `
		WITH user_rel AS (SELECT c.* FROM pg_class c WHERE c.relnamespace NOT IN ('pg_catalog'::regnamespace,
				'information_schema'::regnamespace, 'pg_toast'::regnamespace)),
		user_proc AS (SELECT f.*, l.lanname FROM pg_proc f JOIN pg_language l ON l.oid = f.prolang
			WHERE f.pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
				AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = f.oid AND d.deptype = 'e')
				AND f.proname NOT LIKE 'snowflake%' AND f.proname NOT LIKE 'snowkey%'),
		fk AS (SELECT con.*, c.relkind, c.relispartition, fc.relkind AS frelkind FROM pg_constraint con
			JOIN pg_class c ON c.oid = con.conrelid JOIN pg_class fc ON fc.oid = con.confrelid WHERE con.contype = 'f' AND con.conparentid = 0),
		cycle AS (WITH RECURSIVE walk(start, here, path) AS (
				SELECT conrelid, confrelid, ARRAY[conrelid] FROM fk WHERE conrelid <> confrelid
				UNION ALL
				SELECT w.start, f.confrelid, w.path || w.here FROM walk w JOIN fk f ON f.conrelid = w.here
				WHERE NOT w.here = ANY (w.path) AND f.conrelid <> f.confrelid)
			SELECT count(DISTINCT start) AS n FROM walk WHERE here = start),
		feature(name, n) AS (VALUES
			('row-level security policies', (SELECT count(*) FROM pg_policy)),
			('tables forcing row-level security', (SELECT count(*) FROM user_rel WHERE relforcerowsecurity)),
			('partitioned tables', (SELECT count(*) FROM user_rel WHERE relkind = 'p')),
			('partitioned tables referring to others', (SELECT count(DISTINCT conrelid) FROM fk WHERE relkind = 'p' OR relispartition)),
			('tables referring to partitioned ones', (SELECT count(DISTINCT conrelid) FROM fk WHERE frelkind = 'p')),
			('inheritance children', (SELECT count(*) FROM pg_inherits i JOIN user_rel c ON c.oid = i.inhrelid WHERE NOT c.relispartition)),
			('tables in a foreign-key cycle', (SELECT n FROM cycle)),
			('self-referring tables', (SELECT count(DISTINCT conrelid) FROM fk WHERE conrelid = confrelid)),
			('deferrable constraints', (SELECT count(*) FROM pg_constraint con JOIN user_rel c ON c.oid = con.conrelid WHERE con.condeferrable)),
			('views', (SELECT count(*) FROM user_rel WHERE relkind = 'v')),
			('materialized views', (SELECT count(*) FROM user_rel WHERE relkind = 'm')),
			('SQL functions', (SELECT count(*) FROM user_proc WHERE lanname = 'sql' AND prokind = 'f')),
			('PL/pgSQL functions', (SELECT count(*) FROM user_proc WHERE lanname = 'plpgsql' AND prokind = 'f')),
			('procedures', (SELECT count(*) FROM user_proc WHERE prokind = 'p')),
			('row triggers', (SELECT count(*) FROM pg_trigger t JOIN user_rel c ON c.oid = t.tgrelid
				WHERE NOT t.tgisinternal AND t.tgtype & 1 = 1 AND t.tgconstraint = 0)),
			('statement triggers', (SELECT count(*) FROM pg_trigger t JOIN user_rel c ON c.oid = t.tgrelid
				WHERE NOT t.tgisinternal AND t.tgtype & 1 = 0)),
			('constraint triggers', (SELECT count(*) FROM pg_trigger t JOIN user_rel c ON c.oid = t.tgrelid
				WHERE NOT t.tgisinternal AND t.tgconstraint <> 0)),
			('domains', (SELECT count(*) FROM pg_type WHERE typtype = 'd' AND typnamespace NOT IN ('pg_catalog'::regnamespace,
				'information_schema'::regnamespace))),
			('generated columns', (SELECT count(*) FROM pg_attribute a JOIN user_rel c ON c.oid = a.attrelid WHERE a.attgenerated = 's' AND NOT c.relispartition)),
			('exclusion constraints', (SELECT count(*) FROM pg_constraint WHERE contype = 'x' AND conparentid = 0)),
			('publications', (SELECT count(*) FROM pg_publication)),
			('columns of extension types', (SELECT count(*) FROM pg_attribute a JOIN user_rel c ON c.oid = a.attrelid
				JOIN pg_depend d ON d.classid = 'pg_type'::regclass AND d.objid = a.atttypid AND d.deptype = 'e'
				WHERE c.relkind = 'r' AND a.attnum > 0)),
			('schemas besides public', (SELECT count(*) FROM pg_namespace WHERE nspname NOT IN ('public', 'pg_catalog', 'information_schema',
				'pg_toast') AND nspname NOT LIKE 'pg_temp%' AND nspname NOT LIKE 'pg_toast_temp%')))
		SELECT name || ': ' || n FROM feature WHERE n > 0`)
}

// TestCorpus adopts every schema of the corpus end to end, maintains its
// snowflake-keyed partitioned table, and runs every check: each must pass.
// It logs the corpus table: each schema's features, the plan's verdict,
// how long Apply took, and the checks passed.
func TestCorpus(t *testing.T) {
	ctx := testenv.Deadline(t, 5*time.Minute)
	var mu sync.Mutex
	rows := map[string]string{}
	have := map[string]bool{}
	// The schemas run side by side, each in a database of its own: they
	// mostly wait on the server.
	t.Run("schemas", func(t *testing.T) {
		for _, c := range corpus {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				run := runCorpus(t, ctx, c, defences{}, "", "")
				for _, check := range allChecks {
					if why := run.failed[check]; why != "" {
						t.Errorf("%s: %s", check, why)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				for _, f := range run.features {
					have[strings.SplitN(f, ":", 2)[0]] = true
				}
				rows[c.name] = fmt.Sprintf("| %s | %s | %s | %v | %d of %d |", c.name, strings.Join(run.features, ", "), run.verdict,
					run.apply.Round(time.Millisecond), len(run.ran)-len(run.failed), len(run.ran))
			})
		}
	})
	var table []string
	for _, c := range corpus {
		if r, ok := rows[c.name]; ok {
			table = append(table, r)
		}
	}
	t.Logf("the corpus:\n| schema | features | plan | Apply | checks passed |\n| --- | --- | --- | --- | --- |\n%s", strings.Join(table, "\n"))
	if len(table) < len(corpus) {
		return // a run of some schemas alone (go test -run)
	}
	for _, f := range []string{"row-level security policies", "partitioned tables referring to others", "tables referring to partitioned ones",
		"inheritance children", "tables in a foreign-key cycle", "deferrable constraints", "views", "materialized views", "SQL functions",
		"PL/pgSQL functions", "procedures", "row triggers", "statement triggers", "constraint triggers", "domains", "generated columns",
		"exclusion constraints", "publications", "columns of extension types"} {
		if !have[f] {
			t.Errorf("no schema of the corpus has %s", f)
		}
	}
}

// TestCorpusControls shows that each check of the corpus can fail: with
// the defence it rests on switched off, or (rows, foreign keys) with the
// fault made by hand after Apply, the check sees the fault.
func TestCorpusControls(t *testing.T) {
	ctx := testenv.Deadline(t, 5*time.Minute)
	byName := map[string]corpusCase{}
	for _, c := range corpus {
		byName[c.name] = c
	}
	for _, ctl := range []struct {
		schema string
		off    defences
		tamper string
		check  string
	}{
		{"saas", defences{noRowSecurity: true}, "", checkHidden},
		{"store", defences{noParentColumns: true}, "", checkPlan},
		{"forum", defences{noDependents: true}, "", checkApply},
		{"store", defences{}, "UPDATE films SET title = 'changed' WHERE id = 7", checkRows},
		{"saas", defences{noExactPrivileges: true}, "", checkCatalog},
		{"events", defences{}, "SET session_replication_role = replica; INSERT INTO event_links (from_event, to_event) VALUES (1, 999999); " +
			"RESET session_replication_role", checkFKs},
		{"store", defences{}, "ALTER TABLE notes ALTER COLUMN author_id TYPE integer", checkTypes},
		{"store", defences{noRefresh: true}, "", checkMatviews},
		{"forum", defences{}, "REVOKE SELECT ON forum.votes FROM " + "{{owner}}", checkViews},
		{"events", defences{}, "INSERT INTO events (id, stream_id, seq, kind) VALUES (200000000, 1, 999, 'imported')", checkMaintain},
		{"events", defences{noDomains: true}, "", checkAfter},
		{"store", defences{noFunctions: true}, "", checkAfter},
		{"forum", defences{}, "CREATE FUNCTION forum.never_called(p_post_id integer) RETURNS integer LANGUAGE sql AS 'SELECT 1'", checkCoverage},
	} {
		name := fmt.Sprintf("%s/%s", ctl.schema, ctl.check)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run := runCorpus(t, ctx, byName[ctl.schema], ctl.off, ctl.tamper, ctl.check)
			why := run.failed[ctl.check]
			if why == "" {
				t.Errorf("control %s: the check %s passed (failed: %v): the test does not reach the fault", name, ctl.check, run.failed)
				return
			}
			t.Logf("control %s: %s", name, why)
		})
	}
}

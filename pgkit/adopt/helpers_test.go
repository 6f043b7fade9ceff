package adopt

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
)

// mustExec runs each statement on db, failing the test on the first
// error.
func mustExec(t testing.TB, ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// scalar returns the one value of query.
func scalar[T any](t testing.TB, ctx context.Context, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, query string, args ...any) T {
	t.Helper()
	var v T
	if err := db.QueryRowContext(ctx, query, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return v
}

// testRole makes a role for the test, named after it and its database
// (roles are the server's, and other packages' tests make theirs), with
// the attributes given, and drops it, and what it owns, when the test
// ends.
func testRole(t testing.TB, ctx context.Context, db *sql.DB, suffix, attrs string) string {
	t.Helper()
	dbName := scalar[string](t, ctx, db, "SELECT current_database()")
	role := strings.ToLower(fmt.Sprintf("%s_%s", suffix, dbName))
	if len(role) > 63 {
		role = role[:63]
	}
	mustExec(t, ctx, db, fmt.Sprintf("DROP ROLE IF EXISTS %s", role), fmt.Sprintf("CREATE ROLE %s %s", role, attrs))
	t.Cleanup(func() {
		ctx := context.Background()
		// The database is dropped after the test; what the role owns and
		// its privileges go with it, but a role with privileges in a
		// database cannot be dropped while that database exists.
		_, _ = db.ExecContext(ctx, fmt.Sprintf("DROP OWNED BY %s CASCADE", role))
		_, _ = db.ExecContext(ctx, fmt.Sprintf("DROP ROLE IF EXISTS %s", role))
	})
	return role
}

// catalogSnapshot describes the objects adopting creates again, as what
// must stay the same: each view's and materialized view's kind, owner,
// privileges, comment, options, whether it is populated; their columns'
// comments and privileges; the indexes of materialized views with their
// comments and CLUSTER; each trigger's definition, state and comment;
// each policy's definition and comment; each function's and procedure's
// name, argument names, owner, privileges and comment; each sequence's
// owner, privileges and comment. Privileges are listed as (grantee,
// privilege, grantable), whatever their grantor.
func catalogSnapshot(t testing.TB, ctx context.Context, db *sql.DB) []string {
	t.Helper()
	out, err := queryStrings(ctx, db, `
		WITH acl(oid, kind, owner, acl) AS (
			SELECT c.oid, CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END, c.relowner, c.relacl FROM pg_class c
			UNION ALL SELECT f.oid, 'f', f.proowner, f.proacl FROM pg_proc f),
		grants AS (
			SELECT e.oid, string_agg(e.item, ',' ORDER BY e.item) AS list
			FROM (SELECT acl.oid, CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END || ':' ||
					a.privilege_type || CASE WHEN a.is_grantable THEN '*' ELSE '' END AS item
				FROM acl, aclexplode(coalesce(acl.acl, acldefault(acl.kind::"char", acl.owner))) a) e
			GROUP BY e.oid)
		SELECT format('%s %s owner=%s grants=%s comment=%s options=%s populated=%s', c.relkind, c.oid::regclass,
			pg_get_userbyid(c.relowner), g.list, obj_description(c.oid, 'pg_class'), c.reloptions, c.relispopulated)
		FROM pg_class c JOIN grants g ON g.oid = c.oid
		WHERE c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace, 'pg_toast'::regnamespace)
			AND c.relkind IN ('v', 'm', 'S')
		UNION ALL
		SELECT format('column %s.%s comment=%s grants=%s', a.attrelid::regclass, a.attname, col_description(a.attrelid, a.attnum), a.attacl)
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
		WHERE c.relkind IN ('v', 'm') AND a.attnum > 0 AND c.relnamespace <> 'pg_catalog'::regnamespace
			AND c.relnamespace <> 'information_schema'::regnamespace
		UNION ALL
		SELECT format('index %s %s comment=%s clustered=%s', i.indexrelid::regclass, pg_get_indexdef(i.indexrelid),
			obj_description(i.indexrelid, 'pg_class'), i.indisclustered)
		FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid WHERE c.relkind = 'm'
		UNION ALL
		SELECT format('trigger %s on %s %s enabled=%s comment=%s', t.tgname, t.tgrelid::regclass, pg_get_triggerdef(t.oid),
			t.tgenabled, obj_description(t.oid, 'pg_trigger'))
		FROM pg_trigger t WHERE NOT t.tgisinternal
		UNION ALL
		SELECT format('policy %s on %s %s %s %s using=%s check=%s comment=%s', p.policyname, p.tablename, p.permissive, p.roles, p.cmd,
			p.qual, p.with_check, obj_description(pp.oid, 'pg_policy'))
		FROM pg_policies p JOIN pg_policy pp ON pp.polname = p.policyname AND pp.polrelid = format('%I.%I', p.schemaname, p.tablename)::regclass
		UNION ALL
		SELECT format('function %s.%s(%s) owner=%s grants=%s comment=%s', f.pronamespace::regnamespace, f.proname,
			array_to_string(f.proargnames, ','), pg_get_userbyid(f.proowner), g.list, obj_description(f.oid, 'pg_proc'))
		FROM pg_proc f JOIN grants g ON g.oid = f.oid
		WHERE f.pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
			AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = f.oid AND d.deptype = 'e')
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// grantSnowflake lets role run snowflake_id() even where an operator took
// EXECUTE away from PUBLIC, as docs/adopt.md says to do then.
func grantSnowflake(t testing.TB, ctx context.Context, db *sql.DB, role string) {
	t.Helper()
	mustExec(t, ctx, db, "GRANT EXECUTE ON FUNCTION public.snowflake_id() TO "+role)
}

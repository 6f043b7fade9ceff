package adopt

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// objectsSchema adds to testSchema what PostgreSQL will not change a
// column's type under: a materialized view owned by another role, with a
// unique index (commented, clustered on), comments and a grant; a
// materialized view on it never populated; a view on each; a view on a
// view; a trigger that names a key column, enabled for replicas only; a
// policy with a comment.
const objectsSchema = `
CREATE MATERIALIZED VIEW account_counts AS SELECT account_id, count(*) AS users FROM users GROUP BY account_id;
CREATE UNIQUE INDEX account_counts_key ON account_counts (account_id);
COMMENT ON INDEX account_counts_key IS 'for REFRESH CONCURRENTLY';
ALTER MATERIALIZED VIEW account_counts CLUSTER ON account_counts_key;
COMMENT ON MATERIALIZED VIEW account_counts IS 'users per account';
COMMENT ON COLUMN account_counts.users IS 'how many';
ALTER MATERIALIZED VIEW account_counts ALTER COLUMN users SET STATISTICS 500;
CREATE MATERIALIZED VIEW busy_accounts AS SELECT account_id FROM account_counts WHERE users > 1 WITH NO DATA;
CREATE VIEW account_count_names AS SELECT c.account_id, a.name, c.users FROM account_counts c JOIN accounts a ON a.id = c.account_id;
CREATE VIEW big_accounts AS SELECT id FROM account_names WHERE id > 100;
CREATE FUNCTION keep_ids() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
CREATE TRIGGER keep_post_ids BEFORE UPDATE OF id ON posts FOR EACH ROW EXECUTE FUNCTION keep_ids();
ALTER TABLE posts ENABLE REPLICA TRIGGER keep_post_ids;
COMMENT ON TRIGGER keep_post_ids ON posts IS 'keys never change';
ALTER TABLE setting_audits ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_audits ON setting_audits USING (account_id > 0);
COMMENT ON POLICY own_audits ON setting_audits IS 'positive only';
`

// TestAdoptObjects: what PostgreSQL will not change a column's type under
// is dropped and created again as it was (catalogSnapshot: owner,
// comments, privileges, indexes, state), and a materialized view that was
// populated is filled again, as its owner: it holds what its query gives,
// REFRESH CONCURRENTLY works on its unique index, and a new snowflake key
// shows in it once refreshed. One never populated stays so. The control
// creates them again without filling them: reading the materialized view
// fails.
func TestAdoptObjects(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	for _, control := range []bool{false, true} {
		db := openDB(t, ctx, testSchema+objectsSchema)
		owner := testRole(t, ctx, db, "mv_owner", "")
		reader := testRole(t, ctx, db, "mv_reader", "")
		mustExec(t, ctx, db, "GRANT SELECT ON users TO "+owner, "ALTER MATERIALIZED VIEW account_counts OWNER TO "+owner,
			"GRANT SELECT ON account_counts TO "+reader)
		before := catalogSnapshot(t, ctx, db)
		plan, err := newPlanWithout(ctx, db, testTables, Options{}, defences{noRefresh: control})
		if err != nil {
			t.Fatalf("control=%v: %v", control, err)
		}
		if !control {
			t.Logf("plan:\n%s", plan.SQL())
		}
		if err := plan.Apply(ctx, db); err != nil {
			t.Fatalf("control=%v: %v", control, err)
		}
		if control {
			_, err := db.ExecContext(ctx, "SELECT * FROM account_counts")
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "55000" {
				t.Errorf("control: reading account_counts = %v; want not populated (55000): the test does not reach the fault", err)
			}
			t.Logf("control: %v", err)
			continue
		}
		after := catalogSnapshot(t, ctx, db)
		for _, s := range before {
			if !slices.Contains(after, s) {
				t.Errorf("lost in adopting: %s", s)
			}
		}
		for _, s := range after {
			if !slices.Contains(before, s) {
				t.Errorf("new after adopting: %s", s)
			}
		}
		const differ = `SELECT count(*) FROM ((TABLE account_counts EXCEPT SELECT account_id, count(*) FROM users GROUP BY account_id)
			UNION ALL (SELECT account_id, count(*) FROM users GROUP BY account_id EXCEPT TABLE account_counts)) d`
		if n := scalar[int](t, ctx, db, differ); n != 0 {
			t.Errorf("account_counts differs from its query in %d rows", n)
		}
		if n := scalar[int](t, ctx, db, "SELECT count(*) FROM account_count_names"); n != 300 {
			t.Errorf("account_count_names has %d rows; want 300", n)
		}
		account := scalar[int64](t, ctx, db, "INSERT INTO accounts (name) VALUES ('new') RETURNING id")
		mustExec(t, ctx, db, fmt.Sprintf("INSERT INTO users (account_id) VALUES (%d), (%d)", account, account),
			"REFRESH MATERIALIZED VIEW CONCURRENTLY account_counts", "REFRESH MATERIALIZED VIEW busy_accounts")
		if n := scalar[int64](t, ctx, db, "SELECT users FROM account_counts WHERE account_id = $1", account); n != 2 {
			t.Errorf("the new account has %d users in account_counts; want 2", n)
		}
		if n := scalar[int](t, ctx, db, "SELECT count(*) FROM busy_accounts WHERE account_id = $1", account); n != 1 {
			t.Errorf("busy_accounts shows the new account %d times; want 1", n)
		}
	}
}

// TestAdoptPrivileges: objects created again get exactly the privileges
// they had, whatever the default privileges of the role that adopts (a
// non-superuser owner whose ALTER DEFAULT PRIVILEGES give every new table
// and view to a reporting role, and no function to PUBLIC): a view the
// reporting role could not read stays unreadable, a function that PUBLIC
// could run still can, and a kept identity sequence, a twin domain, a
// materialized view and a function keep theirs. The control grants again
// what the objects had without revoking what the defaults give: the
// reporting role reads the view.
func TestAdoptPrivileges(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	for _, control := range []bool{false, true} {
		db := openDB(t, ctx, "")
		owner := testRole(t, ctx, db, "app_owner", "LOGIN")
		reporting := testRole(t, ctx, db, "reporting", "LOGIN")
		app := testRole(t, ctx, db, "app", "LOGIN")
		mustExec(t, ctx, db, "GRANT CREATE ON SCHEMA public TO "+owner)
		grantSnowflake(t, ctx, db, owner)
		as := asRole(t, ctx, db, owner)
		mustExec(t, ctx, as, `
CREATE DOMAIN employee_ref AS integer CHECK (VALUE > 0);
REVOKE USAGE ON DOMAIN employee_ref FROM PUBLIC;
GRANT USAGE ON DOMAIN employee_ref TO `+app+`;
CREATE TABLE employees (id int GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, name text NOT NULL, salary numeric NOT NULL);
GRANT SELECT ON employees TO `+app+`;
GRANT USAGE ON SEQUENCE employees_id_seq TO `+app+`;
COMMENT ON SEQUENCE employees_id_seq IS 'old keys';
CREATE TABLE reviews (id serial PRIMARY KEY, employee_id employee_ref REFERENCES employees, note text);
CREATE VIEW salaries AS SELECT id, name, salary FROM employees;
CREATE VIEW names AS SELECT id, name FROM employees;
GRANT SELECT ON names TO `+reporting+`;
GRANT SELECT (id) ON salaries TO `+app+`;
CREATE MATERIALIZED VIEW review_counts AS SELECT employee_id, count(*) FROM reviews GROUP BY employee_id;
GRANT SELECT ON review_counts TO `+app+` WITH GRANT OPTION;
CREATE FUNCTION salary_of(p_employee_id int) RETURNS numeric LANGUAGE sql STABLE AS 'SELECT salary FROM employees WHERE id = p_employee_id';
REVOKE EXECUTE ON FUNCTION salary_of(int) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION salary_of(int) TO `+app+`;
CREATE FUNCTION name_of(p_employee_id int) RETURNS text LANGUAGE sql STABLE AS 'SELECT name FROM employees WHERE id = p_employee_id';
INSERT INTO employees (name, salary) VALUES ('Ann', 10), ('Bo', 20);
INSERT INTO reviews (employee_id, note) VALUES (1, 'good'), (2, 'fine');
ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO `+reporting+`;
ALTER DEFAULT PRIVILEGES GRANT USAGE, SELECT ON SEQUENCES TO `+reporting+`;
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO `+reporting+`;
ALTER DEFAULT PRIVILEGES GRANT USAGE ON TYPES TO `+reporting)
		before := catalogSnapshot(t, ctx, db)
		plan, err := newPlanWithout(ctx, as, []string{"employees", "reviews"}, Options{}, defences{noExactPrivileges: control})
		if err != nil {
			t.Fatalf("control=%v: %v", control, err)
		}
		if !control {
			t.Logf("plan:\n%s", plan.SQL())
		}
		if err := plan.Apply(ctx, as); err != nil {
			t.Fatalf("control=%v: %v", control, err)
		}
		_, readErr := asRole(t, ctx, db, reporting).ExecContext(ctx, "SELECT * FROM salaries")
		if control {
			if readErr == nil {
				t.Logf("control: the reporting role reads salaries after adopting")
			} else {
				t.Errorf("control: the reporting role cannot read salaries (%v): the test does not reach the fault", readErr)
			}
			continue
		}
		var pgErr *pgconn.PgError
		if !errors.As(readErr, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("the reporting role reading salaries after adopting: %v; want permission denied (42501)", readErr)
		}
		if _, err := asRole(t, ctx, db, app).ExecContext(ctx, "SELECT name_of(1), salary_of(1)"); err != nil {
			t.Errorf("the app calling functions it could call: %v", err)
		}
		after := catalogSnapshot(t, ctx, db)
		for _, s := range before {
			if !slices.Contains(after, s) {
				t.Errorf("lost in adopting: %s", s)
			}
		}
		for _, s := range after {
			if !slices.Contains(before, s) {
				t.Errorf("new after adopting: %s", s)
			}
		}
		acl := `SELECT string_agg(g, ',' ORDER BY g) FROM (SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END
			|| ':' || a.privilege_type AS g FROM pg_type t, aclexplode(t.typacl) a WHERE t.typname = $1) x`
		twin, domain := scalar[string](t, ctx, db, acl, "employee_ref_bigint"), scalar[string](t, ctx, db, acl, "employee_ref")
		if want := owner + ":USAGE," + app + ":USAGE"; twin != want || domain != want {
			t.Errorf("the twin domain's privileges: %s, the domain's %s; want %s", twin, domain, want)
		}
	}
}

// TestAdoptRowType: what uses the row type of a view that adopting drops
// and creates again (a function returning it, a table's column of it)
// is refused at planning, by name. The control plans without looking,
// and Apply fails on PostgreSQL's refusal to drop the view.
func TestAdoptRowType(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	db := openDB(t, ctx, testSchema+`
CREATE FUNCTION named_accounts() RETURNS SETOF account_names LANGUAGE sql AS 'SELECT * FROM account_names';
CREATE TABLE name_snapshots (taken_at timestamptz, names account_names[]);
`)
	_, err := NewPlan(ctx, db, testTables, Options{})
	if !errors.Is(err, ErrDependents) {
		t.Fatalf("err = %v; want ErrDependents", err)
	}
	for _, want := range []string{"function public.named_accounts() (it uses the row type of view public.account_names",
		"column names of table public.name_snapshots (it uses the row type of view public.account_names"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	plan, err := newPlanWithout(ctx, db, testTables, Options{}, defences{noRowTypeCheck: true})
	if err != nil {
		t.Fatalf("control: %v", err)
	}
	err = plan.Apply(ctx, db)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "2BP01" {
		t.Errorf("control: Apply = %v; want PostgreSQL's refusal to drop the view (2BP01)", err)
	}
	t.Logf("control: %v", err)
}

// TestAdoptCheckValues: a constraint that a snowflake of now cannot pass
// is refused at planning, naming it and the key: a domain over integer
// with an upper bound (whose twin would keep it), a domain over bigint
// with one, a table's CHECK on its key. The control adopts anyway, and
// every insert with a new key then fails with 23514.
func TestAdoptCheckValues(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	const schema = `
CREATE DOMAIN account_ref AS integer CHECK (VALUE > 0 AND VALUE <= 2147483647);
CREATE DOMAIN small_key AS bigint CONSTRAINT below_int CHECK (VALUE <= 2147483647);
CREATE TABLE accounts (id serial PRIMARY KEY);
CREATE TABLE users (id bigserial PRIMARY KEY, account_id small_key REFERENCES accounts);
CREATE TABLE notes (id serial PRIMARY KEY, account_id account_ref REFERENCES accounts);
CREATE TABLE orders (id serial PRIMARY KEY CHECK (id < 2000000000), user_id bigint REFERENCES users);
INSERT INTO accounts DEFAULT VALUES;
`
	db := openDB(t, ctx, schema)
	tables := []string{"accounts", "users", "notes", "orders"}
	_, err := NewPlan(ctx, db, tables, Options{})
	if !errors.Is(err, ErrCheck) {
		t.Fatalf("err = %v; want ErrCheck", err)
	}
	for _, want := range []string{"constraint below_int of domain public.small_key", "constraint account_ref_check of domain public.account_ref",
		"constraint orders_id_check of public.orders"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	plan, err := newPlanWithout(ctx, db, tables, Options{}, defences{noCheckValues: true})
	if err != nil {
		t.Fatalf("control: %v", err)
	}
	if err := plan.Apply(ctx, db); err != nil {
		t.Fatalf("control: %v", err)
	}
	account := scalar[int64](t, ctx, db, "INSERT INTO accounts DEFAULT VALUES RETURNING id")
	_, err = db.ExecContext(ctx, "INSERT INTO users (account_id) VALUES ($1)", account)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
		t.Errorf("control: a user of a new account = %v; want a check violation (23514): the test does not reach the fault", err)
	}
	t.Logf("control: %v", err)
}

// TestAdoptIdentitySequence: an identity key's sequence, which DROP
// IDENTITY drops, is kept, as a serial key's is: same name, current
// value, comment and privileges; nextval goes on from where it was. The
// control lets DROP IDENTITY drop it.
func TestAdoptIdentitySequence(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	for _, control := range []bool{false, true} {
		db := openDB(t, ctx, testSchema+"COMMENT ON SEQUENCE posts_id_seq IS 'post keys';")
		role := testRole(t, ctx, db, "seq_user", "")
		mustExec(t, ctx, db, "GRANT USAGE ON SEQUENCE posts_id_seq TO "+role)
		before := catalogSnapshot(t, ctx, db)
		plan, err := newPlanWithout(ctx, db, testTables, Options{}, defences{dropIdentitySequence: control})
		if err != nil {
			t.Fatal(err)
		}
		if err := plan.Apply(ctx, db); err != nil {
			t.Fatal(err)
		}
		exists := scalar[bool](t, ctx, db, "SELECT to_regclass('posts_id_seq') IS NOT NULL")
		if control {
			if exists {
				t.Error("control: posts_id_seq is there after adopting: the test does not reach the fault")
			}
			continue
		}
		if !exists {
			t.Fatal("posts_id_seq is gone after adopting")
		}
		if next := scalar[int64](t, ctx, db, "SELECT nextval('posts_id_seq')"); next != 801 {
			t.Errorf("nextval('posts_id_seq') = %d; want 801, after the 800 keys it gave", next)
		}
		after := catalogSnapshot(t, ctx, db)
		for _, s := range before {
			if strings.Contains(s, "posts_id_seq") && !slices.Contains(after, s) {
				t.Errorf("lost in adopting: %s", s)
			}
		}
	}
}

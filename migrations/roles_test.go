package migrations

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/workerid"
)

// newRole makes a role that may log in (password "pw") and nothing more,
// under a name no other run on the shared server uses; when the test
// ends, what it owns and was granted in the database of admin, a
// superuser's pool, goes with it.
func newRole(t *testing.T, ctx context.Context, admin *sql.DB, prefix string) string {
	t.Helper()
	name := randomName(prefix)
	ident := pgx.Identifier{name}.Sanitize()
	mustExec(t, ctx, admin, "CREATE ROLE "+ident+" LOGIN PASSWORD 'pw'")
	t.Cleanup(func() {
		cctx := context.WithoutCancel(ctx)
		for _, q := range []string{"DROP OWNED BY " + ident + " CASCADE", "DROP ROLE " + ident} {
			if _, err := admin.ExecContext(cctx, q); err != nil {
				t.Errorf("cleanup: %s: %v", q, err)
			}
		}
	})
	return name
}

// ownedDB returns a fresh database, a superuser's pool on it, and a role
// that owns it, not a superuser, as teams migrate: the role may create
// objects in its schema public and nothing else.
func ownedDB(t *testing.T, ctx context.Context) (base string, admin *sql.DB, owner string) {
	t.Helper()
	base = testenv.Postgres(t)
	admin = openDB(t, base)
	owner = newRole(t, ctx, admin, "owner_")
	dbIdent := pgx.Identifier{strings.TrimPrefix(mustParse(t, base).Path, "/")}.Sanitize()
	mustExec(t, ctx, admin, "ALTER DATABASE "+dbIdent+" OWNER TO "+pgx.Identifier{owner}.Sanitize())
	t.Cleanup(func() {
		// Before the owner's role goes (cleanups run last first).
		if _, err := admin.ExecContext(context.WithoutCancel(ctx), "ALTER DATABASE "+dbIdent+" OWNER TO CURRENT_USER"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return base, admin, owner
}

// mustExec runs each statement on db, failing the test at the first error.
func mustExec(t *testing.T, ctx context.Context, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// stateMillisecond is the millisecond of snowflake_id_state, the
// millisecond snowflake_id() issues in, read by the superuser admin:
// only snowflake_id_slow() moves it.
func stateMillisecond(t *testing.T, ctx context.Context, admin *sql.DB) int64 {
	t.Helper()
	var ms int64
	if err := admin.QueryRowContext(ctx, "SELECT pg_sequence_last_value('snowflake_id_state') >> 22").Scan(&ms); err != nil {
		t.Fatal(err)
	}
	return ms
}

// stateMovers are the statements that move snowflake_id()'s state, as a
// role other than its owner might try them: a role that could run any of
// them could make snowflake_id() repeat IDs.
var stateMovers = []string{
	"SELECT setval('snowflake_id_state', 0)",
	"SELECT nextval('snowflake_id_state')",
	"SELECT setval('snowflake_id_seq', 0)",
	"ALTER SEQUENCE snowflake_id_seq RESTART",
}

// TestSnowflakeIDRoles: after Up by a role of its own (not a superuser),
// roles that were granted nothing on snowflake_id()'s state use it. An app
// role with INSERT on a table whose key defaults to snowflake_id() inserts
// one row, whose call starts a millisecond (the state moves: the slow path
// ran for the app role, as the state's owner), then 10,000 rows in one
// statement; after taking 5,000 values of snowflake_id_seq directly, which
// its USAGE allows, its next ID is still greater than every ID before. A
// reporting role with SELECT reads the time functions; neither role, nor
// any other, may move the state. Once the operator revokes EXECUTE on
// snowflake_id() from PUBLIC and grants it to the app role, a third role
// with INSERT is refused (42501, naming snowflake_id) and the app role
// goes on. Each runs with PUBLIC executing the functions, with EXECUTE
// taken from PUBLIC by default (the operator grants snowflake_id() to the
// app role and the time functions to the reporting role, nothing else),
// and with a server's own number (Options.WorkerPool), whose check of
// where it runs runs as each role. The control migrates without
// 00007_snowflake_id_privileges.sql: the app role's insert is refused
// (42501), and so, where EXECUTE was taken from PUBLIC, are the reporting
// role's time functions.
func TestSnowflakeIDRoles(t *testing.T) {
	ctx := testenv.Deadline(t, 3*time.Minute)
	store := openDB(t, testenv.Postgres(t))
	if err := Up(ctx, store, Options{}); err != nil {
		t.Fatal(err)
	}
	pool := postgresFleet(t, store)
	timeFuncs := []string{"snowflake_time(bigint)", "snowflake_worker(bigint)", "snowflake_sequence(bigint)",
		"snowflake_first_id(timestamptz)"}
	for _, flavour := range []struct {
		name     string
		noPublic bool           // EXECUTE taken from PUBLIC by default
		pool     *workerid.Pool // Options.WorkerPool
	}{
		{name: "PUBLIC executes"},
		{name: "EXECUTE taken from PUBLIC", noPublic: true},
		{name: "server's own number", pool: pool},
	} {
		for _, control := range []bool{false, true} {
			name, off := flavour.name, defences{}
			if control {
				name, off = flavour.name+"/control: no privileges migration", defences{noPrivileges: true}
			}
			t.Run(name, func(t *testing.T) {
				base, admin, ownerName := ownedDB(t, ctx)
				roleNames := map[string]string{}
				dbs := map[string]*sql.DB{}
				for _, r := range []string{"app", "reporting", "denied"} {
					roleNames[r] = newRole(t, ctx, admin, r+"_")
					dbs[r] = openDB(t, withParams(t, base, roleNames[r], nil))
				}
				ident := func(r string) string { return pgx.Identifier{roleNames[r]}.Sanitize() }
				owner := openDB(t, withParams(t, base, ownerName, nil))
				if flavour.noPublic {
					mustExec(t, ctx, owner, "ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC")
				}
				if err := upWithout(ctx, owner, Options{WorkerPool: flavour.pool}, off); err != nil {
					t.Fatal(err)
				}
				mustExec(t, ctx, owner,
					"CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_id(), n int NOT NULL)",
					"GRANT SELECT, INSERT ON events TO "+ident("app")+", "+ident("denied"),
					"GRANT SELECT ON events TO "+ident("reporting"))
				if flavour.noPublic {
					mustExec(t, ctx, owner,
						"GRANT EXECUTE ON FUNCTION snowflake_id() TO "+ident("app"),
						"GRANT EXECUTE ON FUNCTION "+strings.Join(timeFuncs, ", ")+" TO "+ident("reporting"))
				}
				var worker int64
				if err := admin.QueryRowContext(ctx, "SELECT snowflake_reserved_worker()").Scan(&worker); err != nil {
					t.Fatal(err)
				}

				// The app role's first ID: the state is in a millisecond
				// before the clock's, so only snowflake_id_slow() can issue
				// it, moving the state to its own millisecond.
				before := stateMillisecond(t, ctx, admin)
				var first idtype.ID
				err := dbs["app"].QueryRowContext(ctx, "INSERT INTO events (n) VALUES (0) RETURNING id").Scan(&first)
				reportSQL := `SELECT count(*) FROM events
					WHERE id >= snowflake_first_id(now() - interval '1 hour') AND snowflake_time(id) <= clock_timestamp()
						AND snowflake_worker(id) = $1 AND snowflake_sequence(id) >= 0`
				if control {
					if sqlState(err) != "42501" {
						t.Fatalf("control: the app role's insert = %v; want permission denied (42501): the test does not reach the fault", err)
					}
					t.Logf("control: the app role's insert: %v", err)
					if flavour.noPublic {
						var n int
						err := dbs["reporting"].QueryRowContext(ctx, reportSQL, worker).Scan(&n)
						if sqlState(err) != "42501" {
							t.Fatalf("control: the reporting role's time functions = %d, %v; want permission denied (42501)", n, err)
						}
						t.Logf("control: the reporting role's time functions: %v", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("the app role's insert, with no grant on snowflake_id()'s state: %v", err)
				}
				fp := idtype.DefaultLayout.Decode(first)
				if after := stateMillisecond(t, ctx, admin); after <= before || after != fp.Time.UnixMilli()-idtype.DefaultLayout.Epoch.UnixMilli() {
					t.Fatalf("the state went from millisecond %d to %d with the app role's first ID %d (millisecond %d): "+
						"snowflake_id_slow() did not start it", before, after, first, fp.Time.UnixMilli()-idtype.DefaultLayout.Epoch.UnixMilli())
				}
				if fp.Worker != worker {
					t.Fatalf("the app role's ID %d has worker %d, want %d", first, fp.Worker, worker)
				}

				mustExec(t, ctx, dbs["app"], "INSERT INTO events (n) SELECT g FROM generate_series(1, 10000) g")
				var taken int
				if err := dbs["app"].QueryRowContext(ctx, "SELECT count(nextval('snowflake_id_seq')) FROM generate_series(1, 5000)").Scan(&taken); err != nil {
					t.Fatalf("the app role takes values of snowflake_id_seq (USAGE): %v", err)
				}
				var last, largest idtype.ID
				if err := dbs["app"].QueryRowContext(ctx, "SELECT max(id) FROM events").Scan(&largest); err != nil {
					t.Fatal(err)
				}
				if err := dbs["app"].QueryRowContext(ctx, "INSERT INTO events (n) VALUES (-1) RETURNING id").Scan(&last); err != nil {
					t.Fatal(err)
				}
				if last <= largest {
					t.Fatalf("after the app role took %d values of snowflake_id_seq, its next ID %d is not above the largest before, %d",
						taken, last, largest)
				}
				var rows, distinct int
				if err := admin.QueryRowContext(ctx, "SELECT count(*), count(DISTINCT id) FROM events").Scan(&rows, &distinct); err != nil {
					t.Fatal(err)
				}
				if rows != 10002 || distinct != rows {
					t.Fatalf("events holds %d rows, %d distinct IDs; want 10002 of each", rows, distinct)
				}

				var seen int
				if err := dbs["reporting"].QueryRowContext(ctx, reportSQL, worker).Scan(&seen); err != nil || seen != rows {
					t.Fatalf("the reporting role's time functions: %d rows, %v; want %d", seen, err, rows)
				}
				for _, r := range []string{"app", "reporting", "denied"} {
					for _, q := range stateMovers {
						if _, err := dbs[r].ExecContext(ctx, q); sqlState(err) != "42501" {
							t.Errorf("the %s role ran %s: %v; want permission denied (42501)", r, q, err)
						}
					}
				}

				// The operator takes EXECUTE on snowflake_id() from PUBLIC.
				mustExec(t, ctx, owner,
					"REVOKE EXECUTE ON FUNCTION snowflake_id() FROM PUBLIC",
					"GRANT EXECUTE ON FUNCTION snowflake_id() TO "+ident("app"))
				_, err = dbs["denied"].ExecContext(ctx, "INSERT INTO events (n) VALUES (-2)")
				if sqlState(err) != "42501" || !strings.Contains(err.Error(), "snowflake_id") {
					t.Errorf("the insert of a role without EXECUTE on snowflake_id(): %v; want permission denied (42501) for snowflake_id", err)
				} else {
					t.Logf("a role without EXECUTE on snowflake_id(): %v", err)
				}
				if _, err := dbs["app"].ExecContext(ctx, "INSERT INTO events (n) VALUES (-3)"); err != nil {
					t.Errorf("the app role, granted EXECUTE on snowflake_id(): %v", err)
				}
			})
		}
	}
}

// TestSnowflakeIDStateOwnerOnly: roles granted more on snowflake_id()'s
// sequences than PUBLIC has lose, at Up, what moves the state: UPDATE on
// both sequences and USAGE on snowflake_id_state, so that no role but the
// owner may setval either (or nextval the state). Two ways teams grant it:
// default privileges that give the app role everything on new sequences
// (so that its serial columns work), set before the first Up; and the
// grant earlier versions' docs asked for (USAGE, UPDATE on both), given
// after a migration without 00007 and before the Up that upgrades. The
// app role then moves nothing (42501) and still inserts, and no role but
// the owner holds UPDATE on either sequence. The control migrates without
// 00007: the app role moves the state.
func TestSnowflakeIDStateOwnerOnly(t *testing.T) {
	ctx := testenv.Deadline(t, 3*time.Minute)
	for _, how := range []string{"default privileges", "grants of earlier docs"} {
		for _, control := range []bool{false, true} {
			name, off := how, defences{}
			if control {
				name, off = how+"/control: no privileges migration", defences{noPrivileges: true}
			}
			t.Run(name, func(t *testing.T) {
				base, admin, ownerName := ownedDB(t, ctx)
				appName := newRole(t, ctx, admin, "app_")
				appIdent := pgx.Identifier{appName}.Sanitize()
				owner := openDB(t, withParams(t, base, ownerName, nil))
				app := openDB(t, withParams(t, base, appName, nil))
				switch how {
				case "default privileges":
					mustExec(t, ctx, owner, "ALTER DEFAULT PRIVILEGES GRANT ALL ON SEQUENCES TO "+appIdent)
				case "grants of earlier docs":
					if err := upWithout(ctx, owner, Options{}, defences{noPrivileges: true}); err != nil {
						t.Fatal(err)
					}
					mustExec(t, ctx, owner, "GRANT USAGE, UPDATE ON SEQUENCE snowflake_id_state, snowflake_id_seq TO "+appIdent)
				}
				if err := upWithout(ctx, owner, Options{}, off); err != nil {
					t.Fatal(err)
				}
				mustExec(t, ctx, owner,
					"CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_id(), n int NOT NULL)",
					"GRANT SELECT, INSERT ON events TO "+appIdent)

				var holders []string
				rows, err := admin.QueryContext(ctx, `SELECT c.relname || ': ' || a.privilege_type || ' to ' || pg_get_userbyid(a.grantee)
					FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
					WHERE c.oid IN ('snowflake_id_state'::regclass, 'snowflake_id_seq'::regclass)
						AND a.grantee <> c.relowner AND a.privilege_type = 'UPDATE'
					ORDER BY 1`)
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var h string
					if err := rows.Scan(&h); err != nil {
						t.Fatal(err)
					}
					holders = append(holders, h)
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				rows.Close()

				var moved []string
				for _, q := range stateMovers {
					_, err := app.ExecContext(ctx, q)
					switch {
					case err == nil:
						moved = append(moved, q)
					case sqlState(err) != "42501":
						t.Fatalf("the app role ran %s: %v; want permission denied (42501) or success", q, err)
					}
				}
				if control {
					if len(moved) == 0 || len(holders) == 0 {
						t.Fatalf("control: the app role moved the state with %v, UPDATE held by %v: the test does not reach the fault", moved, holders)
					}
					t.Logf("control: the app role ran %v; UPDATE held by %v", moved, holders)
					return
				}
				if len(moved) > 0 || len(holders) > 0 {
					t.Fatalf("the app role moved the state with %v; UPDATE held by %v", moved, holders)
				}
				if _, err := app.ExecContext(ctx, "INSERT INTO events (n) SELECT g FROM generate_series(1, 100) g"); err != nil {
					t.Fatalf("the app role's insert: %v", err)
				}
			})
		}
	}
}

// TestSnowflakeIDPinnedPath: snowflake_id_slow(), which runs as its
// owner, and what it calls resolve no name in the caller's search_path. A
// role that may create functions in a schema of its own puts there a
// function named as one that snowflake_id() reaches, lets every role use
// the schema, and puts it before pg_catalog in its search_path, where an
// unqualified call reaches its function. Its function raises an error
// naming the role it runs as, when that is not the role itself:
//
//   - pg_advisory_xact_lock(bigint), which snowflake_id_slow() takes; the
//     role calls snowflake_id_slow().
//   - pg_is_in_recovery(), which the check of a server's own number
//     (Options.WorkerPool) calls in snowflake_server_worker(); the role
//     calls snowflake_id(), whose plan runs the check as the role first,
//     under its search_path, and then, as the state's millisecond is
//     past, snowflake_id_slow() runs it as the owner.
//
// Each call issues an ID. The control leaves the search_path of
// snowflake_id_slow() unpinned: the role's function runs as the owner.
func TestSnowflakeIDPinnedPath(t *testing.T) {
	ctx := testenv.Deadline(t, 3*time.Minute)
	store := openDB(t, testenv.Postgres(t))
	if err := Up(ctx, store, Options{}); err != nil {
		t.Fatal(err)
	}
	pool := postgresFleet(t, store)
	for _, c := range []struct {
		name     string
		pool     *workerid.Pool
		function string // the role's, in schema evil
		live     string // true when an unqualified call reaches the role's function
		call     string
	}{
		{name: "slow path", function: `CREATE FUNCTION evil.pg_advisory_xact_lock(bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF current_user <> session_user THEN
        RAISE EXCEPTION 'snowkey test: evil.pg_advisory_xact_lock ran as %', current_user;
    END IF;
END$$`, live: "SELECT to_regprocedure('pg_advisory_xact_lock(bigint)') = 'evil.pg_advisory_xact_lock(bigint)'::regprocedure",
			call: "SELECT snowflake_id_slow()"},
		{name: "server's own number", pool: pool, function: `CREATE FUNCTION evil.pg_is_in_recovery() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF current_user <> session_user THEN
        RAISE EXCEPTION 'snowkey test: evil.pg_is_in_recovery ran as %', current_user;
    END IF;
    RETURN NULL;
END$$`, live: "SELECT pg_is_in_recovery() IS NULL", call: "SELECT snowflake_id()"},
	} {
		for _, control := range []bool{false, true} {
			name, off := c.name, defences{}
			if control {
				name, off = c.name+"/control: caller's search_path", defences{noPinnedPath: true}
			}
			t.Run(name, func(t *testing.T) {
				base, admin, ownerName := ownedDB(t, ctx)
				if err := upWithout(ctx, openDB(t, withParams(t, base, ownerName, nil)), Options{WorkerPool: c.pool}, off); err != nil {
					t.Fatal(err)
				}
				attacker := newRole(t, ctx, admin, "attacker_")
				mustExec(t, ctx, admin, "CREATE SCHEMA evil AUTHORIZATION "+pgx.Identifier{attacker}.Sanitize())
				as := openDB(t, withParams(t, base, attacker, map[string]string{"search_path": "evil,pg_catalog,public"}))
				mustExec(t, ctx, as, c.function, "GRANT USAGE ON SCHEMA evil TO PUBLIC")
				var live bool
				if err := as.QueryRowContext(ctx, c.live).Scan(&live); err != nil || !live {
					t.Fatalf("%s in the role's session: %v, %v; want true: its function is not on its path", c.live, live, err)
				}

				var id idtype.ID
				err := as.QueryRowContext(ctx, c.call).Scan(&id)
				if control {
					if err == nil || !strings.Contains(err.Error(), "ran as "+ownerName) {
						t.Fatalf("control: %s = %d, %v; want the role's function to run as the owner %s: "+
							"the test does not reach the fault", c.call, id, err, ownerName)
					}
					t.Logf("control: %v", err)
					return
				}
				if err != nil {
					t.Fatalf("%s with the role's search_path: %v", c.call, err)
				}
				var next idtype.ID
				if err := as.QueryRowContext(ctx, "SELECT snowflake_id()").Scan(&next); err != nil || next <= id {
					t.Fatalf("snowflake_id() after %d: %d, %v", id, next, err)
				}
			})
		}
	}
}

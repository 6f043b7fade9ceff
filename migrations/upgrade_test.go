package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/workerid"
)

// released is what the first released code applied: the migrations
// numbered 1 and 2, as they were released.
func released() fs.FS { return os.DirFS("testdata/released") }

// migrateWith applies fsys's migrations to db as goose does, recorded in
// VersionTable.
func migrateWith(ctx context.Context, t *testing.T, fsys fs.FS, dsn string) error {
	t.Helper()
	p, err := newProvider(openTestDB(t, dsn), fsys, Options{})
	if err != nil {
		return err
	}
	_, err = p.Up(ctx)
	return err
}

// TestUpgradeFromReleased: a database migrated by the released code
// upgrades cleanly, since the lease table's migration kept its number in
// FS: Up applies only what is new, each version is recorded once, and a
// Postgres pool leases from the table. The control renumbers the lease
// table's migration, and the upgrade fails creating the table again.
func TestUpgradeFromReleased(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	names, err := fs.Glob(released(), "*.sql")
	if err != nil || len(names) != 2 {
		t.Fatalf("testdata/released: %v, %v", names, err)
	}
	t.Run("FS", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		dsn := testenv.Postgres(t)
		if err := migrateWith(ctx, t, released(), dsn); err != nil {
			t.Fatal(err)
		}
		db := openTestDB(t, dsn)
		if err := Up(ctx, db, Options{}); err != nil {
			t.Fatalf("Up on a database migrated by the released code: %v", err)
		}
		want := int64(len(migrationNames(t)))
		if v, err := Version(ctx, db); err != nil || v != want {
			t.Fatalf("Version = %d, %v; want %d", v, err, want)
		}
		var twice int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT version_id FROM `+VersionTable+
			` GROUP BY version_id HAVING count(*) > 1) AS d`).Scan(&twice); err != nil || twice != 0 {
			t.Fatalf("%d versions recorded more than once (%v)", twice, err)
		}
		pool, err := workerid.Postgres(db, workerid.Options{})
		if err != nil {
			t.Fatal(err)
		}
		lease, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire on the upgraded database: %v", err)
		}
		if err := lease.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("control: lease table renumbered", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		dsn := testenv.Postgres(t)
		if err := migrateWith(ctx, t, released(), dsn); err != nil {
			t.Fatal(err)
		}
		err := migrateWith(ctx, t, renumbered(t, leasesMigration), dsn)
		if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != "42P07" {
			t.Fatalf("control: the renumbered lease table upgraded with %v, want duplicate_table (42P07): "+
				"the test would not see a renumbering", err)
		}
	})
}

// leasesMigration is the migration that creates workerid.Postgres's table.
const leasesMigration = "00002_worker_leases.sql"

// renumbered returns FS with the migration name moved to the number after
// the last, as if it had been added anew.
func renumbered(t *testing.T, name string) fs.FS {
	t.Helper()
	names, err := fs.Glob(FS, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("FS: %v, %v", names, err)
	}
	out := fstest.MapFS{}
	for _, n := range names {
		data, err := fs.ReadFile(FS, n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = &fstest.MapFile{Data: data}
	}
	moved := fmt.Sprintf("%05d%s", len(names)+1, name[5:])
	out[moved] = out[name]
	delete(out, name)
	return out
}

// TestReleasedUnchanged: the migrations of the released code are in FS
// byte for byte: a released migration never changes.
func TestReleasedUnchanged(t *testing.T) {
	names, err := fs.Glob(released(), "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("testdata/released: %v, %v", names, err)
	}
	for _, name := range names {
		got, err := fs.ReadFile(FS, name)
		if err != nil {
			t.Fatal(err)
		}
		want, err := fs.ReadFile(released(), name)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s differs from the released file: a released migration never changes", name)
		}
	}
}

// stateConversion is the part of 00004_snowflake_id_fast_path.sql that
// carries the state of the snowflake_id() before it over to its own.
const stateConversion = `SELECT setval('snowflake_id_state', (last_value >> 12 << 22) | 4194303) FROM snowflake_id_state;
SELECT setval('snowflake_id_seq', last_value) FROM snowflake_id_state;
`

// migrationsUpTo returns FS's migrations numbered up to last, the 00004
// one with stateConversion removed when convert is false.
func migrationsUpTo(t *testing.T, last int, convert bool) fs.FS {
	t.Helper()
	names, err := fs.Glob(FS, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, name := range names {
		n, err := strconv.Atoi(name[:5])
		if err != nil {
			t.Fatal(err)
		}
		if n > last {
			continue
		}
		data, err := fs.ReadFile(FS, name)
		if err != nil {
			t.Fatal(err)
		}
		if n == 4 && !convert {
			if !strings.Contains(string(data), stateConversion) {
				t.Fatalf("%s does not hold the state conversion the control removes", name)
			}
			data = []byte(strings.Replace(string(data), stateConversion, "", 1))
		}
		out[name] = &fstest.MapFile{Data: data}
	}
	return out
}

// testClock makes snowflake_id() and snowflake_id_slow() in db read,
// instead of the server's clock, the Unix millisecond that the sequence
// snowkey_test_clock holds, set to ms: a clock that stands still until
// the test moves it (setClock), however slowly the machine runs. It
// rewrites the two functions in db alone, for the test, keeping what else
// they declare.
func testClock(t *testing.T, ctx context.Context, db *sql.DB, ms int64) {
	t.Helper()
	if _, err := db.ExecContext(ctx, "CREATE SEQUENCE snowkey_test_clock MINVALUE 0"); err != nil {
		t.Fatal(err)
	}
	setClock(t, ctx, db, ms)
	const clock = "to_timestamp((pg_sequence_last_value('public.snowkey_test_clock') + 0.5) / 1000)"
	for _, name := range []string{"snowflake_id", "snowflake_id_slow"} {
		var def string
		err := db.QueryRowContext(ctx, "SELECT pg_get_functiondef($1::regprocedure)", "public."+name+"()").Scan(&def)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(def, "clock_timestamp()") {
			t.Fatalf("%s() reads no clock_timestamp():\n%s", name, def)
		}
		if _, err := db.ExecContext(ctx, strings.ReplaceAll(def, "clock_timestamp()", clock)); err != nil {
			t.Fatal(err)
		}
	}
}

// setClock moves the clock of testClock to the Unix millisecond ms.
func setClock(t *testing.T, ctx context.Context, db *sql.DB, ms int64) {
	t.Helper()
	if _, err := db.ExecContext(ctx, "SELECT setval('public.snowkey_test_clock', $1)", ms); err != nil {
		t.Fatal(err)
	}
}

// TestUpgradeSnowflakeState: a database whose snowflake_id() issued IDs
// before 00004 changed how it keeps its state issues, after the upgrade,
// only IDs greater than the last one before it, even when that one is
// ahead of the database's clock (the clock was set back). The upgraded
// functions read a test clock (testClock) that stands at a millisecond
// m; the old state is an ID of m + 500. The first call after the upgrade
// must wait for the clock, which the test sees (the call's session sleeps
// in pg_sleep) before it moves the clock past the old ID's millisecond;
// the ID must then be greater than the old one. The control upgrades with
// a 00004 that does not carry the old state over: its first call returns
// at once an ID of m, below the old one, which the control must see.
func TestUpgradeSnowflakeState(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	for _, control := range []bool{false, true} {
		name := "converted"
		if control {
			name = "control: state not carried over"
		}
		t.Run(name, func(t *testing.T) {
			dsn := testenv.Postgres(t)
			if err := migrateWith(ctx, t, migrationsUpTo(t, 3, true), dsn); err != nil {
				t.Fatal(err)
			}
			db := openTestDB(t, dsn)
			epoch := idtype.DefaultLayout.Epoch.UnixMilli()
			m := time.Now().UnixMilli()
			oldMs := m - epoch + 500
			old := oldMs<<22 | 1023<<12 | 4000
			if _, err := db.ExecContext(ctx, "SELECT setval('snowflake_id_state', $1)", oldMs<<12|4000); err != nil {
				t.Fatal(err)
			}
			if err := migrateWith(ctx, t, migrationsUpTo(t, 4, !control), dsn); err != nil {
				t.Fatal(err)
			}
			testClock(t, ctx, db, m)

			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var pid int
			if err := conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				t.Fatal(err)
			}
			type result struct {
				id  int64
				err error
			}
			done := make(chan result, 1)
			go func() {
				var r result
				r.err = conn.QueryRowContext(ctx, "SELECT snowflake_id()").Scan(&r.id)
				done <- r
			}()
			// Until the call returns, or sleeps waiting for the clock.
			waited := false
			var r result
		wait:
			for {
				select {
				case r = <-done:
					break wait
				case <-ctx.Done():
					t.Fatalf("the first call after the upgrade neither returned nor waited for the clock: %v", context.Cause(ctx))
				case <-time.After(10 * time.Millisecond):
				}
				var event sql.NullString
				if err := db.QueryRowContext(ctx, "SELECT wait_event FROM pg_stat_activity WHERE pid = $1", pid).Scan(&event); err != nil {
					t.Fatal(err)
				}
				if event.String == "PgSleep" {
					waited = true
					setClock(t, ctx, db, epoch+oldMs+2)
					r = <-done
					break wait
				}
			}
			if r.err != nil {
				t.Fatalf("the first call after the upgrade: %v", r.err)
			}
			t.Logf("first ID after the upgrade %d (millisecond %d), old state %d (millisecond %d); waited for the clock: %v",
				r.id, r.id>>22, old, oldMs, waited)
			if control {
				if waited || r.id > old {
					t.Fatal("control: the first ID is above the old one: the test does not reach the fault")
				}
				return
			}
			if !waited || r.id <= old {
				t.Fatalf("the first ID after the upgrade, %d, is not greater than the last before it, %d, "+
					"or was issued without waiting for the clock (%v)", r.id, old, waited)
			}
		})
	}
}

// loginRole makes a role that may log in (password "pw"), not a
// superuser, dropped with what it was granted in admin's database when
// the test ends, and returns its name.
func loginRole(t *testing.T, ctx context.Context, admin *sql.DB, prefix string) string {
	t.Helper()
	name := prefix + randomHex(t)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.ExecContext(ctx, "CREATE ROLE "+ident+" LOGIN PASSWORD 'pw'"); err != nil {
		t.Fatal(err)
	}
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

// TestUpgradePrivileges: a database migrated by any earlier version (the
// released files, and FS up to each number before privilegesMigration),
// whose snowflake_id() issued an ID, upgrades so that a role granted
// INSERT on a table whose key defaults to snowflake_id(), and nothing on
// its state, inserts, with an ID greater than the one before the upgrade;
// and a role granted what earlier docs asked for (USAGE and UPDATE on the
// sequences) inserts too and may no longer setval the state. The control
// upgrades without privilegesMigration: the first role's insert is
// refused (42501).
func TestUpgradePrivileges(t *testing.T) {
	testenv.Deadline(t, 3*time.Minute)
	type version struct {
		name string
		fsys func(t *testing.T) fs.FS
	}
	versions := []version{{"released", func(*testing.T) fs.FS { return released() }}}
	for n := 3; n < 7; n++ {
		versions = append(versions, version{fmt.Sprintf("%05d", n), func(t *testing.T) fs.FS { return migrationsUpTo(t, n, true) }})
	}
	for _, v := range versions {
		for _, control := range []bool{false, true} {
			name, d := v.name, defences{}
			if control {
				name, d = v.name+"/control: no privileges migration", defences{noPrivileges: true}
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				dsn := testenv.Postgres(t)
				if err := migrateWith(ctx, t, v.fsys(t), dsn); err != nil {
					t.Fatal(err)
				}
				admin := openTestDB(t, dsn)
				var before int64
				if err := admin.QueryRowContext(ctx, "SELECT snowflake_id()").Scan(&before); err != nil {
					t.Fatal(err)
				}
				app, legacy := loginRole(t, ctx, admin, "app_"), loginRole(t, ctx, admin, "legacy_")
				appIdent, legacyIdent := pgx.Identifier{app}.Sanitize(), pgx.Identifier{legacy}.Sanitize()
				seqs := "snowflake_id_state"
				if exists, err := regclassExists(ctx, admin, "snowflake_id_seq"); err != nil {
					t.Fatal(err)
				} else if exists {
					seqs += ", snowflake_id_seq"
				}
				for _, q := range []string{
					"CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_id(), n int NOT NULL)",
					"GRANT SELECT, INSERT ON events TO " + appIdent + ", " + legacyIdent,
					"GRANT USAGE, UPDATE ON SEQUENCE " + seqs + " TO " + legacyIdent,
				} {
					if _, err := admin.ExecContext(ctx, q); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				if err := up(ctx, admin, Options{}, d, ""); err != nil {
					t.Fatalf("upgrade: %v", err)
				}
				var id int64
				err := openTestDB(t, asUser(t, dsn, app, nil)).QueryRowContext(ctx, "INSERT INTO events (n) VALUES (1) RETURNING id").Scan(&id)
				if control {
					var pgErr *pgconn.PgError
					if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
						t.Fatalf("control: the insert of a role without grants = %d, %v; want permission denied (42501): "+
							"the test does not reach the fault", id, err)
					}
					t.Logf("control: %v", err)
					return
				}
				if err != nil || id <= before {
					t.Fatalf("the insert of a role without grants after the upgrade: ID %d, %v; want one above %d, the last before", id, err, before)
				}
				asLegacy := openTestDB(t, asUser(t, dsn, legacy, nil))
				if _, err := asLegacy.ExecContext(ctx, "INSERT INTO events (n) VALUES (2)"); err != nil {
					t.Fatalf("the insert of a role granted USAGE, UPDATE before the upgrade: %v", err)
				}
				var pgErr *pgconn.PgError
				if _, err := asLegacy.ExecContext(ctx, "SELECT setval('snowflake_id_state', 0)"); !errors.As(err, &pgErr) || pgErr.Code != "42501" {
					t.Fatalf("a role granted UPDATE before the upgrade moved the state after it: %v; want permission denied (42501)", err)
				}
			})
		}
	}
}

// regclassExists reports whether name is a relation on db's search_path.
func regclassExists(ctx context.Context, db *sql.DB, name string) (bool, error) {
	var ok bool
	err := db.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&ok)
	return ok, err
}

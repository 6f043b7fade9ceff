package migrations

import (
	"context"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/idtype/workerid"
	"github.com/snowkeyhq/snowkey/internal/testenv"
)

// released is what the code before workerid owned its table applied: both
// migrations from this folder, as they were released.
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

// TestUpgradeFromReleased: a database migrated by the code that kept the
// lease table in this folder upgrades cleanly, since the table's migration
// kept its number in FS: Up finds nothing to do, each version is recorded
// once, and a Postgres pool leases from the table. The control renumbers
// the lease table's migration, and the upgrade fails.
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
		leases, err := fs.ReadFile(workerid.Migrations(), "00002_worker_leases.sql")
		if err != nil {
			t.Fatal(err)
		}
		renumbered := union{own, fstest.MapFS{"00003_worker_leases.sql": {Data: leases}}}
		if err := migrateWith(ctx, t, renumbered, dsn); err == nil {
			t.Fatal("control: the renumbered lease table upgraded cleanly: the test would not see a renumbering")
		}
	})
}

// TestFSUnion: FS is a well-formed file system that holds this folder's
// migrations and workerid's, once each.
func TestFSUnion(t *testing.T) {
	if err := fstest.TestFS(FS, "00001_snowflake_id.sql", "00002_worker_leases.sql"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"00001_snowflake_id.sql", "00002_worker_leases.sql"} {
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

// TestUpgradeSnowflakeState: a database whose snowflake_id() issued IDs
// before 00004 changed how it keeps its state issues, after the upgrade,
// only IDs greater than the last one before it, even when that one is
// ahead of the database's clock (the clock was set back). The old state
// is set to an ID 900 ms ahead of the clock, the upgrade runs, and the
// first new ID must be greater. A run met its fault only if the clock was
// still behind the old ID's millisecond as the call began, read by the
// server in the statement that calls snowflake_id(); a run that a busy
// machine made later is not judged, and another database is tried. The
// control upgrades with a 00004 that does not carry the old state over:
// a run that met its fault issues an ID below the old one, which the
// control must see; an ID above it shows the clock had passed the old
// millisecond by the call (a stall inside the statement), so that run
// did not meet its fault either.
func TestUpgradeSnowflakeState(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	const tries = 6
	for _, control := range []bool{false, true} {
		name := "converted"
		if control {
			name = "control: state not carried over"
		}
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			for try := 1; ; try++ {
				if try > tries {
					t.Fatalf("in %d tries the clock had passed the old state's millisecond before the first call", tries)
				}
				dsn := testenv.Postgres(t)
				if err := migrateWith(ctx, t, migrationsUpTo(t, 3, true), dsn); err != nil {
					t.Fatal(err)
				}
				db := openTestDB(t, dsn)
				var old int64
				err := db.QueryRowContext(ctx, `SELECT ((x + 900) << 22) | (1023 << 12) | 4000 FROM (SELECT
					setval('snowflake_id_state', ((x + 900) << 12) | 4000) AS s, x FROM (SELECT
					floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - $1 AS x) AS c) AS v`,
					idtype.DefaultLayout.Epoch.UnixMilli()).Scan(&old)
				if err != nil {
					t.Fatal(err)
				}
				if err := migrateWith(ctx, t, migrationsUpTo(t, 4, !control), dsn); err != nil {
					t.Fatal(err)
				}
				// OFFSET 0 keeps the subquery from being flattened into the
				// outer one, so its clock reading is taken before snowflake_id.
				var clock, id int64
				err = db.QueryRowContext(ctx, `SELECT b.t, snowflake_id()
					FROM (SELECT floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - $1 AS t OFFSET 0) AS b`,
					idtype.DefaultLayout.Epoch.UnixMilli()).Scan(&clock, &id)
				if err != nil {
					t.Fatal(err)
				}
				if clock >= old>>22 || control && id > old {
					t.Logf("try %d: the clock (%d, ID %d) passed the old state's millisecond %d before the call: not judged",
						try, clock, id, old>>22)
					continue
				}
				if control {
					t.Logf("control: first ID %d after the upgrade, old state %d", id, old)
					return
				}
				if id <= old {
					t.Fatalf("the first ID after the upgrade, %d, is not greater than the last before it, %d", id, old)
				}
				return
			}
		})
	}
}

package migrations

import (
	"context"
	"io/fs"
	"os"
	"testing"
	"testing/fstest"
	"time"

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

package migrations

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"io/fs"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func openTestDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// asUser returns dsn with another user (password "pw") and run-time
// parameters, which pgx passes to the server.
func asUser(t *testing.T, dsn, user string, params map[string]string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		u.User = url.UserPassword(user, "pw")
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// versionTableExists asks the catalog, as the database's owner.
func versionTableExists(t *testing.T, admin *sql.DB) bool {
	t.Helper()
	var ok bool
	if err := admin.QueryRowContext(t.Context(), "SELECT to_regclass($1) IS NOT NULL", VersionTable).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// gooseVersion is the read that Version replaced, goose's GetDBVersion,
// which creates the version table first (and retries when it cannot): the
// control runs of TestVersionReadOnly use it to show that each case
// reaches what Version must not do.
func gooseVersion(ctx context.Context, db *sql.DB) (int64, error) {
	p, err := newProvider(db, FS, Options{})
	if err != nil {
		return 0, err
	}
	return p.GetDBVersion(ctx)
}

// TestVersionReadOnly: Version creates nothing on a fresh database, and
// answers 0 at once for a role without CREATE and on a read-only
// connection; on a migrated database it answers the version read-only too.
// Each case's control reads the version as goose does, and finds the table
// created, or fails.
func TestVersionReadOnly(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	t.Run("fresh", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		admin := openTestDB(t, testenv.Postgres(t))
		if v, err := Version(ctx, admin); err != nil || v != 0 {
			t.Fatalf("Version = %d, %v; want 0", v, err)
		}
		if versionTableExists(t, admin) {
			t.Fatalf("Version created %s", VersionTable)
		}
		// Control: goose's read creates the table.
		if _, err := gooseVersion(ctx, admin); err != nil {
			t.Fatal(err)
		}
		if !versionTableExists(t, admin) {
			t.Fatalf("control: goose's read did not create %s: the test would not see a read that writes", VersionTable)
		}
	})
	readers := []struct {
		name  string
		setup func(t *testing.T, admin *sql.DB, dsn string) string // returns the reader's DSN
	}{
		{"role without CREATE", func(t *testing.T, admin *sql.DB, dsn string) string {
			role := "reader_" + randomHex(t)
			ident := pgx.Identifier{role}.Sanitize()
			for _, q := range []string{
				"CREATE ROLE " + ident + " LOGIN PASSWORD 'pw'",
				"REVOKE CREATE ON SCHEMA public FROM PUBLIC",
				"GRANT USAGE ON SCHEMA public TO " + ident,
				"GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + ident,
			} {
				if _, err := admin.ExecContext(t.Context(), q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			t.Cleanup(func() {
				ctx := context.WithoutCancel(t.Context())
				_, _ = admin.ExecContext(ctx, "DROP OWNED BY "+ident+" CASCADE")
				if _, err := admin.ExecContext(ctx, "DROP ROLE "+ident); err != nil {
					t.Errorf("drop role %s: %v", role, err)
				}
			})
			return asUser(t, dsn, role, nil)
		}},
		{"default_transaction_read_only", func(t *testing.T, _ *sql.DB, dsn string) string {
			return asUser(t, dsn, "", map[string]string{"default_transaction_read_only": "on"})
		}},
	}
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			dsn := testenv.Postgres(t)
			admin := openTestDB(t, dsn)
			reader := openTestDB(t, r.setup(t, admin, dsn))
			if v, err := Version(ctx, reader); err != nil || v != 0 {
				t.Fatalf("Version on a fresh database = %d, %v; want 0", v, err)
			}
			if versionTableExists(t, admin) {
				t.Fatalf("Version created %s", VersionTable)
			}
			// Control: goose's read fails here, after its retries.
			if v, err := gooseVersion(ctx, reader); err == nil {
				t.Fatalf("control: goose's read answered %d: the reader can create tables, the test proves nothing", v)
			}
			if err := Up(ctx, admin, Options{}); err != nil {
				t.Fatal(err)
			}
			if r.name == "role without CREATE" {
				if _, err := admin.ExecContext(ctx, "GRANT SELECT ON "+VersionTable+" TO "+
					pgx.Identifier{mustUser(t, reader)}.Sanitize()); err != nil {
					t.Fatal(err)
				}
			}
			want := int64(len(migrationNames(t)))
			if v, err := Version(ctx, reader); err != nil || v != want {
				t.Fatalf("Version on the migrated database = %d, %v; want %d", v, err, want)
			}
		})
	}
}

// mustUser returns the user a pool connects as.
func mustUser(t *testing.T, db *sql.DB) string {
	t.Helper()
	var u string
	if err := db.QueryRowContext(t.Context(), "SELECT current_user").Scan(&u); err != nil {
		t.Fatal(err)
	}
	return u
}

func migrationNames(t *testing.T) []string {
	t.Helper()
	names, err := fs.Glob(FS, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("FS: %v, %v", names, err)
	}
	return names
}

// randomHex returns 8 random hex digits, for names no other test run on
// the shared server uses.
func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

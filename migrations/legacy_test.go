package migrations

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/workerid"
)

// legacyServerBody is the body of snowflake_reserved_worker() that Up
// wrote for a claim before it named timelines and before 00006 made
// snowflake_server_worker(): the record, and a check of the system
// identifier and the database only.
func legacyServerBody(r serverRecord) string {
	js, _ := json.Marshal(r)
	w := strconv.FormatInt(r.Worker, 10)
	return "\n" + serverMarker + string(js) + `
BEGIN
    IF (SELECT system_identifier FROM pg_control_system()) IS DISTINCT FROM ` + r.SystemIdentifier + `
            OR current_database() IS DISTINCT FROM ` + sqlLiteral(r.Database) + ` THEN
        RAISE EXCEPTION 'snowflake_id: worker % was claimed for another server', ` + w + `
            USING ERRCODE = '` + SQLStateNoServerWorker + `';
    END IF;
    RETURN ` + w + `;
END
`
}

// issuedWorkerOf is the worker of an ID that snowflake_id() issues in db.
func issuedWorkerOf(t *testing.T, ctx context.Context, db *sql.DB) int64 {
	t.Helper()
	var id idtype.ID
	if err := db.QueryRowContext(ctx, "SELECT snowflake_id()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return idtype.DefaultLayout.Decode(id).Worker
}

// TestUpgradeServerClaim: a database whose number Up claimed before it
// named timelines (the record and its check in snowflake_reserved_worker(),
// migrations up to 00005) upgrades: on timeline 1, Up with the pool keeps
// the number and the claim's name, and moves the check, now with the
// timeline, into snowflake_server_worker(), leaving the number plain in
// snowflake_reserved_worker(). A standby promoted from it before the
// upgrade, which the old check let issue on the number, gets a number of
// its own at its first Up: an old record holds on timeline 1 only.
func TestUpgradeServerClaim(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 3*time.Minute)
	primary := private.StartPostgres(t)
	admin := openTestDB(t, primary.URL())
	o := workerid.Options{Namespace: "fleet", KeyPrefix: testenv.KeyPrefix(t), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	pool, err := workerid.Redis(testenv.RedisClient(t), o)
	if err != nil {
		t.Fatal(err)
	}
	// legacy makes a database claimed as before, and returns its URL, its
	// claimant and its number.
	legacy := func(name string) (*url.URL, string, int64) {
		t.Helper()
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(primary.URL())
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/" + name
		if err := migrateWith(ctx, t, migrationsUpTo(t, 5, true), u.String()); err != nil {
			t.Fatal(err)
		}
		db := openTestDB(t, u.String())
		id, err := identify(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		claimant := "postgres:" + id.system + "/" + name + "/public"
		c, err := pool.Claim(ctx, claimant)
		if err != nil {
			t.Fatal(err)
		}
		rec := serverRecord{Worker: c.Worker, SystemIdentifier: id.system, Database: name, Claimant: claimant, Namespace: "fleet"}
		if _, err := db.ExecContext(ctx, "CREATE OR REPLACE FUNCTION snowflake_reserved_worker() RETURNS bigint "+
			"LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS "+serverQuote+legacyServerBody(rec)+serverQuote); err != nil {
			t.Fatal(err)
		}
		if w := issuedWorkerOf(t, ctx, db); w != c.Worker {
			t.Fatalf("the old server body issues on %d, want %d", w, c.Worker)
		}
		return u, claimant, c.Worker
	}
	u, claimant, worker := legacy("legacy_claim")
	uc, _, workerControl := legacy("legacy_control")
	db := openTestDB(t, u.String())

	standby := private.StartPostgresStandby(t, primary.Addr(), private.PostgresOptions{})
	standby.Promote()
	u.Host = standby.Addr()
	promoted := openTestDB(t, u.String())
	if w := issuedWorkerOf(t, ctx, promoted); w != worker {
		t.Fatalf("before the upgrade the promoted standby issues on %d; the old check let it issue on %d", w, worker)
	}

	if err := Up(ctx, db, Options{WorkerPool: pool}); err != nil {
		t.Fatal(err)
	}
	if w := issuedWorkerOf(t, ctx, db); w != worker {
		t.Errorf("after the upgrade the original issues on %d, want its number %d", w, worker)
	}
	s, err := ServerOf(ctx, db)
	if err != nil || s.Claimant != claimant || !s.Issues || s.Worker != worker {
		t.Errorf("ServerOf after the upgrade = %+v, %v; want the claim %q kept on worker %d", s, err, claimant, worker)
	}
	var reserved, server string
	if err := db.QueryRowContext(ctx, `SELECT (SELECT prosrc FROM pg_proc WHERE oid = 'snowflake_reserved_worker()'::regprocedure),
		(SELECT prosrc FROM pg_proc WHERE oid = 'snowflake_server_worker()'::regprocedure)`).Scan(&reserved, &server); err != nil {
		t.Fatal(err)
	}
	if !workerSource.MatchString(reserved) || !strings.Contains(server, `"timeline":1`) {
		t.Errorf("after the upgrade snowflake_reserved_worker() is %q and snowflake_server_worker() %q; "+
			"want the plain number and the record with timeline 1", reserved, server)
	}

	if err := Up(ctx, promoted, Options{WorkerPool: pool}); err != nil {
		t.Fatal(err)
	}
	if w := issuedWorkerOf(t, ctx, promoted); w == worker {
		t.Errorf("after the upgrade the promoted standby still issues on the original's number %d", w)
	}

	// The control upgrades without timelines: the old record holds on
	// the promoted standby too, which keeps its original's number.
	uc.Host = standby.Addr()
	promotedControl := openTestDB(t, uc.String())
	if err := up(ctx, promotedControl, Options{WorkerPool: pool}, defences{noTimeline: true}, ""); err != nil {
		t.Fatal(err)
	}
	if w := issuedWorkerOf(t, ctx, promotedControl); w != workerControl {
		t.Errorf("control: the promoted standby issues on %d after an upgrade without timelines, not on its original's %d: "+
			"the test would not see an old claim kept on a new timeline", w, workerControl)
	}
}

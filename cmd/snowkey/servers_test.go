package main

import (
	"database/sql"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/migrations"
	"github.com/snowkeyhq/snowkey/workerid"
)

// TestServers: two databases migrated without a pool, as the README
// shows, both issue on worker 1023: snowkey servers lists them and exits 1
// naming the conflict and the fix. Once each claimed a number from the
// fleet's Redis it lists the claims and exits 0; --release gives a claim
// back. Bad flags are usage errors.
func TestServers(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	dsns := []string{testenv.Postgres(t), testenv.Postgres(t)}
	var dbs []*sql.DB
	for _, dsn := range dsns {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if err := migrations.Up(ctx, db, migrations.Options{}); err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, db)
	}
	code, out, errOut := runCLI(append([]string{"servers"}, dsns...)...)
	if code != 1 || strings.Count(out, "worker=1023") != 2 || !strings.Contains(errOut, "issue on worker 1023") ||
		!strings.Contains(errOut, "Options.WorkerPool") {
		t.Fatalf("servers on two databases on 1023 = exit %d\n%s%s\nwant exit 1, both listed, the conflict and the fix named",
			code, out, errOut)
	}

	prefix := testenv.KeyPrefix(t)
	pool, err := workerid.Redis(testenv.RedisClient(t), workerid.Options{Namespace: "api", KeyPrefix: prefix,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for _, db := range dbs {
		if err := migrations.Up(ctx, db, migrations.Options{WorkerPool: pool}); err != nil {
			t.Fatal(err)
		}
	}
	store := []string{"servers", "--redis", "redis://" + testenv.Redis(t), "--namespace", "api", "--key-prefix", prefix}
	code, out, errOut = runCLI(append(store, dsns...)...)
	if code != 0 || strings.Count(out, "\nclaim\t") != 2 || strings.Contains(out, "claim=-") {
		t.Fatalf("servers on two claimed databases = exit %d\n%s%s\nwant exit 0 and both claims", code, out, errOut)
	}
	claims, err := migrations.Servers(ctx, pool)
	if err != nil || len(claims) != 2 {
		t.Fatalf("Servers = %v, %v", claims, err)
	}
	code, out, errOut = runCLI(append(store, "--release", claims[0].Claimant)...)
	if code != 0 || !strings.HasPrefix(out, "released\t") {
		t.Fatalf("servers --release = exit %d\n%s%s", code, out, errOut)
	}
	if left, err := migrations.Servers(ctx, pool); err != nil || len(left) != 1 || left[0] != claims[1] {
		t.Errorf("after --release the namespace holds %+v, %v; want only %+v", left, err, claims[1])
	}
	if code, _, errOut := runCLI(append(store, "--release", claims[0].Claimant)...); code != 1 || !strings.Contains(errOut, "no claim") {
		t.Errorf("releasing it again = exit %d, %q; want exit 1, no claim", code, errOut)
	}

	for _, args := range [][]string{
		{"servers", "--redis", "redis://x", "--leases", "postgres://x", dsns[0]},
		{"servers", "--release", "postgres:1:1/a/public"},
		{"servers", "--timeout", "0s", dsns[0]},
		{"servers", "--redis", "::", dsns[0]},
	} {
		if code, _, errOut := runCLI(args...); code != 2 || errOut == "" {
			t.Errorf("%q = exit %d, %q; want exit 2 and a message", args, code, errOut)
		}
	}
}

package migrations

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/workerid"
)

// TestServerRestart: a server whose number was claimed issues on it after
// a clean restart and after a crash, without Up (a restart keeps the
// timeline), and Up afterwards keeps the number.
func TestServerRestart(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 2*time.Minute)
	srv := private.StartPostgres(t)
	pool := redisFleet(t)
	dsn := createDB(t, ctx, srv.URL())
	db := openDB(t, dsn)
	if err := Up(ctx, db, Options{WorkerPool: pool}); err != nil {
		t.Fatal(err)
	}
	w := issuedWorker(t, ctx, db)
	for _, restart := range []struct {
		name string
		do   func()
	}{
		{"clean restart", srv.Restart},
		{"crash", func() { srv.Kill(); srv.Restart() }},
	} {
		restart.do()
		db := openDB(t, dsn) // the old pool's connections died with the server
		if got := issuedWorker(t, ctx, db); got != w {
			t.Fatalf("after a %s snowflake_id() issues on worker %d, want %d", restart.name, got, w)
		}
		s, err := ServerOf(ctx, db)
		if err != nil || !s.Issues || s.Timeline != 1 || s.Worker != w {
			t.Fatalf("ServerOf after a %s: %+v, %v; want timeline 1, worker %d, issuing", restart.name, s, err, w)
		}
		if err := Up(ctx, db, Options{WorkerPool: pool}); err != nil {
			t.Fatal(err)
		}
		if got := issuedWorker(t, ctx, db); got != w {
			t.Fatalf("Up after a %s moved snowflake_id() to worker %d, want %d", restart.name, got, w)
		}
	}
}

// TestServerStandby: on a hot standby snowflake_id() refuses at once
// (SQLSTATE 25006), while the number it will not issue on can still be
// read, and ServerOf says it is a standby. A session on the standby that
// prepared a call to snowflake_id() is refused after the promotion
// (SQLStateNoServerWorker): PostgreSQL plans the call again then, and the
// check meets the new timeline.
func TestServerStandby(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 3*time.Minute)
	primary := private.StartPostgres(t)
	pool := redisFleet(t)
	dsn := createDB(t, ctx, primary.URL())
	if err := Up(ctx, openDB(t, dsn), Options{WorkerPool: pool}); err != nil {
		t.Fatal(err)
	}
	w := issuedWorker(t, ctx, openDB(t, dsn))
	standby := private.StartPostgresStandby(t, primary.Addr(), private.PostgresOptions{})

	sb := openDB(t, onServer(t, dsn, standby))
	if _, err := sb.ExecContext(ctx, "SELECT snowflake_id()"); sqlState(err) != "25006" {
		t.Errorf("snowflake_id() on the standby: %v, want SQLSTATE 25006", err)
	}
	if got, err := ReservedWorkerOf(ctx, sb); err != nil || got != w {
		t.Errorf("ReservedWorkerOf on the standby = %d, %v; want %d", got, err, w)
	}
	if s, err := ServerOf(ctx, sb); err != nil || !s.Standby || s.Issues || s.Worker != w || s.Refusal == "" {
		t.Errorf("ServerOf on the standby = %+v, %v; want a standby on worker %d that does not issue, and why", s, err, w)
	}

	// A session on the standby, with a plan kept for good.
	conn, err := sb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"SET plan_cache_mode = force_generic_plan", "PREPARE next_id AS SELECT snowflake_id()"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.ExecContext(ctx, "EXECUTE next_id"); sqlState(err) != "25006" {
		t.Fatalf("a prepared snowflake_id() on the standby: %v, want SQLSTATE 25006", err)
	}
	standby.Promote()
	var got int64
	if err := conn.QueryRowContext(ctx, "EXECUTE next_id").Scan(&got); sqlState(err) != SQLStateNoServerWorker {
		t.Errorf("the standby's session after the promotion: %v (ID %d), want SQLSTATE %s", err, got, SQLStateNoServerWorker)
	}
}

// logBuffer is a logger that writes to a buffer, for tests that read
// what Up said.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// TestUpWarnsSharedServer: Up without a pool, on a database that shows it
// shares rows with other servers (a publication; other servers' claims in
// its worker-lease table), warns through Options.Logger that
// snowflake_id() issues on the number every such server gets, and names
// what it saw; a database that shows nothing of the kind is told nothing.
// The control, Up without the warning, says nothing in either case.
func TestUpWarnsSharedServer(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	for _, control := range []bool{false, true} {
		name, off := "defended", defences{}
		if control {
			name, off = "control: no warning", defences{noSharedWarning: true}
		}
		t.Run(name, func(t *testing.T) {
			var alone, published, claimed logBuffer
			db, _ := migrated(t, Options{})
			if err := upWithout(ctx, db, Options{Logger: alone.logger()}, off); err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, "CREATE PUBLICATION to_reports FOR ALL TABLES"); err != nil {
				t.Fatal(err)
			}
			if err := upWithout(ctx, db, Options{Logger: published.logger()}, off); err != nil {
				t.Fatal(err)
			}

			other, _ := migrated(t, Options{})
			leases, err := workerid.Postgres(other, workerid.Options{Namespace: "api", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := leases.Claim(ctx, "postgres:7000000000000000001:1/shard2/public"); err != nil {
				t.Fatal(err)
			}
			if err := upWithout(ctx, other, Options{Logger: claimed.logger()}, off); err != nil {
				t.Fatal(err)
			}

			if strings.Contains(alone.String(), "WARN") {
				t.Errorf("a database that shares nothing was warned:\n%s", alone.String())
			}
			for _, c := range []struct {
				log  *logBuffer
				want string
			}{{&published, "to_reports"}, {&claimed, "api"}} {
				warned := strings.Contains(c.log.String(), "level=WARN") && strings.Contains(c.log.String(), "worker 1023") &&
					strings.Contains(c.log.String(), c.want) && strings.Contains(c.log.String(), "Options.WorkerPool")
				if control && strings.Contains(c.log.String(), "level=WARN") {
					t.Errorf("control: warned anyway:\n%s", c.log.String())
				}
				if !control && !warned {
					t.Errorf("Up without a pool on a database that shows %q: want a warning that names it, worker 1023 "+
						"and Options.WorkerPool; the log:\n%s", c.want, c.log.String())
				}
			}
		})
	}
}

// TestCheckServers: two databases migrated without a pool, as the README
// shows, both issue on worker 1023, and they do repeat each other's IDs;
// CheckServers names them (ErrWorkerConflict). Given twice, one database
// counts once; a copy whose number was claimed for its original, which
// refuses to issue, is named (ErrNoServerWorker); once each database
// claimed its number from the fleet's pool, CheckServers finds nothing.
func TestCheckServers(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	a, aDSN := migrated(t, Options{})
	b, _ := migrated(t, Options{})
	status := func(dbs ...*sql.DB) []Server {
		t.Helper()
		var out []Server
		for _, db := range dbs {
			s, err := ServerOf(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}
	servers := status(a, b, openDB(t, aDSN))
	err := CheckServers(servers, nil)
	if !errors.Is(err, ErrWorkerConflict) || !strings.Contains(err.Error(), "worker 1023") ||
		!strings.Contains(err.Error(), servers[0].Database) || !strings.Contains(err.Error(), servers[1].Database) {
		t.Fatalf("CheckServers on two databases on worker 1023: %v; want ErrWorkerConflict naming both and the number", err)
	}
	if n := strings.Count(err.Error(), "issue on worker"); n != 1 {
		t.Errorf("CheckServers found %d conflicts, want 1 (one database given twice counts once):\n%v", n, err)
	}
	got := issue(t, ctx, []*sql.DB{a, b}, nil)
	t.Logf("two databases migrated without a pool: %d and %d IDs on workers %v and %v, %d duplicates",
		got.counts[0], got.counts[1], got.workers[0], got.workers[1], duplicates(got.all))
	if duplicates(got.all) == 0 {
		t.Error("the two databases on worker 1023 repeated no ID: the conflict CheckServers found was not shown to be one")
	}

	pool := redisFleet(t)
	for _, db := range []*sql.DB{a, b} {
		if err := Up(ctx, db, Options{WorkerPool: pool}); err != nil {
			t.Fatal(err)
		}
	}
	claims, err := Servers(ctx, pool)
	if err != nil || len(claims) != 2 {
		t.Fatalf("Servers = %+v, %v; want the two claims", claims, err)
	}
	if err := CheckServers(status(a, b), claims); err != nil {
		t.Errorf("CheckServers on two databases with numbers of their own: %v", err)
	}

	// A copy of a claimed database refuses until it claims its own.
	copyDSN := templateCopy(t, ctx, aDSN)
	err = CheckServers(status(b, openDB(t, copyDSN)), claims)
	if !errors.Is(err, ErrNoServerWorker) {
		t.Errorf("CheckServers with a copy that refuses: %v, want ErrNoServerWorker", err)
	}
}

// templateCopy copies the database of dsn with CREATE DATABASE ...
// TEMPLATE, which needs the template alone: its sessions are ended first,
// and the copy is tried again while one is still going (SQLSTATE 55006).
func templateCopy(t *testing.T, ctx context.Context, dsn string) string {
	t.Helper()
	u := mustParse(t, dsn)
	name := strings.TrimPrefix(u.Path, "/")
	copyName := randomName("copy_")
	u.Path = "/postgres"
	admin := openDB(t, u.String())
	for {
		if _, err := admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = $1 AND pid <> pg_backend_pid()`, name); err != nil {
			t.Fatal(err)
		}
		_, err := admin.ExecContext(ctx, "CREATE DATABASE "+copyName+" TEMPLATE "+name)
		if err == nil {
			break
		}
		if sqlState(err) != "55006" || ctx.Err() != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP DATABASE "+copyName+" WITH (FORCE)") })
	u.Path = "/" + copyName
	return u.String()
}

package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/workerid"
)

// onServer returns dsn with the address of srv: the same database on
// another server, a standby or a copy of the one dsn names.
func onServer(t testing.TB, dsn string, srv *private.PostgresServer) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = srv.Addr()
	return u.String()
}

// sqlState is the SQLSTATE of err, "" when it is no PostgreSQL error.
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// worker returns the number snowflake_id() issues on in db, from an ID.
func issuedWorker(t testing.TB, ctx context.Context, db *sql.DB) int64 {
	t.Helper()
	var id idtype.ID
	if err := db.QueryRowContext(ctx, "SELECT snowflake_id()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return idtype.DefaultLayout.Decode(id).Worker
}

// fleetLease returns a generator on a lease of pool, the app fleet's.
func fleetLease(t testing.TB, ctx context.Context, pool *workerid.Pool) *idtype.Generator {
	t.Helper()
	l, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.WithoutCancel(ctx)) })
	g, err := l.NewGenerator()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestServerCopyPromoted: a copy of a server made with pg_basebackup and
// promoted (a shard split by cloning, a staging copy) while the original
// runs: before Up its snowflake_id() refuses (SQLStateNoServerWorker) and
// Up without the pool says why (ErrNoServerWorker); Up with the pool gives
// it a number of its own, and the original, the copy and a lease of the
// app fleet issue together without a duplicate. The control names and
// checks the claim without the timeline, as before: the copy keeps the
// original's number, and the two issue the same IDs.
func TestServerCopyPromoted(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 4*time.Minute)
	orig := private.StartPostgres(t)
	pool := redisFleet(t)
	defended, control := createDB(t, ctx, orig.URL()), createDB(t, ctx, orig.URL())
	if err := Up(ctx, openDB(t, defended), Options{WorkerPool: pool}); err != nil {
		t.Fatal(err)
	}
	if err := upWithout(ctx, openDB(t, control), Options{WorkerPool: pool}, defences{noTimeline: true}); err != nil {
		t.Fatal(err)
	}
	cp := private.StartPostgresStandby(t, orig.Addr(), private.PostgresOptions{})
	cp.Promote()

	run := func(t *testing.T, dsn string, off defences, log *logBuffer) issued {
		o, c := openDB(t, dsn), openDB(t, onServer(t, dsn, cp))
		if err := upWithout(ctx, c, Options{WorkerPool: pool, Logger: log.logger()}, off); err != nil {
			t.Fatalf("Up with the pool on the copy: %v", err)
		}
		got := issue(t, ctx, []*sql.DB{o, c}, []*idtype.Generator{fleetLease(t, ctx, pool)})
		t.Logf("original on workers %v: %d IDs; copy on workers %v: %d IDs; a lease on %v: %d IDs; "+
			"%d milliseconds or more shared by every two; %d duplicates",
			got.workers[0], got.counts[0], got.workers[1], got.counts[1], got.workers[2], got.counts[2],
			got.shared, duplicates(got.all))
		return got
	}

	t.Run("defended", func(t *testing.T) {
		c := openDB(t, onServer(t, defended, cp))
		if _, err := c.ExecContext(ctx, "SELECT snowflake_id()"); sqlState(err) != SQLStateNoServerWorker {
			t.Fatalf("snowflake_id() on the promoted copy before Up: %v, want SQLSTATE %s", err, SQLStateNoServerWorker)
		}
		err := Up(ctx, c, Options{})
		if !errors.Is(err, ErrNoServerWorker) || !strings.Contains(err.Error(), "timeline 2") {
			t.Fatalf("Up without the pool on the promoted copy: %v, want ErrNoServerWorker naming timeline 2", err)
		}
		var log logBuffer
		got := run(t, defended, defences{}, &log)
		if w0, w1 := got.workers[0], got.workers[1]; len(w0) != 1 || len(w1) != 1 || w0[0] == w1[0] {
			t.Errorf("the original issued on %v and the copy on %v, want one number each, not the same", w0, w1)
		} else if !strings.Contains(log.String(), fmt.Sprintf("previous_worker=%d", w0[0])) {
			t.Errorf("Up on the copy did not log that the original's number %d stays claimed:\n%s", w0[0], log.String())
		}
		if dups := duplicates(got.all); dups != 0 {
			t.Errorf("%d duplicate IDs", dups)
		}
		// The original's claim stays, for the server it was made for,
		// and the namespace now holds both.
		servers, err := Servers(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		superseded := Superseded(servers)
		var mine []ServerClaim
		for _, s := range servers {
			if s.Database == strings.TrimPrefix(mustParse(t, defended).Path, "/") {
				mine = append(mine, s)
			}
		}
		if len(mine) != 2 || mine[0].Timeline+mine[1].Timeline != 3 {
			t.Fatalf("the namespace holds %+v for the database, want a claim on timeline 1 and one on 2", mine)
		}
		for _, s := range mine {
			if next, ok := superseded[s.Claimant]; ok != (s.Timeline == 1) || ok && next.Timeline != 2 {
				t.Errorf("claim %s: superseded by %+v (%v); want the timeline-1 claim superseded by timeline 2", s.Claimant, next, ok)
			}
		}
	})

	t.Run("control: no timeline", func(t *testing.T) {
		got := run(t, control, defences{noTimeline: true}, new(logBuffer))
		if w0, w1 := got.workers[0], got.workers[1]; len(w0) != 1 || len(w1) != 1 || w0[0] != w1[0] {
			t.Fatalf("control: the original issued on %v and the copy on %v, not on one number", w0, w1)
		}
		if duplicates(got.all) == 0 {
			t.Error("control: the original and its copy on one number issued no duplicate: the test does not reach the fault")
		}
	})
}

// TestServerCopySameTimeline: a base backup started as a server of its
// own, without recovery or promotion, runs on its original's timeline,
// which PostgreSQL does not tell apart from the original restarted, and
// both issue on one number: the duplicates are counted. CheckServers, given
// both, finds them from their start times (its control, which compares
// servers without their start, does not), and Fork gives the copy a number
// of its own, after which the two issue without a duplicate.
func TestServerCopySameTimeline(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 4*time.Minute)
	orig := private.StartPostgres(t)
	pool := redisFleet(t)
	dsn := createDB(t, ctx, orig.URL())
	o := openDB(t, dsn)
	if err := Up(ctx, o, Options{WorkerPool: pool}); err != nil {
		t.Fatal(err)
	}
	cp := private.StartPostgresCopy(t, orig.Addr(), private.PostgresOptions{})
	c := openDB(t, onServer(t, dsn, cp))
	// Every app start runs Up: it finds the claim its bytes carry.
	if err := Up(ctx, c, Options{WorkerPool: pool}); err != nil {
		t.Fatal(err)
	}

	before := issue(t, ctx, []*sql.DB{o, c}, nil)
	t.Logf("before Fork: original on workers %v: %d IDs; copy on workers %v: %d IDs; %d shared milliseconds; %d duplicates",
		before.workers[0], before.counts[0], before.workers[1], before.counts[1], before.shared, duplicates(before.all))
	if duplicates(before.all) == 0 {
		t.Fatal("a copy on its original's timeline and number issued no duplicate: the test does not reach the fault")
	}

	var servers []Server
	for _, db := range []*sql.DB{o, c} {
		s, err := ServerOf(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s)
	}
	if a, b := servers[0], servers[1]; a.SystemIdentifier != b.SystemIdentifier || a.Timeline != b.Timeline ||
		a.Worker != b.Worker || !a.Issues || !b.Issues || a.Started.Equal(b.Started) {
		t.Fatalf("ServerOf: %+v and %+v; want one system identifier, timeline and number, both issuing, two start times", a, b)
	}
	claims, err := Servers(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	err = CheckServers(servers, claims)
	if !errors.Is(err, ErrWorkerConflict) || !strings.Contains(err.Error(), "Fork") {
		t.Errorf("CheckServers: %v, want ErrWorkerConflict that says to Fork the copy", err)
	}
	if err := checkServersWithout(servers, claims, defences{noCopyCheck: true}); err != nil {
		t.Errorf("control: CheckServers without the start times found %v: the test would not see the copy go unnoticed", err)
	}

	if err := Fork(ctx, c, Options{WorkerPool: pool}); err != nil {
		t.Fatal(err)
	}
	// The copy keeps its own number at every later Up.
	if err := Up(ctx, c, Options{WorkerPool: pool}); err != nil {
		t.Fatal(err)
	}
	after := issue(t, ctx, []*sql.DB{o, c}, nil)
	t.Logf("after Fork: original on workers %v: %d IDs; copy on workers %v: %d IDs; %d shared milliseconds; %d duplicates",
		after.workers[0], after.counts[0], after.workers[1], after.counts[1], after.shared, duplicates(after.all))
	if w0, w1 := after.workers[0], after.workers[1]; len(w0) != 1 || len(w1) != 1 || w0[0] == w1[0] {
		t.Errorf("after Fork the original issued on %v and the copy on %v, want one number each, not the same", w0, w1)
	}
	if dups := duplicates(after.all); dups != 0 {
		t.Errorf("after Fork: %d duplicate IDs", dups)
	}
	if err := Fork(ctx, c, Options{}); !errors.Is(err, idtype.ErrInvalidOptions) {
		t.Errorf("Fork without a pool: %v, want ErrInvalidOptions", err)
	}
}

// waitReplayed waits until standby has replayed all that primary has
// written so far.
func waitReplayed(t testing.TB, ctx context.Context, primary, standby *sql.DB) {
	t.Helper()
	var lsn string
	if err := primary.QueryRowContext(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	for {
		var done bool
		if err := standby.QueryRowContext(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", lsn).Scan(&done); err != nil {
			t.Fatal(err)
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the standby did not replay up to %s: %v", lsn, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// cutReplication stops standby from receiving WAL, as a network cut or a
// standby that falls behind does, and returns once its WAL receiver is
// gone.
func cutReplication(t testing.TB, ctx context.Context, standby *sql.DB) {
	t.Helper()
	if _, err := standby.ExecContext(ctx, "ALTER SYSTEM SET primary_conninfo = ''"); err != nil {
		t.Fatal(err)
	}
	if _, err := standby.ExecContext(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
	for {
		var n int
		if err := standby.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_wal_receiver").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the standby's WAL receiver still runs: %v", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// steppingClock makes snowflake_id() in db read, instead of its server's
// clock, one that starts in the middle of Unix millisecond from and moves
// on by a millisecond at every reading: a clock behind by exactly as much
// as takes it back to from, which steps through the milliseconds after it
// however slowly the machine runs. It rewrites the two functions in db
// alone, for the test, as a clock set back would act on them, keeping
// what else they declare.
func steppingClock(t testing.TB, ctx context.Context, db *sql.DB, from int64) {
	t.Helper()
	if _, err := db.ExecContext(ctx, "CREATE SEQUENCE IF NOT EXISTS snowkey_test_clock MINVALUE 0 START 0"); err != nil {
		t.Fatal(err)
	}
	clock := fmt.Sprintf("to_timestamp((%d + nextval('public.snowkey_test_clock') + 0.5) / 1000)", from)
	for _, name := range []string{"snowflake_id", "snowflake_id_slow"} {
		var def string
		if err := db.QueryRowContext(ctx, "SELECT pg_get_functiondef($1::regprocedure)", "public."+name+"()").Scan(&def); err != nil {
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

// idSpan issues IDs in db for at least span, one at a time in a loop that
// runs in the server, so that every millisecond of the span the server ran
// in holds IDs, from sequence 0 on, and returns them: a span of 0 issues
// one.
func idSpan(t testing.TB, ctx context.Context, db *sql.DB, span time.Duration) []idtype.ID {
	t.Helper()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		"CREATE TEMP TABLE span_ids (id bigint NOT NULL)",
		fmt.Sprintf(`DO $span$
DECLARE
    t0 timestamptz := clock_timestamp();
BEGIN
    LOOP
        INSERT INTO span_ids VALUES (snowflake_id());
        EXIT WHEN clock_timestamp() >= t0 + interval '%d milliseconds';
    END LOOP;
END
$span$`, span.Milliseconds()),
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := conn.QueryContext(ctx, "SELECT id FROM span_ids ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []idtype.ID
	for rows.Next() {
		var id idtype.ID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestServerFailoverClockBehind: a failover to an asynchronous standby
// that lagged, whose clock is behind, while the old primary still takes
// writes. The standby's replication is cut; the primary issues IDs in
// every millisecond of 400 ms; the standby is promoted with a clock that
// reads those milliseconds again. Its snowflake_id() refuses until Up with
// the pool (Redis, or a PostgreSQL pool on a server of its own) claims it
// a number of its own, and then repeats none of the IDs the old primary
// returned, before the failover or after. The control names and checks
// the claim without the timeline, as before: the promoted standby keeps
// the primary's number and repeats its IDs.
func TestServerFailoverClockBehind(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 4*time.Minute)
	primary := private.StartPostgres(t)
	redisPool := redisFleet(t)
	storeDB := openDB(t, testenv.Postgres(t))
	if err := Up(ctx, storeDB, Options{}); err != nil {
		t.Fatal(err)
	}
	pgPool := postgresFleet(t, storeDB)

	type side struct {
		name    string
		dsn     string
		pool    *workerid.Pool
		off     defences // zero but in the control
		control bool
		old     []idtype.ID // what the old primary returned
		lagged  time.Time   // its first ID's time after the cut: the standby never saw it
	}
	sides := []*side{
		{name: "defended, Redis", pool: redisPool},
		{name: "defended, PostgreSQL pool", pool: pgPool},
		{name: "control: no timeline", pool: redisPool, off: defences{noTimeline: true}, control: true},
	}
	for _, s := range sides {
		s.dsn = createDB(t, ctx, primary.URL())
		db := openDB(t, s.dsn)
		if err := upWithout(ctx, db, Options{WorkerPool: s.pool}, s.off); err != nil {
			t.Fatal(err)
		}
		s.old = idSpan(t, ctx, db, 0) // the state the standby will have
	}
	standby := private.StartPostgresStandby(t, primary.Addr(), private.PostgresOptions{})
	sb := openDB(t, standby.URL())
	waitReplayed(t, ctx, openDB(t, primary.URL()), sb)
	cutReplication(t, ctx, sb)
	for _, s := range sides {
		window := idSpan(t, ctx, openDB(t, s.dsn), 400*time.Millisecond)
		s.lagged = idtype.DefaultLayout.Decode(window[0]).Time
		s.old = append(s.old, window...)
	}
	standby.Promote()

	for _, s := range sides {
		t.Run(s.name, func(t *testing.T) {
			old, promoted := openDB(t, s.dsn), openDB(t, onServer(t, s.dsn, standby))
			steppingClock(t, ctx, promoted, s.lagged.UnixMilli())
			if !s.control {
				if _, err := promoted.ExecContext(ctx, "SELECT snowflake_id()"); sqlState(err) != SQLStateNoServerWorker {
					t.Fatalf("snowflake_id() on the promoted standby before Up: %v, want SQLSTATE %s",
						err, SQLStateNoServerWorker)
				}
			}
			if err := upWithout(ctx, promoted, Options{WorkerPool: s.pool}, s.off); err != nil {
				t.Fatalf("Up with the pool on the promoted standby: %v", err)
			}
			// The old primary takes writes still, while the promoted
			// standby issues 100 IDs on its stepping clock.
			conn, err := promoted.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			newIDs, err := ids(ctx, conn, 100)
			if err != nil {
				t.Fatal(err)
			}
			s.old = append(s.old, idSpan(t, ctx, old, 0)...)

			returned := make(map[idtype.ID]bool, len(s.old))
			for _, id := range s.old {
				returned[id] = true
			}
			repeats := 0
			for _, id := range newIDs {
				if returned[id] {
					repeats++
				}
			}
			oldWorker := idtype.DefaultLayout.Decode(s.old[0]).Worker
			newWorker := idtype.DefaultLayout.Decode(newIDs[0]).Worker
			t.Logf("%s: the old primary returned %d IDs on worker %d; the promoted standby, its clock back at %v, "+
				"issued %d on worker %d, from %v to %v: %d repeated", s.name, len(s.old), oldWorker,
				s.lagged.Format(time.RFC3339Nano), len(newIDs), newWorker,
				idtype.DefaultLayout.Decode(newIDs[0]).Time.Format(time.RFC3339Nano),
				idtype.DefaultLayout.Decode(newIDs[len(newIDs)-1]).Time.Format(time.RFC3339Nano), repeats)
			if s.control {
				if repeats == 0 {
					t.Error("control: the promoted standby repeated none of the old primary's IDs: the test does not reach the fault")
				}
				return
			}
			if repeats != 0 || newWorker == oldWorker {
				t.Errorf("the promoted standby issued on worker %d (the old primary's: %d) and repeated %d IDs",
					newWorker, oldWorker, repeats)
			}
		})
	}
}

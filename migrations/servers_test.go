package migrations

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/workerid"
)

// fleetOptions are the worker-pool options of the tests' app fleets:
// short leases, so that a fresh Redis namespace waits 1 s, not 10.
func fleetOptions(t testing.TB, ns string) workerid.Options {
	return workerid.Options{
		Namespace: ns, TTL: time.Second, Margin: 200 * time.Millisecond, RenewEvery: 250 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Holder: t.Name(),
	}
}

// redisFleet returns a pool on the shared Redis, in a namespace of t's.
func redisFleet(t testing.TB) *workerid.Pool {
	t.Helper()
	rdb := testenv.RedisClient(t)
	o := fleetOptions(t, "fleet")
	o.KeyPrefix = testenv.KeyPrefix(t)
	p, err := workerid.Redis(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// postgresFleet returns a pool whose leases live in db, migrated.
func postgresFleet(t testing.TB, db *sql.DB) *workerid.Pool {
	t.Helper()
	p, err := workerid.Postgres(db, fleetOptions(t, "fleet"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// createDB makes a database on the server at url and returns its URL.
func createDB(t testing.TB, ctx context.Context, base string) string {
	t.Helper()
	name := randomName("srv_")
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// startServers starts n private PostgreSQL servers.
func startServers(t *testing.T, n int) []*private.PostgresServer {
	t.Helper()
	servers := make([]*private.PostgresServer, n)
	for i := range servers {
		servers[i] = private.StartPostgres(t)
	}
	return servers
}

// issued is what issue saw: every ID, and per source (the databases,
// then the generators) the workers seen and the IDs issued; shared is the
// fewest milliseconds that two sources both issued in.
type issued struct {
	all     []idtype.ID
	workers [][]int64
	counts  []int
	shared  int
}

// issue has each database (and the leases' generators) issue IDs at once,
// batch after batch, until every two of them have issued IDs in at least
// minShared common milliseconds, however the machine schedules them.
func issue(t *testing.T, ctx context.Context, dbs []*sql.DB, gens []*idtype.Generator) issued {
	t.Helper()
	const (
		batch     = 500
		minShared = 5
	)
	n := len(dbs) + len(gens)
	var (
		mu      sync.Mutex
		all     []idtype.ID
		workers = make([][]int64, n)
		counts  = make([]int, n)
		sources = map[int64]uint64{} // millisecond -> the sources that issued in it
		pairs   = make([]int, n*n)   // [i*n+j], i < j: milliseconds both issued in
		done    atomic.Bool          // every pair has minShared
		stop    atomic.Bool
		wg      sync.WaitGroup
		errs    = make([]error, n)
	)
	fewest := func() int {
		least := -1
		for i := range n {
			for j := i + 1; j < n; j++ {
				if least < 0 || pairs[i*n+j] < least {
					least = pairs[i*n+j]
				}
			}
		}
		return least
	}
	run := func(i int, next func() ([]idtype.ID, error)) {
		defer wg.Done()
		for !stop.Load() && !done.Load() {
			got, err := next()
			if err == nil {
				err = ctx.Err()
			}
			if err != nil {
				errs[i] = err
				stop.Store(true)
				return
			}
			mu.Lock()
			all = append(all, got...)
			counts[i] += len(got)
			for _, id := range got {
				p := idtype.DefaultLayout.Decode(id)
				if !slices.Contains(workers[i], p.Worker) {
					workers[i] = append(workers[i], p.Worker)
				}
				ms := p.Time.UnixMilli()
				if had := sources[ms]; had&(1<<i) == 0 {
					sources[ms] = had | 1<<i
					for j := range n {
						if had&(1<<j) != 0 {
							pairs[min(i, j)*n+max(i, j)]++
						}
					}
				}
			}
			if fewest() >= minShared {
				done.Store(true)
			}
			mu.Unlock()
		}
	}
	for i, db := range dbs {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		wg.Add(1)
		go run(i, func() ([]idtype.ID, error) { return ids(ctx, conn, batch) })
	}
	for j, g := range gens {
		wg.Add(1)
		go run(len(dbs)+j, func() ([]idtype.ID, error) {
			out := make([]idtype.ID, 0, batch)
			for len(out) < batch {
				id, err := g.Next()
				if errors.Is(err, idtype.ErrLeaseExpired) {
					// A renewal late on a loaded machine: the lease goes
					// on once the next one is confirmed.
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if err != nil {
					return nil, err
				}
				out = append(out, id)
			}
			return out, nil
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("source %d: %v", i, err)
		}
	}
	return issued{all: all, workers: workers, counts: counts, shared: fewest()}
}

// duplicates counts the IDs that occur more than once.
func duplicates(ids []idtype.ID) int {
	seen := make(map[idtype.ID]struct{}, len(ids))
	n := 0
	for _, id := range ids {
		if _, ok := seen[id]; ok {
			n++
		}
		seen[id] = struct{}{}
	}
	return n
}

// TestServerWorkers: three database servers, each migrated with the app
// fleet's worker pool, and the fleet's leases issue IDs together: every
// server has a number of its own, no lease has any of them, and no ID
// repeats; the lease store is Redis, or PostgreSQL in the first server's
// own database. The control: two servers that each run Up alone, both on
// worker 1023, issue the same IDs.
func TestServerWorkers(t *testing.T) {
	ctx := testenv.Deadline(t, 4*time.Minute)
	servers := startServers(t, 3)
	for _, store := range []string{"redis", "postgres"} {
		t.Run(store, func(t *testing.T) {
			dbs := make([]*sql.DB, len(servers))
			for i, s := range servers {
				dbs[i] = openDB(t, createDB(t, ctx, s.URL()))
			}
			var pool *workerid.Pool
			if store == "redis" {
				pool = redisFleet(t)
			} else {
				// The fleet's leases live in the first server's database,
				// which must hold the lease table before it can claim.
				if err := Up(ctx, dbs[0], Options{}); err != nil {
					t.Fatal(err)
				}
				pool = postgresFleet(t, dbs[0])
			}
			var claimed []int64
			for i, db := range dbs {
				if err := Up(ctx, db, Options{WorkerPool: pool}); err != nil {
					t.Fatalf("server %d: Up: %v", i, err)
				}
				w, err := ReservedWorkerOf(ctx, db)
				if err != nil {
					t.Fatal(err)
				}
				claimed = append(claimed, w)
			}
			var gens []*idtype.Generator
			var leased []int64
			for range 4 {
				l, err := pool.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.Close(context.WithoutCancel(ctx)) })
				g, err := l.NewGenerator()
				if err != nil {
					t.Fatal(err)
				}
				gens = append(gens, g)
				leased = append(leased, l.Worker())
			}
			all := append(slices.Clone(claimed), leased...)
			slices.Sort(all)
			if len(slices.Compact(all)) != len(claimed)+len(leased) {
				t.Fatalf("servers claimed %v and leases got %v: a number is shared", claimed, leased)
			}
			got := issue(t, ctx, dbs, gens)
			ids, workers, shared := got.all, got.workers, got.shared
			for i, w := range workers[:len(dbs)] {
				if len(w) != 1 || w[0] != claimed[i] {
					t.Errorf("server %d issued IDs of workers %v, want only %d", i, w, claimed[i])
				}
			}
			dups := duplicates(ids)
			t.Logf("%s: servers on workers %v, leases on %v: %d IDs, every two sources issued in %d or more common milliseconds, %d duplicates",
				store, claimed, leased, len(ids), shared, dups)
			if dups > 0 {
				t.Errorf("%d duplicate IDs", dups)
			}
		})
	}

	t.Run("control", func(t *testing.T) {
		// Two servers migrated without a pool: each snowflake_id() has
		// worker 1023.
		var dbs []*sql.DB
		for _, s := range servers[:2] {
			db := openDB(t, createDB(t, ctx, s.URL()))
			if err := Up(ctx, db, Options{}); err != nil {
				t.Fatal(err)
			}
			dbs = append(dbs, db)
		}
		got := issue(t, ctx, dbs, nil)
		ids, workers, shared := got.all, got.workers, got.shared
		dups := duplicates(ids)
		t.Logf("control: two servers on workers %v and %v: %d IDs, %d milliseconds in which both issued, %d duplicates",
			workers[0], workers[1], len(ids), shared, dups)
		if !slices.Equal(workers[0], workers[1]) {
			t.Fatalf("control: the servers issued on workers %v and %v, not on one number", workers[0], workers[1])
		}
		if dups == 0 {
			t.Error("control: two servers on one number issued no duplicate: the test does not reach the fault")
		}
	})
}

// TestServerWorkerAgain: Up with the pool again, as every app start does,
// keeps the number; a second schema of the database claims one of its own.
func TestServerWorkerAgain(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	pool := redisFleet(t)
	db, _ := migrated(t, Options{WorkerPool: pool})
	first, err := ReservedWorkerOf(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if first == workerid.SQLWorker {
		t.Fatalf("snowflake_id() kept worker %d", first)
	}
	for range 2 {
		if err := Up(ctx, db, Options{WorkerPool: pool}); err != nil {
			t.Fatal(err)
		}
		if w, err := ReservedWorkerOf(ctx, db); err != nil || w != first {
			t.Fatalf("Up again: worker %d, %v; want %d", w, err, first)
		}
	}
	// Up without the pool leaves the number.
	if err := Up(ctx, db, Options{}); err != nil {
		t.Fatal(err)
	}
	if w, err := ReservedWorkerOf(ctx, db); err != nil || w != first {
		t.Fatalf("Up without the pool: worker %d, %v; want %d", w, err, first)
	}
	var id idtype.ID
	if err := db.QueryRowContext(ctx, "SELECT snowflake_id()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if w := idtype.DefaultLayout.Decode(id).Worker; w != first {
		t.Errorf("snowflake_id() issued on worker %d, want %d", w, first)
	}
}

// TestServerWorkerCopy: a copy of a database whose number was claimed
// refuses to issue on it (SQLStateNoServerWorker), Up without the pool
// says why (ErrNoServerWorker), and Up with the pool claims a number for
// the copy.
func TestServerWorkerCopy(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	pool := redisFleet(t)
	db, dsn := migrated(t, Options{WorkerPool: pool})
	orig, err := ReservedWorkerOf(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close() // CREATE DATABASE ... TEMPLATE needs the template alone

	u, _ := url.Parse(dsn)
	copyName := randomName("copy_")
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+copyName+" TEMPLATE "+pgx.Identifier{u.Path[1:]}.Sanitize())
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE "+copyName+" WITH (FORCE)")
			c.Close(context.Background())
		}
	})
	u.Path = "/" + copyName
	cp := openDB(t, u.String())

	var pgErr *pgconn.PgError
	if err := cp.QueryRowContext(ctx, "SELECT snowflake_id()").Scan(new(int64)); !errors.As(err, &pgErr) ||
		pgErr.Code != SQLStateNoServerWorker {
		t.Fatalf("snowflake_id() in the copy: %v, want SQLSTATE %s", err, SQLStateNoServerWorker)
	}
	if err := Up(ctx, cp, Options{}); !errors.Is(err, ErrNoServerWorker) {
		t.Fatalf("Up without the pool in the copy: %v, want ErrNoServerWorker", err)
	}
	if err := Up(ctx, cp, Options{WorkerPool: pool}); err != nil {
		t.Fatal(err)
	}
	var id idtype.ID
	if err := cp.QueryRowContext(ctx, "SELECT snowflake_id()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	if w := idtype.DefaultLayout.Decode(id).Worker; w == orig || w == workerid.SQLWorker {
		t.Errorf("the copy issues on worker %d; the original has %d", w, orig)
	}
}

// TestServerWorkerAfterMark: a server that claims a number its store may
// have lost the record of (a new namespace on a Redis that ran FLUSHALL,
// which may have dropped the leases of a fleet) waits, as a lease would,
// until any owner the store may have forgotten has stopped: its first ID
// is at least one TTL after the claim. (A Redis that shows no sign of lost
// data opens no such wait: see workerid's TestRedisLossSigns.)
func TestServerWorkerAfterMark(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	srv := private.StartRedis(t)
	if err := srv.Client().FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	pool, err := workerid.Redis(srv.Client(), fleetOptions(t, "fleet"))
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, testenv.Postgres(t))
	before := time.Now()
	if err := Up(ctx, db, Options{WorkerPool: pool}); err != nil {
		t.Fatal(err)
	}
	var id idtype.ID
	if err := db.QueryRowContext(ctx, "SELECT snowflake_id()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	// The pool's TTL is 1 s (fleetOptions).
	if at, want := idtype.DefaultLayout.Decode(id).Time, before.Add(time.Second); at.Before(want) {
		t.Errorf("first ID at %v, before %v, one TTL after the claim", at, want)
	}
}

// TestServerWorkerOptions: a pool is the only source of the number, and
// it must lease numbers of snowflake_id()'s layout.
func TestServerWorkerOptions(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	db := openDB(t, testenv.Postgres(t))
	pool := redisFleet(t)
	if err := Up(ctx, db, Options{WorkerPool: pool, ReservedWorker: 5}); !errors.Is(err, idtype.ErrInvalidOptions) {
		t.Errorf("WorkerPool with ReservedWorker: %v, want ErrInvalidOptions", err)
	}
	o := fleetOptions(t, "fleet")
	o.Layout = idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 13, SequenceBits: 9}
	wide, err := workerid.Redis(testenv.RedisClient(t), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := Up(ctx, db, Options{WorkerPool: wide}); !errors.Is(err, idtype.ErrInvalidOptions) {
		t.Errorf("a pool of 13 worker bits: %v, want ErrInvalidOptions", err)
	}
	if v, err := Version(ctx, db); err != nil || v != 0 {
		t.Errorf("after refused options the database has version %d (%v), want 0", v, err)
	}
}

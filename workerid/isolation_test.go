package workerid

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestPostgresIsolation: on a database whose default_transaction_isolation
// is REPEATABLE READ or SERIALIZABLE, a lease statement that overlaps
// another transaction's write of its row fails with a serialization
// failure, which the pool retries. The test makes the overlap itself
// (overlap): a transaction of its own updates the lease's row and commits
// only once a renewal, and then a Close, waits for that row, so that the
// statement's snapshot is older than the commit and PostgreSQL fails it,
// however fast or slow the machine. The pool must confirm the renewal and
// free the number with no failure; the control run, which does not retry,
// must get the serialization failure from both. The defended run then
// runs 3 rounds of 64 concurrent Acquires, renewals and Closes: every
// number taken, by one lease each, and no serialization failure or
// deadlock reaching the caller or a renewal.
func TestPostgresIsolation(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"repeatable read", "serializable"} {
		for _, defended := range []bool{true, false} {
			name := level + map[bool]string{true: "", false: "/control: no retry"}[defended]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				dsn := testenv.Postgres(t)
				migrate(t, dsn)
				u, _ := url.Parse(dsn)
				db := openDB(t, dsn)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				if _, err := db.ExecContext(ctx, "ALTER DATABASE "+pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()+
					" SET default_transaction_isolation = '"+level+"'"); err != nil {
					t.Fatal(err)
				}
				_ = db.Close()

				overlap(t, ctx, dsn, level, defended)
				if !defended {
					return
				}

				logs := &logRecorder{}
				// Longer timings than the other tests': 64 leases renew at once
				// on a loaded machine, and a renewal must not time out.
				p := postgresPool(t, dsn, Options{Layout: sixBits, Logger: slog.New(logs), MaxConns: 64,
					TTL: 5 * time.Second, Margin: time.Second, RenewEvery: time.Second})
				var failures []error
				for round := range 3 {
					leases, errs := acquireAll(ctx, p, 64)
					failures = append(failures, errs...)
					// No two live leases share a number.
					var workers []int64
					for _, l := range leases {
						if l.Status().State != Lost {
							workers = append(workers, l.Worker())
						}
					}
					slices.Sort(workers)
					if n := len(slices.Compact(slices.Clone(workers))); n != len(workers) {
						t.Fatalf("round %d: %d live leases hold %d distinct numbers: %v", round, len(workers), n, workers)
					}
					if len(leases) != 64 {
						t.Fatalf("round %d: %d of 64 numbers taken; errors: %v", round, len(leases), errs)
					}
					// Let every lease renew twice, then close them all at once. A
					// lease whose renewals a busy machine timed out until it
					// expired has had its renewals too (the timeouts are only
					// logged, below). A starved CPU may hold a renewal well past
					// RenewEvery, so the wait is 30 s.
					waitFor(t, 30*time.Second, "every lease to renew twice or expire", func() bool {
						for _, l := range leases {
							if s := l.Status(); s.State == Held && s.Renewals < 2 {
								return false
							}
						}
						return true
					})
					var wg sync.WaitGroup
					var mu sync.Mutex
					for _, l := range leases {
						wg.Go(func() {
							if err := l.Close(ctx); err != nil {
								mu.Lock()
								failures = append(failures, err)
								mu.Unlock()
							}
						})
					}
					wg.Wait()
				}
				// What the defence is for: serialization failures and
				// deadlocks. (A renewal that timed out on a busy machine is
				// another matter, and is only logged.)
				var serial []error
				for _, err := range failures {
					if serialFailure(err) {
						serial = append(serial, err)
					} else {
						t.Logf("failure of another kind: %v", err)
					}
				}
				// A renewal whose time ran out while it waited to retry
				// failed of the time, which the machine's load decides.
				if ms := logs.matching(func(m string) bool {
					return (strings.Contains(m, "SQLSTATE 40001") || strings.Contains(m, "SQLSTATE 40P01")) &&
						!strings.Contains(m, "while waiting to retry after a serialization failure")
				}); len(ms) > 0 {
					serial = append(serial, fmt.Errorf("%d renewals failed with a serialization failure; first: %s", len(ms), ms[0]))
				}
				t.Logf("%s: %d serialization failures in 3 rounds of 64 concurrent Acquires, renewals and Closes",
					level, len(serial))
				if len(serial) > 0 {
					t.Fatalf("%d serialization failures; first: %v", len(serial), serial[0])
				}
			})
		}
	}
}

// overlap makes a renewal and a Close of a lease overlap, one after the
// other, a transaction of the test's own that updates the lease's row and
// commits once the pool's statement waits for the row's lock: the
// statement's snapshot is then older than the commit, which PostgreSQL
// fails at level with a serialization failure (40001), whatever the
// machine's speed. The defended pool retries: the renewal is confirmed,
// with no failure logged, and the Close frees the number. The control
// (defended false) must get the serialization failure from both.
//
// Its leases last 2 minutes, so that a renewal that waits for the row is
// not given up before the test commits.
func overlap(t *testing.T, ctx context.Context, dsn, level string, defended bool) {
	t.Helper()
	logs := &logRecorder{}
	p := postgresPoolWithout(t, dsn, Options{Layout: sixBits, Logger: slog.New(logs),
		TTL: 2 * time.Minute, Margin: time.Second, RenewEvery: time.Second}, defences{noSerialRetry: !defended})
	db := openDB(t, dsn)
	l, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ns := p.store.(*pgStore).ns

	// hold updates the lease's row, changing nothing, in a transaction it
	// returns with the transaction's backend pid. The transaction is the
	// test's tool, not its subject: read committed, so that a renewal
	// committed since its first statement makes its UPDATE wait, never
	// fail, at the database's default level.
	hold := func() (*sql.Tx, int) {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		if err := tx.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE snowkey_worker_leases SET renewed_at = renewed_at WHERE namespace = $1 AND worker = $2",
			ns, l.Worker()); err != nil {
			t.Fatal(err)
		}
		return tx, pid
	}
	// waitBlocked waits until a statement that contains what waits for
	// the lock of the transaction of pid.
	waitBlocked := func(pid int, what string) {
		for {
			var n int
			err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE $1::int = ANY (pg_blocking_pids(pid)) AND strpos(query, $2) > 0`, pid, what).Scan(&n)
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("no statement containing %q waited for the test's transaction: %v", what, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}

	// A renewal. While it waits for the row no other renewal of the
	// lease runs, so the count read then is the one before it.
	tx, pid := hold()
	waitBlocked(pid, "high_water = GREATEST(high_water, $5::bigint), renewed_at")
	before := l.Status().Renewals
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	failedRenewal := func() []string {
		return logs.matching(func(m string) bool { return strings.Contains(m, "lease renewal failed") })
	}
	for {
		if defended && l.Status().Renewals > before || !defended && len(failedRenewal()) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the renewal that overlapped the test's transaction neither was confirmed nor failed: %v; logs: %v", ctx.Err(), logs.all())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if failed := failedRenewal(); defended && len(failed) > 0 {
		t.Errorf("%s: the renewal that overlapped the test's transaction failed: %v", level, failed)
	} else if !defended {
		if !strings.Contains(failed[0], "SQLSTATE 40001") {
			t.Errorf("control: the overlapping renewal failed with %s; want a serialization failure (40001)", failed[0])
		} else {
			t.Logf("control: %s", failed[0])
		}
	}

	// A Close: its release waits for the row, and fails when the test
	// commits.
	tx, pid = hold()
	closed := make(chan error, 1)
	go func() { closed <- l.Close(ctx) }()
	waitBlocked(pid, "owner = NULL, holder = NULL")
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	err = <-closed
	if !defended {
		if !serialFailure(err) {
			t.Fatalf("control: the Close that overlapped the test's transaction: %v; want a serialization failure: "+
				"the test does not reach its fault", err)
		}
		t.Logf("control: %v", err)
		return
	}
	if err != nil {
		t.Fatalf("%s: the Close that overlapped the test's transaction: %v", level, err)
	}
	var owner sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT owner FROM snowkey_worker_leases WHERE namespace = $1 AND worker = $2",
		ns, l.Worker()).Scan(&owner); err != nil || owner.Valid {
		t.Fatalf("after Close the number's owner is %v (%v); want none", owner, err)
	}
}

// acquireAll runs n Acquires at once and returns the leases and errors.
func acquireAll(ctx context.Context, p *Pool, n int) ([]*Lease, []error) {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		leases []*Lease
		errs   []error
	)
	for range n {
		wg.Go(func() {
			l, err := p.Acquire(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			leases = append(leases, l)
		})
	}
	wg.Wait()
	return leases, errs
}

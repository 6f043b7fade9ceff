package workerid

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/internal/testenv"
)

// TestPostgresIsolation runs concurrent Acquires, renewals and Closes on
// a database whose default_transaction_isolation is REPEATABLE READ or
// SERIALIZABLE: statements that overlap on a row then fail with
// serialization failures, which the pool retries. Every number must be
// taken, by one lease each, with no error, in every round. The control
// run, which does not retry, must see errors.
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
				logs := &logRecorder{}
				// Longer timings than the other tests': 64 leases renew at once
				// on a loaded machine, and a renewal must not time out.
				p := postgresPool(t, dsn, Options{Layout: sixBits, Logger: slog.New(logs), MaxConns: 64,
					TTL: 5 * time.Second, Margin: time.Second, RenewEvery: time.Second})
				if !defended {
					turnOff(t, p, "serial-retry")
				}
				var got string
				if err := p.store.(*pgStore).db.QueryRowContext(ctx, "SHOW transaction_isolation").Scan(&got); err != nil || got != level {
					t.Fatalf("transaction_isolation is %q (%v), want %q", got, err, level)
				}

				var failures []error
				for round := range 3 {
					leases, errs := acquireAll(ctx, p, 64)
					failures = append(failures, errs...)
					// No two live leases share a number. (A control run's lease
					// that failed to renew may have lost its number since.)
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
					if defended && len(leases) != 64 {
						t.Fatalf("round %d: %d of 64 numbers taken; errors: %v", round, len(leases), errs)
					}
					// Let every lease renew twice, then close them all at once. A
					// lease whose renewals a busy machine timed out until it
					// expired has had its renewals too (the timeouts are only
					// logged, below): a stressed run once waited 30 s for one.
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
				switch {
				case defended && len(serial) > 0:
					t.Fatalf("%d serialization failures; first: %v", len(serial), serial[0])
				case !defended && len(serial) == 0:
					t.Fatal("control run saw no serialization failure: the test does not reach its fault")
				}
			})
		}
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

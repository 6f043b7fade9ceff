package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestLockOrder: while writers insert notes that refer to the table,
// one row each statement (each holds the notes table, then needs the
// table to check its key), Maintain makes eight partitions of the table,
// each of which locks the notes table too. No write fails and Maintain
// succeeds. The control locks the table first and leaves the notes table
// to CREATE TABLE ... PARTITION OF, and PostgreSQL breaks the deadlocks
// that follow by failing a write or a step (40P01).
func TestLockOrder(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	for _, control := range []bool{false, true} {
		t.Run(fmt.Sprintf("control=%v", control), func(t *testing.T) {
			db, clock := referredDB(t)
			p := clock.table("events", Options{Premake: -1})
			if _, err := p.Maintain(ctx, db); err != nil {
				t.Fatal(err)
			}
			ids := insertEvents(t, db, date("2025-03-10T13:00:00Z"), 50)
			var writes, deadlocks atomic.Int64
			var other atomic.Value
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 6 {
				wg.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						_, err := db.ExecContext(ctx, "INSERT INTO notes_noaction (event_id) VALUES ($1)", ids[(w*7+i)%len(ids)])
						var pgErr *pgconn.PgError
						switch {
						case err == nil:
							writes.Add(1)
						case errors.As(err, &pgErr) && pgErr.Code == "40P01":
							deadlocks.Add(1)
						default:
							other.Store(err)
						}
					}
				})
			}
			waitFor(t, ctx, "the writers to write", func() bool { return writes.Load() > 100 })
			many := clock.tableWithout("events", Options{Premake: 8}, defences{parentFirst: control})
			var stopOnce sync.Once
			if control {
				// The first deadlock is the fault: the writers stop then.
				go func() {
					for deadlocks.Load() == 0 {
						select {
						case <-stop:
							return
						case <-time.After(5 * time.Millisecond):
						}
					}
					stopOnce.Do(func() { close(stop) })
				}()
			}
			var rep Report
			var err error
			for range 3 { // the control's steps may be the deadlocks' victims, to be tried again
				var r Report
				r, err = many.Maintain(context.WithoutCancel(ctx), db)
				rep.Created = append(rep.Created, r.Created...)
				var pgErr *pgconn.PgError
				if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
					deadlocks.Add(1)
				}
			}
			stopOnce.Do(func() { close(stop) })
			wg.Wait()
			if e := other.Load(); e != nil {
				t.Fatalf("a write failed: %v", e)
			}
			t.Logf("control=%v: %d writes, %d deadlocks; %d partitions made, %v", control, writes.Load(), deadlocks.Load(), len(rep.Created), err)
			switch {
			case !control && (deadlocks.Load() != 0 || err != nil || len(rep.Created) != 8):
				t.Errorf("%d deadlocks, %d partitions made, %v; want none, 8 and no error", deadlocks.Load(), len(rep.Created), err)
			case control && deadlocks.Load() == 0:
				t.Errorf("control: no deadlock: the test does not reach the fault")
			}
		})
	}
}

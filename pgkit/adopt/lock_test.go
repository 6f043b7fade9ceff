package adopt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestAdoptLockTimeout: while a long transaction holds a table, Apply
// gives up after LockTimeout with ErrLock, changes nothing, and the
// queries that queued behind its lock request go on. The control, without
// lock_timeout, waits as long as the transaction lasts, and every query
// on the table waits behind it: an outage.
func TestAdoptLockTimeout(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	db := openDB(t, ctx, testSchema)
	url := databaseURL(t, ctx, db)
	_, _, colsBefore := snapshot(t, ctx, db)

	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO accounts (name) VALUES ('long transaction')"); err != nil {
		t.Fatal(err)
	}

	plan, err := NewPlan(ctx, db, testTables, Options{LockTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reader, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(ctx)
	if _, err := reader.Exec(ctx, "SET statement_timeout = '1s'"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	applied := make(chan error, 1)
	go func() { applied <- plan.Apply(ctx, db) }()
	waitForLockWait(t, ctx, db)
	var n int
	if err := reader.QueryRow(ctx, "SELECT count(*) FROM accounts").Scan(&n); err != nil {
		t.Errorf("a reader behind Apply's lock request: %v; want it served once Apply gives up", err)
	}
	err = <-applied
	if !errors.Is(err, ErrLock) {
		t.Fatalf("Apply = %v; want ErrLock", err)
	}
	t.Logf("Apply gave up after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if _, _, cols := snapshot(t, ctx, db); strings.Join(cols, "\n") != strings.Join(colsBefore, "\n") {
		t.Error("the timed-out Apply changed the schema")
	}

	// Control: no lock_timeout. Apply waits; a reader queues behind it.
	plan, err = newPlanWithout(ctx, db, testTables, Options{}, defences{noLock: true})
	if err != nil {
		t.Fatal(err)
	}
	go func() { applied <- plan.Apply(ctx, db) }()
	waitForLockWait(t, ctx, db)
	if err := reader.QueryRow(ctx, "SELECT count(*) FROM accounts").Scan(&n); err == nil {
		t.Error("control: a reader went past an Apply waiting without lock_timeout: the test does not reach the fault")
	} else {
		t.Logf("control: the reader, behind the waiting Apply: %v", err)
	}
	select {
	case err := <-applied:
		t.Fatalf("control: Apply returned %v while the transaction still held the table", err)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-applied; err != nil {
		t.Fatalf("control: Apply after the transaction ended: %v", err)
	}
}

// waitForLockWait returns once a backend of db's database waits on a
// lock.
func waitForLockWait(t *testing.T, ctx context.Context, db *sql.DB) {
	t.Helper()
	for {
		var waiting int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("nothing came to wait on a lock")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestAdoptConcurrentWriters adopts while writers insert: raw SQL through
// the key's default, with pgx's cached prepared statements. A reader
// holds the table when Apply starts, so that Apply waits for its lock and
// the writers queue behind Apply (the test waits until PostgreSQL shows
// them waiting), then lets go. Every insert either succeeded, and its row
// is there with the key it was told, or failed with an error and wrote
// nothing; every writer inserted before the adoption and after it, the
// later rows with snowflakes, and no writer got a key from the sequence
// after one from snowflake_id().
func TestAdoptConcurrentWriters(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	db := openDB(t, ctx, testSchema)
	url := databaseURL(t, ctx, db)
	first := int64(idtype.DefaultLayout.FirstID(time.Now()))

	type result struct {
		name string
		id   int64
		err  error
	}
	const writers = 4
	var (
		mu      sync.Mutex
		results []result
		wg      sync.WaitGroup
		pids    []uint32
		ok      [writers]atomic.Int64 // successful inserts of each writer
	)
	stop := make(chan struct{})
	for w := range writers {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		pids = append(pids, conn.PgConn().PID())
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := result{name: fmt.Sprintf("writer %d row %d", w, i)}
				r.err = conn.QueryRow(ctx, "INSERT INTO accounts (name) VALUES ($1) RETURNING id", r.name).Scan(&r.id)
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
				if r.err == nil {
					ok[w].Add(1)
				}
				if conn.IsClosed() {
					return
				}
			}
		})
	}
	// waitInserts waits until every writer has inserted n rows more than
	// it had in from.
	counts := func() (c [writers]int64) {
		for w := range writers {
			c[w] = ok[w].Load()
		}
		return c
	}
	waitInserts := func(what string, from [writers]int64, n int64) {
		t.Helper()
		for w := range writers {
			for ok[w].Load() < from[w]+n {
				select {
				case <-ctx.Done():
					t.Fatalf("waiting for writer %d's inserts %s: %v", w, what, ctx.Err())
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
	}
	waitInserts("before the adoption", [writers]int64{}, 20)

	// A reader in a transaction: Apply's ACCESS EXCLUSIVE lock waits for
	// it, and the writers' inserts queue behind Apply's request.
	reader, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reader.Rollback() }()
	if _, err := reader.ExecContext(ctx, "SELECT count(*) FROM accounts"); err != nil {
		t.Fatal(err)
	}
	plan, err := NewPlan(ctx, db, testTables, Options{LockTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	applied := make(chan error, 1)
	go func() { applied <- plan.Apply(ctx, db) }()
	waitForLockWaiters(t, ctx, db, pids)
	if err := reader.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-applied; err != nil {
		t.Fatalf("Apply while writers insert: %v", err)
	}
	waitInserts("after the adoption", counts(), 5)
	close(stop)
	wg.Wait()

	var before, after, failed int
	switched := map[string]bool{} // writers that got a snowflake
	for _, r := range results {
		writer := r.name[:strings.Index(r.name, " row")]
		var id int64
		err := db.QueryRowContext(ctx, "SELECT id FROM accounts WHERE name = $1", r.name).Scan(&id)
		switch {
		case r.err != nil:
			failed++
			if !errors.Is(err, sql.ErrNoRows) {
				t.Errorf("%s failed (%v) but its row is there (%d, %v)", r.name, r.err, id, err)
			}
		case err != nil || id != r.id:
			t.Errorf("%s was inserted with key %d; the table has %d (%v)", r.name, r.id, id, err)
		case r.id < first:
			before++
			if switched[writer] {
				t.Errorf("%s got key %d from the sequence after a snowflake", r.name, r.id)
			}
		case idtype.DefaultLayout.Decode(idtype.ID(r.id)).Worker == 1023:
			after++
			switched[writer] = true
		default:
			t.Errorf("%s got key %d, neither from the sequence nor from snowflake_id()", r.name, r.id)
		}
	}
	t.Logf("%d inserts: %d before the adoption, %d after, %d failed", len(results), before, after, failed)
	for _, r := range results {
		if r.err != nil {
			t.Logf("a failed insert: %v", r.err)
			break
		}
	}
	if len(switched) != writers {
		t.Errorf("%d of %d writers got snowflakes after the adoption", len(switched), writers)
	}
}

// waitForLockWaiters returns once PostgreSQL shows a backend of db's
// database waiting on a lock other than the backends of pids, which is
// Apply behind the reader, and at least one of pids waiting on a lock
// too: a writer queued behind Apply.
func waitForLockWaiters(t *testing.T, ctx context.Context, db *sql.DB, pids []uint32) {
	t.Helper()
	ints := make([]int64, len(pids))
	for i, p := range pids {
		ints[i] = int64(p)
	}
	for {
		var apply, writers int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE NOT pid = ANY ($1::int8[]::int[])),
				count(*) FILTER (WHERE pid = ANY ($1::int8[]::int[]))
			FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`, ints).Scan(&apply, &writers); err != nil {
			t.Fatal(err)
		}
		if apply > 0 && writers > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for Apply and a writer to wait on locks (%d, %d): %v", apply, writers, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

package workerid

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Postgres returns a Pool that keeps its leases in PostgreSQL, in the
// table snowkey_worker_leases that package migrations creates (run
// migrations.Up first): one row per number of a
// namespace, made at the namespace's first take (1,024 to a
// transaction), which keeps the number's high-water mark
// across leases. Expiry is judged by the
// database's clock. Besides Options.Reserved and SQLWorker, the pool never
// leases the number snowflake_id() stamps in this database,
// snowflake_reserved_worker(), even when migrations.Options.ReservedWorker
// moved it.
//
// db may use any driver (pgx's stdlib, lib/pq); the queries bind only
// text, integers and booleans. It may be the app's own pool (a pgxpool
// through pgx's stdlib.OpenDBFromPool): the pool runs at most
// Options.MaxConns statements at once, each on a connection of db for the
// statement's time only. Every statement costs O(log n) in the
// namespace's n numbers: Acquire takes a free row through an index, from a
// random place, skipping rows that concurrent Acquires have locked (FOR
// UPDATE SKIP LOCKED), so that takers do not queue on one row; it needs
// more than one statement only when the rows above that place are taken,
// or the namespace has no rows yet.
//
// Every statement is one implicit transaction, so a lost reply means it
// ran or it did not, and each works under any default_transaction_isolation.
// Under REPEATABLE READ or SERIALIZABLE, PostgreSQL fails statements that
// overlap on a row with a serialization failure (SQLSTATE 40001), or a
// deadlock (40P01); the pool runs such a statement again, up to 10 times
// with a jittered backoff from 2 ms to 100 ms, within the call's context.
// It reads the SQLSTATE from the driver's error through a
// SQLState() string method, which pgx's and lib/pq's errors have.
func Postgres(db *sql.DB, opts Options) (*Pool, error) {
	return newPostgres(db, opts, defences{})
}

// newPostgres is Postgres with the defences d.
func newPostgres(db *sql.DB, opts Options, d defences) (*Pool, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", idtype.ErrInvalidOptions)
	}
	return newPool(opts, d, func(o Options, reserved []int64, d *defences) store {
		return &pgStore{db: db, ns: o.Namespace, max: o.Layout.MaxWorker(), reserved: intArray(reserved),
			growLock: growLockKey(o.Namespace), d: d, sem: make(chan struct{}, o.MaxConns)}
	})
}

// pgTakeFree takes, for owner $2, a free row of namespace $1 (given back,
// or made ahead and never leased: expires_at '-infinity') from worker $6
// on: one index range scan (snowkey_worker_leases_free) that skips rows
// locked by concurrent takers, so that takers do not queue on one row; a
// random $6 spreads them over the index. It returns the number taken and
// the high-water mark its ownership starts after (NULLs when none was
// free), and the highest number that has a row, as the statement saw them:
// a namespace that has rows for all its numbers and no free one in that
// view has none. Each take is a short statement, so that PostgreSQL plans
// it in moments.
//
// The free rows are those with expires_at '-infinity' and a worker from
// $6 to $7, written as two row comparisons, which only the free index
// can bound: written as expires_at = '-infinity' AND worker >= $6, the
// primary key's order served the ORDER BY too, and a planner that judged
// by statistics from when every row was free (the namespace's first take
// makes them all free) read the primary key from $6 on, through every
// held number: 9 ms a take at 16 worker bits with 16 numbers free
// (BenchmarkLeaseOps), 0.09 ms at 10 bits.
const pgTakeFree = `
WITH up AS (
	UPDATE snowkey_worker_leases AS l SET
		owner = $2, holder = $3, expires_at = statement_timestamp() + $4::float8 * interval '1 millisecond',
		start_after = l.high_water, high_water = GREATEST(l.high_water, $5::bigint),
		acquired_at = statement_timestamp(), renewed_at = statement_timestamp()
	WHERE l.namespace = $1 AND l.worker = (
		SELECT worker FROM snowkey_worker_leases
		WHERE namespace = $1 AND (expires_at, worker) >= ('-infinity', $6) AND (expires_at, worker) <= ('-infinity', $7)
			AND worker <> snowflake_reserved_worker() AND worker <> ALL ($8::text::int[])
		ORDER BY expires_at, worker LIMIT 1 FOR UPDATE SKIP LOCKED)
	RETURNING l.worker, l.start_after
)
SELECT (SELECT worker FROM up), (SELECT start_after FROM up),
	(SELECT max(worker) FROM snowkey_worker_leases WHERE namespace = $1)`

// pgTakeLapsed is pgTakeFree for the row of namespace $1 whose lease
// lapsed first (its owner stopped renewing), up to worker $6.
const pgTakeLapsed = `
UPDATE snowkey_worker_leases AS l SET
	owner = $2, holder = $3, expires_at = statement_timestamp() + $4::float8 * interval '1 millisecond',
	start_after = l.high_water, high_water = GREATEST(l.high_water, $5::bigint),
	acquired_at = statement_timestamp(), renewed_at = statement_timestamp()
WHERE l.namespace = $1 AND l.worker = (
	SELECT worker FROM snowkey_worker_leases
	WHERE namespace = $1 AND expires_at > '-infinity' AND expires_at <= statement_timestamp() AND worker <= $6
		AND worker <> snowflake_reserved_worker() AND worker <> ALL ($7::text::int[])
	ORDER BY expires_at LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING l.worker, l.start_after`

// pgTakeListed is pgTakeFree for the first of the numbers $6 (an array
// literal) whose row is free or whose lease lapsed: a claim's, which
// tries a range of numbers in order.
const pgTakeListed = `
UPDATE snowkey_worker_leases AS l SET
	owner = $2, holder = $3, expires_at = statement_timestamp() + $4::float8 * interval '1 millisecond',
	start_after = l.high_water, high_water = GREATEST(l.high_water, $5::bigint),
	acquired_at = statement_timestamp(), renewed_at = statement_timestamp()
WHERE l.namespace = $1 AND l.worker = (
	SELECT worker FROM snowkey_worker_leases
	WHERE namespace = $1 AND worker = ANY ($6::text::int[]) AND expires_at <= statement_timestamp()
		AND worker <> snowflake_reserved_worker() AND worker <> ALL ($7::text::int[])
	ORDER BY array_position($6::text::int[], worker) LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING l.worker, l.start_after`

// pgMakeRows makes the next $3 rows namespace $1 lacks, up to number $2,
// free and without a mark: every number of the namespace gets its row at
// its first take, so that free rows lie spread over the index, where
// takers that start at random places find them after few entries.
// makeRows runs it for rowChunk rows at a time, each chunk committed on
// its own under a lock of the namespace's.
const pgMakeRows = `
INSERT INTO snowkey_worker_leases (namespace, worker, expires_at, high_water)
SELECT $1, g, '-infinity', 0
FROM (SELECT COALESCE(max(worker) + 1, 0) AS lo FROM snowkey_worker_leases WHERE namespace = $1) AS m,
	generate_series(m.lo, LEAST(m.lo + $3::int - 1, $2::int)) AS g
ON CONFLICT DO NOTHING`

// rowChunk is how many rows pgMakeRows makes in one transaction, and
// rowWait how long a taker that found another making them waits before
// it looks again (less up to half of it, at random).
const (
	rowChunk = 1024
	rowWait  = 20 * time.Millisecond
)

// pgTakeOne takes number $2 for owner $3 if it is free, or his already.
// It returns the number taken and the high-water mark its ownership
// started after (NULL when it had no row), and whether it was $3's
// already, or NULLs when another holds it.
//
// A number whose lease is $3's already, even a live one, stays $3's with
// the mark its ownership started after: that is a retried take whose
// first attempt ran ($7 true; a test's control run sends false).
const pgTakeOne = `
WITH ins AS (
	INSERT INTO snowkey_worker_leases AS l
		(namespace, worker, owner, holder, expires_at, high_water, start_after, acquired_at, renewed_at)
	VALUES ($1, $2, $3, $4, statement_timestamp() + $5::float8 * interval '1 millisecond', $6::bigint, NULL,
		statement_timestamp(), statement_timestamp())
	ON CONFLICT (namespace, worker) DO UPDATE SET
		owner = EXCLUDED.owner, holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at,
		start_after = CASE WHEN $7::boolean AND l.owner IS NOT DISTINCT FROM EXCLUDED.owner
			THEN l.start_after ELSE l.high_water END,
		high_water = GREATEST(l.high_water, EXCLUDED.high_water),
		acquired_at = CASE WHEN $7::boolean AND l.owner IS NOT DISTINCT FROM EXCLUDED.owner
			THEN l.acquired_at ELSE EXCLUDED.acquired_at END,
		renewed_at = EXCLUDED.renewed_at
	WHERE l.owner IS NULL OR l.expires_at <= statement_timestamp()
		OR ($7::boolean AND l.owner IS NOT DISTINCT FROM EXCLUDED.owner)
	RETURNING l.worker, l.start_after
)
SELECT ins.worker, ins.start_after,
	-- The statement's snapshot: the owner before the take.
	(SELECT l.owner = $3::text FROM snowkey_worker_leases l WHERE l.namespace = $1 AND l.worker = $2)
FROM (SELECT 1) AS one LEFT JOIN ins ON true`

// pgRenew extends the lease of owner $3, raising its high-water mark to
// $5. It returns the new mark and the mark the ownership started after
// (both NULL when the lease is not $3's; the second NULL too when the
// number had no row before), and the holder of a live lease of someone
// else's (NULL when none).
const pgRenew = `
WITH u AS (
	UPDATE snowkey_worker_leases SET
		expires_at = statement_timestamp() + $4::float8 * interval '1 millisecond',
		high_water = GREATEST(high_water, $5::bigint), renewed_at = statement_timestamp()
	WHERE namespace = $1 AND worker = $2 AND owner = $3
	RETURNING high_water, start_after
)
SELECT (SELECT high_water FROM u), (SELECT start_after FROM u),
	(SELECT holder FROM snowkey_worker_leases
	 WHERE namespace = $1 AND worker = $2 AND owner IS DISTINCT FROM $3 AND expires_at > statement_timestamp())`

// pgRelease frees the number of owner $3, leaving $4 as its high-water
// mark (never below what the owner found).
const pgRelease = `
UPDATE snowkey_worker_leases SET
	owner = NULL, holder = NULL, expires_at = '-infinity', renewed_at = statement_timestamp(),
	high_water = GREATEST($4::bigint, COALESCE(start_after, 0))
WHERE namespace = $1 AND worker = $2 AND owner = $3`

// Retries of a statement that PostgreSQL failed with a serialization
// failure (40001) or a deadlock (40P01), which a database whose
// default_transaction_isolation is REPEATABLE READ or SERIALIZABLE
// reports when statements on one row overlap. Each statement is one
// implicit transaction, rolled back when it fails, so running it again is
// safe; the backoff is jittered so that the takers that collided spread
// out.
const (
	serialRetries    = 10
	serialBackoff    = 2 * time.Millisecond
	serialBackoffMax = 100 * time.Millisecond
)

// sqlState is what drivers' errors tell of a PostgreSQL error: pgx's
// *pgconn.PgError and lib/pq's *pq.Error both have it.
type sqlState interface{ SQLState() string }

// serialFailure reports whether err is a serialization failure or a
// deadlock, after which the statement can run again.
func serialFailure(err error) bool {
	var st sqlState
	if !errors.As(err, &st) {
		return false
	}
	switch st.SQLState() {
	case "40001", "40P01":
		return true
	}
	return false
}

type pgStore struct {
	db       *sql.DB
	ns       string
	growLock int64        // the advisory lock key of the making of the namespace's rows
	top      atomic.Int64 // the highest number a take saw a row of, or 0
	max      int64
	reserved string        // an array literal of the pool's reserved numbers
	sem      chan struct{} // one token per statement running: MaxConns
	d        *defences
}

// growLockKey is the advisory lock key that serializes the making of a
// namespace's rows: an FNV-1a hash of the package's name and the
// namespace, which other users of advisory locks are unlikely to meet.
func growLockKey(namespace string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("snowkey/workerid grow\x00" + namespace))
	return int64(h.Sum64())
}

// intArray is an array literal, '{5,6,7}', which binds as text with any
// driver.
func intArray(ns []int64) string {
	b := make([]byte, 0, 5*len(ns)+2)
	b = append(b, '{')
	for i, w := range ns {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, w, 10)
	}
	return string(append(b, '}'))
}

// do runs one statement by f, again after a serialization failure or a
// deadlock, up to serialRetries times, while ctx lasts. Each run holds
// one of the pool's MaxConns slots, none while it waits to retry.
func (s *pgStore) do(ctx context.Context, f func() error) error {
	backoff := serialBackoff
	for retry := 0; ; retry++ {
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		err := f()
		<-s.sem
		if err == nil || s.d.noSerialRetry || retry == serialRetries || !serialFailure(err) {
			return err
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			// The call ran out of time, which is what it failed of: the
			// serialization failure would have been retried.
			return fmt.Errorf("%w while waiting to retry after a serialization failure (%v)", ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, serialBackoffMax)
	}
}

func (s *pgStore) kind() string { return "postgres" }

func (s *pgStore) take(ctx context.Context, r takeRequest) (taken, error) {
	if r.cands != nil {
		return s.takeListed(ctx, r)
	}
	// A namespace's rows are made at its first take, once however many
	// takers ask for them.
	for {
		// A random place among the rows made, so that concurrent takers
		// spread over the index (and over the entries that takes before
		// them left dead there), then from the start.
		var top sql.NullInt64
		from := int64(0)
		if t := s.top.Load(); t > 0 {
			from = rand.Int64N(t + 1)
		}
		for _, start := range []int64{from, 0} {
			var worker, prev sql.NullInt64
			err := s.do(ctx, func() error {
				return s.db.QueryRowContext(ctx, pgTakeFree, s.ns, r.token, r.holder, r.ttl, r.reserve, start, s.max, s.reserved).
					Scan(&worker, &prev, &top)
			})
			if err != nil {
				return taken{}, err
			}
			if top.Valid {
				s.top.Store(top.Int64)
			}
			if worker.Valid {
				return taken{worker: worker.Int64, prev: prev.Int64, hadRecord: prev.Valid && prev.Int64 > 0}, nil
			}
			if from == 0 {
				break
			}
		}
		var worker, prev sql.NullInt64
		err := s.do(ctx, func() error {
			return s.db.QueryRowContext(ctx, pgTakeLapsed, s.ns, r.token, r.holder, r.ttl, r.reserve, s.max, s.reserved).
				Scan(&worker, &prev)
		})
		switch {
		case err == nil:
			return taken{worker: worker.Int64, prev: prev.Int64, hadRecord: prev.Valid && prev.Int64 > 0}, nil
		case !errors.Is(err, sql.ErrNoRows):
			return taken{}, err
		case top.Valid && top.Int64 >= s.max:
			return taken{worker: -1}, nil
		}
		done, err := s.makeRows(ctx, s.max)
		if err != nil {
			return taken{}, err
		}
		if !done {
			// Another taker is making the rows: look again in a moment.
			if err := sleepCtx(ctx, jitter(rowWait, 0.5)); err != nil {
				return taken{}, err
			}
		}
	}
}

// makeRows makes the rows the namespace lacks up to number upTo
// (pgMakeRows), rowChunk at a time, each chunk in a READ COMMITTED
// transaction that takes the namespace's advisory lock if no one holds
// it (pg_try_advisory_xact_lock, which a transaction-mode PgBouncer
// keeps with the transaction). It reports whether it saw, under the
// lock, that every row up to upTo is made; false when another taker held
// the lock, which then is making them.
//
// Neither the making nor the takers that find it under way hold a
// snapshot for long: a statement queued behind the making
// (pg_advisory_xact_lock) would hold its snapshot as long as the making
// lasts, and while any snapshot that old is held PostgreSQL cannot mark
// dead the index entries every take leaves behind, so that each take
// reads all those before it and a fleet's cold start grows with the
// square of its size (BenchmarkFleetColdStart measures it).
func (s *pgStore) makeRows(ctx context.Context, upTo int64) (done bool, err error) {
	for {
		var got bool
		var n int64
		err := s.do(ctx, func() error {
			tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			err = tx.QueryRowContext(ctx, "SELECT pg_try_advisory_xact_lock($1::bigint)", s.growLock).Scan(&got)
			if err != nil || !got {
				return err
			}
			res, err := tx.ExecContext(ctx, pgMakeRows, s.ns, upTo, rowChunk)
			if err != nil {
				return err
			}
			if n, err = res.RowsAffected(); err != nil {
				return err
			}
			return tx.Commit()
		})
		if err != nil || !got || n == 0 {
			return got && n == 0, err
		}
	}
}

// takeListed takes the first free number of r.cands: one statement for
// one number, which may be the taker's own already; for more, a claim's,
// two, the first of which makes the rows the namespace lacks.
func (s *pgStore) takeListed(ctx context.Context, r takeRequest) (taken, error) {
	if len(r.cands) == 0 {
		return taken{worker: -1}, nil
	}
	if len(r.cands) == 1 {
		return s.takeOne(ctx, r.cands[0], r)
	}
	for {
		done, err := s.makeRows(ctx, slices.Max(r.cands))
		if err != nil {
			return taken{}, err
		}
		if done {
			break
		}
		if err := sleepCtx(ctx, jitter(rowWait, 0.5)); err != nil {
			return taken{}, err
		}
	}
	var worker, prev sql.NullInt64
	err := s.do(ctx, func() error {
		return s.db.QueryRowContext(ctx, pgTakeListed, s.ns, r.token, r.holder, r.ttl, r.reserve, intArray(r.cands), s.reserved).
			Scan(&worker, &prev)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return taken{worker: -1}, nil
	case err != nil:
		return taken{}, err
	}
	return taken{worker: worker.Int64, prev: prev.Int64, hadRecord: prev.Valid && prev.Int64 > 0}, nil
}

func (s *pgStore) takeOne(ctx context.Context, w int64, r takeRequest) (taken, error) {
	var (
		worker sql.NullInt64
		prev   sql.NullInt64
		mine   sql.NullBool
	)
	err := s.do(ctx, func() error {
		return s.db.QueryRowContext(ctx, pgTakeOne, s.ns, w, r.token, r.holder, r.ttl, r.reserve, !s.d.noOwnToken).
			Scan(&worker, &prev, &mine)
	})
	if err != nil {
		return taken{}, err
	}
	if !worker.Valid {
		return taken{worker: -1}, nil
	}
	return taken{worker: worker.Int64, prev: prev.Int64, hadRecord: prev.Valid, own: mine.Bool}, nil
}

func (s *pgStore) renew(ctx context.Context, worker int64, token string, ttl, reserve int64) (renewal, error) {
	var (
		hw, start sql.NullInt64
		holder    sql.NullString
	)
	err := s.do(ctx, func() error {
		return s.db.QueryRowContext(ctx, pgRenew, s.ns, worker, token, ttl, reserve).Scan(&hw, &start, &holder)
	})
	if err != nil {
		return renewal{}, err
	}
	if hw.Valid {
		return renewal{held: true, prev: hw.Int64, startAfter: start.Int64, hadStart: start.Valid}, nil
	}
	return renewal{holder: holder.String}, nil
}

func (s *pgStore) release(ctx context.Context, worker int64, token string, final int64) error {
	return s.do(ctx, func() error {
		_, err := s.db.ExecContext(ctx, pgRelease, s.ns, worker, token, final)
		return err
	})
}

package workerid

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Postgres returns a Pool that keeps its leases in PostgreSQL, in the
// table snowkey_worker_leases that this package's SQL creates (Migrations;
// run migrations.Up first, which applies it): one row per number ever
// leased in a namespace, which keeps the number's high-water mark across
// leases. Expiry is judged by the database's clock. Besides
// Options.Reserved and SQLWorker, the pool never leases the number
// snowflake_id() stamps in this database, snowflake_reserved_worker(),
// even when migrations.Options.ReservedWorker moved it.
//
// db may use any driver (pgx's stdlib, lib/pq); the queries bind only
// text, integers and booleans. Acquire is one statement that finds a free
// number from a random start and takes it; when concurrent Acquires pick
// the same number, the losers try again (see Pool.Acquire).
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
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", idtype.ErrInvalidOptions)
	}
	return newPool(opts, func(o Options, defences *defences, trips *atomic.Int64) store {
		return &pgStore{db: db, ns: o.Namespace, defences: defences, trips: trips}
	})
}

// pgTake takes the first free number of $2 (in order) for owner $3.
// It returns one row: how many candidates were free, and the number taken
// with the high-water mark its ownership started after (NULL when it had
// no row) and whether it was $3's already, or NULLs when a concurrent
// taker won.
//
// A number whose lease is $3's already, even a live one, counts as free
// and stays $3's with the mark its ownership started after: that is a
// retried take whose first attempt ran ($7 true; a test's control run
// sends false).
//
// Each candidate is looked up on its own, by a correlated subquery that
// the planner cannot turn into a join: a driver that caches the statement
// soon gets a generic plan, which, not knowing how long the array is, may
// otherwise join every candidate with every row. The scan stops at the
// first free number; unnest yields the array in order.
const pgTake = `
WITH cand AS (
	SELECT c.n
	FROM unnest($2::text::int[]) AS c(n)
	WHERE c.n <> snowflake_reserved_worker() AND COALESCE((
		SELECT l.expires_at > statement_timestamp()
			AND NOT ($7::boolean AND l.owner IS NOT DISTINCT FROM $3::text)
		FROM snowkey_worker_leases l
		WHERE l.namespace = $1 AND l.worker = c.n), false) = false
	LIMIT 1
), ins AS (
	INSERT INTO snowkey_worker_leases AS l
		(namespace, worker, owner, holder, expires_at, high_water, start_after, acquired_at, renewed_at)
	SELECT $1, n, $3, $4, statement_timestamp() + $5::float8 * interval '1 millisecond', $6::bigint, NULL,
		statement_timestamp(), statement_timestamp()
	FROM cand
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
SELECT (SELECT count(*) FROM cand), ins.worker, ins.start_after,
	-- The statement's snapshot: the owner before the take.
	(SELECT l.owner = $3::text FROM snowkey_worker_leases l, cand WHERE l.namespace = $1 AND l.worker = cand.n)
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
	owner = NULL, holder = NULL, expires_at = NULL, renewed_at = statement_timestamp(),
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
	defences *defences
	trips    *atomic.Int64
}

// do runs one statement by f, again after a serialization failure or a
// deadlock, up to serialRetries times, while ctx lasts.
func (s *pgStore) do(ctx context.Context, f func() error) error {
	backoff := serialBackoff
	for retry := 0; ; retry++ {
		s.trips.Add(1)
		err := f()
		if err == nil || s.defences.noSerialRetry || retry == serialRetries || !serialFailure(err) {
			return err
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, serialBackoffMax)
	}
}

func (s *pgStore) kind() string { return "postgres" }

// durable is true: a committed row does not vanish, so a number without
// one was never leased, and a mark is never behind what its owner issued.
// (A database restored from a backup breaks this; see the package doc.)
func (s *pgStore) durable() bool { return true }

func (s *pgStore) take(ctx context.Context, r takeRequest) (taken, error) {
	var (
		free   int64
		worker sql.NullInt64
		prev   sql.NullInt64
		mine   sql.NullBool
	)
	// An array literal, '{5,6,7}', binds as text with any driver.
	cands := make([]byte, 0, 5*len(r.cands)+2)
	cands = append(cands, '{')
	for i, w := range r.cands {
		if i > 0 {
			cands = append(cands, ',')
		}
		cands = strconv.AppendInt(cands, w, 10)
	}
	cands = append(cands, '}')
	err := s.do(ctx, func() error {
		return s.db.QueryRowContext(ctx, pgTake, s.ns, string(cands), r.token, r.holder, r.ttl, r.reserve, !s.defences.noOwnToken).
			Scan(&free, &worker, &prev, &mine)
	})
	if err != nil {
		return taken{}, err
	}
	if !worker.Valid {
		return taken{worker: -1, raced: free > 0}, nil
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

package migrations

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/snowkeyhq/snowkey/idtype"
)

// DefaultLockTimeout is how long Up waits for another instance's migration
// run to finish when WithLockTimeout is not given.
const DefaultLockTimeout = 5 * time.Minute

// An Option changes what Up does.
type Option func(*options) error

type options struct {
	logger         *slog.Logger
	lockTimeout    time.Duration
	reservedWorker int64  // < 0: leave as it is
	idSpace        string // "": the one recorded, if any
}

// WithLogger makes Up log each migration it applies to logger. Without it
// Up logs nothing.
func WithLogger(logger *slog.Logger) Option {
	return func(o *options) error {
		if logger == nil {
			return fmt.Errorf("%w: WithLogger(nil)", idtype.ErrInvalidOptions)
		}
		o.logger = logger
		return nil
	}
}

// WithLockTimeout bounds how long Up waits for the migration lock while
// another instance holds it; at least 1 s (it is polled once a second).
// The default is DefaultLockTimeout.
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Second {
			return fmt.Errorf("%w: WithLockTimeout(%v) is under 1s", idtype.ErrInvalidOptions, d)
		}
		o.lockTimeout = d
		return nil
	}
}

// WithReservedWorker makes snowflake_id() use worker number w, 0..1023,
// instead of ReservedWorker, for a fleet whose worker leases must keep
// 1023 (the worker-lease code reads the number with ReservedWorkerOf).
// Up changes it after migrating, under the migration lock, and only when
// it differs; every session sees the new number from its next call.
//
// Choose it before the first ID is issued and keep it: IDs that
// snowflake_id() issued with the old number may collide with those of an
// app generator that later leases that number.
//
// Without this option Up leaves the number as it is: a database set to
// 1000 stays at 1000.
func WithReservedWorker(w int64) Option {
	return func(o *options) error {
		if max := idtype.DefaultLayout.MaxWorker(); w < 0 || w > max {
			return fmt.Errorf("%w: WithReservedWorker(%d) is outside 0..%d", idtype.ErrInvalidOptions, w, max)
		}
		o.reservedWorker = w
		return nil
	}
}

// WithIDSpace puts the database in the ID space name (1 to 63 letters,
// digits, '_', '-', '.'). Databases of one PostgreSQL cluster whose IDs
// meet, such as the shards of one app, share a space, and Up refuses to give
// two of them one reserved worker (ErrWorkerConflict). Up records the
// database's space and its schemas' workers in the database's setting
// SpaceSetting, which every database of the cluster can read; once recorded,
// the database stays in its space, and Up without this option keeps
// checking. Writing the record takes a role that may set that setting
// (ErrIDSpace says how). Without a space, databases are not compared:
// separate databases cannot meet unless the app makes them.
func WithIDSpace(name string) Option {
	return func(o *options) error {
		if err := checkSpaceName(name); err != nil {
			return fmt.Errorf("%w: WithIDSpace: %v", idtype.ErrInvalidOptions, err)
		}
		o.idSpace = name
		return nil
	}
}

// Up applies every migration in FS that db has not run yet, each in its
// own transaction, and records it in VersionTable. It holds the
// session-level advisory lock MigrationLockKey for the whole run, so app
// instances that start together may all call it: one migrates, the others
// wait for it (up to the lock timeout) and then find nothing to do.
//
// Before it migrates anything, and at every call, Up makes sure that the
// reserved worker snowflake_id() is to use is used by no other
// snowflake_id() whose IDs can meet these: none in another schema of the
// database, none in another database of its ID space (WithIDSpace). It
// refuses otherwise with ErrWorkerConflict, having created and changed
// nothing.
//
// db must be a PostgreSQL database, through any database/sql driver (pgx's
// stdlib, lib/pq). Migrations are created in the first schema of the
// connection's search_path.
func Up(ctx context.Context, db *sql.DB, opts ...Option) (err error) {
	o := options{lockTimeout: DefaultLockTimeout, reservedWorker: -1}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return err
		}
	}
	locker, err := newLocker(o)
	if err != nil {
		return err
	}
	p, err := newProvider(db, o)
	if err != nil {
		return err
	}

	// The lock is held on a session of Up's own, which also runs the
	// checks and the change of the reserved worker. goose then needs no
	// lock of its own: it would skip it anyway when nothing is pending,
	// and the checks must run at every start.
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	defer conn.Close()
	if err := locker.SessionLock(ctx, conn); err != nil {
		return fmt.Errorf("migrations: lock: %w", err)
	}
	defer func() {
		if uerr := locker.SessionUnlock(context.WithoutCancel(ctx), conn); uerr != nil {
			// A session that may still hold the lock must not go back to
			// the pool, where it would block every later Up.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			err = errors.Join(err, fmt.Errorf("migrations: unlock: %w", uerr))
		}
	}()

	if err := checkWorkers(ctx, conn, o); err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: up: %w", err)
	}
	if o.reservedWorker >= 0 {
		if err := setReservedWorker(ctx, conn, o.reservedWorker); err != nil {
			return err
		}
	}
	return nil
}

// Version returns the number of the last migration applied to db, 0 for
// none.
func Version(ctx context.Context, db *sql.DB) (int64, error) {
	p, err := newProvider(db, options{lockTimeout: DefaultLockTimeout})
	if err != nil {
		return 0, err
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrations: version: %w", err)
	}
	return v, nil
}

// newLocker returns goose's session locker on MigrationLockKey, polled
// once a second for the lock timeout.
func newLocker(o options) (lock.SessionLocker, error) {
	tries := uint64(math.Ceil(o.lockTimeout.Seconds()))
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(MigrationLockKey), lock.WithLockTimeout(1, tries))
	if err != nil {
		return nil, fmt.Errorf("migrations: lock: %w", err)
	}
	return locker, nil
}

// newProvider returns goose's provider for FS, without a lock: Up holds
// the lock itself.
func newProvider(db *sql.DB, o options) (*goose.Provider, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", idtype.ErrInvalidOptions)
	}
	popts := []goose.ProviderOption{
		goose.WithTableName(VersionTable),
		goose.WithDisableGlobalRegistry(true),
	}
	if o.logger != nil {
		popts = append(popts, goose.WithSlog(o.logger), goose.WithVerbose(true))
	} else {
		popts = append(popts, goose.WithLogger(goose.NopLogger()))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS, popts...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// ReservedWorkerOf returns the worker number snowflake_id() uses in db:
// ReservedWorker unless Up was given WithReservedWorker. Worker leases
// read it to know which number to skip. The error wraps ErrNotMigrated
// when db has no snowflake_id().
func ReservedWorkerOf(ctx context.Context, db *sql.DB) (int64, error) {
	if err := checkMigrated(ctx, db); err != nil {
		return 0, err
	}
	var w int64
	if err := db.QueryRowContext(ctx, "SELECT snowflake_reserved_worker()").Scan(&w); err != nil {
		return 0, fmt.Errorf("migrations: read the reserved worker: %w", err)
	}
	return w, nil
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// checkMigrated returns an error wrapping ErrNotMigrated when the
// connection's search_path reaches no snowflake_reserved_worker(). It asks
// the catalog, so it works the same with every driver.
func checkMigrated(ctx context.Context, q querier) error {
	var ok bool
	if err := q.QueryRowContext(ctx, "SELECT to_regprocedure('snowflake_reserved_worker()') IS NOT NULL").Scan(&ok); err != nil {
		return fmt.Errorf("migrations: look for snowflake_reserved_worker(): %w", err)
	}
	if !ok {
		return fmt.Errorf("%w: no function snowflake_reserved_worker() on the search_path", ErrNotMigrated)
	}
	return nil
}

// setReservedWorker replaces snowflake_reserved_worker() with one that
// returns w, in the schema where it is, unless it returns w already. conn
// holds the migration lock, so that instances starting together do not
// replace the function at once (PostgreSQL refuses concurrent replacement
// with "tuple concurrently updated").
func setReservedWorker(ctx context.Context, conn *sql.Conn, w int64) (err error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrations: set reserved worker: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := checkMigrated(ctx, tx); err != nil {
		return err
	}
	var (
		schema string
		cur    int64
	)
	err = tx.QueryRowContext(ctx, `SELECT n.nspname, snowflake_reserved_worker()
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE p.oid = 'snowflake_reserved_worker()'::regprocedure`).Scan(&schema, &cur)
	if err != nil {
		return fmt.Errorf("migrations: set reserved worker: %w", err)
	}
	if cur == w {
		return tx.Rollback()
	}
	ddl := "CREATE OR REPLACE FUNCTION " + pgx.Identifier{schema, "snowflake_reserved_worker"}.Sanitize() +
		"() RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT " + strconv.FormatInt(w, 10) + "::bigint'"
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("migrations: set reserved worker to %d: %w", w, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrations: set reserved worker to %d: %w", w, err)
	}
	return nil
}

package migrations

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/workerid"
)

// DefaultLockTimeout is how long Up waits for another instance's migration
// run to finish when Options.LockTimeout is zero.
const DefaultLockTimeout = 5 * time.Minute

// Options configure Up. The zero value of every field is a safe default,
// said in the field's doc, so migrations.Up(ctx, db, migrations.Options{})
// is the common call. A bad value is an error wrapping
// idtype.ErrInvalidOptions that names the field.
type Options struct {
	// Logger receives a line for each migration Up applies. Nil means Up
	// logs nothing.
	Logger *slog.Logger
	// LockTimeout bounds how long Up waits for the migration lock while
	// another instance holds it. Zero means DefaultLockTimeout (5
	// minutes). A negative value is an error, and so is one under 1 s,
	// since the lock is polled once a second.
	LockTimeout time.Duration
	// ReservedWorker makes snowflake_id() use this worker number, 1..1023,
	// instead of workerid.SQLWorker (1023), for a fleet whose worker leases
	// must keep 1023, or a second schema or database whose IDs meet these
	// (see the package doc). Up changes it after migrating, under the
	// migration lock, and only when it differs; every session sees the new
	// number from its next call. Postgres pools of package workerid read
	// the number from the database and skip it.
	//
	// Choose it before the first ID is issued and keep it: IDs that
	// snowflake_id() issued with the old number may collide with those of
	// an app generator that later leases that number.
	//
	// Zero leaves the number as it is: workerid.SQLWorker on a fresh
	// database, and what an earlier Up set otherwise (a database set to
	// 1000 stays at 1000). Worker 0 cannot be reserved for SQL.
	ReservedWorker int64
	// IDSpace puts the database in the ID space of this name (1 to 63
	// letters, digits, '_', '-', '.'). Databases of one PostgreSQL cluster
	// whose IDs meet, such as the shards of one app, share a space, and Up
	// refuses to give two of them one reserved worker (ErrWorkerConflict).
	// Up records the database's space and its schemas' workers in the
	// database's setting SpaceSetting, which every database of the cluster
	// can read; once recorded, the database stays in its space. Writing
	// the record takes a role that may set that setting (ErrIDSpace says
	// how).
	//
	// Empty means the space the database is recorded in, if any, and Up
	// keeps checking it; a database in no space is not compared with
	// other databases, since separate databases cannot meet unless the
	// app makes them.
	IDSpace string
	// WorkerPool gives the database server its own worker number, for
	// several servers whose snowflake_id() IDs meet each other's and the
	// app fleet's: shards, regions, the nodes of a cluster that each take
	// inserts. Up claims a number for good from the pool, the app fleet's
	// (workerid.Redis or workerid.Postgres, with idtype.DefaultLayout), so
	// that no lease of the fleet and no other server ever gets it, and
	// makes snowflake_id() use it (see "Several servers" in the package
	// doc). At every later call Up finds the claim again, so it gives the
	// same number: pass the pool at every start. The number belongs to the
	// server's system identifier and timeline: after a restart it stays,
	// while a promoted standby or a promoted copy refuses to issue until
	// Up, with the pool, claims it a number of its own.
	//
	// Nil leaves the number as it is: workerid.SQLWorker on a fresh
	// database, which suits one database server. It cannot be given with
	// ReservedWorker.
	WorkerPool *workerid.Pool
}

// resolve checks the options given to Up and fills in the defaults.
func resolve(o Options) (Options, error) {
	switch {
	case o.LockTimeout < 0:
		return o, fmt.Errorf("%w: LockTimeout %v is negative", idtype.ErrInvalidOptions, o.LockTimeout)
	case o.LockTimeout == 0:
		o.LockTimeout = DefaultLockTimeout
	case o.LockTimeout < time.Second:
		return o, fmt.Errorf("%w: LockTimeout %v is under 1s", idtype.ErrInvalidOptions, o.LockTimeout)
	}
	if max := idtype.DefaultLayout.MaxWorker(); o.ReservedWorker < 0 || o.ReservedWorker > max {
		return o, fmt.Errorf("%w: ReservedWorker %d is outside 1..%d (zero leaves the number as it is)",
			idtype.ErrInvalidOptions, o.ReservedWorker, max)
	}
	if o.WorkerPool != nil {
		if o.ReservedWorker != 0 {
			return o, fmt.Errorf("%w: ReservedWorker %d with WorkerPool: the pool gives the number",
				idtype.ErrInvalidOptions, o.ReservedWorker)
		}
		if l := o.WorkerPool.Layout(); !sameLayout(l, idtype.DefaultLayout) {
			return o, fmt.Errorf("%w: WorkerPool leases numbers of a layout with %d worker bits, %d sequence bits and epoch %v; "+
				"snowflake_id() issues IDs of idtype.DefaultLayout, which only a pool of that layout shares",
				idtype.ErrInvalidOptions, l.WorkerBits, l.SequenceBits, l.Epoch)
		}
	}
	if o.IDSpace != "" {
		if err := checkSpaceName(o.IDSpace); err != nil {
			return o, fmt.Errorf("%w: IDSpace: %v", idtype.ErrInvalidOptions, err)
		}
	}
	return o, nil
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
// database, none in another database of its ID space (Options.IDSpace). It
// refuses otherwise with ErrWorkerConflict, having created and changed
// nothing.
//
// db must be a PostgreSQL database, through any database/sql driver (pgx's
// stdlib, lib/pq). Migrations are created in the first schema of the
// connection's search_path.
func Up(ctx context.Context, db *sql.DB, opts Options) error {
	return up(ctx, db, opts, defences{}, "")
}

// defences switch Up's defences off, one by one, for the control runs of
// this package's tests, which show that each test reaches the fault its
// defence is for. The zero value, every defence on, is the only one Up,
// Fork and CheckServers use; only export_test.go passes another.
type defences struct {
	// noTimeline: a server's claim is named, and snowflake_id() checks
	// where it runs, by system identifier and database alone, as before
	// timelines: a promoted standby, or a promoted copy, keeps the number
	// of the server it came from.
	noTimeline bool
	// noSharedWarning: Up without a pool says nothing of the signs that
	// the server shares its IDs with other servers.
	noSharedWarning bool
	// noCopyCheck: CheckServers does not tell apart two servers that
	// share a system identifier and a timeline but not their start.
	noCopyCheck bool
	// noPrivileges: Up does not apply privilegesMigration, as before it
	// was written: a role needs grants on snowflake_id()'s sequences to
	// call it, and a role granted UPDATE on them keeps it.
	noPrivileges bool
	// noPinnedPath: snowflake_id_slow() runs as its owner with the
	// caller's search_path, as privilegesMigration would make it without
	// its SET clause.
	noPinnedPath bool
}

// privilegesMigration lets every role that may execute snowflake_id() call
// it, and no role but the owner move its state.
const privilegesMigration = "00007_snowflake_id_privileges.sql"

// up is Up with the defences d, and, when fork is not empty, a copy's new
// name (Fork).
func up(ctx context.Context, db *sql.DB, opts Options, d defences, fork string) (err error) {
	o, err := resolve(opts)
	if err != nil {
		return err
	}
	locker, err := newLocker(o)
	if err != nil {
		return err
	}
	var skip []goose.ProviderOption
	if d.noPrivileges {
		skip = append(skip, goose.WithExcludeNames([]string{privilegesMigration}))
	}
	p, err := newProvider(db, FS, o, skip...)
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

	srv, err := prepareServer(ctx, conn, o, d, fork)
	if err != nil {
		return err
	}
	check := o
	if srv.claim != nil {
		check.ReservedWorker = srv.claim.Worker
	}
	if err := checkWorkers(ctx, conn, check); err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrations: up: %w", err)
	}
	if d.noPinnedPath {
		if _, err := conn.ExecContext(ctx, "ALTER FUNCTION snowflake_id_slow() RESET search_path"); err != nil {
			return fmt.Errorf("migrations: %w", err)
		}
	}
	if o.ReservedWorker != 0 {
		if err := setReservedWorker(ctx, conn, o.ReservedWorker); err != nil {
			return err
		}
	}
	if srv.claim != nil {
		return configureServer(ctx, conn, srv, o.WorkerPool.Namespace(), d)
	}
	if o.Logger != nil && !d.noSharedWarning {
		warnShared(ctx, conn, o.Logger, srv)
	}
	return nil
}

// Version returns the number of the last migration applied to db, 0 for
// none. It only reads: on a database Up has not run on it answers 0 and
// creates nothing, and it answers on a read-only connection, a standby,
// or for a role that may not create tables. Migrations are looked for on
// the connection's search_path, where Up creates them.
func Version(ctx context.Context, db *sql.DB) (int64, error) {
	if db == nil {
		return 0, fmt.Errorf("%w: nil *sql.DB", idtype.ErrInvalidOptions)
	}
	// goose's own GetDBVersion creates its table first, which a read-only
	// database refuses (after retries): ask the catalog, then the table.
	var exists bool
	if err := db.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL", VersionTable).Scan(&exists); err != nil {
		return 0, fmt.Errorf("migrations: version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int64
	if err := db.QueryRowContext(ctx, "SELECT COALESCE(max(version_id), 0) FROM "+VersionTable).Scan(&v); err != nil {
		return 0, fmt.Errorf("migrations: version: %w", err)
	}
	return v, nil
}

// newLocker returns goose's session locker on MigrationLockKey, polled
// once a second for the lock timeout.
func newLocker(o Options) (lock.SessionLocker, error) {
	tries := uint64(math.Ceil(o.LockTimeout.Seconds()))
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(MigrationLockKey), lock.WithLockTimeout(1, tries))
	if err != nil {
		return nil, fmt.Errorf("migrations: lock: %w", err)
	}
	return locker, nil
}

// newProvider returns goose's provider for fsys (FS, or a test's), without
// a lock: Up holds the lock itself; more are goose's options beside Up's.
func newProvider(db *sql.DB, fsys fs.FS, o Options, more ...goose.ProviderOption) (*goose.Provider, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", idtype.ErrInvalidOptions)
	}
	popts := []goose.ProviderOption{
		goose.WithTableName(VersionTable),
		goose.WithDisableGlobalRegistry(true),
	}
	if o.Logger != nil {
		popts = append(popts, goose.WithSlog(o.Logger), goose.WithVerbose(true))
	} else {
		popts = append(popts, goose.WithLogger(goose.NopLogger()))
	}
	popts = append(popts, more...)
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, popts...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// ReservedWorkerOf returns the worker number snowflake_id() uses in db:
// workerid.SQLWorker unless Up was given Options.ReservedWorker. Worker leases
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
	// The body, not a call: a body Up wrote before
	// snowflake_server_worker() was made checks where it runs, and
	// refuses to be called on a copy of its database.
	var schema, src string
	err = tx.QueryRowContext(ctx, `SELECT n.nspname, p.prosrc
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE p.oid = 'snowflake_reserved_worker()'::regprocedure`).Scan(&schema, &src)
	if err != nil {
		return fmt.Errorf("migrations: set reserved worker: %w", err)
	}
	// snowflake_server_worker() is replaced with it, unless it holds the
	// claim of this very number: it calls snowflake_reserved_worker(), and
	// a plan that folded it into a constant depends on it alone, so that
	// only its replacement tells PostgreSQL to plan again. A number
	// claimed for the server (Options.WorkerPool) that w replaces no
	// longer holds: snowflake_id() issues on w, unchecked.
	var server sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE p.proname = 'snowflake_server_worker' AND p.pronargs = 0 AND n.nspname = $1`, schema).Scan(&server)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("migrations: set reserved worker: %w", err)
	}
	rec, claimed, _ := parseServerBody(server.String)
	replaceClaim := claimed && rec.Worker != w
	if m := workerSource.FindStringSubmatch(src); m != nil && m[1] == strconv.FormatInt(w, 10) && !replaceClaim {
		return tx.Rollback()
	}
	ddl := "CREATE OR REPLACE FUNCTION " + pgx.Identifier{schema, "snowflake_reserved_worker"}.Sanitize() +
		"() RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT " + strconv.FormatInt(w, 10) + "::bigint'"
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("migrations: set reserved worker to %d: %w", w, err)
	}
	if server.Valid && (replaceClaim || !claimed) {
		ddl := "CREATE OR REPLACE FUNCTION " + pgx.Identifier{schema, "snowflake_server_worker"}.Sanitize() +
			"() RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS " + serverQuote + "SELECT " +
			pgx.Identifier{schema, "snowflake_reserved_worker"}.Sanitize() + "()" + serverQuote
		if _, err := tx.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("migrations: set reserved worker to %d: %w", w, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrations: set reserved worker to %d: %w", w, err)
	}
	return nil
}

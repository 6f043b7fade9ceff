package migrations

import "embed"

// FS holds every migration Up applies: the files NNNNN_name.sql of this
// folder, in goose format, numbered in one sequence and applied in its
// order. They create snowflake_id() and its state, the time functions,
// and the table of workerid.Postgres's worker leases. Up applies them;
// other tools that read goose files (the goose command, a test fixture)
// can too.
//
//go:embed *.sql
var FS embed.FS

// VersionTable is the table in which Up records the migrations it has
// applied. It is not goose's default table, so an app that also runs its
// own goose migrations keeps the two histories apart.
const VersionTable = "snowkey_db_version"

// Advisory lock keys. Apps that take advisory locks of their own should
// stay clear of these two keys.
const (
	// MigrationLockKey is the session-level advisory lock that Up holds
	// while it migrates ("snowkey0" in ASCII).
	MigrationLockKey int64 = 8317708120493488432
	// SnowflakeLockKey is the transaction-level advisory lock that
	// snowflake_id() holds for a few microseconds while it moves its state
	// ("snowkey1" in ASCII).
	SnowflakeLockKey int64 = 8317708120493488433
)

// SQLSTATE codes of the errors snowflake_id() raises. With pgx, match them
// on (*pgconn.PgError).Code.
const (
	// SQLStateClockBehind means the database's clock is more than 1 s
	// behind the last ID issued (the clock was set back), so the call
	// would have had to wait longer than that. Nothing was issued;
	// retrying later is safe.
	SQLStateClockBehind = "SK001"
	// SQLStateTimeExhausted means the clock is past the last millisecond
	// the layout holds, 2080-07-10T17:30:30.208Z.
	SQLStateTimeExhausted = "SK002"
	// SQLStateNoServerWorker means the worker number of snowflake_id()
	// was claimed for another server, timeline or database
	// (Options.WorkerPool): this database is a copy of that one or a
	// standby promoted in its place (a failover, a copy made with
	// pg_basebackup and promoted, a restore to a point in time, a restored
	// dump, CREATE DATABASE ... TEMPLATE, a server moved by pg_upgrade),
	// and issuing on the number would repeat the other's IDs, which it may
	// still issue. Nothing was issued; run Up with Options.WorkerPool to
	// claim a number for this database.
	SQLStateNoServerWorker = "SK005"
)

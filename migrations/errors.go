package migrations

import "errors"

// Errors of this package. Each is wrapped with detail; match with
// errors.Is. A bad option wraps idtype.ErrInvalidOptions, the one
// sentinel of every snowkey constructor.
var (
	// ErrNotMigrated means the database lacks what Up creates: Up has not
	// run on it (or not in the schema the connection's search_path
	// names).
	ErrNotMigrated = errors.New("migrations: database not migrated (run migrations.Up)")
	// ErrWorkerConflict means Up would give snowflake_id() a reserved
	// worker that another snowflake_id() whose IDs can meet these already
	// uses: one in another schema of the database, or in another database
	// of the same ID space (Options.IDSpace). Two such functions would issue
	// the same IDs. The error names the other schema or database and a
	// free number; Up created and changed nothing. CheckServers reports
	// with it two servers that issue on one number.
	ErrWorkerConflict = errors.New("migrations: reserved worker already used by another snowflake_id()")
	// ErrIDSpace means Up could not read or write the records of an ID
	// space (Options.IDSpace): the role may not set the database's
	// snowkey.reserved_workers, another database's record is not
	// readable, or the database is recorded in another space. The error
	// says which and how to fix it; Up created and changed nothing.
	ErrIDSpace = errors.New("migrations: ID space record")
	// ErrNoServerWorker means the database's snowflake_id() has no worker
	// number it may issue on: the number it has was claimed for another
	// server, timeline or database (Options.WorkerPool), of which this one
	// is a copy or a promoted standby, so snowflake_id() refuses with
	// SQLStateNoServerWorker. Up with Options.WorkerPool claims a number
	// for this database. CheckServers also reports a database that
	// refuses with it.
	ErrNoServerWorker = errors.New("migrations: no worker number claimed for this database server")
)

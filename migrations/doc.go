// Package migrations holds snowkey's SQL for PostgreSQL, in goose format
// and embedded in the binary (FS), and a small runner, Up, that applies it.
//
//	db, _ := sql.Open("pgx", os.Getenv("DATABASE_URL"))
//	if err := migrations.Up(ctx, db, migrations.Options{}); err != nil {
//		log.Fatal(err)
//	}
//
// What it creates:
//
//   - snowflake_id(), a PL/pgSQL function that issues snowflake IDs inside
//     the database, for rows inserted by plain SQL (see below).
//   - snowflake_reserved_worker(), the worker number snowflake_id() puts in
//     its IDs; ReservedWorkerOf reads it. snowflake_server_worker() is the
//     number snowflake_id() asks for, checked where it runs when it was
//     claimed for a server (see "Several servers").
//   - snowflake_id_state and snowflake_id_seq, the sequences that hold
//     snowflake_id()'s state: the first ID of the millisecond it issues
//     in, and the last ID it issued. snowflake_id_slow() is the part of
//     snowflake_id() that starts a millisecond or waits for the clock.
//   - snowkey_worker_leases, the table of workerid.Postgres's worker
//     leases.
//   - snowflake_time(id), snowflake_worker(id), snowflake_sequence(id) and
//     snowflake_first_id(t), which take IDs apart and give the first ID of
//     a time (see below).
//
// # Options
//
// Up takes one Options struct by value, migrations.Up(ctx, db,
// migrations.Options{...}), as every snowkey constructor takes its options
// struct: the zero value of each field is the default its doc
// names, and a bad value is an error wrapping idtype.ErrInvalidOptions
// that names the field.
//
// # snowflake_id()
//
// A key column can default to it:
//
//	CREATE TABLE audit (id bigint PRIMARY KEY DEFAULT snowflake_id(), ...)
//
// and with GORM, `gorm:"primaryKey;default:snowflake_id()"` leaves the key
// to the database (gormplugin does not fill it). Its IDs decode with
// idtype.DefaultLayout (same widths, same epoch), strictly increase across
// all sessions and transactions, and carry a reserved worker number
// (workerid.SQLWorker, 1023, unless changed with Options.ReservedWorker)
// that no app generator may lease, so they never collide with the app's. When a
// millisecond's 4,096 IDs are spent it waits for the next millisecond
// instead of wrapping; when the database's clock is behind the last ID it
// waits up to 1 s and then fails with SQLSTATE SQLStateClockBehind. The
// file 00001_snowflake_id.sql states its rules in full.
//
// Most calls cost one read of the state and one nextval, without a lock:
// the function is one SQL expression that the planner inlines into the
// calling query. About once a millisecond, and when the clock is behind,
// a call takes a lock for a few microseconds to start the next
// millisecond (or to wait); 00004_snowflake_id_fast_path.sql says why the
// IDs stay unique and increasing.
//
// # Roles
//
// Any role that may EXECUTE snowflake_id() (PUBLIC may, as for every
// function, unless the operator revokes it) calls it with no grant on its
// state, and no role but the state's owner, the role Up ran as, may move
// the state: a role that could setval it could make snowflake_id() repeat
// IDs. The fast path runs as the caller, inlined, and needs to read
// snowflake_id_state and take nextval of snowflake_id_seq, which PUBLIC
// may (SELECT, USAGE) and which moves nothing back; snowflake_id_slow(),
// which starts each millisecond with setval, runs as the owner (SECURITY
// DEFINER) with its search_path pinned to pg_catalog and pg_temp. Roles
// granted UPDATE on either sequence before (by default privileges, or as
// earlier versions' docs asked) lose it at the upgrade. The time functions
// need EXECUTE on themselves alone. 00007_snowflake_id_privileges.sql
// states the rules in full; docs/operations.md says what each role needs.
//
// # Time functions
//
// A snowflake carries its creation time, so SQL can read it from the key:
//
//	SELECT id, snowflake_time(id) AS created FROM events
//	WHERE id >= snowflake_first_id(now() - interval '1 day')
//
// snowflake_time(id) is when the ID was issued (timestamptz, to the
// millisecond), snowflake_worker(id) and snowflake_sequence(id) its other
// two fields, and snowflake_first_id(t) the smallest ID of the millisecond
// of t, as idtype.Layout.FirstID gives it (0 before the epoch, MaxID past
// the layout's last time). They decode with idtype.DefaultLayout; each has
// a variant for any layout, which takes it as three more arguments:
// snowflake_time(id, epoch, worker_bits, sequence_bits). They agree with
// idtype on every ID, are IMMUTABLE, so they work in index expressions,
// generated columns and partition bounds, and are inlined into the calling
// query. An ID of 0 or less fails with SQLSTATE SQLStateInvalidID, a layout
// that idtype refuses with SQLStateInvalidLayout.
//
// # Schemas, databases and shards
//
// Each snowflake_id() keeps its own state, so two of them must never use
// one reserved worker when their IDs can meet: they would issue the same
// IDs. Up refuses that (ErrWorkerConflict, naming the other function and a
// free number) before it creates or changes anything, at every call:
//
//   - Schemas of one database always can meet. Up compares the worker it
//     is about to use with that of every other schema of the database
//     that has snowflake_reserved_worker(). A second schema happens by
//     accident, too: a role's default search_path is "$user", public, and
//     once a schema named after the role exists, Up migrates there.
//   - Databases of one cluster meet only if the app makes them (shards of
//     one app, data moved between them). Put those in one ID space with
//     Options.IDSpace: Up records each database's space and workers in the
//     database's SpaceSetting, which every database of the cluster can
//     read, and refuses a worker another database of the space uses.
//     Writing the record needs a superuser, or on PostgreSQL 15 and later a
//     role granted SET ON PARAMETER snowkey.reserved_workers that owns the
//     database; Up refuses with ErrIDSpace, saying so, when it may not.
//   - Shards on other clusters cannot be seen from here. Give each its own
//     number: Options.WorkerPool claims one from the app fleet's lease
//     store (see below), Options.ReservedWorker sets one by hand.
//
// Whatever number a database uses, the app's worker leases must skip it,
// and the numbers of every schema and database its IDs meet:
// ReservedWorkers lists those Up knows of, for workerid.Options.Reserved.
//
// # Several servers
//
// Every database server whose snowflake_id() IDs meet other servers' and
// the app fleet's (shards, regions, the nodes of a cluster that each take
// inserts) needs a worker number of its own that no app instance leases.
// Give Up the app fleet's worker pool:
//
//	pool, err := workerid.Redis(rdb, workerid.Options{Namespace: "api"})
//	…
//	err = migrations.Up(ctx, db, migrations.Options{WorkerPool: pool})
//
// Up claims a number from the pool for good (workerid.Pool.Claim), before
// it migrates anything, and then makes snowflake_id() use it; the fleet's
// leases never get that number. Called again, Up finds the same claim.
// When the number was used before, Up starts snowflake_id()'s state after
// the number's high-water mark and waits until the database's clock has
// passed it, as a new lease would (at most two TTLs of the pool).
//
// A number belongs to what runs, not to the bytes that a copy carries
// along: the claimant is "postgres:<system identifier>:<timeline>/<database>/<schema>".
// The system identifier is drawn by initdb and shared by every copy and
// standby of a server; the timeline is the one PostgreSQL writes on, which
// it starts anew whenever a server takes writes on a history that another
// may go on writing: a standby promoted (a failover, a copy made with
// pg_basebackup and promoted), a server restored to a point in time. A
// restart or a crash keeps it, and the number with it: snowflake_id() goes
// on issuing without Up.
//
// snowflake_server_worker() checks, once per plan of a statement that
// calls snowflake_id(), that it runs on the server, the timeline and in the
// database the number was claimed for. Anywhere else (a promoted standby,
// a promoted copy, a restored dump, CREATE DATABASE ... TEMPLATE, a server
// moved by pg_upgrade) snowflake_id() refuses with SQLSTATE
// SQLStateNoServerWorker, and Up without a pool with ErrNoServerWorker,
// until Up with the pool claims a number of its own; on a standby it
// refuses with SQLSTATE 25006. So a promoted standby never repeats an ID
// the old primary returned, whatever its clock and however far it lagged,
// and an old primary that still takes writes after a failover does not
// meet it either: the two issue on two numbers. The price: after a
// failover snowflake_id() refuses until Up runs on the new primary (an app
// start, or a hook of the failover manager that runs it), and the old
// primary's claim keeps its number out of the pool until it is released
// (workerid.Pool.Unclaim, snowkey servers --release) once that server
// takes no more writes.
//
// One kind of copy cannot be told from its original: one that takes
// writes on the original's timeline, started without recovery or
// promotion (a disk snapshot, a stopped server's directory copied, a base
// backup started without standby.signal). PostgreSQL itself cannot tell it
// from the original restarted. Both issue on one number; CheckServers, given
// both, finds them from their start times, and Fork gives the copy a number
// of its own. docs/operations.md says what operators do about it.
//
// Servers lists the servers that claimed numbers in a pool's namespace,
// ServerOf tells where one database's snowflake_id() stands, and
// CheckServers finds the snowflake_id()s among them that would repeat each
// other's IDs; the snowkey command's servers check prints all three. Up
// without a pool warns (Options.Logger) when the database shows that it
// shares rows with other servers (logical replication, claims of other
// servers in its lease table) while issuing on workerid.SQLWorker, the
// number every server migrated without a pool gets. What the lease store
// must keep for claims to hold is in docs/operations.md.
//
// # The runner
//
// Up applies the migrations not yet applied, using pressly/goose's
// Provider. It keeps its own version table (VersionTable), apart from any
// goose table the app keeps for its own migrations, and it is safe to call
// from every app instance at start-up at once: the instances queue on a
// PostgreSQL advisory lock (MigrationLockKey) held for the whole run, and
// the first one does the work.
//
// # Adding a migration
//
// Add a file NNNNN_what.sql to this folder with the next number (no
// gaps, no timestamps), in goose's SQL format:
//
//	-- +goose Up
//	CREATE TABLE ...;
//
//	-- +goose Down
//	DROP TABLE ...;
//
// Wrap statements that contain semicolons of their own (function bodies)
// in "-- +goose StatementBegin" and "-- +goose StatementEnd". Each file
// runs in one transaction. Never edit a file that has been released: an
// installed database has already run it and will not run it again; add a
// new file instead. TestFS checks the numbering.
package migrations

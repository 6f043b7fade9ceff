// Package migrations holds snowkey's SQL for PostgreSQL, in goose format
// and embedded in the binary (FS), and a small runner, Up, that applies it.
//
//	db, _ := sql.Open("pgx", os.Getenv("DATABASE_URL"))
//	if err := migrations.Up(ctx, db); err != nil {
//		log.Fatal(err)
//	}
//
// What it creates:
//
//   - snowflake_id(), a PL/pgSQL function that issues snowflake IDs inside
//     the database, for rows inserted by plain SQL (see below).
//   - snowflake_reserved_worker(), the worker number snowflake_id() puts in
//     its IDs; ReservedWorkerOf reads it.
//   - snowflake_id_state, the sequence that holds snowflake_id()'s last
//     millisecond and sequence.
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
// (ReservedWorker, 1023, unless changed with WithReservedWorker) that no
// app generator may lease, so they never collide with the app's. When a
// millisecond's 4,096 IDs are spent it waits for the next millisecond
// instead of wrapping; when the database's clock is behind the last ID it
// waits up to 1 s and then fails with SQLSTATE SQLStateClockBehind. The
// file 00001_snowflake_id.sql states its rules in full.
//
// The role that calls snowflake_id() needs USAGE and UPDATE on
// snowflake_id_state; the migrations grant nothing, since most apps run
// them as the role they query with.
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
// Add a file NNNNN_what.sql to this folder with the next number (00002_,
// 00003_, ...; no gaps, no timestamps), in goose's SQL format:
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

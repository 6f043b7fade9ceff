// Package adopt moves an existing schema's serial, bigserial and
// identity primary keys onto snowflakes, in place.
//
// Tables with serial, bigserial or identity keys, and foreign keys into
// them, can move to snowflakes in place. NewPlan reads the catalog and
// works out the statements; Plan.SQL prints them with the locks each
// takes (what `snowkey adopt --dry-run` shows); Plan.Apply runs them
// in one transaction:
//
//	plan, err := adopt.NewPlan(ctx, sqlDB, []string{"users", "posts"}, adopt.Options{})
//	if err != nil {
//		log.Fatal(err) // a refusal names what is in the way
//	}
//	fmt.Print(plan.SQL())
//	err = plan.Apply(ctx, sqlDB)
//
// The plan widens each integer key, and every foreign-key column that
// holds its values (following foreign keys to foreign keys), to bigint;
// drops identities and detaches serial sequences (kept, unused); and sets
// each key's default to snowflake_id() (from migrations.Up), or drops it
// with Options.AppKeys when every insert brings its key, as GORM with
// gormplugin does. Rows, indexes and constraints are kept; plain views on
// widened columns are dropped and created again with their definition,
// owner, comments and privileges. A column of a domain over integer (say
// DOMAIN positive_id AS integer NOT NULL CHECK (VALUE > 0)) cannot be
// widened in place, since PostgreSQL cannot change a domain's base type:
// it moves to the domain's twin over bigint, positive_id_bigint, made in
// the same schema with the same default, constraints, comment, owner and
// privileges, so that it keeps every constraint; the domain itself, and
// columns of it that hold no keys, stay as they are.
//
// Apply sets lock_timeout (Options.LockTimeout), takes an ACCESS
// EXCLUSIVE lock on every table and view it changes, all at once, plans
// again under the locks (ErrChanged if the schema moved meanwhile),
// checks the keys again, runs the statements and commits. Nothing reads or
// writes those tables until it commits: widening a column rewrites its
// table and rebuilds its indexes, a time that grows with the table (about
// 3 s for a 1,000,000-row table and a 1,000,000-row table that refers to
// it, on 2 cores), while a key that is bigint already only changes its
// default, in milliseconds. Writers that arrive meanwhile wait; when a long
// transaction holds a table, Apply gives up after the lock timeout instead
// of making every query on the table queue behind it. After a widening,
// each pooled connection's cached prepared statements that return the
// widened columns fail once with "cached plan must not change result type"
// (SQLSTATE 0A000), and work again from the next call: retry such
// statements, or restart the app's pools after adopting. The same holds
// for PL/pgSQL functions that read the widened columns (triggers, say):
// each session's cached plan of them fails once.
//
// The script SQL prints sets search_path to pg_catalog alone, as Apply
// does, and every name in it is schema-qualified (view definitions too),
// so that psql runs the same statements whatever search_path it starts
// with. The tables to adopt are named on the caller's search_path when
// NewPlan runs.
//
// NewPlan refuses, naming every problem at once and changing nothing,
// what Apply would fail on or could not do safely: a composite,
// non-integer or generated key (ErrTable); a default that is not a
// sequence (ErrDefault); a BEFORE INSERT trigger that sets the key, which
// would go on issuing its own keys (ErrTrigger); a column PostgreSQL will
// not change the type of, because it is part of a partition key, inherited
// or of a typed table, or because the current user does not own what
// changes (ErrColumn); objects PostgreSQL cannot change a column's type
// under, such as materialized views, rules, triggers that name the column,
// policies and views that other views use (ErrDependents); keys that reach
// the first key new rows would get now, in snowflake_id()'s layout on the
// database's clock and in Options.Layout on the app's, so that new keys
// would not all be greater than old ones (ErrKeyRange); and a missing
// snowflake_id() (ErrFunction). Adopting tables that are adopted already
// plans nothing and changes nothing.
//
// What it cannot see: columns that hold keys without a foreign key, keys
// kept outside the database, and code that reads keys as 32-bit integers
// or as JSON numbers. idtype.ID writes JSON strings; docs/adopt.md in
// the repository says how to phase that in.
package adopt

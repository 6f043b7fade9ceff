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
// owner, comments and privileges.
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
// statements, or restart the app's pools after adopting.
//
// NewPlan refuses, naming every problem at once and changing nothing:
// a composite, non-integer or generated key (ErrTable), a default
// that is not a sequence (ErrDefault), objects PostgreSQL cannot
// change a column's type under, such as materialized views, rules,
// triggers that name the column, policies and views that other views use
// (ErrDependents), keys that reach the first snowflake of now, so
// that new keys would not all be greater than old ones
// (ErrKeyRange), and a missing snowflake_id() (ErrFunction).
// Adopting tables that are adopted already plans nothing and changes
// nothing.
//
// What it cannot see: columns that hold keys without a foreign key, keys
// kept outside the database, and code that reads keys as 32-bit integers
// or as JSON numbers. idtype.ID writes JSON strings; see the README's
// guide for phasing that in.
package adopt

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
// # What a plan changes
//
// A table's key is its one-column primary key, or the one column of a
// composite key whose values come from a sequence or an identity
// (PRIMARY KEY (tenant_id, id), a partitioned table's (created_at, id)).
// The plan widens each integer key, and every foreign-key column that
// holds its values (following foreign keys to foreign keys), to bigint; a
// column that a partition or an inheritance child has from its parent is
// widened on the topmost parent, which reaches every partition. It drops
// identities, detaches serial sequences and keeps them (an identity's
// sequence is copied, with its value, owner and privileges, before DROP
// IDENTITY drops it), and sets each key's default to snowflake_id() (from
// migrations.Up), or drops it with Options.AppKeys when every insert
// brings its key, as GORM with gormplugin does. Rows, indexes and
// constraints are kept.
//
// PostgreSQL will not change a column's type under views, materialized
// views, policies, triggers that name the column, or SQL-standard function
// bodies that read it: the plan drops them and creates them again, each
// with its owner, comments, options, column defaults and exactly the
// privileges it had (what PUBLIC and the adopting role's ALTER DEFAULT
// PRIVILEGES would give a new object is revoked first); a materialized
// view gets back its indexes (with their comments and CLUSTER) and
// statistics targets, and is refreshed, as its owner, if it was populated.
//
// Functions and procedures whose arguments, result or PL/pgSQL variables
// hold keys as integer would fail on the first snowflake (function
// f(bigint) does not exist, integer out of range). A scan of every
// function body, view and policy finds them (an integer named like a key
// column, compared with or assigned one, selected into from one, inserted
// into one, returned as one, or passed to or from another that holds keys)
// and the plan widens them: a function whose arguments or result change is
// dropped and created again with what depends on it; one whose variables
// alone change is replaced in place; a cast to integer compared with keys
// (current_setting('app.tenant')::int = tenant_id) is widened where it
// stands. An integer that meets no key is left as it is. Plan.SQL prints,
// for each, why.
//
// A column of a domain over integer (say DOMAIN positive_id AS integer
// NOT NULL CHECK (VALUE > 0)) cannot be widened in place, since PostgreSQL
// cannot change a domain's base type: it moves to the domain's twin over
// bigint, positive_id_bigint, made in the same schema with the same
// default, constraints, comment, owner and privileges, so that it keeps
// every constraint; the domain itself, and columns of it that hold no
// keys, stay as they are.
//
// # Locks
//
// Apply sets lock_timeout (Options.LockTimeout), takes an ACCESS
// EXCLUSIVE lock on every table and view it changes, all at once, plans
// again under the locks (ErrChanged if the schema moved meanwhile),
// checks the keys again, runs the statements and commits. Nothing reads or
// writes those tables until it commits: widening a column rewrites its
// table and rebuilds its indexes, a time that grows with the table
// (BENCHMARKS.md gives it for a 1,000,000-row table and a 1,000,000-row
// table that refers to it), while a key that is bigint already only
// changes its default, in milliseconds. Writers that arrive meanwhile
// wait; when a long transaction holds a table, Apply gives up after the
// lock timeout instead of making every query on the table queue behind
// it. After a widening, each pooled connection's cached prepared
// statements that return the widened columns fail once with "cached plan
// must not change result type" (SQLSTATE 0A000), and work again from the
// next call: retry such statements, or restart the app's pools after
// adopting. The same holds for PL/pgSQL functions that read the widened
// columns (triggers, say): each session's cached plan of them fails once.
//
// The script SQL prints sets search_path to pg_catalog alone, as Apply
// does, and every name in it is schema-qualified (view definitions too),
// so that psql runs the same statements whatever search_path it starts
// with. The tables to adopt, and Options.AllowTriggers, are named on the
// caller's search_path when NewPlan runs.
//
// # What it refuses
//
// NewPlan refuses, naming every problem at once and changing nothing,
// what Apply would fail on or could not do safely: a key it cannot find,
// or a generated one, a partition or a table in an inheritance tree
// (ErrTable); a default that is not a sequence (ErrDefault); a BEFORE
// INSERT row trigger it cannot prove leaves the key alone, unless the
// caller vouches for it by name, and a rule on INSERT (ErrTrigger); a
// column PostgreSQL will not change the type of (part of a partition key,
// of a typed table, from two parents), or objects the user may not change
// (ErrColumn); objects it does not create again, such as rules, generated
// columns on keys, publications that list the column, and what uses the
// row type of a view it drops (ErrDependents); a function that holds keys
// and that it cannot widen (ErrFunctionKeys); a CHECK constraint that a
// snowflake of now fails, such as VALUE <= 2147483647 (ErrCheck); a table
// whose rows the user may not all read, by a grant or a row-level security
// policy, since the check of the keys rests on its largest key (ErrHidden);
// keys that reach the first key new rows would get now, in snowflake_id()'s
// layout on the database's clock and in Options.Layout on the app's
// (ErrKeyRange); and a missing snowflake_id(), or a role that may insert
// into a table and may not run it (ErrFunction). Adopting tables that are
// adopted already plans nothing and changes nothing.
//
// What it cannot see: columns that hold keys without a foreign key, keys
// kept outside the database, keys that pass through strings or dynamic
// SQL in a function, and code that reads keys as 32-bit integers or as
// JSON numbers. idtype.ID writes JSON strings; docs/adopt.md in the
// repository says how to phase that in.
package adopt

package adopt

import "errors"

// Errors of NewPlan and Plan.Apply. Each is wrapped with detail
// that names the table, column or object; match with errors.Is. A plan
// that finds several problems returns them all, joined. Nothing is
// changed when any of them is returned.
var (
	// ErrTable means a table cannot be adopted: it does not exist, is not
	// a table (a view, a foreign table), is a partition (its partitioned
	// table is adopted) or in an inheritance tree, or its key is missing,
	// not an integer, or a generated column; or its primary key is
	// composite and not exactly one of its columns takes values from a
	// sequence or an identity.
	ErrTable = errors.New("adopt: cannot adopt table")
	// ErrDefault means a key's default is neither a sequence
	// (serial, bigserial, nextval), an identity, nor snowflake_id(), so
	// adopting would replace something adopt does not know.
	ErrDefault = errors.New("adopt: key default is not a sequence")
	// ErrTrigger means a BEFORE INSERT row trigger of a table (or of one
	// of its partitions) is not proven to leave its key alone, or a rule
	// rewrites its inserts: one that sets the key (NEW.id := nextval(...),
	// or r := NEW; r.id := ...; RETURN r) would override the new default,
	// and the table would go on issuing the trigger's keys. Proven are
	// PL/pgSQL functions that return NEW (or OLD or NULL) and name NEW only
	// as NEW.column of other columns, and PostgreSQL's full-text trigger;
	// vouch for any other by name with Options.AllowTriggers. It also
	// means Options.AllowTriggers names no such trigger. The error names
	// each trigger, its function and why.
	ErrTrigger = errors.New("adopt: a trigger sets the key")
	// ErrColumn means a column that must become bigint is one PostgreSQL
	// will not change the type of: part of a partition key (SQLSTATE
	// 42P16), of a typed table, had from two parent tables, of a domain
	// over a domain; or the current user may not change what the plan
	// changes (a table, view, function or sequence of another owner, a
	// schema where it cannot make a domain's twin over bigint or a copy of
	// a sequence); or a domain's twin, or the copy of an identity's
	// sequence, cannot be made under its name. The error names each.
	ErrColumn = errors.New("adopt: a column cannot become bigint")
	// ErrDependents means objects depend on a column that must become
	// bigint, or on a view or function the plan drops and creates again,
	// and adopt does not create them again: a rule, a generated column, a
	// publication that lists the column or filters rows by it, an index,
	// constraint or default that calls a function whose arguments are
	// widened, and anything that uses the row type of such a view (a
	// function that returns it, a column of it), which PostgreSQL would
	// drop with the view or refuse to. The error names each, and for a
	// function the statement that widens it; drop them, adopt, and create
	// them again.
	ErrDependents = errors.New("adopt: objects depend on a key column")
	// ErrKeyRange means a table holds keys that are not all below the
	// first key that new rows would get now, so new keys would not all be
	// greater than the old ones, and could meet them: the first key of
	// snowflake_id() (idtype.DefaultLayout on the database's clock), and
	// the first key of Options.Layout (the app's, on this clock). The
	// error names the one the table reaches.
	ErrKeyRange = errors.New("adopt: existing keys reach the snowflake range")
	// ErrFunction means snowflake_id() is not installed in the database
	// (run migrations.Up first, or adopt with AppKeys), or a role that may
	// insert into a table to adopt may not run it (it takes USAGE and
	// UPDATE on snowflake_id_state and snowflake_id_seq): once adopted,
	// every insert of that role that leaves the key to the default would
	// fail. The error names each role with the GRANT that lets it.
	ErrFunction = errors.New("adopt: snowflake_id() cannot be the keys' default")
	// ErrCheck means a CHECK constraint of a column that will hold
	// snowflakes, its domain's or its table's (CHECK (VALUE <=
	// 2147483647)), fails on a snowflake of now, or cannot be read: Apply
	// would pass and every insert would then fail with 23514. The error
	// names each constraint and the key it fails on.
	ErrCheck = errors.New("adopt: a constraint refuses snowflakes")
	// ErrFunctionKeys means a function or procedure holds keys as integer
	// (an argument, its result or a variable) and adopt cannot widen it: it
	// is in a language adopt does not read, its argument is of a domain,
	// or its definition is not as PostgreSQL prints one. The error names
	// each, with what holds keys and the statement that widens it.
	ErrFunctionKeys = errors.New("adopt: a function holds keys as integer")
	// ErrHidden means the current user may not read every row of a table
	// whose rows a decision of the plan rests on (its largest key): it lacks
	// SELECT on it, or row-level security applies to it there. PostgreSQL
	// is asked with row_security off, so that it refuses (SQLSTATE 42501)
	// rather than leave rows out. Adopt as the table's owner (when it
	// does not FORCE ROW LEVEL SECURITY) or as a role with BYPASSRLS.
	ErrHidden = errors.New("adopt: rows are hidden from the current user")
	// ErrChanged means the schema changed between NewPlan and
	// Apply, so the plan is not what Apply would run: plan again.
	ErrChanged = errors.New("adopt: schema changed since the plan")
	// ErrLock means Apply could not take its locks within
	// Options.LockTimeout: another transaction holds one of the
	// tables. The error also wraps PostgreSQL's (SQLSTATE 55P03).
	ErrLock = errors.New("adopt: could not lock the tables in time")
)

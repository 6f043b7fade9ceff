package adopt

import "errors"

// Errors of NewPlan and Plan.Apply. Each is wrapped with detail
// that names the table, column or object; match with errors.Is. A plan
// that finds several problems returns them all, joined. Nothing is
// changed when any of them is returned.
var (
	// ErrTable means a table cannot be adopted: it does not exist, is
	// not an ordinary table (a view, a partitioned table, a table with
	// inheritance), or its primary key is missing, composite, not an
	// integer, or a generated column.
	ErrTable = errors.New("adopt: cannot adopt table")
	// ErrDefault means a key's default is neither a sequence
	// (serial, bigserial, nextval), an identity, nor snowflake_id(), so
	// adopting would replace something adopt does not know.
	ErrDefault = errors.New("adopt: key default is not a sequence")
	// ErrTrigger means a BEFORE INSERT trigger of a table sets its key
	// (NEW.id := nextval(...), common in schemas ported from other
	// databases), or may (its function is in a language adopt cannot
	// read): it would override the new default, and the table would go on
	// issuing the trigger's keys. The error names each trigger and its
	// function.
	ErrTrigger = errors.New("adopt: a trigger sets the key")
	// ErrColumn means a column that must become bigint is one PostgreSQL
	// will not change the type of: part of a partition key (SQLSTATE
	// 42P16), inherited from a parent table, of a typed table; or the
	// current user may not change what the plan changes (a table, view or
	// sequence of another owner, a schema where it cannot make a domain's
	// twin over bigint); or a domain's twin cannot be made. The error names
	// each.
	ErrColumn = errors.New("adopt: a column cannot become bigint")
	// ErrDependents means objects depend on a column that must become
	// bigint, and PostgreSQL would refuse to change the column's type
	// under them: a materialized view, a rule, a trigger whose WHEN or
	// UPDATE OF names the column, a policy, a generated column, a view
	// that other objects depend on. The error names each; drop them,
	// adopt, and create them again.
	ErrDependents = errors.New("adopt: objects depend on a key column")
	// ErrKeyRange means a table holds keys that are not all below the
	// first key that new rows would get now, so new keys would not all be
	// greater than the old ones, and could meet them: the first key of
	// snowflake_id() (idtype.DefaultLayout on the database's clock), and
	// the first key of Options.Layout (the app's, on this clock). The
	// error names the one the table reaches.
	ErrKeyRange = errors.New("adopt: existing keys reach the snowflake range")
	// ErrFunction means snowflake_id() is not installed in the
	// database: run migrations.Up first, or adopt with AppKeys.
	ErrFunction = errors.New("adopt: snowflake_id() is not installed")
	// ErrChanged means the schema changed between NewPlan and
	// Apply, so the plan is not what Apply would run: plan again.
	ErrChanged = errors.New("adopt: schema changed since the plan")
	// ErrLock means Apply could not take its locks within
	// Options.LockTimeout: another transaction holds one of the
	// tables. The error also wraps PostgreSQL's (SQLSTATE 55P03).
	ErrLock = errors.New("adopt: could not lock the tables in time")
)

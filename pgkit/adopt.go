package pgkit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Errors of PlanAdopt and AdoptPlan.Apply. Each is wrapped with detail
// that names the table, column or object; match with errors.Is. A plan
// that finds several problems returns them all, joined. Nothing is
// changed when any of them is returned.
var (
	// ErrAdoptTable means a table cannot be adopted: it does not exist, is
	// not an ordinary table (a view, a partitioned table, a table with
	// inheritance), or its primary key is missing, composite, not an
	// integer, or a generated column.
	ErrAdoptTable = errors.New("pgkit: cannot adopt table")
	// ErrAdoptDefault means a key's default is neither a sequence
	// (serial, bigserial, nextval), an identity, nor snowflake_id(), so
	// adopting would replace something adopt does not know.
	ErrAdoptDefault = errors.New("pgkit: key default is not a sequence")
	// ErrAdoptDependents means objects depend on a column that must become
	// bigint, and PostgreSQL would refuse to change the column's type
	// under them: a materialized view, a rule, a trigger whose WHEN or
	// UPDATE OF names the column, a policy, a generated column, a view
	// that other objects depend on. The error names each; drop them,
	// adopt, and create them again.
	ErrAdoptDependents = errors.New("pgkit: objects depend on a key column")
	// ErrAdoptKeyRange means a table holds keys that are not all below the
	// first snowflake of now (idtype.Layout.FirstID), so new keys would not
	// all be greater than the old ones, and could meet them.
	ErrAdoptKeyRange = errors.New("pgkit: existing keys reach the snowflake range")
	// ErrAdoptFunction means snowflake_id() is not installed in the
	// database: run migrations.Up first, or adopt with AppKeys.
	ErrAdoptFunction = errors.New("pgkit: snowflake_id() is not installed")
	// ErrAdoptChanged means the schema changed between PlanAdopt and
	// Apply, so the plan is not what Apply would run: plan again.
	ErrAdoptChanged = errors.New("pgkit: schema changed since the plan")
	// ErrAdoptLock means Apply could not take its locks within
	// AdoptOptions.LockTimeout: another transaction holds one of the
	// tables. The error also wraps PostgreSQL's (SQLSTATE 55P03).
	ErrAdoptLock = errors.New("pgkit: could not lock the tables in time")
)

// DefaultAdoptLockTimeout is how long Apply waits for each lock when
// AdoptOptions.LockTimeout is zero.
const DefaultAdoptLockTimeout = 5 * time.Second

// AdoptOptions configures PlanAdopt. The zero value adopts with
// snowflake_id() as the keys' default, waits at most
// DefaultAdoptLockTimeout for each lock, and checks the existing keys
// against idtype.DefaultLayout.
type AdoptOptions struct {
	// AppKeys drops the keys' sequence and identity defaults instead of
	// replacing them with snowflake_id(): every insert must then bring its
	// key, as GORM with gormplugin does. Zero means DEFAULT
	// snowflake_id(), so raw SQL inserts get snowflakes too.
	AppKeys bool
	// LockTimeout bounds how long Apply waits for each of its locks
	// (PostgreSQL's lock_timeout, set for the transaction). While it
	// waits, every other query on the table queues behind it; when it
	// runs out, Apply fails with ErrAdoptLock and changes nothing. Zero
	// means DefaultAdoptLockTimeout; negative is an error.
	LockTimeout time.Duration
	// Layout is the layout of the keys to come: every existing key must be
	// below its FirstID of now. Zero means idtype.DefaultLayout, the
	// layout of snowflake_id().
	Layout idtype.Layout

	// defences switches defences off for the control runs of this
	// package's tests; users cannot reach it.
	defences adoptDefences
}

// adoptDefences lists the defences a test may switch off.
type adoptDefences struct {
	noKeyRange   bool // skip the check of existing keys
	noDependents bool // plan without looking at dependent objects
	noLock       bool // no lock_timeout
	noTx         bool // run each statement on its own
}

// AdoptPlan is what adopting a set of tables takes: what PlanAdopt found,
// and the statements Apply runs, in order, in one transaction. An empty
// Steps means the tables are adopted already.
type AdoptPlan struct {
	// Tables describes each table to adopt, as found.
	Tables []AdoptTable
	// Steps are the statements Apply runs after taking its locks, each
	// with the locks it takes.
	Steps []AdoptStep
	// Locks are the tables and views that Apply locks ACCESS EXCLUSIVE
	// before the first step, all at once, and holds until it commits:
	// nothing reads or writes them in between.
	Locks []string

	names []string
	o     AdoptOptions
}

// AdoptTable is one table of a plan, as PlanAdopt found it.
type AdoptTable struct {
	// Name is the table, schema-qualified.
	Name string
	// Key is its primary key column, Type the column's type.
	Key, Type string
	// Default is the key's default: an expression such as
	// nextval('users_id_seq'::regclass) or snowflake_id(), "identity", or
	// "" for none.
	Default string
	// MaxKey is the largest key in the table, 0 when it is empty.
	MaxKey int64
	// Referrers are the foreign-key columns that hold its keys, directly
	// or through other foreign keys, as table.column.
	Referrers []string
}

// AdoptStep is one statement of a plan.
type AdoptStep struct {
	// SQL is the statement.
	SQL string
	// Locks says what the statement locks and for how long, and whether
	// it rewrites a table (a time that grows with the table's size).
	Locks string
}

// PlanAdopt works out how to move the primary keys of tables onto
// snowflakes, without changing anything. Each table is named as in SQL,
// optionally with its schema ("users", "app.users"); it must have a
// one-column integer primary key. The plan:
//
//   - widens the key, and every foreign-key column that holds its values
//     (following foreign keys to foreign keys), to bigint, where they are
//     smaller; plain views on those columns are dropped and created again
//     with their definition, owner, privileges and comment;
//   - drops the key's identity, or detaches its serial sequence (OWNED BY
//     NONE; the sequence is kept, unused);
//   - sets the key's default to snowflake_id(), or drops it (AppKeys); a
//     key that had no default (keys from the app, or a one-to-one key that
//     is another table's) is left without one.
//
// It refuses (ErrAdoptTable, ErrAdoptDefault, ErrAdoptDependents,
// ErrAdoptKeyRange, ErrAdoptFunction) what it cannot do safely, naming
// every problem it finds. Rows, indexes and constraints are kept. A table
// adopted already has no steps: adopting is idempotent.
//
// db is a *sql.DB on PostgreSQL (pgx's stdlib driver, or any other).
func PlanAdopt(ctx context.Context, db *sql.DB, tables []string, opts ...AdoptOptions) (*AdoptPlan, error) {
	o, err := adoptOptionsOf(opts)
	if err != nil {
		return nil, err
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("%w: no table named", ErrAdoptTable)
	}
	return adoptPlan(ctx, db, tables, o)
}

// Apply adopts the plan's tables in one transaction: it sets
// lock_timeout, locks every table of p.Locks, plans again under the locks
// (failing with ErrAdoptChanged if the plan differs, and checking the
// keys again), runs the steps and commits. Any failure rolls everything
// back. An empty plan does nothing.
func (p *AdoptPlan) Apply(ctx context.Context, db *sql.DB) error {
	if len(p.Steps) == 0 {
		return nil
	}
	if p.o.defences.noTx {
		return p.applyUnsafe(ctx, db)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("pgkit: adopt: begin: %w", err)
	}
	defer tx.Rollback()
	for _, stmt := range p.prelude() {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return adoptExecError(stmt, err)
		}
	}
	again, err := adoptPlan(ctx, tx, p.names, p.o)
	if err != nil {
		return err
	}
	if !slices.Equal(again.Steps, p.Steps) || !slices.Equal(again.Locks, p.Locks) {
		return fmt.Errorf("%w: under the locks the plan is now:\n%s", ErrAdoptChanged, again.SQL())
	}
	for _, s := range p.Steps {
		if _, err := tx.ExecContext(ctx, s.SQL); err != nil {
			return adoptExecError(s.SQL, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("pgkit: adopt: commit: %w", err)
	}
	return nil
}

// applyUnsafe runs the steps one by one, outside a transaction: the
// control of the tests that show why Apply uses one.
func (p *AdoptPlan) applyUnsafe(ctx context.Context, db *sql.DB) error {
	for _, s := range p.Steps {
		if _, err := db.ExecContext(ctx, s.SQL); err != nil {
			return adoptExecError(s.SQL, err)
		}
	}
	return nil
}

// prelude is what Apply runs before the steps: the lock timeout and the
// locks.
func (p *AdoptPlan) prelude() []string {
	var out []string
	if !p.o.defences.noLock {
		out = append(out, fmt.Sprintf("SET LOCAL lock_timeout = '%dms'", p.o.LockTimeout.Milliseconds()))
	}
	if len(p.Locks) > 0 {
		out = append(out, "LOCK TABLE "+strings.Join(p.Locks, ", ")+" IN ACCESS EXCLUSIVE MODE")
	}
	return out
}

// SQL returns the whole of what Apply runs, as a script for psql, each
// statement after a comment that says what it locks and for how long:
// what `snowkey adopt --dry-run` prints. Apply also plans again under the
// locks, which the script cannot do.
func (p *AdoptPlan) SQL() string {
	var b strings.Builder
	for _, t := range p.Tables {
		def := t.Default
		if def == "" {
			def = "no default"
		}
		fmt.Fprintf(&b, "-- %s: key %s %s, %s, largest key %d\n", t.Name, t.Key, t.Type, def, t.MaxKey)
		if len(t.Referrers) > 0 {
			fmt.Fprintf(&b, "--   held by %s\n", strings.Join(t.Referrers, ", "))
		}
	}
	if len(p.Steps) == 0 {
		b.WriteString("-- adopted already: nothing to do\n")
		return b.String()
	}
	b.WriteString("BEGIN;\n")
	for _, stmt := range p.prelude() {
		if strings.HasPrefix(stmt, "LOCK") {
			b.WriteString("-- locks: ACCESS EXCLUSIVE on every table and view below, until COMMIT:\n" +
				"-- nothing reads or writes them until then\n")
		}
		b.WriteString(stmt + ";\n")
	}
	for _, s := range p.Steps {
		fmt.Fprintf(&b, "-- %s\n%s;\n", s.Locks, s.SQL)
	}
	b.WriteString("COMMIT;\n")
	return b.String()
}

// adoptExecError wraps a failed statement's error, as ErrAdoptLock when it
// is a lock timeout.
func adoptExecError(stmt string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		return fmt.Errorf("%w: %s: %w", ErrAdoptLock, stmt, err)
	}
	return fmt.Errorf("pgkit: adopt: %s: %w", stmt, err)
}

// adoptOptionsOf returns the one options struct of a call, checked, with
// its defaults.
func adoptOptionsOf(opts []AdoptOptions) (AdoptOptions, error) {
	var o AdoptOptions
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		return o, fmt.Errorf("%w: %d AdoptOptions given; pass at most one", idtype.ErrInvalidOptions, len(opts))
	}
	switch {
	case o.LockTimeout < 0:
		return o, fmt.Errorf("%w: AdoptOptions.LockTimeout %v is negative", idtype.ErrInvalidOptions, o.LockTimeout)
	case o.LockTimeout == 0:
		o.LockTimeout = DefaultAdoptLockTimeout
	case o.LockTimeout < time.Millisecond:
		return o, fmt.Errorf("%w: AdoptOptions.LockTimeout %v is under 1ms", idtype.ErrInvalidOptions, o.LockTimeout)
	}
	if o.Layout.IsZero() {
		o.Layout = idtype.DefaultLayout
	} else if err := o.Layout.Validate(); err != nil {
		return o, fmt.Errorf("%w: AdoptOptions.Layout: %w", idtype.ErrInvalidOptions, err)
	}
	return o, nil
}

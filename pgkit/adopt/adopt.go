package adopt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Plan is what adopting a set of tables takes: what NewPlan found,
// and the statements Apply runs, in order, in one transaction. An empty
// Steps means the tables are adopted already.
type Plan struct {
	// Tables describes each table to adopt, as found.
	Tables []Table
	// Steps are the statements Apply runs after taking its locks, each
	// with the locks it takes.
	Steps []Step
	// Locks are the tables and views that Apply locks ACCESS EXCLUSIVE
	// before the first step, all at once, and holds until it commits:
	// nothing reads or writes them in between.
	Locks []string

	names     []string // the tables, schema-qualified
	fn        string   // snowflake_id(), schema-qualified; "" with AppKeys
	functions bool     // it creates functions again
	o         Options
	defences  defences // zero: every defence on; only export_test.go turns one off
}

// defences lists the defences of a plan, each of which a test may switch
// off (export_test.go) to show that it fails without it; the zero value
// has every defence on.
type defences struct {
	noKeyRange           bool // skip the check of existing keys
	appLayoutOnly        bool // check keys against Options.Layout alone, not snowflake_id()'s
	noDependents         bool // plan without looking at dependent objects
	noColumnCheck        bool // plan without checking that each column can change type
	noOwnerCheck         bool // plan without checking ownership
	noDomains            bool // widen domain-typed columns to plain bigint
	noTriggerCheck       bool // plan without looking for triggers that set keys
	noTriggerProof       bool // look for triggers that set keys by pattern alone, not by proof
	unqualified          bool // read definitions, and run, under the caller's search_path
	noLock               bool // no lock_timeout
	noTx                 bool // run each statement on its own
	noParentColumns      bool // refuse a column a partition or child has from its parent, as PostgreSQL does
	noFunctions          bool // leave functions that hold keys as integer as they are
	noRefresh            bool // create materialized views again without filling them
	noExactPrivileges    bool // grant again what objects had, without revoking what defaults give
	noRowTypeCheck       bool // drop views whose row type something uses
	noCheckValues        bool // skip evaluating constraints on the keys of now
	noRowSecurity        bool // read keys as policies filter them, without checking that nothing is hidden
	dropIdentitySequence bool // let DROP IDENTITY drop an identity's sequence
	noCallerCheck        bool // set snowflake_id() as the default whoever may insert
}

// Table is one table of a plan, as NewPlan found it.
type Table struct {
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

// Step is one statement of a plan.
type Step struct {
	// SQL is the statement.
	SQL string
	// Locks says what the statement locks and for how long, and whether
	// it rewrites a table (a time that grows with the table's size).
	Locks string
}

// NewPlan works out how to move the primary keys of tables onto
// snowflakes, without changing anything. Each table is named as in SQL,
// optionally with its schema ("users", "app.users"), found on the
// connection's search_path; its key is its one-column integer primary
// key, or the one column of a composite primary key whose values come
// from a sequence or an identity. A partitioned table is adopted whole.
// The plan (the package doc says each part at length):
//
//   - widens the key, and every foreign-key column that holds its values
//     (following foreign keys to foreign keys), to bigint, where they are
//     smallint or integer, on the topmost parent of a partition or child;
//     a column of a domain over them goes to the domain's twin over
//     bigint, made with the domain's default and constraints;
//   - drops and creates again, exactly as they were, the views,
//     materialized views (refreshed), policies and triggers PostgreSQL
//     will not change a column's type under, and widens the functions and
//     procedures that hold keys as integer, with what depends on them;
//   - drops the key's identity (keeping a copy of its sequence), or
//     detaches its serial sequence (OWNED BY NONE; kept, unused);
//   - sets the key's default to snowflake_id(), or drops it (AppKeys); a
//     key that had no default (keys from the app, or a one-to-one key that
//     is another table's) is left without one.
//
// It refuses what Apply could not do, or could not do safely, naming
// every problem it finds: ErrTable, ErrDefault, ErrTrigger, ErrColumn,
// ErrDependents, ErrFunctionKeys, ErrCheck, ErrHidden, ErrKeyRange,
// ErrFunction. Rows, indexes and constraints are kept. A table adopted
// already has no steps: adopting is idempotent.
//
// db is a *sql.DB on PostgreSQL (pgx's stdlib driver, or any other). The
// plan reads the catalog in one read-only transaction, and the tables'
// largest keys with row_security off.
func NewPlan(ctx context.Context, db *sql.DB, tables []string, opts Options) (*Plan, error) {
	return newPlan(ctx, db, tables, opts, defences{})
}

func newPlan(ctx context.Context, db *sql.DB, tables []string, opts Options, d defences) (*Plan, error) {
	o, err := opts.check()
	if err != nil {
		return nil, err
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("%w: no table named", ErrTable)
	}
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", idtype.ErrInvalidOptions)
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("adopt: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	return buildPlan(ctx, tx, tables, "", o, d)
}

// Apply adopts the plan's tables in one transaction: it sets
// lock_timeout, locks every table of p.Locks, plans again under the locks
// (failing with ErrChanged if the plan differs, and checking the keys
// again), runs the steps and commits. Any failure rolls everything back.
// An empty plan does nothing. It runs with search_path set to pg_catalog
// alone, as the script of SQL does: every name in the steps is
// schema-qualified.
func (p *Plan) Apply(ctx context.Context, db *sql.DB) error {
	if len(p.Steps) == 0 {
		return nil
	}
	if p.defences.noTx {
		return p.applyUnsafe(ctx, db)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("adopt: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, stmt := range p.prelude(false) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return execError(stmt, err)
		}
	}
	again, err := buildPlan(ctx, tx, p.names, p.fn, p.o, p.defences)
	if err != nil {
		return err
	}
	if !slices.Equal(again.Steps, p.Steps) || !slices.Equal(again.Locks, p.Locks) {
		return fmt.Errorf("%w: under the locks the plan is now:\n%s", ErrChanged, again.SQL())
	}
	for _, s := range p.Steps {
		if _, err := tx.ExecContext(ctx, s.SQL); err != nil {
			return execError(s.SQL, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("adopt: commit: %w", err)
	}
	return nil
}

// applyUnsafe runs the steps one by one, outside a transaction: the
// control of the tests that show why Apply uses one.
func (p *Plan) applyUnsafe(ctx context.Context, db *sql.DB) error {
	for _, s := range p.Steps {
		if _, err := db.ExecContext(ctx, s.SQL); err != nil {
			return execError(s.SQL, err)
		}
	}
	return nil
}

// prelude is what runs before the steps: the lock timeout, the pinned
// search_path (in the script; Apply's plan pins it) and the locks.
func (p *Plan) prelude(script bool) []string {
	var out []string
	if !p.defences.noLock {
		out = append(out, fmt.Sprintf("SET LOCAL lock_timeout = '%dms'", p.o.LockTimeout.Milliseconds()))
	}
	if script && !p.defences.unqualified {
		out = append(out, "SET LOCAL search_path = "+pinnedPath)
	}
	if p.functions {
		// Functions are created in an order that PostgreSQL cannot check
		// a string body against (one may call another made after it), as
		// pg_dump's scripts do.
		out = append(out, "SET LOCAL check_function_bodies = off")
	}
	if len(p.Locks) > 0 {
		out = append(out, "LOCK TABLE "+strings.Join(p.Locks, ", ")+" IN ACCESS EXCLUSIVE MODE")
	}
	return out
}

// SQL returns the whole of what Apply runs, as a script for psql, each
// statement after a comment that says what it locks and for how long:
// what `snowkey adopt --dry-run` prints. It sets its own search_path, and
// names every object with its schema, so it does the same whatever
// search_path it is run under. Apply also plans again under the locks,
// which the script cannot do.
func (p *Plan) SQL() string {
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
	for _, stmt := range p.prelude(true) {
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

// execError wraps a failed statement's error, as ErrLock when it
// is a lock timeout.
func execError(stmt string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
		return fmt.Errorf("%w: %s: %w", ErrLock, stmt, err)
	}
	return fmt.Errorf("adopt: %s: %w", stmt, err)
}

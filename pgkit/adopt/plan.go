package adopt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// querier is what planning reads the catalog through: NewPlan's read-only
// transaction, or Apply's, for its second look under the locks.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// pinnedPath is the search_path under which a plan reads definitions
// (views, domain constraints) and under which Apply and the script run:
// with nothing of the user's on it, PostgreSQL prints every name
// schema-qualified, so the statements mean the same whatever search_path
// the script is later run under.
const pinnedPath = "pg_catalog, pg_temp"

// snowflakeDefault matches a default that is snowflake_id() itself,
// schema-qualified or not.
var snowflakeDefault = regexp.MustCompile(`^(?:(?:"[^"]+"|[^".()]+)\.)?snowflake_id\(\)$`)

// planner builds one plan. Each of its steps reads what it needs of the
// catalog and keeps what it found for the steps after it; a problem that
// the plan refuses (one of the package's errors) is noted with refuse and
// the steps go on, so that a refusal names every problem at once; any
// other error (the connection, a query) ends the plan.
type planner struct {
	q        querier
	o        Options
	defences defences // zero: every defence on; only export_test.go turns one off

	names []string // the tables as named
	fn    string   // snowflake_id(), schema-qualified; "" with AppKeys
	dbNow time.Time
	user  string // current_user, quoted as needed

	rels    []relation
	allowed map[string]string // Options.AllowTriggers, schema-qualified, to "table oid/trigger"
	targets []*target
	// widen are the columns to change to bigint, each on the topmost
	// table that has it (a partitioned or inheritance parent), in the
	// order found: targets' keys first.
	widen []*column
	// holders are the names of every column that will hold snowflakes,
	// widened or bigint already (targets' keys and every column that
	// refers to them): what tells a function's integers that hold keys.
	holders map[string]bool
	// holderRels are the names of the tables of those columns.
	holderRels map[string]bool
	// holderCols are those columns, as found.
	holderCols []*column
	funcs      map[int64]*function // functions to change, by oid
	texts      map[string][]edit   // edits of view definitions and policies' expressions, by scanText.key
	objects    []*object           // what is dropped and created again, in the order to create it
	twins      []*twin
	twinOf     map[int64]*twin // by the domain's oid
	seqs       []*keptSequence // identity sequences kept under their name

	errs []error
}

// refuse notes a problem the plan refuses.
func (b *planner) refuse(err error) { b.errs = append(b.errs, err) }

// buildPlan reads the catalog and builds the plan for names. q is a
// transaction: planning pins its search_path (pinnedPath) once it has
// resolved the names and snowflake_id(), the function fn names if set (as
// an earlier plan found it), else the one on the caller's search_path.
func buildPlan(ctx context.Context, q querier, names []string, fn string, o Options, d defences) (*Plan, error) {
	b := &planner{q: q, o: o, defences: d, names: names, fn: fn}
	for _, step := range []func(context.Context) error{
		b.resolveTables, // tables.go: the names, on the caller's search_path
		b.findFunction,  // snowflake_id(), unless AppKeys
		b.pin,           // the pinned search_path, the database's clock, the user
		b.readTargets,   // tables.go: each table's key, its default and sequence
		b.checkCallers,  // callers.go: who may run snowflake_id()
		b.checkTriggers, // triggers.go: what else gives the keys values
		b.findHolders,   // columns.go: every column that holds the keys, and where to widen it
		b.checkColumns,  // columns.go: what PostgreSQL will not widen
		b.checkValues,   // checks.go: constraints that the keys of now must pass
		b.findFunctions, // functions.go: integers of functions that hold keys
		b.findObjects,   // objects.go: what to drop and create again around the changes
		b.readTwins,     // domain.go: domains over bigint for domains over integer
		b.keepSequences, // sequences.go: identity sequences, kept
		b.checkOwners,   // owners.go: what the user may change
		b.checkKeys,     // keys.go: every key below the first snowflake of now
	} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	if len(b.errs) > 0 {
		return nil, errors.Join(b.errs...)
	}
	return b.plan(), nil // steps.go
}

// findFunction finds snowflake_id(), unless the keys come from the app.
func (b *planner) findFunction(ctx context.Context) error {
	if b.o.AppKeys {
		return nil
	}
	name := "snowflake_id()"
	if b.fn != "" {
		name = b.fn + "()"
	}
	err := b.q.QueryRowContext(ctx, `SELECT format('%I.%I', n.nspname, f.proname)
		FROM pg_catalog.pg_proc f JOIN pg_catalog.pg_namespace n ON n.oid = f.pronamespace
		WHERE f.oid = pg_catalog.to_regprocedure($1)`, name).Scan(&b.fn)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		b.refuse(fmt.Errorf("%w (no snowflake_id() on the search_path): run migrations.Up first, "+
			"or adopt with app-side keys (AppKeys, --app-keys)", ErrFunction))
	case err != nil:
		return fmt.Errorf("adopt: %w", err)
	}
	return nil
}

// pin sets the pinned search_path for the rest of the transaction (unless
// the control leaves it as it is) and reads the database's time, for the
// keys snowflake_id() makes, and the current user, in one round trip, as
// Apply plans again under its locks.
func (b *planner) pin(ctx context.Context) error {
	path := pinnedPath
	if b.defences.unqualified {
		path = ""
	}
	if err := b.q.QueryRowContext(ctx, `SELECT CASE WHEN $1 = '' THEN '' ELSE pg_catalog.set_config('search_path', $1, true) END,
		pg_catalog.statement_timestamp(), pg_catalog.quote_ident(current_user)`, path).Scan(new(string), &b.dbNow, &b.user); err != nil {
		return fmt.Errorf("adopt: %w", err)
	}
	return nil
}

// queryStrings returns the one text column of every row of query.
func queryStrings(ctx context.Context, q querier, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("adopt: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// literal quotes s as an SQL string constant, as quote_literal does: an
// E-string when it holds backslashes, so that it reads the same whatever
// standard_conforming_strings is where the script runs.
func literal(s string) string {
	q := strings.ReplaceAll(s, "'", "''")
	if strings.Contains(s, `\`) {
		return "E'" + strings.ReplaceAll(q, `\`, `\\`) + "'"
	}
	return "'" + q + "'"
}

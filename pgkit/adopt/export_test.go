package adopt

import (
	"context"
	"database/sql"
)

// The switch of the control runs, which show that a defence is needed by
// turning it off; users cannot reach it.

// newPlanWithout is NewPlan with the defences in off switched off, for
// the plan and for its Apply.
func newPlanWithout(ctx context.Context, db *sql.DB, tables []string, opts Options, off defences) (*Plan, error) {
	return newPlan(ctx, db, tables, opts, off)
}

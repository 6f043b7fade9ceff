package adopt

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestAdoptCallers: a role that may insert into a table to adopt, and may
// not run snowflake_id() (an operator took EXECUTE away from PUBLIC), is
// refused at planning, named with the GRANT that lets it; once granted,
// the plan passes and the role's inserts get snowflakes. The control
// adopts anyway, and the role's next insert fails.
func TestAdoptCallers(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	for _, control := range []bool{false, true} {
		db := openDB(t, ctx, "CREATE TABLE accounts (id serial PRIMARY KEY, name text);")
		mustExec(t, ctx, db, "REVOKE EXECUTE ON FUNCTION public.snowflake_id() FROM PUBLIC")
		app := testRole(t, ctx, db, "inserter", "LOGIN")
		mustExec(t, ctx, db, "GRANT SELECT, INSERT ON accounts TO "+app, "GRANT USAGE ON SEQUENCE accounts_id_seq TO "+app)
		as := asRole(t, ctx, db, app)
		mustExec(t, ctx, as, "INSERT INTO accounts (name) VALUES ('before')")
		if !control {
			_, err := NewPlan(ctx, db, []string{"accounts"}, Options{})
			if !errors.Is(err, ErrFunction) || !strings.Contains(err.Error(),
				"GRANT EXECUTE ON FUNCTION public.snowflake_id() TO "+app) {
				t.Fatalf("err = %v; want ErrFunction naming the role and the GRANT", err)
			}
			mustExec(t, ctx, db, "GRANT EXECUTE ON FUNCTION public.snowflake_id() TO "+app)
		}
		plan, err := newPlanWithout(ctx, db, []string{"accounts"}, Options{}, defences{noCallerCheck: control})
		if err != nil {
			t.Fatalf("control=%v: %v", control, err)
		}
		if err := plan.Apply(ctx, db); err != nil {
			t.Fatalf("control=%v: %v", control, err)
		}
		_, err = as.ExecContext(ctx, "INSERT INTO accounts (name) VALUES ('after')")
		var pgErr *pgconn.PgError
		switch {
		case !control && err != nil:
			t.Errorf("the role's insert after adopting: %v", err)
		case control && (!errors.As(err, &pgErr) || pgErr.Code != "42501"):
			t.Errorf("control: the role's insert after adopting = %v; want permission denied (42501): the test does not reach the fault", err)
		case control:
			t.Logf("control: %v", err)
		}
	}
}

package adopt

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// rlsSchema is a multi-tenant table with row-level security, owned by a
// role that is no superuser, holding a row of another tenant whose key is
// from tomorrow (imported from another system): a policy hides it from
// whoever is not its tenant.
func rlsSchema(t *testing.T, owner string) string {
	tomorrow := idtype.DefaultLayout.FirstID(time.Now().Add(24 * time.Hour))
	return fmt.Sprintf(`
CREATE TABLE accounts (id bigserial PRIMARY KEY, tenant int NOT NULL, name text);
INSERT INTO accounts (tenant, name) SELECT 1, 'account ' || i FROM generate_series(1, 5) i;
INSERT INTO accounts VALUES (%d, 2, 'imported');
ALTER TABLE accounts ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant ON accounts USING (tenant = nullif(current_setting('app.tenant', true), '')::int);
ALTER TABLE accounts OWNER TO %s;
ALTER SEQUENCE accounts_id_seq OWNER TO %s;
`, tomorrow, owner, owner)
}

// TestAdoptRowSecurity: the largest key, on which the check of the keys'
// range rests, is read whole or not at all. A policy forced on the
// table's owner, a policy on a table of which the user is not the owner,
// and a missing SELECT each make NewPlan fail closed (ErrHidden), naming
// the table and what the role lacks; an owner whose table does not force
// its policies, and a role with BYPASSRLS, read every row, and so find the
// key from tomorrow (ErrKeyRange). The control reads as policies filter:
// the plan passes on a count the policy cut short (the owner's case: and
// after adopting a new key is below the hidden one), or reports a largest
// key that is not the table's (the other's).
func TestAdoptRowSecurity(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	tomorrow := int64(idtype.DefaultLayout.FirstID(time.Now().Add(24 * time.Hour)))

	// The owner, with FORCE ROW LEVEL SECURITY.
	db := openDB(t, ctx, "")
	owner := testRole(t, ctx, db, "tenant_owner", "LOGIN")
	mustExec(t, ctx, db, rlsSchema(t, owner), "ALTER TABLE accounts FORCE ROW LEVEL SECURITY")
	grantSnowflake(t, ctx, db, owner)
	as := asRole(t, ctx, db, owner)
	_, err := NewPlan(ctx, as, []string{"accounts"}, Options{})
	if !errors.Is(err, ErrHidden) || !strings.Contains(err.Error(), "public.accounts") ||
		!strings.Contains(err.Error(), "FORCE ROW LEVEL SECURITY") || !strings.Contains(err.Error(), owner) {
		t.Errorf("the owner, FORCE: err = %v; want ErrHidden naming the table, FORCE and the role", err)
	}
	plan, err := newPlanWithout(ctx, as, []string{"accounts"}, Options{}, defences{noRowSecurity: true})
	if err != nil {
		t.Fatalf("control, the owner: %v", err)
	}
	if err := plan.Apply(ctx, as); err != nil {
		t.Fatalf("control, the owner: %v", err)
	}
	fresh := scalar[int64](t, ctx, db, "INSERT INTO accounts (tenant) VALUES (3) RETURNING id")
	if fresh >= tomorrow {
		t.Errorf("control, the owner: the new key %d is above the hidden %d: the test does not reach the fault", fresh, tomorrow)
	}
	t.Logf("control, the owner: planned on largest key %d; the new key %d is below the hidden %d", plan.Tables[0].MaxKey, fresh, tomorrow)

	// Without FORCE the owner reads every row; so does a role with
	// BYPASSRLS that owns it through membership.
	db = openDB(t, ctx, "")
	owner = testRole(t, ctx, db, "tenant_owner", "")
	mustExec(t, ctx, db, rlsSchema(t, owner))
	grantSnowflake(t, ctx, db, owner)
	member := testRole(t, ctx, db, "tenant_member", "LOGIN IN ROLE "+owner)
	if _, err := NewPlan(ctx, asRole(t, ctx, db, member), []string{"accounts"}, Options{}); !errors.Is(err, ErrKeyRange) {
		t.Errorf("a member of the owner, without FORCE: err = %v; want ErrKeyRange, from the key it sees", err)
	}
	mustExec(t, ctx, db, "ALTER TABLE accounts FORCE ROW LEVEL SECURITY", "ALTER ROLE "+member+" BYPASSRLS")
	if _, err := NewPlan(ctx, asRole(t, ctx, db, member), []string{"accounts"}, Options{}); !errors.Is(err, ErrKeyRange) {
		t.Errorf("a member of the owner with BYPASSRLS, FORCE: err = %v; want ErrKeyRange, from the key it sees", err)
	}

	// A role that is not the owner, to which the policy applies.
	other := testRole(t, ctx, db, "tenant_other", "LOGIN")
	mustExec(t, ctx, db, "GRANT SELECT ON accounts TO "+other)
	_, err = NewPlan(ctx, asRole(t, ctx, db, other), []string{"accounts"}, Options{})
	if !errors.Is(err, ErrHidden) || !strings.Contains(err.Error(), "policies apply to role "+other) {
		t.Errorf("another role: err = %v; want ErrHidden naming the role", err)
	}
	plan, err = newPlanWithout(ctx, asRole(t, ctx, db, other), []string{"accounts"}, Options{},
		defences{noRowSecurity: true, noOwnerCheck: true})
	if err != nil {
		t.Fatalf("control, another role: %v", err)
	}
	if plan.Tables[0].MaxKey >= tomorrow {
		t.Errorf("control, another role: the plan's largest key is %d, the table's: the test does not reach the fault", plan.Tables[0].MaxKey)
	}
	t.Logf("control, another role: the plan's largest key is %d; the table's is %d", plan.Tables[0].MaxKey, tomorrow)

	// An owner without SELECT on its table: PostgreSQL refuses the read
	// itself, and the refusal is typed as well.
	mustExec(t, ctx, db, "ALTER TABLE accounts NO FORCE ROW LEVEL SECURITY", "REVOKE SELECT ON accounts FROM "+owner)
	_, err = NewPlan(ctx, asRole(t, ctx, db, member), []string{"accounts"}, Options{})
	if !errors.Is(err, ErrHidden) || !strings.Contains(err.Error(), "lacks SELECT") {
		t.Errorf("without SELECT: err = %v; want ErrHidden saying SELECT", err)
	}
	_, err = newPlanWithout(ctx, asRole(t, ctx, db, member), []string{"accounts"}, Options{}, defences{noRowSecurity: true})
	if !errors.Is(err, ErrHidden) {
		t.Errorf("without SELECT, unchecked: err = %v; want ErrHidden from PostgreSQL's refusal", err)
	}
}

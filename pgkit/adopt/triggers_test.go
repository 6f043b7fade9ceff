package adopt

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// triggerSchema has BEFORE INSERT row triggers of every kind: one that
// sets the key through a row variable (r := NEW; r.id := nextval(...);
// RETURN r), which a look for NEW.id := misses; one in SQL's own
// full-text trigger; one that stamps another column (proven); one that
// reads the key (not proven, vouched for by name); and a trigger of a
// partition of a partitioned table.
const triggerSchema = `
CREATE SEQUENCE legacy_ids;
CREATE TABLE orders (id int PRIMARY KEY DEFAULT nextval('legacy_ids'), note text, stamped timestamptz, words tsvector);
ALTER SEQUENCE legacy_ids OWNED BY orders.id;
CREATE FUNCTION orders_key() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	r orders;
BEGIN
	r := NEW;
	r.id := nextval('legacy_ids');
	RETURN r;
END $$;
CREATE FUNCTION stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'UPDATE' THEN
		RETURN OLD;
	END IF;
	NEW.stamped := now();
	RETURN NEW;
END $$;
CREATE FUNCTION audit_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE NOTICE 'order %', NEW.id;
	RETURN NEW;
END $$;
CREATE TRIGGER orders_key BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION orders_key();
CREATE TRIGGER orders_stamp BEFORE INSERT OR UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION stamp();
CREATE TRIGGER orders_words BEFORE INSERT ON orders FOR EACH ROW
	EXECUTE FUNCTION tsvector_update_trigger(words, 'pg_catalog.simple', note);
CREATE TRIGGER orders_audit BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION audit_key();
INSERT INTO orders (note) VALUES ('old');

CREATE TABLE events (id serial, at date NOT NULL, PRIMARY KEY (at, id)) PARTITION BY RANGE (at);
CREATE TABLE events_2025 PARTITION OF events FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE FUNCTION events_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW := jsonb_populate_record(NEW, '{"id": 1}');
	RETURN NEW;
END $$;
CREATE TRIGGER events_key BEFORE INSERT ON events_2025 FOR EACH ROW EXECUTE FUNCTION events_key();
`

// TestAdoptTriggerProof: every BEFORE INSERT row trigger that is not
// proven to leave the key alone is refused, named with why, unless the
// caller vouches for it by name (Options.AllowTriggers); proven ones
// (a PL/pgSQL trigger that returns NEW and touches only other columns,
// tsvector_update_trigger) pass; a name in AllowTriggers that is no such
// trigger is refused. The control looks for NEW.id := alone: the row
// variable passes, and after adopting the table goes on issuing the
// sequence's keys over snowflake_id().
func TestAdoptTriggerProof(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	db := openDB(t, ctx, triggerSchema)
	_, err := NewPlan(ctx, db, []string{"orders", "events"}, Options{})
	if !errors.Is(err, ErrTrigger) {
		t.Fatalf("err = %v; want ErrTrigger", err)
	}
	for _, want := range []string{
		"trigger orders_key (function public.orders_key) uses NEW as a whole",
		"trigger orders_audit (function public.audit_key) names NEW.id",
		"trigger events_key of partition public.events_2025 (function public.events_key) uses NEW as a whole",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	for _, not := range []string{"orders_stamp", "orders_words"} {
		if strings.Contains(err.Error(), not) {
			t.Errorf("%q names %s, which leaves the key alone", err, not)
		}
	}
	_, err = NewPlan(ctx, db, []string{"orders"}, Options{AllowTriggers: []string{"orders.orders_audit", "public.orders.nosuch"}})
	if !errors.Is(err, ErrTrigger) || !strings.Contains(err.Error(), "names public.orders.nosuch, which is no BEFORE INSERT row trigger") ||
		strings.Contains(err.Error(), "orders_audit") || !strings.Contains(err.Error(), "orders_key") {
		t.Errorf("with orders_audit allowed and a name of no trigger: %v", err)
	}
	mustExec(t, ctx, db, "DROP TRIGGER orders_key ON orders", "DROP TRIGGER events_key ON events_2025")
	if _, err := NewPlan(ctx, db, []string{"orders", "events"}, Options{AllowTriggers: []string{"orders.orders_audit"}}); err != nil {
		t.Errorf("with the others dropped and orders_audit allowed: %v", err)
	}

	ctl := openDB(t, ctx, triggerSchema+"DROP TRIGGER orders_audit ON orders;")
	plan, err := newPlanWithout(ctx, ctl, []string{"orders"}, Options{}, defences{noTriggerProof: true})
	if err != nil {
		t.Fatalf("control: %v", err)
	}
	if err := plan.Apply(ctx, ctl); err != nil {
		t.Fatalf("control: %v", err)
	}
	// A connection of its own: PL/pgSQL's cached plans of the pool's
	// fail once after the column's type changed.
	fresh := scalar[int64](t, ctx, asRole(t, ctx, ctl, "postgres"), "INSERT INTO orders (note) VALUES ('new') RETURNING id")
	if fresh >= int64(idtype.DefaultLayout.FirstID(time.Now().Add(-time.Hour))) {
		t.Errorf("control: the new order got a snowflake (%d): the test does not reach the fault", fresh)
	}
	t.Logf("control: the new order's key is %d, from the sequence", fresh)
}

package partition

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// referredSchema is a table of events, partitioned by day with only its
// default partition so far, referred to by notes through a foreign key of
// each kind, with a row trigger that logs every call and stamps the rows
// it inserts (an audit table and a BEFORE INSERT stamp, as apps have).
const referredSchema = `
CREATE TABLE events (id bigint PRIMARY KEY, body text NOT NULL, stamp int NOT NULL DEFAULT 0) PARTITION BY RANGE (id);
CREATE TABLE events_default PARTITION OF events DEFAULT;
CREATE TABLE notes_cascade (id serial PRIMARY KEY, event_id bigint REFERENCES events ON DELETE CASCADE);
CREATE TABLE notes_setnull (id serial PRIMARY KEY, event_id bigint REFERENCES events ON DELETE SET NULL);
CREATE TABLE notes_noaction (id serial PRIMARY KEY, event_id bigint REFERENCES events);
CREATE TABLE notes_restrict (id serial PRIMARY KEY, event_id bigint REFERENCES events ON DELETE RESTRICT);
CREATE TABLE trigger_calls (op text NOT NULL, id bigint NOT NULL);
CREATE FUNCTION log_call() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.trigger_calls VALUES (TG_OP, coalesce(NEW.id, OLD.id));
	IF TG_OP = 'INSERT' THEN
		NEW.stamp := NEW.stamp + 1;
		RETURN NEW;
	END IF;
	RETURN OLD;
END $$;
CREATE TRIGGER log_call BEFORE INSERT OR UPDATE OR DELETE ON events FOR EACH ROW EXECUTE FUNCTION log_call();
`

// referredDB makes referredSchema with its clock at 2025-03-10 12:00.
func referredDB(t testing.TB) (*sql.DB, *dbClock) {
	t.Helper()
	_, db := openDB(t)
	clock := newDBClock(t, db, date("2025-03-10T12:00:00Z"))
	if _, err := db.Exec(referredSchema); err != nil {
		t.Fatal(err)
	}
	return db, clock
}

// insertEvents inserts n events of time at, keys from the default layout
// on worker 1, and returns their keys.
func insertEvents(t testing.TB, db *sql.DB, at time.Time, n int) []idtype.ID {
	t.Helper()
	gen, _ := generator(t, 1, at)
	ids := make([]idtype.ID, n)
	if err := gen.NextN(ids); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := db.Exec("INSERT INTO events (id, body) VALUES ($1, 'event')", id); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// referredState is what the moves must keep: every event with its stamp
// and partition, every note with the event it refers to, and the trigger
// calls.
type referredState struct {
	events map[idtype.ID]string // key -> "partition stamp"
	notes  map[string]string    // table.id -> event_id
	calls  []string
}

func readReferred(t testing.TB, db *sql.DB) referredState {
	t.Helper()
	s := referredState{events: map[idtype.ID]string{}, notes: map[string]string{}}
	rows, err := db.Query("SELECT id, tableoid::regclass::text || ' ' || stamp FROM events")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id idtype.ID
		var v string
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		s.events[id] = v
	}
	rows.Close()
	for _, table := range []string{"notes_cascade", "notes_setnull", "notes_noaction", "notes_restrict"} {
		rows, err := db.Query("SELECT id, coalesce(event_id::text, 'NULL') FROM " + table)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int
			var ev string
			if err := rows.Scan(&id, &ev); err != nil {
				t.Fatal(err)
			}
			s.notes[fmt.Sprintf("%s.%d", table, id)] = ev
		}
		rows.Close()
	}
	rows, err = db.Query("SELECT op || ' ' || id FROM trigger_calls ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		s.calls = append(s.calls, c)
	}
	rows.Close()
	return s
}

// TestMoveReferenced: rows of a day with no partition, in the default
// partition, referred to by notes through foreign keys of every action.
// A superuser's Maintain moves them under session_replication_role =
// replica: every note keeps its event, no trigger is called, no row
// changes. A role that may not set it leaves the day, naming it, its rows
// and the notes, changes nothing, and makes the next day all the same,
// moving its rows, to which nothing refers, with the trigger switched off.
func TestMoveReferenced(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	for _, super := range []bool{true, false} {
		t.Run(fmt.Sprintf("superuser=%v", super), func(t *testing.T) {
			db, clock := referredDB(t)
			maintainAs := db
			if !super {
				role, as := maintainer(t, db)
				own(t, db, role)
				if _, err := db.Exec("GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + role); err != nil {
					t.Fatal(err)
				}
				maintainAs = as
			}
			// Premake -1: the 11th is made only when it comes.
			p := clock.table("events", Options{Premake: -1})
			if _, err := p.Maintain(ctx, maintainAs); err != nil {
				t.Fatal(err)
			}
			referred := insertEvents(t, db, date("2025-03-11T00:30:00Z"), 20)
			free := insertEvents(t, db, date("2025-03-12T09:00:00Z"), 30)
			for i, table := range []string{"notes_cascade", "notes_setnull", "notes_noaction", "notes_restrict"} {
				if _, err := db.Exec("INSERT INTO "+table+" (event_id) VALUES ($1), ($2)", referred[2*i], referred[2*i+1]); err != nil {
					t.Fatal(err)
				}
			}
			before := readReferred(t, db)

			clock.Set(date("2025-03-11T01:00:00Z"))
			rep, err := p.Maintain(ctx, maintainAs)
			if err != nil {
				t.Fatal(err)
			}
			after := readReferred(t, db)
			for k, ev := range before.notes {
				if after.notes[k] != ev {
					t.Errorf("note %s referred to event %s, now %q", k, ev, after.notes[k])
				}
			}
			if len(after.calls) != len(before.calls) {
				t.Errorf("the trigger was called %d times by maintenance: %q", len(after.calls)-len(before.calls), after.calls[len(before.calls):])
			}
			for id, v := range before.events {
				stamp := v[strings.LastIndex(v, " "):]
				if got := after.events[id]; !strings.HasSuffix(got, stamp) {
					t.Errorf("event %d was %q, now %q", id, v, got)
				}
			}
			for _, id := range free {
				if got := after.events[id]; !strings.HasPrefix(got, "events_p20250312 ") {
					t.Errorf("event %d of the 12th, to which nothing refers, is in %q", id, got)
				}
			}
			if super {
				if rep.Moved != 50 || len(rep.Left) != 0 || !same(rep.Created, []string{"events_p20250311", "events_p20250312"}) {
					t.Errorf("report %+v; want the 11th and 12th made and 50 rows moved", rep)
				}
				for _, id := range referred {
					if got := after.events[id]; !strings.HasPrefix(got, "events_p20250311 ") {
						t.Errorf("event %d of the 11th is in %q", id, got)
					}
				}
				return
			}
			if rep.Moved != 30 || !same(rep.Created, []string{"events_p20250312"}) || len(rep.Left) != 1 {
				t.Fatalf("report %+v; want the 11th left, the 12th made and its 30 rows moved", rep)
			}
			l := rep.Left[0]
			if !errors.Is(l.Err, ErrReferenced) || l.Partition != "events_p20250311" || l.Rows != 20 ||
				!l.From.Equal(date("2025-03-11T00:00:00Z")) || len(l.Keys) != MaxLeftKeys || l.Keys[0] != referred[0] ||
				len(l.Referrers) != 4 || !strings.Contains(strings.Join(l.Referrers, " "), "public.notes_cascade.event_id (notes_cascade_event_id_fkey): 2 rows") {
				t.Errorf("left %s; want the 11th's 20 rows named, with the 4 foreign keys that refer to them", l)
			}
			for _, id := range referred {
				if got := after.events[id]; !strings.HasPrefix(got, "events_default ") {
					t.Errorf("event %d of the 11th is in %q; want it left in the default partition", id, got)
				}
			}
		})
	}
}

// TestMoveReferencedControl: the move as a DELETE and an INSERT, as it
// once was, with the trigger guard on: ON DELETE CASCADE deletes the
// notes of the moved events, SET NULL unlinks them, and NO ACTION fails
// the step, which Maintain reports while it makes the days after.
func TestMoveReferencedControl(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	db, clock := referredDB(t)
	p := clock.table("events", Options{Premake: -1})
	if _, err := p.Maintain(ctx, db); err != nil {
		t.Fatal(err)
	}
	cascadeDay := insertEvents(t, db, date("2025-03-11T00:30:00Z"), 2)
	noActionDay := insertEvents(t, db, date("2025-03-12T00:30:00Z"), 2)
	if _, err := db.Exec("INSERT INTO notes_cascade (event_id) VALUES ($1)", cascadeDay[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO notes_setnull (event_id) VALUES ($1)", cascadeDay[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO notes_noaction (event_id) VALUES ($1)", noActionDay[0]); err != nil {
		t.Fatal(err)
	}
	clock.Set(date("2025-03-12T01:00:00Z"))
	blind := clock.tableWithout("events", Options{Premake: -1}, defences{noRefCheck: true})
	rep, err := blind.Maintain(ctx, db)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23503" {
		t.Errorf("control: %v; want the NO ACTION key's 23503 for the 12th", err)
	}
	after := readReferred(t, db)
	var cascaded, unlinked int
	for k, ev := range after.notes {
		switch {
		case strings.HasPrefix(k, "notes_setnull") && ev == "NULL":
			unlinked++
		}
	}
	if _, ok := after.notes["notes_cascade.1"]; !ok {
		cascaded++
	}
	t.Logf("control: report %+v, err %v; %d notes deleted, %d unlinked", rep, err, cascaded, unlinked)
	if cascaded != 1 || unlinked != 1 {
		t.Errorf("control: the blind move deleted %d notes and unlinked %d; want 1 and 1: the test does not reach the fault", cascaded, unlinked)
	}
}

// TestMoveTriggers: a move switches off the user's triggers that would
// fire, ALWAYS ones too, and puts each back as it was (a trigger that was
// off stays off). The control moves with them on: the trigger logs a
// DELETE and an INSERT for each row and stamps it again.
func TestMoveTriggers(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	for _, control := range []bool{false, true} {
		db, clock := referredDB(t)
		if _, err := db.Exec(`CREATE TRIGGER always_call BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION log_call();
			ALTER TABLE events ENABLE ALWAYS TRIGGER always_call;
			CREATE TRIGGER off_call BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION log_call();
			ALTER TABLE events DISABLE TRIGGER off_call`); err != nil {
			t.Fatal(err)
		}
		p := clock.tableWithout("events", Options{Premake: -1}, defences{noTriggerGuard: control})
		if _, err := p.Maintain(ctx, db); err != nil {
			t.Fatal(err)
		}
		insertEvents(t, db, date("2025-03-11T00:30:00Z"), 10)
		before := readReferred(t, db)
		clock.Set(date("2025-03-11T01:00:00Z"))
		rep, err := p.Maintain(ctx, db)
		if err != nil || rep.Moved != 10 {
			t.Fatalf("control=%v: %+v, %v; want 10 rows moved", control, rep, err)
		}
		after := readReferred(t, db)
		calls := len(after.calls) - len(before.calls)
		var states []string
		rows, err := db.Query(`SELECT c.relname || '.' || t.tgname || '=' || t.tgenabled::text FROM pg_trigger t
			JOIN pg_class c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal AND c.relname LIKE 'events%' ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			states = append(states, s)
		}
		rows.Close()
		want := []string{"events.always_call=A", "events.log_call=O", "events.off_call=D", "events_default.always_call=A",
			"events_default.log_call=O", "events_default.off_call=D", "events_p20250310.always_call=A",
			"events_p20250310.log_call=O", "events_p20250310.off_call=D", "events_p20250311.always_call=A",
			"events_p20250311.log_call=O", "events_p20250311.off_call=D"}
		switch {
		case !control && calls != 0:
			t.Errorf("the move called the trigger %d times: %q", calls, after.calls[len(before.calls):])
		case !control && !same(states, want):
			t.Errorf("triggers after the move: %q; want them as they were, %q", states, want)
		case control && calls == 0:
			t.Errorf("control: the move with the triggers on called none: the test does not reach the fault")
		case control:
			t.Logf("control: the move called the triggers %d times", calls)
		}
	}
}

// TestMoveLeftDoesNotStall: a day left for its referred rows does not
// stop maintenance: the days after it are made and retention runs. The
// control ends Maintain at the first day it cannot finish, and nothing
// after it is done.
func TestMoveLeftDoesNotStall(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	for _, control := range []bool{false, true} {
		db, clock := referredDB(t)
		role, as := maintainer(t, db)
		clock.Set(date("2025-03-01T12:00:00Z"))
		build := clock.table("events", Options{Premake: 2})
		if _, err := build.Maintain(ctx, db); err != nil {
			t.Fatal(err)
		}
		own(t, db, role)
		if _, err := db.Exec("GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + role); err != nil {
			t.Fatal(err)
		}
		ids := insertEvents(t, db, date("2025-03-11T00:30:00Z"), 3)
		if _, err := db.Exec("INSERT INTO notes_noaction (event_id) VALUES ($1)", ids[0]); err != nil {
			t.Fatal(err)
		}
		clock.Set(date("2025-03-11T12:00:00Z"))
		p := clock.tableWithout("events", Options{Premake: 1, Retention: 5 * 24 * time.Hour}, defences{stopAtLeft: control})
		rep, err := p.Maintain(ctx, as)
		t.Logf("control=%v: %+v, %v", control, rep, err)
		made := strings.Join(rep.Created, " ")
		switch {
		case !control && (err != nil || len(rep.Left) != 1 || !errors.Is(rep.Left[0].Err, ErrReferenced) ||
			!strings.Contains(made, "events_p20250312") || len(rep.Removed) == 0):
			t.Errorf("report %+v, %v; want the 11th left, the 12th made and the expired days removed", rep, err)
		case control && (err == nil || strings.Contains(made, "events_p20250312") || len(rep.Removed) != 0):
			t.Errorf("control: %+v, %v; the first left day should stop it: the test does not reach the fault", rep, err)
		}
	}
}

// TestMoveOldPeriods: rows of periods before the oldest partition, as a
// table copied into a partitioned one holds, get their periods' partitions
// and move; rows of periods past Retention stay, reported, and nothing is
// made for them.
func TestMoveOldPeriods(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	_, db := openDB(t)
	clock := newDBClock(t, db, date("2025-03-10T12:00:00Z"))
	rawTable(t, db, "events")
	if _, err := db.ExecContext(ctx, "CREATE TABLE events_default PARTITION OF events DEFAULT"); err != nil {
		t.Fatal(err)
	}
	for _, at := range []string{"2025-01-05T10:00:00Z", "2025-02-20T10:00:00Z", "2025-03-09T10:00:00Z", "2025-04-01T00:00:00Z"} {
		gen, _ := generator(t, 2, date(at))
		ids := make([]idtype.ID, 5)
		if err := gen.NextN(ids); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if _, err := db.ExecContext(ctx, "INSERT INTO events VALUES ($1, 'old')", id); err != nil {
				t.Fatal(err)
			}
		}
	}
	p := clock.table("events", Options{Premake: 1, Retention: 30 * 24 * time.Hour})
	rep, err := p.Maintain(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"events_p20250310", "events_p20250311", "events_p20250220", "events_p20250309", "events_p20250401"}
	if !same(rep.Created, want) || rep.Moved != 15 {
		t.Errorf("created %v, moved %d; want %v and 15", rep.Created, rep.Moved, want)
	}
	if len(rep.Left) != 1 || !errors.Is(rep.Left[0].Err, ErrExpired) || rep.Left[0].Rows != 5 ||
		rep.Left[0].Partition != "events_p20250105" {
		t.Errorf("left %v; want January's 5 rows, expired, left", rep.Left)
	}
	rep, err = p.Maintain(ctx, db)
	if err != nil || len(rep.Created)+len(rep.Removed) != 0 || rep.Moved != 0 || len(rep.Left) != 1 {
		t.Errorf("again: %+v, %v; want nothing done and January still reported", rep, err)
	}
}

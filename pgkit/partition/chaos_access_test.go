package partition

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/chaos"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// The fault kinds of decisions on hidden rows: the role that maintains
// is no superuser and may not set session_replication_role, as an app's
// role usually is, and a policy of row-level security or a missing grant
// keeps it from seeing rows that a decision of Maintain rests on. Events
// of three days sit in the default partition (or, for retention, in
// partitions of three expired days), notes of tenants "a" and "b" refer
// to them through ON DELETE CASCADE and SET NULL foreign keys, and the
// role's sessions are tenant "a" (app.tenant):
//
//   - forced: the owner's tables FORCE ROW LEVEL SECURITY with a tenant
//     policy, and the role owns them all;
//   - other: the notes are another role's, with row-level security
//     enabled (not forced), and the role may select and update them;
//   - grant: the notes are another role's, and the role has no SELECT on
//     them (and, in half the runs, no UPDATE, which its lock needs);
//   - retention: as forced, with the expired days' partitions to remove;
//   - default: the default partition FORCEs row-level security, hiding
//     events of two days without a partition.
//
// A run meets its fault when the role cannot see what a decision rests
// on: the policy hides every note that refers to a day's events (forced,
// other, retention), hides rows of the default partition (default), or
// the catalog says the role has no SELECT on the notes (grant). After one
// Maintain as the role, the checks read every table as a superuser: a
// note deleted, unlinked or pointing at an event that is gone (its
// foreign key still marked valid), an event gone, rows in the default
// partition or an expired partition that neither the report nor the
// error names, and, when the run met its fault, a Maintain that did not
// fail with the kind's error (ErrRowSecurity, or ErrPrivilege for grant)
// naming each table and what to grant, with PostgreSQL's refusal
// (42501) inside.
//
// Each row switches off one defence in its control: row_security = off
// (the control decides on what the policies let it see, and a move's
// DELETE cascades to the notes it did not see; retention drops a
// partition that hidden notes refer to), or the access errors (the
// control returns PostgreSQL's bare refusal, naming no table or grant,
// and reports nothing it left).

// accessKind is how the role that maintains is kept from seeing rows.
type accessKind int

const (
	forcedPolicy    accessKind = iota // the owner's tables FORCE row-level security
	otherPolicy                       // the notes are another role's, with row-level security enabled
	noSelect                          // the notes are another role's, and the role may not select them
	retentionPolicy                   // as forcedPolicy, with expired partitions to remove
	defaultPolicy                     // the default partition FORCEs row-level security
)

// accessSpec is one row of the kinds: a kind, and the defence its control
// switches off.
type accessSpec struct {
	kind           accessKind
	fault, defence string
	off            defences
}

var accessSpecs = map[string]accessSpec{
	"forced": {kind: forcedPolicy, fault: "row-level security: FORCE on the owner's tables, referred rows moved",
		defence: "row_security off", off: defences{filtered: true}},
	"forced errors": {kind: forcedPolicy, fault: "row-level security: FORCE on the owner's tables, referred rows moved",
		defence: "access errors", off: defences{rawRefusals: true}},
	"other": {kind: otherPolicy, fault: "row-level security: ENABLE on referring tables of another owner",
		defence: "row_security off", off: defences{filtered: true}},
	"grant": {kind: noSelect, fault: "no SELECT on referring tables of another owner",
		defence: "access errors", off: defences{rawRefusals: true}},
	"retention": {kind: retentionPolicy, fault: "row-level security: retention of a partition that hidden rows refer to",
		defence: "row_security off", off: defences{filtered: true}},
	"default": {kind: defaultPolicy, fault: "row-level security: FORCE on the default partition",
		defence: "row_security off", off: defences{filtered: true}},
}

func TestChaosForcedPolicy(t *testing.T)       { accessScenario(t, accessSpecs["forced"]) }
func TestChaosForcedPolicyErrors(t *testing.T) { accessScenario(t, accessSpecs["forced errors"]) }
func TestChaosOtherPolicy(t *testing.T)        { accessScenario(t, accessSpecs["other"]) }
func TestChaosNoSelect(t *testing.T)           { accessScenario(t, accessSpecs["grant"]) }
func TestChaosRetentionPolicy(t *testing.T)    { accessScenario(t, accessSpecs["retention"]) }
func TestChaosDefaultPolicy(t *testing.T)      { accessScenario(t, accessSpecs["default"]) }

// accessScenario runs spec as a chaos.Scenario: its runs take a second
// or two, so the short schedule runs each side once, and the long one
// gives each of the six a thirtieth of the package's budget (the fifth
// that the scenarios under load leave; chaosScenario).
func accessScenario(t *testing.T, spec accessSpec) {
	budget := chaos.OneRun
	if chaos.Long() {
		budget = chaos.Budget(t) / 30
	}
	chaos.Scenario{Package: "pgkit/partition", Fault: spec.fault, Store: "postgres", Defence: spec.defence,
		Budget: budget}.Run(t, func(t *testing.T, r *chaos.Run) { accessRun(t, spec, r) })
}

// accessRun is one run of spec.
func accessRun(t *testing.T, spec accessSpec, r *chaos.Run) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	w := buildAccess(t, ctx, spec.kind, accessNoFix, r.Rand)
	met, what := w.observe(t, ctx)
	if met {
		r.Met("%s", what)
	}
	var off defences
	if r.Control {
		off = spec.off
	}
	p := w.table(off)
	rep, err := p.Maintain(ctx, w.as)
	t.Logf("Maintain as %s: %+v, error: %v", w.role, rep, err)
	violations, rows := w.check(t, rep, err, met)
	for _, v := range violations {
		r.Violation("%s", v)
	}
	r.CountRows(rows)
}

// accessFix is what lets the role see every row, for the runs that show
// Maintain works as before when it can.
type accessFix int

const (
	accessNoFix accessFix = iota
	bypassRLS             // ALTER ROLE ... BYPASSRLS
	noForce               // the owner's tables ENABLE row-level security without FORCE
	ownerMember           // the role is a member of the notes' owner
)

// accessWorld is one run's database, as a superuser and as the role that
// maintains, and what was written to it.
type accessWorld struct {
	kind   accessKind
	db, as *sql.DB
	role   string
	clock  *dbClock
	days   []time.Time // the three days of the events
	events map[idtype.ID]int
	notes  []accessNote
	// hidden names the tables the role cannot read whole, as the error
	// must name them; fix is what the error must say to do.
	hidden []string
	fix    string
	// lockable says the role may lock the notes (noSelect).
	lockable bool
}

// accessNote is a note written.
type accessNote struct {
	table  string
	id     int64
	event  idtype.ID
	hidden bool // of tenant "b", which the role's sessions do not see
}

const accessSchema = `
CREATE TABLE events (id bigint PRIMARY KEY, tenant text NOT NULL) PARTITION BY RANGE (id);
CREATE TABLE events_default PARTITION OF events DEFAULT;
CREATE TABLE notes_cascade (id serial PRIMARY KEY, event_id bigint REFERENCES events ON DELETE CASCADE, tenant text NOT NULL);
CREATE TABLE notes_setnull (id serial PRIMARY KEY, event_id bigint REFERENCES events ON DELETE SET NULL, tenant text NOT NULL);
CREATE INDEX ON notes_cascade (event_id);
CREATE INDEX ON notes_setnull (event_id);
`

var accessNoteTables = []string{"notes_cascade", "notes_setnull"}

// tenantPolicy is the SQL that gives table a tenant policy: a session
// sees the rows of its tenant, app.tenant.
func tenantPolicy(table string, force bool) string {
	s := "ALTER TABLE " + table + " ENABLE ROW LEVEL SECURITY; CREATE POLICY tenant ON " + table +
		" USING (tenant = current_setting('app.tenant', true));"
	if force {
		s += "ALTER TABLE " + table + " FORCE ROW LEVEL SECURITY;"
	}
	return s
}

// accessNow is the database's time when the role maintains.
var accessNow = date("2025-03-12T12:00:00Z")

// buildAccess makes the world of kind, with fix applied, choosing what
// is random from rng.
func buildAccess(t *testing.T, ctx context.Context, kind accessKind, fix accessFix, rng *rand.Rand) *accessWorld {
	t.Helper()
	_, db := openDB(t)
	w := &accessWorld{kind: kind, db: db, events: map[idtype.ID]int{}}
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	w.clock = newDBClock(t, db, accessNow)
	exec(accessSchema)
	first := date("2025-03-10T00:00:00Z")
	switch kind {
	case retentionPolicy:
		// Three days with partitions, made as a superuser; all expired
		// at accessNow.
		first = date("2025-03-01T00:00:00Z")
		w.clock.Set(first.Add(12 * time.Hour))
		if _, err := w.clock.table("events", Options{Premake: 2}).Maintain(ctx, db); err != nil {
			t.Fatal(err)
		}
		w.clock.Set(accessNow)
	case defaultPolicy:
		// Partitions from accessNow's day on: the two days before land
		// in the default partition.
		first = date("2025-03-09T00:00:00Z")
		if _, err := w.clock.table("events", Options{Premake: 2}).Maintain(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	ndays := 3
	if kind == defaultPolicy {
		ndays = 2
	}
	for d := range ndays {
		day := first.AddDate(0, 0, d)
		w.days = append(w.days, day)
		gen, _ := generator(t, 1, day.Add(time.Duration(1+rng.IntN(20))*time.Hour))
		ids := make([]idtype.ID, 1+rng.IntN(4))
		if err := gen.NextN(ids); err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			tenant := "b"
			if kind == defaultPolicy && d == 1 && rng.IntN(3) == 0 {
				tenant = "a"
			}
			if _, err := db.ExecContext(ctx, "INSERT INTO events VALUES ($1, $2)", id, tenant); err != nil {
				t.Fatal(err)
			}
			w.events[id] = d
			if kind == defaultPolicy {
				continue
			}
			// The first day's events are referred to by hidden notes
			// alone, at least one; the second's by a mix, at least one;
			// the third's by none.
			n := rng.IntN(3)
			if d < 2 && i == len(ids)-1 && !slices.ContainsFunc(w.notes, func(n accessNote) bool { return w.events[n.event] == d }) {
				n = max(n, 1)
			}
			if d == 2 {
				n = 0
			}
			for range n {
				note := accessNote{table: accessNoteTables[rng.IntN(len(accessNoteTables))], event: id, hidden: d == 0 || rng.IntN(4) > 0}
				tenant := map[bool]string{true: "b", false: "a"}[note.hidden]
				if err := db.QueryRowContext(ctx, "INSERT INTO "+note.table+" (event_id, tenant) VALUES ($1, $2) RETURNING id",
					id, tenant).Scan(&note.id); err != nil {
					t.Fatal(err)
				}
				w.notes = append(w.notes, note)
			}
		}
	}

	role, as := maintainer(t, db)
	w.role, w.as = role, as
	own(t, db, role)
	switch kind {
	case forcedPolicy, retentionPolicy:
		for _, table := range []string{"events", "notes_cascade", "notes_setnull"} {
			exec(tenantPolicy(table, fix != noForce))
		}
		w.hidden = []string{"public.notes_cascade", "public.notes_setnull"}
		w.fix = "BYPASSRLS"
		if fix == bypassRLS {
			exec("ALTER ROLE " + role + " BYPASSRLS")
		}
	case otherPolicy, noSelect:
		other, _ := maintainer(t, db)
		w.lockable = kind == otherPolicy || rng.IntN(2) == 0
		for _, table := range accessNoteTables {
			exec("ALTER TABLE " + table + " OWNER TO " + other)
			switch {
			case kind == otherPolicy:
				exec(tenantPolicy(table, false))
				exec("GRANT SELECT, UPDATE ON " + table + " TO " + role)
			case w.lockable:
				exec("GRANT UPDATE ON " + table + " TO " + role)
			}
		}
		w.hidden = []string{"public.notes_cascade", "public.notes_setnull"}
		w.fix = "BYPASSRLS"
		if kind == noSelect {
			w.fix = "GRANT SELECT"
		}
		if fix == ownerMember {
			exec("GRANT " + other + " TO " + role)
		}
	case defaultPolicy:
		exec(tenantPolicy("events_default", true))
		w.hidden = []string{"public.events_default"}
		w.fix = "BYPASSRLS"
	}
	exec("ALTER ROLE " + role + " SET app.tenant = 'a'")
	return w
}

// table is the Table the role maintains with: the current day only, and
// for retention three days kept.
func (w *accessWorld) table(off defences) *Table {
	switch w.kind {
	case retentionPolicy:
		return w.clock.tableWithout("events", Options{Premake: -1, Retention: 72 * time.Hour}, off)
	case defaultPolicy:
		return w.clock.tableWithout("events", Options{Premake: 2}, off)
	}
	return w.clock.tableWithout("events", Options{Premake: -1}, off)
}

// dayRange is the key range of day.
func dayRange(day time.Time) (idtype.ID, idtype.ID) {
	return idtype.DefaultLayout.FirstID(day), idtype.DefaultLayout.FirstID(day.AddDate(0, 0, 1))
}

// referring counts, on db, the notes that refer to the events of day.
func referring(ctx context.Context, db *sql.DB, day time.Time) (int, error) {
	lo, hi := dayRange(day)
	var n int
	err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM notes_cascade WHERE event_id >= $1 AND event_id < $2)
		+ (SELECT count(*) FROM notes_setnull WHERE event_id >= $1 AND event_id < $2)`, lo, hi).Scan(&n)
	return n, err
}

// observe reads, before Maintain, whether the role is kept from seeing
// what a decision rests on, and what shows it.
func (w *accessWorld) observe(t *testing.T, ctx context.Context) (bool, string) {
	t.Helper()
	switch w.kind {
	case noSelect:
		var can bool
		if err := w.db.QueryRowContext(ctx, `SELECT has_table_privilege($1, 'public.notes_cascade', 'SELECT')
			OR has_table_privilege($1, 'public.notes_setnull', 'SELECT')`, w.role).Scan(&can); err != nil {
			t.Fatal(err)
		}
		n, err := referring(ctx, w.db, w.days[0])
		if err != nil {
			t.Fatal(err)
		}
		return !can && n > 0, fmt.Sprintf("role %s has no SELECT on the notes, %d of which refer to rows in the default partition "+
			"(lock granted: %v)", w.role, n, w.lockable)
	case defaultPolicy:
		var all, seen int
		q := "SELECT count(*) FROM ONLY events_default"
		if err := w.db.QueryRowContext(ctx, q).Scan(&all); err != nil {
			t.Fatal(err)
		}
		if err := w.as.QueryRowContext(ctx, q).Scan(&seen); err != nil {
			t.Fatal(err)
		}
		return all > seen, fmt.Sprintf("the policy of events_default hid %d of its %d rows from role %s", all-seen, all, w.role)
	}
	var hidden, all int
	var blind []string
	for _, day := range w.days {
		n, err := referring(ctx, w.db, day)
		if err != nil {
			t.Fatal(err)
		}
		seen, err := referring(ctx, w.as, day)
		if err != nil {
			t.Fatal(err)
		}
		hidden, all = hidden+n-seen, all+n
		if n > 0 && seen == 0 {
			blind = append(blind, day.Format(time.DateOnly))
		}
	}
	return len(blind) > 0, fmt.Sprintf("the policies hid %d of %d notes from role %s; to it, the events of %v had none",
		hidden, all, w.role, blind)
}

// check reads every table as a superuser after Maintain returned rep and
// err, and returns what breaks the promise, and the rows it checked.
// met says the run met its fault: then err must be the kind's.
func (w *accessWorld) check(t *testing.T, rep Report, err error, met bool) ([]string, int) {
	t.Helper()
	ctx := context.Background()
	var out []string
	where := map[idtype.ID]string{}
	rows, qerr := w.db.QueryContext(ctx, "SELECT id, tableoid::regclass::text FROM events")
	if qerr != nil {
		t.Fatal(qerr)
	}
	for rows.Next() {
		var id idtype.ID
		var part string
		if err := rows.Scan(&id, &part); err != nil {
			t.Fatal(err)
		}
		where[id] = part
	}
	rows.Close()
	checked := 0
	for id := range w.events {
		checked++
		if _, ok := where[id]; !ok && w.kind != retentionPolicy {
			out = append(out, fmt.Sprintf("event %d is gone", id))
		}
	}
	valid := map[string]bool{}
	for _, table := range accessNoteTables {
		var ok bool
		if err := w.db.QueryRowContext(ctx, "SELECT convalidated FROM pg_constraint WHERE conname = $1",
			table+"_event_id_fkey").Scan(&ok); err != nil {
			t.Fatal(err)
		}
		valid[table] = ok
	}
	for _, n := range w.notes {
		checked++
		var ev sql.NullInt64
		err := w.db.QueryRowContext(ctx, "SELECT event_id FROM "+n.table+" WHERE id = $1", n.id).Scan(&ev)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			out = append(out, fmt.Sprintf("note %s.%d of event %d (hidden: %v) was deleted; nobody deleted it", n.table, n.id, n.event, n.hidden))
		case err != nil:
			t.Fatal(err)
		case !ev.Valid:
			out = append(out, fmt.Sprintf("note %s.%d (hidden: %v) was unlinked from event %d", n.table, n.id, n.hidden, n.event))
		case idtype.ID(ev.Int64) != n.event:
			out = append(out, fmt.Sprintf("note %s.%d refers to %d, not to its event %d", n.table, n.id, ev.Int64, n.event))
		case where[n.event] == "":
			out = append(out, fmt.Sprintf("note %s.%d (hidden: %v) refers to event %d, which is gone with its partition, "+
				"and its foreign key is marked valid: %v", n.table, n.id, n.hidden, n.event, valid[n.table]))
		}
	}

	// What stays where Maintain would have moved or removed it is named.
	errNames := func(table string) bool { return err != nil && strings.Contains(err.Error(), table) }
	left := map[string]Left{}
	for _, l := range rep.Left {
		left[l.Partition] = l
	}
	inDefault := map[string]int{}
	for id, part := range where {
		if part == "events_default" {
			inDefault["events_p"+id.Time().UTC().Format("20060102")]++
		}
	}
	for name, n := range inDefault {
		l, named := left[name]
		switch {
		case !named && !errNames("public.events_default"):
			out = append(out, fmt.Sprintf("%d rows of %s stay in the default partition, which neither the report nor the error names", n, name))
		case named && l.Rows != int64(n):
			out = append(out, fmt.Sprintf("the report says %d rows of %s stay in the default partition; %d do", l.Rows, name, n))
		}
	}
	kept := map[string]bool{}
	for _, k := range rep.Kept {
		kept[k.Partition] = true
	}
	for _, name := range partitions(t, w.db, "events") {
		day, perr := time.Parse("events_p20060102", name)
		if perr == nil && w.kind == retentionPolicy && day.Before(w.days[2].AddDate(0, 0, 1)) && !kept[name] {
			out = append(out, fmt.Sprintf("expired partition %s stays, which the report does not name", name))
		}
	}

	if !met {
		return out, checked
	}
	sentinel := ErrRowSecurity
	if w.kind == noSelect {
		sentinel = ErrPrivilege
	}
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		out = append(out, fmt.Sprintf("Maintain reported success (created %v, moved %d, removed %v, %d left, %d kept) "+
			"on what the role could not see whole", rep.Created, rep.Moved, rep.Removed, len(rep.Left), len(rep.Kept)))
	case !errors.Is(err, sentinel):
		out = append(out, fmt.Sprintf("Maintain's error does not wrap %v: %v", sentinel, err))
	case !errors.As(err, &pgErr) || pgErr.Code != "42501":
		out = append(out, fmt.Sprintf("Maintain's error does not hold PostgreSQL's refusal (42501): %v", err))
	}
	if err != nil {
		for _, s := range append([]string{w.fix}, w.hidden...) {
			if !strings.Contains(err.Error(), s) {
				out = append(out, fmt.Sprintf("Maintain's error does not say %q: %v", s, err))
			}
		}
	}
	return out, checked
}

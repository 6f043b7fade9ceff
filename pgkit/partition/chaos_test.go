package partition

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/chaos"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// The fault kind "partition maintenance under load": writers insert
// events, and notes that refer to them through foreign keys of each
// action, across day boundaries of a simulated clock, while four app
// instances, whose clocks differ by up to a day, run Maintain with
// Premake -1 (so every new day's first rows land in the default
// partition) and a day's Retention, a cleaner deletes old notes, and a
// row trigger on the events logs every call. The history (every insert
// the writers were told committed, every note the cleaner deleted, the
// trigger's calls, and snapshots of the tables with the database's time,
// taken as the run goes, and the database's time of each partition's
// drop, logged by an event trigger in its transaction) is checked for: a
// partition dropped before its day expired; an event lost before then, or
// duplicated, or changed (the trigger stamps each
// insert, so a row inserted twice shows); a note lost or unlinked; a
// trigger call that no writer made; and, after a last Maintain, rows in
// the default partition or expired partitions that its report does not
// name, or a Maintain that failed.
//
// Four scenarios run it, one defence each, switched off in the control:
// the reference check (as an owner role that may not set
// session_replication_role), the trigger guard, the database's clock and
// the detach before the drop (as a superuser, whose moves go under
// session_replication_role).

// chaosSpec is one scenario of the kind.
type chaosSpec struct {
	fault, defence string
	off            defences // the defence its control switches off
	super          bool     // maintain as a superuser, else as an owner role
	// keep makes some notes of the first day stay two days, so that its
	// partition outlives its Retention for a while (Report.Kept).
	keep bool
	// met says whether a run met the fault, from what it observed.
	met func(o *chaosObserved) (bool, string)
}

var chaosSpecs = map[string]chaosSpec{
	"refcheck": {
		fault: "maintenance under load: referred rows in the default partition", defence: "reference check",
		off: defences{noRefCheck: true},
		met: func(o *chaosObserved) (bool, string) {
			return o.referredInDefault > 0, fmt.Sprintf("%d times a snapshot saw an event in the default partition that a note referred to", o.referredInDefault)
		},
	},
	"triggers": {
		fault: "maintenance under load: user triggers on moved rows", defence: "trigger guard",
		off: defences{noTriggerGuard: true}, super: true,
		met: func(o *chaosObserved) (bool, string) {
			return o.moved > 0, fmt.Sprintf("Maintain moved %d rows out of the default partition while writers ran", o.moved)
		},
	},
	"clocks": {
		fault: "maintenance under load: instance clocks a day apart", defence: "database clock",
		off: defences{appClock: true}, super: true,
		met: func(o *chaosObserved) (bool, string) {
			return o.aheadAtExpiry > 0 && o.removed > 0,
				fmt.Sprintf("%d times an instance ran Maintain when its clock, up to %v ahead, had a day expired that the database's had not; "+
					"%d partitions removed while writers ran", o.aheadAtExpiry, o.maxSkew, o.removed)
		},
	},
	"retention": {
		fault: "maintenance under load: retention of a referenced table", defence: "detach before drop",
		off: defences{plainDrop: true}, super: true, keep: true,
		met: func(o *chaosObserved) (bool, string) {
			return o.expiredSeen > 0, fmt.Sprintf("%d times a snapshot saw an expired partition of the referenced table while writers ran", o.expiredSeen)
		},
	},
}

func TestChaosReferencedMove(t *testing.T) { chaosScenario(t, chaosSpecs["refcheck"]) }
func TestChaosTriggers(t *testing.T)       { chaosScenario(t, chaosSpecs["triggers"]) }
func TestChaosClocks(t *testing.T)         { chaosScenario(t, chaosSpecs["clocks"]) }
func TestChaosRetention(t *testing.T)      { chaosScenario(t, chaosSpecs["retention"]) }

// chaosScenario runs spec as a chaos.Scenario on PostgreSQL against its
// one defence: the control side with the defence off, then the defended
// side, every run judged on whether it met its fault. On the long
// schedule, each of the package's four scenarios under load takes a fifth
// of its budget, and the six of decisions on hidden rows
// (chaos_access_test.go) the fifth left; the short one of make test runs
// each side once, and on only while it has not reached its goal.
func chaosScenario(t *testing.T, spec chaosSpec) {
	budget := chaos.OneRun
	if chaos.Long() {
		budget = chaos.Budget(t) / 5
	}
	chaos.Scenario{Package: "pgkit/partition", Fault: spec.fault, Store: "postgres", Defence: spec.defence,
		Budget: budget}.Run(t, func(t *testing.T, r *chaos.Run) { chaosRun(t, spec, r) })
}

// chaosSpeed is how much faster than real time the simulated clock runs
// at most: a day in 720 ms. It moves about every chaosTick, by at most
// chaosStep, and only once every instance has run Maintain and a snapshot
// has been read since it last moved: a busy machine slows the simulated
// days down instead of letting an instance sleep through the hours in
// which its clock is ahead of the database's by a day's expiry, which a
// control must run in to meet its fault. Each window of the scenarios is
// hours long, so every instance runs in it several times.
const (
	chaosSpeed = 120000
	chaosTick  = 10 * time.Millisecond
	chaosStep  = 2 * time.Hour
)

// chaosDays is how many simulated days a run covers.
func chaosDays() float64 {
	if chaos.Long() {
		return 6
	}
	return 3.5
}

// chaosEvent is an event a writer was told committed.
type chaosEvent struct {
	id  idtype.ID
	ack time.Time
}

// chaosNote is a note a writer was told committed.
type chaosNote struct {
	table string
	id    int64
	event idtype.ID
	keep  bool
	ack   time.Time
}

// chaosClean is one DELETE of the cleaner: it deletes the notes of table
// whose events are below all, or below notKept when not kept. Its rows
// may be gone from when it began, whether or not it got to say so.
type chaosClean struct {
	table        string
	notKept, all idtype.ID
	began        time.Time
}

// cleanedBefore returns, by notes table, the highest bounds of the
// cleaner's DELETEs that began before t: a DELETE among them may have
// deleted a note whose event is below all, or below notKept when not
// kept. A snapshot reads them once for all its notes, rather than every
// DELETE for each note.
func (h *chaosHistory) cleanedBefore(t time.Time) map[string]chaosClean {
	out := map[string]chaosClean{}
	for _, c := range h.cleans {
		if c.began.Before(t) {
			m := out[c.table]
			m.notKept, m.all = max(m.notKept, c.notKept), max(m.all, c.all)
			out[c.table] = m
		}
	}
	return out
}

// chaosObserved is what the run saw of its fault.
type chaosObserved struct {
	referredInDefault int
	moved             int64
	removed           int
	// aheadAtExpiry counts the Maintain calls of an instance whose clock
	// had a day expired that the database's had not (a day's end plus
	// Retention between the two), and maxSkew is the largest lead among
	// them: what the database's clock is the defence against.
	aheadAtExpiry int
	maxSkew       time.Duration
	expiredSeen   int
}

// chaosHistory is what a run records, for the checks.
type chaosHistory struct {
	mu      sync.Mutex
	events  []chaosEvent
	unknown map[idtype.ID]bool // inserts that failed: they may or may not be there
	notes   []chaosNote
	cleans  []chaosClean
	obs     chaosObserved
	errs    []string
	// gone holds, for each event a snapshot found missing before its day
	// expired by the snapshot's clock, that clock's reading: chaosFinal
	// judges them (see chaosGone).
	gone map[idtype.ID]time.Time
}

// chaosNoteTables are the notes tables: one foreign key action each.
var chaosNoteTables = []string{"notes_cascade", "notes_setnull", "notes_noaction"}

const chaosSchema = `
CREATE TABLE events (id bigint PRIMARY KEY, writer int NOT NULL, seq int NOT NULL, stamp int NOT NULL DEFAULT 0) PARTITION BY RANGE (id);
CREATE TABLE notes_cascade (id bigserial PRIMARY KEY, event_id bigint REFERENCES events ON DELETE CASCADE, keep bool NOT NULL);
CREATE TABLE notes_setnull (id bigserial PRIMARY KEY, event_id bigint REFERENCES events ON DELETE SET NULL, keep bool NOT NULL);
CREATE TABLE notes_noaction (id bigserial PRIMARY KEY, event_id bigint REFERENCES events, keep bool NOT NULL);
CREATE INDEX ON notes_cascade (event_id);
CREATE INDEX ON notes_setnull (event_id);
CREATE INDEX ON notes_noaction (event_id);
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
ALTER TABLE events ENABLE ALWAYS TRIGGER log_call;
CREATE TABLE drops (name text NOT NULL, at timestamptz NOT NULL);
CREATE FUNCTION log_drop() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.drops SELECT object_name, (SELECT now FROM public.snowkey_test_clock)
	FROM pg_event_trigger_dropped_objects() WHERE object_type = 'table' AND schema_name = 'public';
END $$;
CREATE EVENT TRIGGER log_drop ON sql_drop EXECUTE FUNCTION log_drop();
`

// chaosRetention is the Retention of the run's tables.
const chaosRetention = 24 * time.Hour

// chaosRun is one run of spec: the setup, the load, the last Maintain and
// the checks.
func chaosRun(t *testing.T, spec chaosSpec, r *chaos.Run) {
	ctx := testenv.Deadline(t, 3*time.Minute)
	began := time.Now()
	phases := []string{}
	phase := func(name string) {
		phases = append(phases, fmt.Sprintf("%s %v", name, time.Since(began).Round(time.Millisecond)))
	}
	defer func() { t.Logf("phases: %s", strings.Join(phases, ", ")) }()
	rng := r.Rand
	_, db := openDB(t)
	db.SetMaxOpenConns(40)
	t0 := date("2025-03-10T00:00:00Z")
	clock := newDBClock(t, db, t0)
	if _, err := db.ExecContext(ctx, chaosSchema); err != nil {
		t.Fatal(err)
	}
	if _, err := clock.table("events", Options{Premake: -1}).Maintain(ctx, db); err != nil {
		t.Fatal(err)
	}
	maintainDB := db
	if !spec.super {
		role, as := maintainer(t, db)
		own(t, db, role)
		maintainDB = as
	}

	phase("setup")
	var sim atomic.Int64 // the simulated time, ns: the database's clock
	sim.Store(t0.UnixNano())
	simNow := func() time.Time { return time.Unix(0, sim.Load()).UTC() }
	h := &chaosHistory{unknown: map[idtype.ID]bool{}, gone: map[idtype.ID]time.Time{}}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// The load's calls end when the load stops: a Maintain under way then
	// ends at once, and what it left undone the last Maintain does.
	load, endLoad := context.WithCancel(ctx)
	defer endLoad()
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	errf := func(format string, args ...any) {
		h.mu.Lock()
		h.errs = append(h.errs, fmt.Sprintf(format, args...))
		h.mu.Unlock()
	}

	// Writers: events of the simulated now, and notes for some.
	for w := range 3 {
		wrng := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
		clk := &offsetClock{sim: &sim}
		gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: int64(10 + w), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for seq := 0; !stopped(); seq++ {
				id, err := gen.Next()
				if err != nil {
					errf("writer %d: %v", w, err)
					return
				}
				_, err = db.ExecContext(load, "INSERT INTO events (id, writer, seq) VALUES ($1, $2, $3)", id, w, seq)
				ack := time.Now()
				h.mu.Lock()
				if err != nil {
					h.unknown[id] = true
				} else {
					h.events = append(h.events, chaosEvent{id: id, ack: ack})
				}
				h.mu.Unlock()
				if err != nil {
					if load.Err() == nil {
						errf("writer %d: insert event: %v", w, err)
					}
					continue
				}
				if wrng.IntN(10) < 3 {
					table := chaosNoteTables[wrng.IntN(len(chaosNoteTables))]
					var nid int64
					// Notes of the first day are now and then kept longer, so
					// that its partition outlives its Retention for a while.
					keep := spec.keep && id.Time().Before(t0.Add(24*time.Hour)) && wrng.IntN(20) == 0
					err := db.QueryRowContext(load, "INSERT INTO "+table+" (event_id, keep) VALUES ($1, $2) RETURNING id",
						id, keep).Scan(&nid)
					if err != nil {
						if load.Err() == nil {
							errf("writer %d: insert note: %v", w, err)
						}
						continue
					}
					h.mu.Lock()
					h.notes = append(h.notes, chaosNote{table: table, id: nid, event: id, keep: keep, ack: time.Now()})
					h.mu.Unlock()
				}
			}
		})
	}

	// The cleaner: notes of events older than six hours go (those marked
	// keep, two days after): the app's own deletes, which retention waits
	// for.
	wg.Go(func() {
		for !stopped() {
			now := simNow()
			for _, table := range chaosNoteTables {
				c := chaosClean{table: table, notKept: idtype.DefaultLayout.FirstID(now.Add(-6 * time.Hour)),
					all: idtype.DefaultLayout.FirstID(now.Add(-48 * time.Hour)), began: time.Now()}
				h.mu.Lock()
				h.cleans = append(h.cleans, c)
				h.mu.Unlock()
				if _, err := db.ExecContext(load, "DELETE FROM "+table+" WHERE (NOT keep AND event_id < $1) OR event_id < $2",
					c.notKept, c.all); err != nil && load.Err() == nil {
					errf("cleaner: %v", err)
				}
			}
			sleepOrStop(stop, 40*time.Millisecond)
		}
	})

	// Four instances, with clocks up to a day apart: one on the
	// database's time, one 16 to 24 hours ahead, and two up to 24 hours
	// ahead. A step may wait for its locks as long as the run may last
	// (its deadline): what the run checks is the faults, not lock waits.
	offsets := []time.Duration{0, 16*time.Hour + time.Duration(rng.Int64N(int64(8*time.Hour))),
		time.Duration(rng.Int64N(int64(24 * time.Hour))), time.Duration(rng.Int64N(int64(24 * time.Hour)))}
	var defencesOff defences
	if r.Control {
		defencesOff = spec.off
	}
	tables := make([]*Table, len(offsets))
	for i, off := range offsets {
		tables[i] = clock.tableWithout("events", Options{Premake: -1, Retention: chaosRetention, LockTimeout: 3 * time.Minute,
			Clock: &offsetClock{sim: &sim, off: off}}, defencesOff)
	}
	var maintainErrs []string
	// rounds counts, for each instance and then for the snapshots, the
	// calls since the run began: the simulated clock moves only when each
	// has grown since it last moved.
	rounds := make([]atomic.Int64, len(tables)+1)
	for i, p := range tables {
		irng := rand.New(rand.NewPCG(rng.Uint64(), uint64(100+i)))
		wg.Go(func() {
			for !stopped() {
				rep, err := p.Maintain(load, maintainDB)
				rounds[i].Add(1)
				h.mu.Lock()
				h.obs.moved += rep.Moved
				h.obs.removed += len(rep.Removed)

				if db, app := rep.DatabaseTime, rep.DatabaseTime.Add(rep.ClockSkew); !db.IsZero() && rep.ClockSkew > 0 {
					// A day expires at the midnight Retention after its end;
					// the first to expire is t0's, two days on.
					if m := app.Truncate(24 * time.Hour); m.After(db) && !m.Before(t0.Add(24*time.Hour+chaosRetention)) {
						h.obs.aheadAtExpiry++
						h.obs.maxSkew = max(h.obs.maxSkew, rep.ClockSkew)
					}
				}
				if err != nil && load.Err() == nil && !transient(err) {
					maintainErrs = append(maintainErrs, fmt.Sprintf("instance %d (clock %+v): %v", i, offsets[i], err))
				}
				h.mu.Unlock()
				sleepOrStop(stop, time.Duration(20+irng.IntN(60))*time.Millisecond)
			}
		})
	}

	// Snapshots, checked as they come.
	wg.Go(func() {
		for !stopped() {
			chaosSnapshot(load, t, db, h, r, false)
			rounds[len(tables)].Add(1)
			sleepOrStop(stop, 30*time.Millisecond)
		}
	})

	// The simulated clock: the database's first, then the writers'.
	end := t0.Add(time.Duration(chaosDays() * float64(24*time.Hour)))
	moved := time.Now()
	last := make([]int64, len(rounds))
	for simNow().Before(end) {
		select {
		case <-ctx.Done():
			close(stop)
			wg.Wait()
			t.Fatalf("the run did not end: %v", ctx.Err())
		case <-time.After(chaosTick):
		}
		behind := false
		for i := range rounds {
			behind = behind || rounds[i].Load() == last[i]
		}
		if behind {
			continue
		}
		for i := range rounds {
			last[i] = rounds[i].Load()
		}
		step := min(time.Since(moved)*chaosSpeed, chaosStep)
		moved = time.Now()
		next := simNow().Add(step).Truncate(time.Millisecond)
		if next.After(end) {
			next = end
		}
		if _, err := db.ExecContext(ctx, "UPDATE public.snowkey_test_clock SET now = $1", next); err != nil {
			t.Fatal(err)
		}
		sim.Store(next.UnixNano())
	}
	phase("load")
	close(stop)
	endLoad()
	wg.Wait()
	phase("stop")
	for _, e := range h.errs {
		t.Errorf("load: %s", e)
	}

	// The last Maintain, on the database's time now, by the first
	// instance, as the run's defences have it.
	final, ferr := tables[0].Maintain(ctx, maintainDB)
	phase("last Maintain")
	spec.observe(h, r)
	for _, e := range maintainErrs {
		r.Violation("Maintain failed while writers ran: %s", e)
	}
	if ferr != nil {
		r.Violation("the last Maintain failed: %v", ferr)
	}
	chaosFinal(ctx, t, db, h, r, final)
	phase("checks")
}

// observe records whether the run met spec's fault.
func (spec chaosSpec) observe(h *chaosHistory, r *chaos.Run) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ok, what := spec.met(&h.obs); ok {
		r.Met("%s", what)
	}
}

// transient reports errors a concurrent Maintain may meet and retry: a
// deadlock or serialization failure PostgreSQL resolved by failing it.
func transient(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

func sleepOrStop(stop <-chan struct{}, d time.Duration) {
	select {
	case <-stop:
	case <-time.After(d):
	}
}

// offsetClock is the simulated clock, off ahead (or behind); Sleep waits
// for it to move.
type offsetClock struct {
	sim *atomic.Int64
	off time.Duration
}

func (c *offsetClock) UnixNano() int64 { return c.sim.Load() + int64(c.off) }
func (c *offsetClock) Sleep(d time.Duration) {
	until := c.UnixNano() + int64(d)
	for c.UnixNano() < until {
		time.Sleep(time.Millisecond)
	}
}

// chaosState is one read of the tables, in one snapshot.
type chaosState struct {
	now      time.Time
	events   map[idtype.ID]chaosRow
	notes    map[string]*idtype.ID // table.id -> event_id, nil for NULL
	parts    []string
	calls    map[string]int       // "op id" -> calls
	drops    map[string]time.Time // partition -> the database's time when it was dropped
	began    time.Time            // before the snapshot began
	finished time.Time
}

type chaosRow struct {
	part  string
	stamp int
	count int
}

// readChaos reads the tables in one REPEATABLE READ snapshot, with the
// database's time.
func readChaos(ctx context.Context, db *sql.DB, calls bool) (*chaosState, error) {
	s := &chaosState{events: map[idtype.ID]chaosRow{}, notes: map[string]*idtype.ID{}, calls: map[string]int{},
		drops: map[string]time.Time{}, began: time.Now()}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	if err := tx.QueryRowContext(ctx, "SELECT "+dbClockSQL).Scan(&s.now); err != nil {
		return nil, err
	}
	s.now = s.now.UTC()
	rows, err := tx.QueryContext(ctx, "SELECT id, tableoid::regclass::text, stamp FROM events")
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id idtype.ID
		var row chaosRow
		if err := rows.Scan(&id, &row.part, &row.stamp); err != nil {
			rows.Close()
			return nil, err
		}
		row.count = s.events[id].count + 1
		s.events[id] = row
	}
	rows.Close()
	for _, table := range chaosNoteTables {
		rows, err := tx.QueryContext(ctx, "SELECT id, event_id FROM "+table)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id int64
			var ev *idtype.ID
			if err := rows.Scan(&id, &ev); err != nil {
				rows.Close()
				return nil, err
			}
			s.notes[fmt.Sprintf("%s.%d", table, id)] = ev
		}
		rows.Close()
	}
	rows, err = tx.QueryContext(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'events'::regclass`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return nil, err
		}
		s.parts = append(s.parts, name)
	}
	rows.Close()
	if calls {
		rows, err = tx.QueryContext(ctx, "SELECT op || ' ' || id, count(*) FROM trigger_calls GROUP BY 1")
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var k string
			var n int
			if err := rows.Scan(&k, &n); err != nil {
				rows.Close()
				return nil, err
			}
			s.calls[k] = n
		}
		rows.Close()
		rows, err = tx.QueryContext(ctx, "SELECT name, min(at) FROM drops GROUP BY name")
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var name string
			var at time.Time
			if err := rows.Scan(&name, &at); err != nil {
				rows.Close()
				return nil, err
			}
			s.drops[name] = at.UTC()
		}
		rows.Close()
	}
	s.finished = time.Now()
	return s, tx.Commit()
}

// chaosExpired reports whether the period of key id ended more than the
// Retention before now: its partition may be gone.
func chaosExpired(id idtype.ID, now time.Time) bool {
	day := id.Time().UTC().Truncate(24 * time.Hour)
	return !day.Add(24 * time.Hour).Add(chaosRetention).After(now)
}

// chaosSnapshot reads the tables and checks what the writers were told
// before it began: each event there once, with the stamp of one insert,
// unless its period expired; each note there, pointing at its event,
// unless the cleaner deleted it. It also records what the run saw of its
// fault. It returns the state it read and the rows it checked.
func chaosSnapshot(ctx context.Context, t *testing.T, db *sql.DB, h *chaosHistory, r *chaos.Run, calls bool) (*chaosState, int) {
	s, err := readChaos(ctx, db, calls)
	if err != nil {
		if ctx.Err() == nil {
			h.mu.Lock()
			h.errs = append(h.errs, fmt.Sprintf("snapshot: %v", err))
			h.mu.Unlock()
		}
		return nil, 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	checked := 0
	for _, e := range h.events {
		if e.ack.After(s.began) {
			continue
		}
		checked++
		row, ok := s.events[e.id]
		switch {
		case !ok && !chaosExpired(e.id, s.now):
			if at, seen := h.gone[e.id]; !seen || s.now.Before(at) {
				h.gone[e.id] = s.now
			}
		case ok && row.count != 1:
			r.Violation("event %d is in the table %d times", e.id, row.count)
		case ok && row.stamp != 1:
			r.Violation("event %d was changed: stamped %d times, inserted once", e.id, row.stamp)
		}
	}
	referred := map[idtype.ID]bool{}
	cleaned := h.cleanedBefore(s.finished)
	for _, n := range h.notes {
		k := fmt.Sprintf("%s.%d", n.table, n.id)
		if c := cleaned[n.table]; n.event < c.all || (!n.keep && n.event < c.notKept) {
			continue
		}
		if n.ack.After(s.began) {
			continue
		}
		checked++
		ev, ok := s.notes[k]
		switch {
		case !ok:
			r.Violation("note %s of event %d is gone; nobody deleted it", k, n.event)
		case ev == nil:
			r.Violation("note %s was unlinked from event %d", k, n.event)
		case *ev != n.event:
			r.Violation("note %s refers to %d, not to its event %d", k, *ev, n.event)
		default:
			referred[n.event] = true
		}
	}
	for id := range referred {
		if s.events[id].part == "events_default" {
			h.obs.referredInDefault++
			break
		}
	}
	for _, name := range s.parts {
		if name == "events_default" {
			continue
		}
		day, err := time.Parse("events_p20060102", name)
		if err == nil && !day.Add(24*time.Hour).Add(chaosRetention).After(s.now) {
			h.obs.expiredSeen++
			break
		}
	}
	return s, checked
}

// chaosFinal checks the tables after the last Maintain: what
// chaosSnapshot checks, each trigger call made by a writer's insert, and
// no row or partition left unnamed by the report.
func chaosFinal(ctx context.Context, t *testing.T, db *sql.DB, h *chaosHistory, r *chaos.Run, rep Report) {
	s, checked := chaosSnapshot(ctx, t, db, h, r, true)
	if s == nil {
		t.Fatal("the last snapshot failed")
	}
	r.CountRows(checked)
	h.mu.Lock()
	defer h.mu.Unlock()
	committed := map[idtype.ID]bool{}
	for _, e := range h.events {
		committed[e.id] = true
		if n := s.calls["INSERT "+fmt.Sprint(e.id)]; n != 1 {
			r.Violation("the trigger ran %d times on inserting event %d, which a writer inserted once", n, e.id)
		}
	}
	for k, n := range s.calls {
		op, id, _ := strings.Cut(k, " ")
		switch {
		case op != "INSERT":
			r.Violation("the trigger ran %d times for %s of event %s, which no writer did", n, op, id)
		case !committed[mustID(id)] && !h.unknown[mustID(id)]:
			r.Violation("the trigger ran on inserting event %s, which no writer inserted", id)
		}
	}
	left := map[string]bool{}
	for _, l := range rep.Left {
		left[l.Partition] = true
	}
	unnamed := map[string]int{}
	for id, row := range s.events {
		if row.part != "events_default" {
			continue
		}
		name := "events_p" + id.Time().UTC().Format("20060102")
		if !left[name] {
			unnamed[name]++
		}
	}
	for name, n := range unnamed {
		r.Violation("%d rows of %s stay in the default partition after the last Maintain, which does not name them", n, name)
	}
	chaosGone(h, r, s)
	// Every partition dropped, with the database's time of the drop, in
	// its transaction (an event trigger logs it): none before its day
	// expired.
	for name, at := range s.drops {
		day, err := time.Parse("events_p20060102", name)
		if err == nil && day.Add(24*time.Hour).Add(chaosRetention).After(at) {
			r.Violation("partition %s was dropped at %s, before its day expired at %s", name, at.Format(time.RFC3339),
				day.Add(24*time.Hour).Add(chaosRetention).Format(time.RFC3339))
		}
	}
	kept := map[string]bool{}
	for _, k := range rep.Kept {
		kept[k.Partition] = true
	}
	for _, name := range s.parts {
		day, err := time.Parse("events_p20060102", name)
		if err == nil && !day.Add(24*time.Hour).Add(chaosRetention).After(s.now) && !kept[name] {
			r.Violation("expired partition %s is still there after the last Maintain, which does not say why", name)
		}
	}
	slices.Sort(s.parts)
	t.Logf("%d events, %d notes checked at %s; partitions %v, dropped %v; last Maintain %+v", len(h.events), len(h.notes),
		s.now.Format(time.RFC3339), s.parts, s.drops, rep)
}

// chaosGone judges the events that snapshots found missing before their
// day expired (h.gone), once the drops are known (s, the last snapshot,
// read them). A snapshot reads the clock in its first statement, and so
// fixes its view of the rows and the catalog, but the partitions its
// SELECT FROM events scans are those there when that statement locks
// them: a partition dropped in between is missing from it, dropped at a
// later reading of the clock, by at most chaosStep, since the clock moves
// at most once while a snapshot runs. An event whose partition was
// dropped by then is therefore judged by that drop's time, which
// chaosFinal checks against the day's expiry for every dropped
// partition; one whose partition was dropped later, or never, was lost.
func chaosGone(h *chaosHistory, r *chaos.Run, s *chaosState) {
	for id, at := range h.gone {
		name := "events_p" + id.Time().UTC().Format("20060102")
		if dropped, ok := s.drops[name]; ok && !dropped.After(at.Add(chaosStep)) {
			continue
		}
		r.Violation("event %d (%s) is gone at %s, before its day expired, and its partition %s was not dropped by then",
			id, id.Time().UTC().Format(time.RFC3339), at.Format(time.RFC3339), name)
	}
}

func mustID(s string) idtype.ID {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return idtype.ID(n)
}

package partition

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Maintain brings the table's partitions in line with the options at the
// database's current time, and returns what it changed and what it left:
//
//   - It makes the default partition (table_default) if the table has
//     none, so that a row whose period has no partition yet is kept, not
//     refused.
//   - It makes a partition for the current period and for Premake periods
//     after it, and for every period between the newest partition and now,
//     so that a pause in maintenance leaves no gap. With Premake made
//     ahead, rows find their partition from the first one, and the default
//     partition stays empty.
//   - When the default partition holds rows (a clock far ahead, a pause
//     longer than Premake, rows of old periods copied in), it makes the
//     partition of each of their periods, from the oldest, and moves the
//     rows into it, in the transaction that makes it, under a lock that
//     keeps writers of the table waiting: no row is lost or seen twice.
//     A move fires no trigger of the user's and no foreign key's action:
//     the user's triggers are switched off for the move, in its
//     transaction, and put back before it commits; rows that other rows
//     refer to are moved with session_replication_role set to replica,
//     under which PostgreSQL fires no foreign-key action either, when the
//     current user may set it (a superuser, or a role granted SET on it),
//     and left where they are otherwise (Report.Left, ErrReferenced): a
//     DELETE and INSERT would delete the rows that refer to them with ON
//     DELETE CASCADE, unlink them with SET NULL, and fail with NO ACTION.
//     Rows of a period past Retention are never moved (ErrExpired).
//   - With Retention, it removes every partition it made whose whole
//     period ended more than Retention ago: it detaches it, then drops it
//     (or keeps it as a table of its own, with Detach), which works on a
//     table that other tables refer to, where DROP alone fails. A
//     partition whose rows other rows still refer to stays, with its rows
//     (Report.Kept, ErrReferenced), until they no longer do: removing it
//     would break those foreign keys, and Maintain deletes no row of
//     another table. A partition it did not make (another name or other
//     bounds) is never removed, nor are rows in the default partition.
//
// Every decision rests on every row: the steps read with row_security
// off, so that PostgreSQL refuses a read that a policy of row-level
// security would filter instead of filtering it, and a period or an
// expired partition whose rows, or the rows that refer to them, the role
// cannot read whole is left or kept as it is (Report.Left, Report.Kept),
// with an error wrapping ErrRowSecurity or ErrPrivilege that names the
// table and what to grant, which Maintain also returns. A role with
// BYPASSRLS, or the tables' owner when they do not FORCE ROW LEVEL
// SECURITY, reads every row. A default partition the role cannot read
// whole ends the call with that error.
//
// Every decision is made on the database's clock, read in the
// transaction of the step that acts on it, so that every instance of an
// app decides alike, whatever its own clock says (Report.ClockSkew says
// how far that is).
//
// Maintain is idempotent, and safe to call from every instance of an app
// at once: each step runs in a transaction of its own that first takes
// the advisory lock pg_advisory_xact_lock(LockClass, table OID) and then
// looks at the table afresh, so concurrent calls queue and the later ones
// find the work done. Each step bounds its wait for the table's lock with
// LockTimeout. A step that makes or removes a partition of a table that
// others refer to also locks the referring tables, which PostgreSQL needs
// for their foreign keys: it locks them first and the table second, each
// with a brief wait, and gives up its locks to try again (for up to a
// minute) when one is in use, so that it neither deadlocks with the app's
// writes nor waits behind a stream of them. A period that cannot be done
// is named in the report, and
// every other step still runs; a step that fails is rolled back, and the
// error (joined with any others) is returned after the other steps ran,
// except a lock timeout, a lost connection or the end of ctx, which stop
// the call. The steps done stay done, and the report says what they were.
//
// The table must exist and be partitioned BY RANGE on one bigint column
// (Create makes it so); otherwise the error wraps ErrNotPartitioned. A
// partition made by hand that covers part of a period to make is left in
// place, and the period is reported (ErrOverlap).
func (p *Table) Maintain(ctx context.Context, db *sql.DB) (Report, error) {
	if db == nil {
		return Report{}, fmt.Errorf("%w: Maintain: nil *sql.DB", idtype.ErrInvalidOptions)
	}
	var oid sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT to_regclass($1)::oid::bigint", p.quoted()).Scan(&oid); err != nil {
		return Report{}, fmt.Errorf("partition: look up table %s: %w", p.Name(), err)
	}
	if !oid.Valid {
		return Report{}, fmt.Errorf("%w: table %s does not exist (Create makes it)", ErrNotPartitioned, p.Name())
	}
	m := &maintenance{p: p, db: db, oid: uint32(oid.Int64), skip: map[string]bool{}, scanFrom: bound{inf: -1}}
	for {
		done, err := m.step(ctx)
		if err != nil {
			return m.rep, errors.Join(append(m.errs, err)...)
		}
		if done {
			return m.rep, errors.Join(m.errs...)
		}
	}
}

// maintenance is one Maintain call.
type maintenance struct {
	p       *Table
	db      *sql.DB
	oid     uint32
	version int // server_version_num
	rep     Report
	// skip holds the actions (by key) done with for this call without
	// being done: periods left, partitions kept, steps that failed.
	skip map[string]bool
	// scanFrom is where the next look for rows in the default partition
	// starts: the periods below it were dealt with in this call.
	scanFrom bound
	// reported holds the Left entries reported, by partition and reason.
	reported map[string]bool
	errs     []error
	steps    int
	last     string // the last action's key
	busy     int    // steps tried again for a busy referring table
}

// maxBusy bounds how often one call tries steps again for a busy
// referring table: at the back-off's 200 ms, a minute.
const maxBusy = 300

type actionKind int

const (
	makeDefault actionKind = iota
	makePeriod
	removeExpired
)

// action is one step of maintenance, run in a transaction of its own.
type action struct {
	kind   actionKind
	name   string      // makeDefault, makePeriod: the new partition
	start  time.Time   // makePeriod: the period's start
	lo, hi bound       // makePeriod
	parts  []partition // removeExpired
	// fromDefault says the period was found in the default partition
	// rather than due now.
	fromDefault bool
}

// key names the action for the skip set and the progress check.
func (a *action) key() string {
	switch a.kind {
	case makeDefault:
		return "default " + a.name
	case makePeriod:
		return "make " + a.name
	}
	names := make([]string, len(a.parts))
	for i, pt := range a.parts {
		names[i] = pt.name
	}
	return "remove " + strings.Join(names, ", ")
}

func (a *action) String() string {
	switch a.kind {
	case makeDefault:
		return "make default partition " + a.name
	case makePeriod:
		return fmt.Sprintf("make partition %s [%s, %s)", a.name, a.lo, a.hi)
	}
	return a.key()
}

// maxSteps bounds the steps of one call: one per partition made or
// period left, and one for retention, which a table never needs this
// many of.
const maxSteps = 100000

// step takes the lock, reads the table, and runs the first action the
// plan holds; it reports done when there is nothing left to do.
func (m *maintenance) step(ctx context.Context) (done bool, err error) {
	p := m.p
	if m.steps++; m.steps > maxSteps {
		return false, fmt.Errorf("partition: table %s: more than %d steps in one Maintain", p.Name(), maxSteps)
	}
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("partition: table %s: %w", p.Name(), err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit it does nothing
	if !p.defences.noLock {
		// The OID is unsigned; the lock takes a signed int4 with the same bits.
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1, $2)", LockClass, int32(m.oid)); err != nil {
			return false, fmt.Errorf("partition: table %s: advisory lock: %w", p.Name(), err)
		}
	}
	if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = "+strconv.FormatInt(p.lockTimeout.Milliseconds(), 10)); err != nil {
		return false, fmt.Errorf("partition: table %s: %w", p.Name(), err)
	}
	// A read that a decision rests on sees every row, or PostgreSQL
	// refuses it (access.go).
	if !p.defences.filtered {
		if _, err := tx.ExecContext(ctx, "SET LOCAL row_security = off"); err != nil {
			return false, fmt.Errorf("partition: table %s: %w", p.Name(), err)
		}
	}
	appNow := p.now()
	var dbNow time.Time
	if err := tx.QueryRowContext(ctx, "SELECT "+p.nowSQL).Scan(&dbNow); err != nil {
		return false, fmt.Errorf("partition: table %s: read the database's clock: %w", p.Name(), err)
	}
	dbNow = dbNow.UTC()
	if m.steps == 1 {
		m.rep.DatabaseTime, m.rep.ClockSkew = dbNow, appNow.Sub(dbNow)
	}
	now := dbNow
	if p.defences.appClock {
		now = appNow
	}
	st, err := p.readState(ctx, tx, m.oid)
	if err != nil {
		return false, err
	}
	m.version = st.version
	act, err := m.plan(ctx, tx, st, now)
	if err != nil || act == nil {
		return act == nil && err == nil, err
	}
	// Each step changes what the next one sees; the same action twice
	// would mean it did not, and would repeat for ever.
	if act.key() == m.last {
		return false, fmt.Errorf("partition: table %s: step %s made no progress", p.Name(), act)
	}
	m.last = act.key()
	if act.fromDefault {
		m.scanFrom = act.hi
	}
	res, err := m.run(ctx, tx, st, act)
	if err == nil && res.left == nil {
		err = tx.Commit()
	}
	if errors.Is(err, errBusy) && m.busy < maxBusy && ctx.Err() == nil {
		// Tried again, after the writers that held a referring table.
		_ = tx.Rollback()
		m.last = ""
		m.busy++
		t := time.NewTimer(time.Duration(min(m.busy, 10)) * 20 * time.Millisecond)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		return false, nil
	}
	if err != nil {
		_ = tx.Rollback()
		m.skip[act.key()] = true
		err = fmt.Errorf("partition: table %s: %s: %w", p.Name(), act, err)
		if fatal(ctx, err) || p.defences.stopAtLeft {
			return false, err
		}
		m.errs = append(m.errs, err)
		return false, nil
	}
	// A refused read is reported with what it left or kept, and fails the
	// call too: the role must be given what it lacks.
	refusal := func() {
		if res.refused != nil {
			m.errs = append(m.errs, fmt.Errorf("partition: table %s: %s: %w", p.Name(), act, res.refused))
		}
	}
	if res.left != nil {
		// Nothing changed: the transaction rolls back.
		m.skip[act.key()] = true
		m.addLeft(*res.left)
		if p.defences.stopAtLeft {
			return false, fmt.Errorf("partition: table %s: %s: %w", p.Name(), act, res.left.Err)
		}
		refusal()
		return false, nil
	}
	switch act.kind {
	case makeDefault, makePeriod:
		m.rep.Created = append(m.rep.Created, act.name)
	case removeExpired:
		for _, pt := range res.removed {
			m.rep.Removed = append(m.rep.Removed, pt.name)
		}
	}
	for _, k := range res.kept {
		m.skip["keep "+k.Partition] = true
		m.rep.Kept = append(m.rep.Kept, k)
	}
	refusal()
	m.rep.Moved += res.moved
	return false, nil
}

// fatal reports whether err ends the call rather than only its step: the
// context ended, the connection failed, or a lock timed out (which the
// next steps would wait for in vain too).
func fatal(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return true
	}
	return pgErr.Code == "55P03" || pgErr.Code == "57014" || strings.HasPrefix(pgErr.Code, "08")
}

// addLeft reports l, once per period and reason in a call.
func (m *maintenance) addLeft(l Left) {
	k := l.Partition + "|" + l.From.String() + "|" + l.Err.Error()
	if m.reported == nil {
		m.reported = map[string]bool{}
	}
	if m.reported[k] {
		return
	}
	m.reported[k] = true
	m.rep.Left = append(m.rep.Left, l)
}

// result is what an action did.
type result struct {
	moved   int64
	removed []partition
	kept    []Kept
	left    *Left // set when the action changed nothing and left a period
	// refused is set when PostgreSQL refused a read the action's
	// decision rests on (ErrRowSecurity, ErrPrivilege): the action
	// left or kept what it could not decide on, and Maintain returns it.
	refused error
}

// run does one action in tx.
func (m *maintenance) run(ctx context.Context, tx *sql.Tx, st *tableState, act *action) (result, error) {
	switch act.kind {
	case makeDefault:
		if _, err := m.lockTables(ctx, tx, st); err != nil {
			return result{}, err
		}
		_, err := tx.ExecContext(ctx, "CREATE TABLE "+pgx.Identifier{st.schema, act.name}.Sanitize()+
			" PARTITION OF "+st.ident()+" DEFAULT")
		return result{}, err
	case makePeriod:
		return m.makePeriod(ctx, tx, st, act)
	}
	return m.removeExpired(ctx, tx, st, act)
}

// periodBounds returns the bounds of the period that starts at s, and
// false when the layout holds no ID of it (it lies before the epoch or
// after the layout's last time). The last period the layout reaches runs
// to MAXVALUE, so that the last IDs have a partition too.
func (p *Table) periodBounds(s time.Time) (lo, hi bound, ok bool) {
	if s.After(p.layout.MaxTime()) {
		return lo, hi, false
	}
	lo, hi = finite(p.layout.FirstID(s)), finite(p.layout.FirstID(p.period.next(s)))
	if p.period.next(s).After(p.layout.MaxTime()) {
		hi = maxBound
	}
	return lo, hi, lo.cmp(hi) < 0
}

// ours reports whether Maintain made pt: it has the name and bounds
// Maintain gives the period its lower bound starts.
func (p *Table) ours(st *tableState, pt partition) bool {
	if pt.lo.inf != 0 || pt.schema != st.schema {
		return false
	}
	s := p.period.start(p.layout.Decode(idtype.ID(pt.lo.v)).Time)
	lo, hi, ok := p.periodBounds(s)
	return ok && pt.name == p.table+p.period.suffix(s) && lo == pt.lo && hi == pt.hi
}

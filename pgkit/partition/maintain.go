package partition

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Report says what one Maintain call changed.
type Report struct {
	// Created lists the partitions made, the default partition first if
	// it was missing, then the periods from the oldest.
	Created []string
	// Removed lists the partitions dropped, or detached with
	// Options.Detach, from the oldest.
	Removed []string
	// Moved is how many rows were moved out of the default partition into
	// partitions made for their periods.
	Moved int64
}

// Maintain brings the table's partitions in line with the options at the
// clock's current time, and returns what it changed:
//
//   - It makes the default partition (table_default) if the table has
//     none, so that a row whose period has no partition yet is kept, not
//     refused.
//   - It makes a partition for the current period and for Premake periods
//     after it, and for every period between the newest partition and now,
//     so that a pause in maintenance leaves no gap. It makes none for a
//     period already entirely past Retention.
//   - When the default partition holds rows of a period it makes, it moves
//     them into the new partition in the same transaction, under a lock
//     that keeps writers of the table waiting, so that no row is lost or
//     seen twice.
//   - With Retention, it removes (drops, or detaches with Detach) every
//     partition it made whose whole period ended more than Retention ago.
//     A partition it did not make (another name or other bounds) is never
//     removed, nor are rows of an expired period that sit in the default
//     partition.
//
// It is idempotent, and safe to call from every instance of an app at
// once: each step runs in a transaction of its own that first takes the
// advisory lock pg_advisory_xact_lock(LockClass, table OID) and
// then looks at the table afresh, so concurrent calls queue and the later
// ones find the work done. Each step bounds its wait for table locks with
// LockTimeout. On error, the steps already done stay done, and the report
// says what they were.
//
// The table must exist and be partitioned BY RANGE on one bigint column
// (Create makes it so); otherwise the error wraps ErrNotPartitioned.
// A partition made by hand that covers part of a period to make fails it
// with ErrOverlap.
func (p *Table) Maintain(ctx context.Context, db *sql.DB) (Report, error) {
	var rep Report
	if db == nil {
		return rep, fmt.Errorf("%w: Maintain: nil *sql.DB", idtype.ErrInvalidOptions)
	}
	now := p.now()
	var oid sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT to_regclass($1)::oid::bigint", p.quoted()).Scan(&oid); err != nil {
		return rep, fmt.Errorf("partition: look up table %s: %w", p.Name(), err)
	}
	if !oid.Valid {
		return rep, fmt.Errorf("%w: table %s does not exist (Create makes it)", ErrNotPartitioned, p.Name())
	}
	var last *action
	for {
		act, err := p.step(ctx, db, uint32(oid.Int64), now, &rep)
		if err != nil || act == nil {
			return rep, err
		}
		// Each step changes what the next one sees; the same step twice
		// would mean it did not, and would repeat for ever.
		if last != nil && last.String() == act.String() {
			return rep, fmt.Errorf("partition: table %s: step %s made no progress", p.Name(), act)
		}
		last = act
	}
}

// partition is one partition of the table, as the catalog says.
type partition struct {
	schema, name string
	lo, hi       bound
}

// tableState is what a step reads of the table under the lock.
type tableState struct {
	schema, name string
	key          string // the key column
	version      int    // server_version_num
	def          *partition
	parts        []partition // range partitions, by lower bound
}

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
	lo, hi bound       // makePeriod
	parts  []partition // removeExpired
}

func (a *action) String() string {
	switch a.kind {
	case makeDefault:
		return "make default partition " + a.name
	case makePeriod:
		return fmt.Sprintf("make partition %s [%s, %s)", a.name, a.lo, a.hi)
	}
	names := make([]string, len(a.parts))
	for i, pt := range a.parts {
		names[i] = pt.name
	}
	return "remove " + strings.Join(names, ", ")
}

// step takes the lock, reads the table, and runs the first action the
// plan holds; it returns nil when there is nothing left to do.
func (p *Table) step(ctx context.Context, db *sql.DB, oid uint32, now time.Time, rep *Report) (*action, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("partition: table %s: %w", p.Name(), err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit it does nothing
	if !p.d.noLock {
		// The OID is unsigned; the lock takes a signed int4 with the same bits.
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1, $2)", LockClass, int32(oid)); err != nil {
			return nil, fmt.Errorf("partition: table %s: advisory lock: %w", p.Name(), err)
		}
	}
	if p.lockTimeout > 0 {
		if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = "+strconv.FormatInt(p.lockTimeout.Milliseconds(), 10)); err != nil {
			return nil, fmt.Errorf("partition: table %s: %w", p.Name(), err)
		}
	}
	st, err := p.readState(ctx, tx, oid)
	if err != nil {
		return nil, err
	}
	acts, err := p.plan(st, now)
	if err != nil || len(acts) == 0 {
		return nil, err
	}
	act := &acts[0]
	moved, err := p.run(ctx, tx, st, act)
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return nil, fmt.Errorf("partition: table %s: %s: %w", p.Name(), act, err)
	}
	switch act.kind {
	case makeDefault, makePeriod:
		rep.Created = append(rep.Created, act.name)
	case removeExpired:
		for _, pt := range act.parts {
			rep.Removed = append(rep.Removed, pt.name)
		}
	}
	rep.Moved += moved
	return act, nil
}

// quoted is the table's name as SQL takes it.
func (p *Table) quoted() string {
	if p.schema == "" {
		return pgx.Identifier{p.table}.Sanitize()
	}
	return pgx.Identifier{p.schema, p.table}.Sanitize()
}

// querier is what readState needs of a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readState reads the table's partition key and partitions from the
// catalog, and checks that Maintain can work on it.
func (p *Table) readState(ctx context.Context, q querier, oid uint32) (*tableState, error) {
	st := &tableState{}
	var strat, keyType, key sql.NullString
	var natts sql.NullInt64
	err := q.QueryRowContext(ctx, `
		SELECT n.nspname, c.relname, current_setting('server_version_num')::int,
		       pt.partstrat::text, pt.partnatts, a.attname, format_type(a.atttypid, a.atttypmod)
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_partitioned_table pt ON pt.partrelid = c.oid
		LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = pt.partattrs[0]
		WHERE c.oid = $1`, int64(oid)).Scan(&st.schema, &st.name, &st.version, &strat, &natts, &key, &keyType)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("%w: table %s no longer exists", ErrNotPartitioned, p.Name())
	case err != nil:
		return nil, fmt.Errorf("partition: table %s: read catalog: %w", p.Name(), err)
	case st.version < 110000:
		return nil, fmt.Errorf("%w: table %s: the server is PostgreSQL %d; partitions by key time need 11 or later (default partition)",
			ErrServer, p.Name(), st.version/10000)
	case !strat.Valid:
		return nil, fmt.Errorf("%w: table %s is a plain table; PostgreSQL cannot partition a table in place: "+
			"make a partitioned table (Create) and move the rows into it", ErrNotPartitioned, p.Name())
	case strat.String != "r":
		return nil, fmt.Errorf("%w: table %s is partitioned by %s, not by range", ErrNotPartitioned, p.Name(),
			map[string]string{"l": "list", "h": "hash"}[strat.String])
	case natts.Int64 != 1 || !key.Valid:
		return nil, fmt.Errorf("%w: table %s is partitioned by %d key columns or an expression, not by its key column alone",
			ErrNotPartitioned, p.Name(), natts.Int64)
	case keyType.String != "bigint":
		return nil, fmt.Errorf("%w: table %s is partitioned by %s of type %s, not bigint", ErrNotPartitioned, p.Name(),
			key.String, keyType.String)
	}
	st.key = key.String
	rows, err := q.QueryContext(ctx, `
		SELECT n.nspname, c.relname, pg_get_expr(c.relpartbound, c.oid)
		FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE i.inhparent = $1`, int64(oid))
	if err != nil {
		return nil, fmt.Errorf("partition: table %s: read partitions: %w", p.Name(), err)
	}
	defer rows.Close()
	for rows.Next() {
		var pt partition
		var expr string
		if err := rows.Scan(&pt.schema, &pt.name, &expr); err != nil {
			return nil, fmt.Errorf("partition: table %s: read partitions: %w", p.Name(), err)
		}
		isDefault, lo, hi, err := parseBound(expr)
		if err != nil {
			return nil, fmt.Errorf("table %s, partition %s: %w", p.Name(), pt.name, err)
		}
		if isDefault {
			st.def = &pt
			continue
		}
		pt.lo, pt.hi = lo, hi
		st.parts = append(st.parts, pt)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("partition: table %s: read partitions: %w", p.Name(), err)
	}
	slices.SortFunc(st.parts, func(a, b partition) int { return a.lo.cmp(b.lo) })
	return st, nil
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

// plan lists what the table needs at time now, in the order Maintain
// does it: the default partition, the missing periods from the oldest,
// then the expired partitions.
func (p *Table) plan(st *tableState, now time.Time) ([]action, error) {
	var acts []action
	if st.def == nil {
		acts = append(acts, action{kind: makeDefault, name: p.defaultName()})
	}
	cur := p.period.start(now)
	first := cur
	// A pause in maintenance: fill the periods since the newest partition.
	if n := len(st.parts); n > 0 {
		newest := slices.MaxFunc(st.parts, func(a, b partition) int { return a.hi.cmp(b.hi) })
		if newest.hi.inf == 0 && newest.hi.v > 0 {
			if end := p.layout.Decode(idtype.ID(newest.hi.v)).Time; end.Before(cur) {
				first = p.period.start(end)
			}
		}
	}
	var cut bound
	if p.retention > 0 {
		cutoff := now.Add(-p.retention)
		cut = finite(p.layout.FirstID(cutoff))
		if s := p.period.start(cutoff); first.Before(s) {
			first = s
		}
	}
	last := cur
	for range p.premake {
		last = p.period.next(last)
	}
	for s := first; !s.After(last); s = p.period.next(s) {
		lo, hi, ok := p.periodBounds(s)
		if !ok {
			continue
		}
		exists := false
		for _, pt := range st.parts {
			if pt.lo == lo && pt.hi == hi {
				exists = true
				break
			}
			if pt.lo.cmp(hi) < 0 && lo.cmp(pt.hi) < 0 {
				return nil, fmt.Errorf("%w: table %s: partition %s holds [%s, %s), part of the %s from %s, [%s, %s)",
					ErrOverlap, p.Name(), pt.name, pt.lo, pt.hi, p.period, s.Format(time.DateOnly), lo, hi)
			}
		}
		if !exists {
			acts = append(acts, action{kind: makePeriod, name: p.table + p.period.suffix(s), lo: lo, hi: hi})
		}
	}
	if p.retention > 0 {
		var expired []partition
		for _, pt := range st.parts {
			if pt.hi.cmp(cut) <= 0 && p.ours(st, pt) {
				expired = append(expired, pt)
			}
		}
		if len(expired) > 0 {
			acts = append(acts, action{kind: removeExpired, parts: expired})
		}
	}
	return acts, nil
}

// execer is what run needs of a transaction.
type execer interface {
	querier
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// run does one action in tx and returns how many rows it moved.
func (p *Table) run(ctx context.Context, tx execer, st *tableState, act *action) (int64, error) {
	parent := pgx.Identifier{st.schema, st.name}.Sanitize()
	exec := func(q string, args ...any) (int64, error) {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	switch act.kind {
	case makeDefault:
		_, err := exec("CREATE TABLE " + pgx.Identifier{st.schema, act.name}.Sanitize() + " PARTITION OF " + parent + " DEFAULT")
		return 0, err
	case removeExpired:
		names := make([]string, len(act.parts))
		for i, pt := range act.parts {
			names[i] = pgx.Identifier{pt.schema, pt.name}.Sanitize()
		}
		if !p.detach {
			_, err := exec("DROP TABLE " + strings.Join(names, ", "))
			return 0, err
		}
		for _, name := range names {
			if _, err := exec("ALTER TABLE " + parent + " DETACH PARTITION " + name); err != nil {
				return 0, err
			}
		}
		return 0, nil
	}

	// makePeriod. Writers of the table wait from here to the commit: the
	// rows of the period that are in the default partition cannot change
	// between the look and the move, and none can arrive there after it
	// (CREATE TABLE ... PARTITION OF takes this lock anyway).
	if _, err := exec("LOCK TABLE ONLY " + parent + " IN ACCESS EXCLUSIVE MODE"); err != nil {
		return 0, err
	}
	part := pgx.Identifier{st.schema, act.name}.Sanitize()
	create := "CREATE TABLE " + part + " PARTITION OF " + parent + " FOR VALUES FROM (" + act.lo.sql() + ") TO (" + act.hi.sql() + ")"
	if st.def == nil || p.d.noMove {
		_, err := exec(create)
		return 0, err
	}
	def := pgx.Identifier{st.def.schema, st.def.name}.Sanitize()
	key := pgx.Identifier{st.key}.Sanitize()
	var conds []string
	if act.lo.inf == 0 {
		conds = append(conds, key+" >= "+act.lo.sql())
	}
	if act.hi.inf == 0 {
		conds = append(conds, key+" < "+act.hi.sql())
	}
	where := strings.Join(conds, " AND ")
	var found bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM ONLY "+def+" WHERE "+where+")").Scan(&found); err != nil {
		return 0, err
	}
	if !found {
		_, err := exec(create)
		return 0, err
	}
	// PostgreSQL refuses to make a partition whose range has rows in the
	// default partition: take them out first, keep them in a temporary
	// table, make the partition and put them in. Generated columns are
	// left for PostgreSQL to compute again; identity columns keep their
	// values.
	cols, err := p.insertColumns(ctx, tx, st)
	if err != nil {
		return 0, err
	}
	const tmp = "pg_temp.snowkey_partition_move"
	if _, err := exec("CREATE TEMP TABLE snowkey_partition_move (LIKE " + parent + ") ON COMMIT DROP"); err != nil {
		return 0, err
	}
	out, err := exec("WITH moved AS (DELETE FROM ONLY " + def + " WHERE " + where + " RETURNING " + cols + ") " +
		"INSERT INTO " + tmp + " (" + cols + ") SELECT " + cols + " FROM moved")
	if err != nil {
		return 0, err
	}
	if _, err := exec(create); err != nil {
		return 0, err
	}
	in, err := exec("INSERT INTO " + part + " (" + cols + ") OVERRIDING SYSTEM VALUE SELECT " + cols + " FROM " + tmp)
	if err != nil {
		return 0, err
	}
	if in != out {
		return 0, fmt.Errorf("moved %d rows out of %s but %d into %s; rolled back", out, st.def.name, in, act.name)
	}
	return in, nil
}

// insertColumns lists the table's columns that an INSERT may set, quoted
// and joined: all but dropped and generated ones.
func (p *Table) insertColumns(ctx context.Context, q querier, st *tableState) (string, error) {
	generated := "a.attgenerated <> ''"
	if st.version < 120000 { // no generated columns before PostgreSQL 12
		generated = "false"
	}
	rows, err := q.QueryContext(ctx, `SELECT a.attname FROM pg_attribute a
		WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped AND NOT (`+generated+`)
		ORDER BY a.attnum`, pgx.Identifier{st.schema, st.name}.Sanitize())
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return "", err
		}
		cols = append(cols, pgx.Identifier{c}.Sanitize())
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	return strings.Join(cols, ", "), nil
}

// Run maintains the table now and then every Interval until ctx is done,
// for apps that keep their partitions from within: every instance may run
// it, since Maintain is safe to run at once. It logs what each Maintain
// changed, and each error, to Logger; after an error it tries again within
// a minute (sooner if Interval is shorter). It returns ctx's error once
// ctx is done, and stops no sooner than the Maintain under way notices.
func (p *Table) Run(ctx context.Context, db *sql.DB) error {
	for {
		rep, err := p.Maintain(ctx, db)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := p.interval
		if len(rep.Created)+len(rep.Removed) > 0 || rep.Moved > 0 {
			p.logger.InfoContext(ctx, "partition: partitions maintained", "table", p.Name(),
				"created", rep.Created, "removed", rep.Removed, "moved_rows", rep.Moved)
		}
		if err != nil {
			p.logger.ErrorContext(ctx, "partition: partition maintenance failed", "table", p.Name(), "error", err)
			wait = min(wait, time.Minute)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

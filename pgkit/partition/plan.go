package partition

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// plan returns the next thing the table needs at time now, in the order
// Maintain does them: the default partition; the periods due, from the
// oldest; the periods whose rows are in the default partition, from the
// oldest; then the expired partitions. Actions done with in this call
// without being done (m.skip) are passed over; what cannot be done at all
// is reported in m.rep.Left as the look finds it. nil means nothing is
// left to do.
func (m *maintenance) plan(ctx context.Context, q querier, st *tableState, now time.Time) (*action, error) {
	p := m.p
	acts, overlaps := p.due(st, now)
	for _, o := range overlaps {
		l, err := m.describe(ctx, q, st, o.lo, o.hi)
		if err != nil {
			return nil, err
		}
		l.Partition, l.From, l.To, l.Err = o.name, o.start, p.period.next(o.start), o.err
		m.addLeft(l)
		if p.defences.stopAtLeft {
			return nil, o.err
		}
	}
	var remove *action
	for i := range acts {
		act := &acts[i]
		switch {
		case act.kind == removeExpired:
			remove = act
		case !m.skip[act.key()]:
			return act, nil
		}
	}
	if st.def != nil {
		act, err := m.fromDefault(ctx, q, st, now)
		if err != nil || act != nil {
			return act, err
		}
	}
	if remove != nil {
		parts := remove.parts[:0:0]
		for _, pt := range remove.parts {
			if !m.skip["keep "+pt.name] {
				parts = append(parts, pt)
			}
		}
		if act := (&action{kind: removeExpired, parts: parts}); len(parts) > 0 && !m.skip[act.key()] {
			return act, nil
		}
	}
	return nil, nil
}

// overlap is a period due that a partition Maintain did not make covers
// in part.
type overlap struct {
	name   string
	start  time.Time
	lo, hi bound
	err    error
}

// due lists what the table needs at time now, from its catalog alone, in
// the order Maintain does it: the default partition, if it has none; the
// missing periods from the newest partition (or now) to Premake periods
// ahead, from the oldest, leaving out those already past Retention and
// those a partition made by hand covers in part (overlaps); then the
// expired partitions, in one action.
func (p *Table) due(st *tableState, now time.Time) ([]action, []overlap) {
	var acts []action
	var overlaps []overlap
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
		act, o := p.periodAction(st, s)
		switch {
		case o != nil:
			overlaps = append(overlaps, *o)
		case act != nil:
			acts = append(acts, *act)
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
	return acts, overlaps
}

// periodAction returns the action that makes the period that starts at
// s; nil when it needs none (it exists, or the layout holds no ID of it);
// or the overlap, when a partition made by hand covers part of it.
func (p *Table) periodAction(st *tableState, s time.Time) (*action, *overlap) {
	lo, hi, ok := p.periodBounds(s)
	if !ok {
		return nil, nil
	}
	name := p.table + p.period.suffix(s)
	for _, pt := range st.parts {
		if pt.lo == lo && pt.hi == hi {
			return nil, nil
		}
		if pt.lo.cmp(hi) < 0 && lo.cmp(pt.hi) < 0 {
			return nil, &overlap{name: name, start: s, lo: lo, hi: hi,
				err: fmt.Errorf("%w: table %s: partition %s holds [%s, %s), part of the %s from %s, [%s, %s)",
					ErrOverlap, p.Name(), pt.name, pt.lo, pt.hi, p.period, s.Format(time.DateOnly), lo, hi)}
		}
	}
	return &action{kind: makePeriod, name: name, start: s, lo: lo, hi: hi}, nil
}

// fromDefault returns the action that makes the oldest period whose rows
// are in the default partition, from m.scanFrom on, or nil when none is
// left. Periods past Retention, and keys of no period, are reported and
// passed over.
func (m *maintenance) fromDefault(ctx context.Context, q querier, st *tableState, now time.Time) (*action, error) {
	p := m.p
	var cut bound
	var cutoff time.Time
	if p.retention > 0 {
		cutoff = now.Add(-p.retention)
		cut = finite(p.layout.FirstID(cutoff))
	}
	for {
		k, ok, err := m.nextDefaultKey(ctx, q, st)
		if err != nil || !ok {
			return nil, err
		}
		if k < 0 {
			l, err := m.describe(ctx, q, st, bound{inf: -1}, finite(0))
			if err != nil {
				return nil, err
			}
			l.Err = fmt.Errorf("%w: keys below 0", ErrOutsideLayout)
			m.addLeft(l)
			m.scanFrom = finite(0)
			continue
		}
		s := p.period.start(p.layout.Decode(idtype.ID(k)).Time)
		lo, hi, ok := p.periodBounds(s)
		if !ok {
			return nil, nil
		}
		name := p.table + p.period.suffix(s)
		if p.retention > 0 && hi.cmp(cut) <= 0 {
			l, err := m.describe(ctx, q, st, lo, hi)
			if err != nil {
				return nil, err
			}
			l.Partition, l.From, l.To = name, s, p.period.next(s)
			l.Err = fmt.Errorf("%w: the period ended before %s, Retention before the database's now", ErrExpired,
				cutoff.Format(time.RFC3339))
			m.addLeft(l)
			m.scanFrom = hi
			continue
		}
		act, o := p.periodAction(st, s)
		if o != nil {
			l, err := m.describe(ctx, q, st, lo, hi)
			if err != nil {
				return nil, err
			}
			l.Partition, l.From, l.To, l.Err = name, s, p.period.next(s), o.err
			m.addLeft(l)
			if p.defences.stopAtLeft {
				return nil, o.err
			}
		}
		if act != nil && !m.skip[act.key()] {
			act.fromDefault = true
			return act, nil
		}
		m.scanFrom = hi
	}
}

// nextDefaultKey returns the lowest key in the default partition from
// m.scanFrom on, and false when there is none.
func (m *maintenance) nextDefaultKey(ctx context.Context, q querier, st *tableState) (int64, bool, error) {
	if st.def == nil || m.scanFrom.inf > 0 {
		return 0, false, nil
	}
	query := "SELECT min(" + quoteIdent(st.key) + ") FROM ONLY " + st.def.ident()
	if m.scanFrom.inf == 0 {
		query += " WHERE " + quoteIdent(st.key) + " >= " + m.scanFrom.sql()
	}
	var k sql.NullInt64
	if err := m.guarded(ctx, q, st.defaultTarget(), func() error { return q.QueryRowContext(ctx, query).Scan(&k) }); err != nil {
		return 0, false, fmt.Errorf("partition: table %s: read the default partition: %w", m.p.Name(), err)
	}
	return k.Int64, k.Valid, nil
}

// describe counts the rows in the default partition with keys in
// [lo, hi) and reads the lowest of their keys, for a Left.
func (m *maintenance) describe(ctx context.Context, q querier, st *tableState, lo, hi bound) (Left, error) {
	var l Left
	where := rangeCond(quoteIdent(st.key), lo, hi)
	err := m.guarded(ctx, q, st.defaultTarget(), func() error {
		if err := q.QueryRowContext(ctx, "SELECT count(*) FROM ONLY "+st.def.ident()+where).Scan(&l.Rows); err != nil {
			return err
		}
		rows, err := q.QueryContext(ctx, fmt.Sprintf("SELECT %[1]s FROM ONLY %[2]s%[3]s ORDER BY %[1]s LIMIT %[4]d",
			quoteIdent(st.key), st.def.ident(), where, MaxLeftKeys))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k idtype.ID
			if err := rows.Scan(&k); err != nil {
				return err
			}
			l.Keys = append(l.Keys, k)
		}
		return rows.Err()
	})
	if err != nil {
		return l, fmt.Errorf("partition: table %s: read the default partition: %w", m.p.Name(), err)
	}
	return l, nil
}

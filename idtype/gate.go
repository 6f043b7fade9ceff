package idtype

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Errors of a gated Generator (NewGatedGenerator), such as one on a worker
// number leased by package workerid. Each is wrapped with detail; match
// with errors.Is.
var (
	// ErrLeaseExpired means the generator cannot prove that it still owns
	// its worker number: the next ID would fall in a millisecond past the
	// time its lease has confirmed (the lease's end by its own clock, less
	// a safety margin), because renewals have not been confirmed in time.
	// Nothing was issued. The lease keeps trying; calls succeed again once
	// it is renewed.
	ErrLeaseExpired = errors.New("idtype: worker lease not confirmed")
	// ErrLeaseLost means the generator's worker number is gone for good:
	// another owner took it, or the lease was closed. Nothing was issued and
	// the generator will never issue again: acquire a new lease and build a
	// new generator on it.
	ErrLeaseLost = errors.New("idtype: worker lease lost")
)

// NewGatedGenerator returns a generator that issues nothing until its Gate
// grants, and the Gate. It checks opts as NewGenerator does.
//
// The Gate is for whoever owns the generator's worker number for a limited
// time, such as a workerid.Lease, which builds its generator this way
// (workerid's Lease.NewGenerator): the owner keeps the Gate and pushes a
// Grant whenever what the generator may do changes. Calls go one way: the
// generator never calls back. Until the first Grant, Next and NextN fail
// with ErrLeaseExpired.
//
// A lease keeps a high-water millisecond in its store: the last
// millisecond in which its owner may issue IDs. It raises the mark ahead
// of use, like a hi/lo block, and grants the generator at most up to it,
// so that the next owner of the number, which starts after the mark,
// never repeats an ID, even when clocks disagree or a crash left no trace
// of the last IDs. The generator reads the grant on every call, one
// pointer load before its reservation and one after, from a cache line no
// call writes; the store is only ever touched by the lease's own
// background work.
func NewGatedGenerator(opts GeneratorOptions) (*Generator, *Gate, error) {
	g, err := newGenerator(opts, true)
	if err != nil {
		return nil, nil, err
	}
	return g, &Gate{g: g, high: -1}, nil
}

// A Gate says how far its generator may go (see NewGatedGenerator). It is
// safe for concurrent use; grants take effect one at a time, in the order
// Grant is called.
type Gate struct {
	mu sync.Mutex // one Grant at a time
	g  *Generator
	// high is the latest millisecond any grant has allowed, -1 before the
	// first: no ID the generator issued is later.
	high int64
}

// Grant is what a Gate allows its Generator. Each grant replaces the one
// before, except after a stop (Err wrapping ErrLeaseLost), which is final.
type Grant struct {
	// NotBefore, when not zero, raises the generator's floor: it issues no
	// ID in that millisecond or earlier. Floors only rise; a lower
	// NotBefore than the generator has already passed changes nothing.
	// A lease sets it in its first grant to the high-water mark of the
	// number's previous owners, and again if it has to take its number
	// anew.
	NotBefore time.Time
	// Until is the last millisecond in which the generator may issue IDs:
	// for a lease, no later than the high-water mark it has persisted, and
	// no later than the lease's end by its own clock less a safety margin.
	// The zero time allows nothing.
	Until time.Time
	// Err, when not nil, says why the generator may not go past Until. It
	// wraps ErrLeaseExpired while the lease is unconfirmed and retrying,
	// or ErrLeaseLost when it has ended; the generator returns it as it
	// is. Err wrapping ErrLeaseLost stops the generator at once, whatever
	// Until says, and the time Grant returns is then final: no ID will
	// ever carry a later millisecond.
	Err error
}

// Grant applies gr to the generator and returns the millisecond of the
// last ID it issued (of NotBefore, if none yet), for the owner to persist
// or report.
//
// A grant takes effect for every call that reserves its ID after Grant
// has begun, and for every call that had reserved one before it and
// judges it after (see Generator): such a reservation is refused if the
// new grant does not allow it, and the call tries again under the new
// grant. Once Grant returns, no call issues an ID the new grant does not
// allow. A new floor is raised in the state after the grant is in force,
// so a call that reserved below it before finds the new grant when it
// judges, and every later reservation lies above the floor.
//
// A stop (Err wrapping ErrLeaseLost) is final: later grants change
// nothing. It draws a line at the state once it is in force: what had been
// reserved at or below the line was reserved before the stop and is
// judged by the grant before it, so the calls in flight finish as they
// would have and Stats counts them when Grant returns; nothing above the
// line is ever issued, and the line is the time Grant returns. The first
// call that judges under the stop draws the line if Grant has not yet
// done so, so no call waits for Grant.
func (gt *Gate) Grant(gr Grant) (lastIssued time.Time) {
	gt.mu.Lock()
	defer gt.mu.Unlock()
	g := gt.g
	cur := g.grant.Load()
	if cur.before != nil {
		return gt.lastIssued(g.lineOf(cur), cur.floor)
	}
	if errors.Is(gr.Err, ErrLeaseLost) {
		stop := &grant{limit: -1, floor: cur.floor, floorState: cur.floorState, err: gr.Err, before: cur}
		stop.line.Store(noLine)
		g.grant.Store(stop)
		return gt.lastIssued(g.lineOf(stop), stop.floor)
	}
	floor := cur.floor
	if !gr.NotBefore.IsZero() {
		floor = max(floor, min(g.layout.fieldOf(gr.NotBefore), g.maxTime))
	}
	limit := int64(-1)
	if !gr.Until.IsZero() {
		limit = max(min(g.layout.fieldOf(gr.Until), g.maxTime), -1)
	}
	next := g.newGrant(limit, floor, gr.Err)
	g.grant.Store(next)
	g.raiseFloor(next.floorState)
	gt.high = max(gt.high, limit)
	return gt.lastIssued(g.state.Load(), floor)
}

// lastIssued is the time of the last ID issued, from state, the state at
// or after it, and floor, the generator's floor. The state can lie past
// every grant when concurrent adds ran past a grant's last millisecond
// and were refused: no issued ID is later than the latest millisecond a
// grant allowed, or the floor when that is later.
func (gt *Gate) lastIssued(state, floor int64) time.Time {
	ms := gt.g.msOf(state)
	if ms > gt.high {
		ms = max(gt.high, floor)
	}
	return gt.g.layout.timeAt(ms)
}

// grant is what a generator may issue: a record that Grant replaces
// whole, so that a call reads one consistent grant with one atomic load.
type grant struct {
	// limit is the last millisecond (since the epoch) an ID may take: the
	// layout's last, or less when a Gate grants less; -1 allows nothing.
	limit int64
	// floor is the millisecond (since the epoch) at or before which no ID
	// is issued, -1 for none; floorState is the state that puts the next
	// ID after it.
	floor, floorState int64
	// err says why the generator may not go past limit (Grant.Err), or
	// is nil.
	err error
	// before, for a stop, is the grant that judges what was reserved at or
	// below line; it is nil for every other grant.
	before *grant
	// line is a stop's line in the state, noLine until it is drawn.
	line atomic.Int64
}

// noLine is the line of a stop not yet drawn: no state value, which is
// never below -1.
const noLine = math.MinInt64

func (g *Generator) newGrant(limit, floor int64, err error) *grant {
	return &grant{limit: limit, floor: floor, floorState: floor<<g.seqBits | g.seqMask, err: err}
}

// lineOf returns the line of the stop gr, drawing it at the state if no
// one has yet: a state read after the stop was in force, so every value
// reserved above it was reserved under the stop.
func (g *Generator) lineOf(gr *grant) int64 {
	if line := gr.line.Load(); line != noLine {
		return line
	}
	gr.line.CompareAndSwap(noLine, g.state.Load())
	return gr.line.Load()
}

// raiseFloor moves the state forward to target, if it is below, so that
// the next ID falls after the floor it stands for. A call that reserved
// below it judges its reservation by the grant that set the floor, and
// refuses it.
func (g *Generator) raiseFloor(target int64) {
	for {
		old := g.state.Load()
		if old >= target {
			return
		}
		if g.state.CompareAndSwap(old, target) {
			g.drop(old, target)
			return
		}
	}
}

// pastLimit is the error for a next ID in millisecond t (since the epoch)
// beyond the limit of gr, the grant in force: the layout's end, or the
// Gate's grant.
func (g *Generator) pastLimit(gr *grant, t int64) error {
	if t > g.maxTime {
		return g.exhausted(t)
	}
	if gr.err != nil {
		return gr.err
	}
	if gr.limit < 0 {
		return fmt.Errorf("%w: worker %d has no grant", ErrLeaseExpired, g.worker)
	}
	return fmt.Errorf("%w: the next ID of worker %d belongs to %s, past %s, the last millisecond its lease has confirmed",
		ErrLeaseExpired, g.worker, g.layout.timeAt(t).Format(time.RFC3339Nano), g.layout.timeAt(gr.limit).Format(time.RFC3339Nano))
}

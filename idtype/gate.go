package idtype

import (
	"errors"
	"fmt"
	"sync"
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
// of the last IDs. The generator checks the grant on every call with one
// atomic load and compare; the store is only ever touched by the lease's
// own background work.
func NewGatedGenerator(opts GeneratorOptions) (*Generator, *Gate, error) {
	g, err := newGenerator(opts, true)
	if err != nil {
		return nil, nil, err
	}
	return g, &Gate{g: g}, nil
}

// A Gate says how far its generator may go (see NewGatedGenerator). It is
// safe for concurrent use; grants take effect one at a time, in the order
// Grant is called.
type Gate struct {
	mu sync.Mutex // one Grant at a time
	g  *Generator
}

// Grant is what a Gate allows its Generator. Each grant replaces the one
// before.
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
// The order matters to concurrent Next calls, which load the state before
// the limit: the floor is raised before a new limit lets anything through,
// and the reason is stored before a limit that stops calls.
func (gt *Gate) Grant(gr Grant) (lastIssued time.Time) {
	gt.mu.Lock()
	defer gt.mu.Unlock()
	g := gt.g
	if !gr.NotBefore.IsZero() {
		g.raiseFloor(g.layout.fieldOf(gr.NotBefore))
	}
	limit := int64(-1)
	if !gr.Until.IsZero() && !errors.Is(gr.Err, ErrLeaseLost) {
		limit = max(min(g.layout.fieldOf(gr.Until), g.maxTime), -1)
	}
	if gr.Err != nil {
		g.gateErr.Store(&gr.Err)
	} else {
		g.gateErr.Store(nil)
	}
	g.limit.Store(limit)
	if limit < 0 {
		g.seal()
	}
	return g.layout.timeAt(g.state.Load() >> g.seqBits)
}

// raiseFloor moves the state forward so that the next ID falls after the
// millisecond floor (since the epoch). A Next that loaded the old state
// fails its compare-and-swap and starts over.
func (g *Generator) raiseFloor(floor int64) {
	floor = min(floor, g.maxTime)
	target := floor<<g.seqBits | g.seqMask
	for {
		old := g.state.Load()
		if old >= target {
			return
		}
		if g.state.CompareAndSwap(old, target) {
			g.skipped.Add(target - old)
			return
		}
	}
}

// seal moves the state by one, counted as skipped, after the limit has
// dropped below every millisecond: a Next that loaded the limit before the
// drop and the state before the seal fails its compare-and-swap, so once
// seal returns the state holds the last ID that will ever be issued.
func (g *Generator) seal() {
	for {
		old := g.state.Load()
		if g.state.CompareAndSwap(old, old+1) {
			g.skipped.Add(1)
			return
		}
	}
}

// pastLimit is the error for a next ID in millisecond t (since the epoch)
// beyond the generator's limit: the layout's end, or the Gate's grant.
func (g *Generator) pastLimit(t int64) error {
	if t > g.maxTime {
		return g.exhausted(t)
	}
	if p := g.gateErr.Load(); p != nil {
		return *p
	}
	limit := g.limit.Load()
	if limit < 0 {
		return fmt.Errorf("%w: worker %d has no grant", ErrLeaseExpired, g.worker)
	}
	return fmt.Errorf("%w: the next ID of worker %d belongs to %s, past %s, the last millisecond its lease has confirmed",
		ErrLeaseExpired, g.worker, g.layout.timeAt(t).Format(time.RFC3339Nano), g.layout.timeAt(limit).Format(time.RFC3339Nano))
}

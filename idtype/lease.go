package idtype

import (
	"errors"
	"fmt"
	"time"
)

// Errors of a Generator built on a Lease. Each is wrapped with detail;
// match with errors.Is.
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

// A Lease is a worker number held for a limited time, renewed in the
// background, on behalf of one Generator (GeneratorOptions.Lease). Package workerid
// leases numbers from Redis or PostgreSQL; this interface is what a
// Generator needs of any lease.
//
// A lease keeps a high-water millisecond in its store: the last
// millisecond in which its owner may issue IDs. It raises the mark ahead
// of use, like a hi/lo block, and grants the generator at most up to it,
// so that the next owner of the number, which starts after the mark,
// never repeats an ID, even when clocks disagree or a crash left no trace
// of the last IDs. The generator checks the grant on every call with one
// atomic load and compare; the store is only ever touched by the lease's
// own background work.
type Lease interface {
	// Worker returns the leased worker number.
	Worker() int64
	// Layout returns the layout whose worker numbers the lease hands out.
	// A generator on the lease uses it; GeneratorOptions.Layout must be zero or
	// equal to it.
	Layout() Layout
	// Clock returns the clock by which the lease measures its time. A
	// generator on the lease reads the same clock, so that the lease's
	// grants and the times in IDs agree; GeneratorOptions.Clock must be nil.
	Clock() Clock
	// Bind attaches the lease to the generator that NewGenerator is
	// building. The lease calls grant at once, before Bind returns, with
	// what the generator may do now, and again, from one goroutine at a
	// time, whenever that changes (see Grant); grant returns the
	// millisecond of the last ID issued (or of NotBefore, if none).
	//
	// A lease serves one generator: Bind fails when the lease is already
	// bound or has ended. The error is returned by NewGenerator.
	Bind(grant func(Grant) time.Time) error
}

// Grant is what a Lease allows the Generator bound to it. Each grant
// replaces the one before.
type Grant struct {
	// NotBefore, when not zero, raises the generator's floor: it issues no
	// ID in that millisecond or earlier. Floors only rise; a lower
	// NotBefore than the generator has already passed changes nothing.
	// A lease sets it at Bind to the high-water mark of the number's
	// previous owners, and again if it has to take its number anew.
	NotBefore time.Time
	// Until is the last millisecond in which the generator may issue IDs:
	// no later than the high-water mark the lease has persisted, and no
	// later than the lease's end by its own clock less a safety margin.
	// The zero time allows nothing.
	Until time.Time
	// Err, when not nil, says why the generator may not go past Until. It
	// wraps ErrLeaseExpired while the lease is unconfirmed and retrying,
	// or ErrLeaseLost when it has ended; a generator returns it as it is.
	// Err wrapping ErrLeaseLost stops the generator at once, whatever
	// Until says, and the time grant returns is then final: no ID will
	// ever carry a later millisecond.
	Err error
}

// bindLease attaches the generator to cfg.Lease, taking its worker number,
// layout and clock from the lease. It runs inside NewGenerator, after the
// checks of cfg that do not depend on the lease; the state and limit are
// set by the lease's first grant, before it returns.
func (g *Generator) bindLease(lease Lease) error {
	if err := lease.Bind(g.grant); err != nil {
		return fmt.Errorf("%w: Lease: %w", ErrInvalidOptions, err)
	}
	return nil
}

// leaseConfig fills cfg's worker, layout and clock from cfg.Lease and
// checks that cfg does not say otherwise.
func leaseConfig(cfg GeneratorOptions) (GeneratorOptions, error) {
	lease := cfg.Lease
	if cfg.Clock != nil {
		return cfg, fmt.Errorf("%w: Clock is set together with Lease; set the clock on the lease, so that both read one clock",
			ErrInvalidOptions)
	}
	cfg.Clock = lease.Clock()
	if cfg.Clock == nil {
		return cfg, fmt.Errorf("%w: Lease has no clock", ErrInvalidOptions)
	}
	w := lease.Worker()
	if cfg.Worker != 0 && cfg.Worker != w {
		return cfg, fmt.Errorf("%w: Worker %d is set, but the lease holds worker %d; leave Worker zero with a Lease",
			ErrInvalidOptions, cfg.Worker, w)
	}
	cfg.Worker = w
	ll := lease.Layout()
	l := cfg.Layout
	switch {
	case l.IsZero():
		cfg.Layout = ll
	case !l.Epoch.Equal(ll.Epoch) || l.WorkerBits != ll.WorkerBits || l.SequenceBits != ll.SequenceBits:
		return cfg, fmt.Errorf("%w: Layout (epoch %s, %d worker bits, %d sequence bits) differs from the lease's (epoch %s, %d, %d)",
			ErrInvalidOptions, l.Epoch.Format(time.RFC3339Nano), l.WorkerBits, l.SequenceBits,
			ll.Epoch.Format(time.RFC3339Nano), ll.WorkerBits, ll.SequenceBits)
	}
	return cfg, nil
}

// grant applies a lease's Grant; it is the callback a Lease's Bind gets.
// The order matters to concurrent Next calls, which load the state before
// the limit: the floor is raised before a new limit lets anything through,
// and the reason is stored before a limit that stops calls.
func (g *Generator) grant(gr Grant) time.Time {
	g.grantMu.Lock()
	defer g.grantMu.Unlock()
	if !gr.NotBefore.IsZero() {
		g.raiseFloor(gr.NotBefore.UnixMilli() - g.layout.epochMs())
	}
	limit := int64(-1)
	if !gr.Until.IsZero() && !errors.Is(gr.Err, ErrLeaseLost) {
		limit = max(min(gr.Until.UnixMilli()-g.layout.epochMs(), g.maxTime), -1)
	}
	if gr.Err != nil {
		g.leaseErr.Store(&gr.Err)
	} else {
		g.leaseErr.Store(nil)
	}
	g.limit.Store(limit)
	if limit < 0 {
		g.seal()
	}
	return time.UnixMilli(g.layout.epochMs() + g.state.Load()>>g.seqBits).UTC()
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
// beyond the generator's limit: the layout's end, or the lease's grant.
func (g *Generator) pastLimit(t int64) error {
	if t > g.maxTime {
		return g.exhausted(t)
	}
	if p := g.leaseErr.Load(); p != nil {
		return *p
	}
	limit := g.limit.Load()
	if limit < 0 {
		return fmt.Errorf("%w: worker %d has no grant", ErrLeaseExpired, g.worker)
	}
	return fmt.Errorf("%w: the next ID of worker %d belongs to %s, past %s, the last millisecond its lease has confirmed",
		ErrLeaseExpired, g.worker, g.msTime(t), g.msTime(limit))
}

// msTime formats a millisecond since the layout's epoch.
func (g *Generator) msTime(ms int64) string {
	return time.UnixMilli(g.layout.epochMs() + ms).UTC().Format(time.RFC3339Nano)
}

package workerid

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// A Lease is a worker number held by this process, from Pool.Acquire.
// Build its one generator with NewGenerator.
//
// A lease renews itself every Options.RenewEvery in one background
// goroutine, which Close stops. Each renewal extends the lease to TTL
// from when it was sent and raises the number's high-water mark in the
// store to that time; the generator is granted
// up to TTL - Margin from then, so it stops, when renewals fail, Margin
// before the store could hand the number to someone else, and never
// issues past the persisted high-water mark, which the next owner starts
// after.
//
// When a renewal finds the lease gone from the store (it expired while
// the store was unreachable, or the store lost it), the lease takes the
// number again if it is free, starting after the high-water mark; if
// someone else holds it, the lease is lost for good: Done is closed, Err
// says why and the generator fails with idtype.ErrLeaseLost.
type Lease struct {
	pool   *Pool
	worker int64
	token  string
	log    *slog.Logger

	ctx     context.Context    // of the renewal requests; canceled by Close
	cancel  context.CancelFunc //
	exited  chan struct{}      // closed when the renewal goroutine returns
	done    chan struct{}      // closed when the lease has ended
	renewed chan struct{}      // signalled (never blocking) when a renewal is confirmed

	mu          sync.Mutex
	ended       bool
	err         error // why it ended
	floor       int64 // no ID at or before this millisecond (Unix ms)
	until       int64 // no ID after this millisecond (Unix ms)
	highWater   int64 // the high-water mark last persisted (Unix ms)
	expired     bool  // a renewal failed after until, and none succeeded since
	acquired    time.Time
	lastRenewal time.Time // when the last confirmed renewal was sent
	lastIssued  time.Time // as the generator last told
	renewals    int64
	failures    int64 // renewals failed in a row
	lastErr     error
	// unsure is the reservation of a take-back whose outcome the lease
	// does not know (no reply came), 0 when there is none: the take may
	// have run, leaving the number this lease's again, after a mark the
	// lease has not seen.
	unsure int64
	gate   *idtype.Gate // of the lease's generator; nil before NewGenerator
	// delays are the waits the renewal goroutine chose before each of the
	// lease's first few renewals (at most maxDelays), which the tests read
	// to see the spread a fleet's renewals get and how retries back off.
	delays []renewalWait
}

// A renewalWait is a wait the renewal goroutine chose, how many renewals
// had failed in a row when it chose it (0: the rhythm), and the time its
// generator had left then (0 once that has run out).
type renewalWait struct {
	d        time.Duration
	failures int64
	left     time.Duration
}

// maxDelays bounds the renewal waits a lease keeps in Lease.delays.
const maxDelays = 8

func newLease(p *Pool, worker int64, token string, start, floor int64) *Lease {
	ttl, margin := p.opts.TTL.Milliseconds(), p.opts.Margin.Milliseconds()
	l := &Lease{
		pool:        p,
		worker:      worker,
		token:       token,
		log:         p.logger(worker),
		exited:      make(chan struct{}),
		done:        make(chan struct{}),
		renewed:     make(chan struct{}, 1),
		floor:       floor,
		until:       start + ttl - margin,
		highWater:   p.reserve(start),
		acquired:    unixMsTime(start),
		lastRenewal: unixMsTime(start),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	go l.run()
	return l
}

// Worker returns the leased worker number.
func (l *Lease) Worker() int64 { return l.worker }

// Done returns a channel that is closed when the lease has ended: lost to
// another owner, or closed. Err then says why.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease lasts; once Done is closed, an error
// wrapping idtype.ErrLeaseLost and ErrTaken or ErrClosed.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// NewGenerator returns the generator of the lease: IDs of the leased
// worker number, in the pool's Layout, read by the pool's Clock, waiting
// and drifting as the pool's Options.MaxWait and Options.MaxDrift say. It
// issues nothing at or before the high-water mark of the number's
// previous owners, and nothing past what the lease has confirmed: its
// calls fail with idtype.ErrLeaseExpired while renewals fail, and with
// idtype.ErrLeaseLost once the lease has ended (see Lease).
//
// A lease has one generator, since two on one worker number would issue
// the same IDs: a second call fails with ErrLeaseInUse. On a lease that
// has ended, NewGenerator fails with Err's error, which wraps
// idtype.ErrLeaseLost.
func (l *Lease) NewGenerator() (*idtype.Generator, error) {
	o := l.pool.opts
	g, gate, err := idtype.NewGatedGenerator(idtype.GeneratorOptions{
		Worker: l.worker, Layout: o.Layout, Clock: o.Clock, MaxWait: o.MaxWait, MaxDrift: o.MaxDrift,
		RandomSequenceStart: o.RandomSequenceStart,
	})
	if err != nil {
		// The pool checked its options and the number is one of its
		// layout's: only a bug gets here.
		return nil, fmt.Errorf("workerid: generator on worker %d: %w", l.worker, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.ended:
		return nil, fmt.Errorf("workerid: generator on worker %d: %w", l.worker, l.err)
	case l.gate != nil:
		return nil, fmt.Errorf("%w: worker %d of namespace %q", ErrLeaseInUse, l.worker, o.Namespace)
	}
	l.gate = gate
	l.grantLocked(l.current())
	return g, nil
}

// current is the grant the lease's state allows. l.mu is held.
func (l *Lease) current() idtype.Grant {
	g := idtype.Grant{NotBefore: unixMsTime(l.floor), Until: unixMsTime(l.until)}
	switch {
	case l.pool.defences.noUntil:
		g.Until = l.pool.opts.Layout.MaxTime()
	case l.expired:
		g.Err = l.expiredErr()
	}
	return g
}

// grantLocked hands g to the generator, if any. l.mu is held, so grants
// reach the generator one at a time and in order.
func (l *Lease) grantLocked(g idtype.Grant) {
	if l.gate != nil {
		l.lastIssued = l.gate.Grant(g)
	}
}

func (l *Lease) expiredErr() error {
	return fmt.Errorf("%w: worker %d: no renewal confirmed since %s (TTL %v, margin %v); last error: %v",
		idtype.ErrLeaseExpired, l.worker, l.lastRenewal.Format(time.RFC3339Nano),
		l.pool.opts.TTL, l.pool.opts.Margin, l.lastErr)
}

// run renews the lease until it ends or Close cancels l.ctx. Renewals go
// out RenewEvery apart less up to a fifth of it, at random, and the first
// after up to half of it less: a fleet that started together spreads its
// renewals out instead of sending them in bursts.
func (l *Lease) run() {
	defer close(l.exited)
	every := l.pool.opts.RenewEvery
	first := jitter(every, 0.5)
	if l.pool.defences.noJitter {
		first = every
	}
	l.mu.Lock()
	if l.pool.nowMs() > l.until {
		// The take's reply came so late that the lease needs a renewal
		// before its generator may issue at all.
		first = 0
	}
	l.delays = append(l.delays, renewalWait{d: first})
	l.mu.Unlock()
	timer := time.NewTimer(first)
	defer timer.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-timer.C:
		}
		start := l.pool.nowMs()
		ok := l.observedRenew(start)
		if l.isEnded() {
			return
		}
		next := jitter(every, 0.2)
		if l.pool.defences.noJitter {
			next = every
		}
		var left time.Duration
		if !ok {
			next, left = l.retryDelay()
		}
		l.mu.Lock()
		if len(l.delays) < maxDelays {
			l.delays = append(l.delays, renewalWait{d: next, failures: l.failures, left: left})
		}
		l.mu.Unlock()
		// Renewals keep their rhythm from when each was sent.
		timer.Reset(max(next-time.Duration(l.pool.nowMs()-start)*time.Millisecond, 0))
	}
}

// retryDelay is how long the lease waits to retry after a failed
// renewal: RenewEvery/4 after the first failure and RenewEvery/2 after
// later ones in a row, each less up to half of it at random, so that a
// store that falls behind a fleet's renewals is sent half as many retries
// once they keep failing, and a fleet whose renewals failed together does
// not retry together. It stops there, since a lease whose generator has
// stopped issues again only once a retry succeeds. While half the time left before the
// lease's generator would stop is at least RenewEvery/4, the retry comes
// no later than that half, so that a short outage does not cost the
// lease a retry it had time for; no retry comes sooner than RenewEvery/4
// would, which is where the waits start. It returns that time left too (0 once it has
// run out).
func (l *Lease) retryDelay() (d, left time.Duration) {
	every := l.pool.opts.RenewEvery
	l.mu.Lock()
	failures, until := l.failures, l.until
	l.mu.Unlock()
	left = max(time.Duration(until-l.pool.nowMs())*time.Millisecond, 0)
	if l.pool.defences.noBackoff {
		return every / 4, left
	}
	d = every / 4
	if failures > 1 {
		d = every / 2
	}
	d = jitter(d, 0.5)
	if left/2 >= every/4 {
		d = min(d, left/2)
	}
	return d, left
}

func (l *Lease) isEnded() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ended
}

// observedRenew is renew, told to Options.Observer. It reports whether
// the lease is confirmed.
func (l *Lease) observedRenew(start int64) bool {
	obs := l.pool.opts.Observer
	if obs == nil {
		return l.renew(l.ctx, start) == nil
	}
	ctx := obs.Start(l.ctx, OpRenew, l.worker)
	err := l.renew(ctx, start)
	obs.End(ctx, OpRenew, l.worker, err)
	return err == nil
}

// renew sends one renewal, sent at start (Unix ms), with ctx (the
// lease's), and takes the number again if the store has let it go. It
// returns nil when the lease is confirmed, or what the lease recorded as
// the failure or the loss.
func (l *Lease) renew(ctx context.Context, start int64) error {
	p := l.pool
	ttl := p.opts.TTL.Milliseconds()
	// A renewal that takes longer than RenewEvery still extends the
	// lease; one that takes half of what a lease lasts is given up.
	ctx, cancel := context.WithTimeout(ctx, max(p.opts.RenewEvery, (p.opts.TTL-p.opts.Margin)/2))
	defer cancel()
	r, err := p.store.renew(ctx, l.worker, l.token, ttl, p.reserve(start))
	if err != nil {
		err = p.wrap("renew", err)
		l.failed(err)
		return err
	}
	if p.defences.noSendTime {
		start = p.nowMs()
	}
	if r.held {
		l.confirmed(start, r.prev, l.heldFloor(r), l.isUnsure())
		return nil
	}
	if r.holder != "" {
		err := fmt.Errorf("%w: %w: worker %d of namespace %q is held by %q",
			idtype.ErrLeaseLost, ErrTaken, l.worker, p.opts.Namespace, r.holder)
		l.lose(err)
		return err
	}
	// The store has no lease on the number: it expired while this process
	// could not renew it, or the store lost it. Take it again if free.
	reserve := p.reserve(start)
	l.mu.Lock()
	l.unsure = reserve
	l.mu.Unlock()
	t, err := p.store.take(ctx, takeRequest{
		cands: []int64{l.worker}, token: l.token, holder: p.opts.Holder,
		ttl: ttl, reserve: reserve, now: start,
	})
	if err == nil && t.worker < 0 {
		l.mu.Lock()
		l.unsure = 0
		l.mu.Unlock()
	}
	switch {
	case err != nil:
		err = p.wrap("take back", err)
		l.failed(err)
		return err
	case t.worker < 0:
		err = fmt.Errorf("%w: %w: worker %d of namespace %q was taken over while this lease could not renew",
			idtype.ErrLeaseLost, ErrTaken, l.worker, p.opts.Namespace)
		l.lose(err)
		return err
	}
	l.confirmed(start, t.prev, p.floor(t), true)
	return nil
}

// heldFloor is the floor that a renewal which found the lease held
// implies: the mark the ownership started after. The lease's floor is at
// least that already, unless the ownership began with a take-back whose
// reply was lost; then this renewal is how the lease learns of it, and
// the floor is what that reply would have set. Without it the lease
// would go on after its own old IDs while the number's owner in between
// had issued later ones.
func (l *Lease) heldFloor(r renewal) int64 {
	p := l.pool
	switch {
	case p.defences.noStartFloor:
		return 0
	case l.isUnsure():
		return p.floor(taken{prev: r.startAfter, hadRecord: r.hadStart, notBefore: r.notBefore})
	}
	return r.startAfter
}

func (l *Lease) isUnsure() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unsure != 0
}

// confirmed records a renewal sent at start that the store confirmed:
// found is the high-water mark the store had, and floor the mark the
// ownership started after, which the lease's floor rises to before the
// generator is granted more; retaken says the number was taken anew.
func (l *Lease) confirmed(start, found, floor int64, retaken bool) {
	p := l.pool
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	if !retaken && found < l.highWater {
		// Only a store that lost writes goes back; the renewal has put
		// the mark back up, and the generator never passed it.
		l.log.Warn("workerid: the store had lost the lease's high-water mark; restored",
			"found", unixMsTime(found), "persisted", unixMsTime(l.highWater))
	}
	wasExpired, failures, unsure := l.expired, l.failures, l.unsure != 0
	l.highWater = max(l.highWater, p.reserve(start))
	l.until = start + p.opts.TTL.Milliseconds() - p.opts.Margin.Milliseconds()
	l.floor = max(l.floor, floor)
	l.lastRenewal = unixMsTime(start)
	l.renewals++
	l.failures = 0
	l.expired = false
	l.unsure = 0
	switch {
	case retaken && unsure:
		l.log.Warn("workerid: lease had lapsed in the store; worker number taken back (learned from a renewal: the take-back's reply was lost)",
			floorAttr(l.floor), "last_error", l.lastErr)
	case retaken:
		l.log.Warn("workerid: lease had lapsed in the store; worker number taken back",
			floorAttr(l.floor), "last_error", l.lastErr)
	case wasExpired || failures > 0:
		l.log.Info("workerid: lease renewed again", "failed_renewals", failures, "was_expired", wasExpired)
	}
	l.lastErr = nil
	// The grant raises the generator's floor before it lets it issue up
	// to the new end.
	l.grantLocked(l.current())
	select {
	case l.renewed <- struct{}{}:
	default:
	}
}

// failed records a renewal that got no answer, or a bad one.
func (l *Lease) failed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	l.failures++
	l.lastErr = err
	if l.failures == 1 {
		l.log.Warn("workerid: lease renewal failed; retrying", "error", err, "until", unixMsTime(l.until))
	}
	if l.expireLocked(err) {
		l.grantLocked(l.current())
	}
}

// expireLocked marks the lease expired and logs it, if its time is past
// until and it is not marked yet; it reports whether it did. l.mu is
// held. A failed renewal is the usual place, but a renewal that finds the
// number taken may be the first the lease hears after its time ran out
// (the renewals between were held up, on a starved CPU or a slow dial):
// the log says it expired before it says it was lost either way.
func (l *Lease) expireLocked(err error) bool {
	if l.expired || l.pool.nowMs() <= l.until {
		return false
	}
	l.expired = true
	l.log.Error("workerid: lease expired: its generator stops issuing until a renewal succeeds",
		"last_renewal", l.lastRenewal, "error", err)
	return true
}

// lose ends the lease because someone else holds the number.
func (l *Lease) lose(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	l.expireLocked(err)
	l.endLocked(err)
	l.log.Error("workerid: lease lost: its generator issues no more IDs", "error", err)
}

// endLocked stops the generator for good and marks the lease ended. l.mu
// is held.
func (l *Lease) endLocked(err error) {
	l.ended = true
	l.err = err
	l.grantLocked(idtype.Grant{Err: err})
	close(l.done)
}

// waitReady waits until a generator on the lease may issue: the clock is
// past the floor and the lease covers the clock's millisecond.
func (l *Lease) waitReady(ctx context.Context) error {
	p := l.pool
	deadline := p.nowMs() + p.opts.MaxStartWait.Milliseconds()
	for {
		now := p.nowMs()
		l.mu.Lock()
		ended, err, floor, until := l.ended, l.err, l.floor, l.until
		l.mu.Unlock()
		switch {
		case ended:
			return err
		case now > floor && now <= until:
			return nil
		case floor >= deadline:
			return fmt.Errorf("%w: worker %d of namespace %q has a high-water mark of %s, %v after the clock's %s; MaxStartWait is %v",
				idtype.ErrClockBehind, l.worker, p.opts.Namespace, unixMsTime(floor).Format(time.RFC3339Nano),
				time.Duration(floor-now)*time.Millisecond, unixMsTime(now).Format(time.RFC3339Nano), p.opts.MaxStartWait)
		}
		// Wait for the clock to pass the floor, or, past the lease's end,
		// for a renewal: no polling, so that many leases waiting at once
		// cost nothing.
		var tick <-chan time.Time
		var t *time.Timer
		if now <= floor {
			t = time.NewTimer(time.Duration(floor+1-now) * time.Millisecond)
			tick = t.C
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("workerid: acquire: waiting for worker %d's high-water mark %s: %w",
				l.worker, unixMsTime(floor).Format(time.RFC3339Nano), ctx.Err())
		case <-l.done:
		case <-l.renewed:
		case <-tick:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// Close stops the lease's generator for good, then gives the number back,
// leaving in the store, as its high-water mark, the millisecond of the
// generator's last ID (or the lease's floor), so that the next owner
// starts right after it. It stops the background renewal. Closing a lease
// that has ended, or closing twice, does nothing and returns nil.
//
// If the store cannot be reached within ctx the number stays held until
// its TTL runs out; the error then wraps ErrStore or the context's error.
func (l *Lease) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		l.cancel()
		<-l.exited
		return nil
	}
	l.endLocked(fmt.Errorf("%w: %w: worker %d", idtype.ErrLeaseLost, ErrClosed, l.worker))
	final := max(l.floor, l.lastIssued.UnixMilli())
	l.mu.Unlock()

	// A renewal in flight could take the number back after the release
	// below: wait until none is.
	l.cancel()
	select {
	case <-l.exited:
	case <-ctx.Done():
		return fmt.Errorf("workerid: close worker %d: %w", l.worker, ctx.Err())
	}
	// A take-back whose outcome is unknown may have made the number this
	// lease's again after a mark it never saw (one a store without a
	// record cannot keep for it either): leave the take's reservation.
	l.mu.Lock()
	if !l.pool.defences.noReleaseClamp {
		final = max(final, l.unsure)
	}
	l.mu.Unlock()
	if err := l.pool.store.release(ctx, l.worker, l.token, final); err != nil {
		return l.pool.wrap("release", err)
	}
	l.log.Info("workerid: lease released", "high_water", unixMsTime(final))
	return nil
}

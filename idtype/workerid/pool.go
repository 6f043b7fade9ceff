package workerid

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// A Pool hands out leases on the worker numbers of one namespace, kept in
// Redis (see Redis) or PostgreSQL (see Postgres). It is safe for
// concurrent use and starts no goroutine of its own; each Lease runs one
// until it is closed or lost.
type Pool struct {
	store store
	opts  Options
	cands []int64      // the numbers a lease may take, in order
	trips atomic.Int64 // requests sent to the store, for benchmarks
	takes atomic.Int64 // store.take calls by Acquire, for tests
	// defences are on (the zero value) in every Pool that Redis or
	// Postgres makes; only export_test.go turns one off.
	defences defences
}

// defences are the pool's defences, one switch each, which this package's
// tests turn off one by one (through export_test.go) for the control runs
// that show each test reaches the fault its defence is for. The zero
// value, every defence on, is the only one a Pool made by Redis or
// Postgres has; nothing outside this package's tests can change it.
type defences struct {
	// noStartFloor: a renewal that finds the lease held does not raise
	// the lease's floor to the mark the ownership started after.
	noStartFloor bool
	// noReleaseClamp: Redis's release may lower the mark below the one
	// the ownership started after, and Close does not keep it above a
	// take-back whose outcome it does not know.
	noReleaseClamp bool
	// noOwnToken: a take does not recognise a lease held by the taker's
	// own token (a retried take whose first attempt ran) as its own.
	noOwnToken bool
	// noSerialRetry: PostgreSQL statements that fail with a
	// serialization failure or a deadlock are not retried.
	noSerialRetry bool
	// undeclaredKeys: Redis's take script builds lease keys itself
	// instead of declaring them in KEYS.
	undeclaredKeys bool
	// noFloor: a new owner does not start after the number's high-water
	// mark (nor wait out a number without a record).
	noFloor bool
	// noUntil: the generator is not stopped when renewals fail; only a
	// lost lease stops it.
	noUntil bool
	// untilFromReply: a confirmed renewal extends the generator's time
	// from when its reply arrived, not from when it was sent.
	untilFromReply bool
}

// store is what a Pool needs of Redis or PostgreSQL. Times are Unix
// milliseconds by the pool's clock; ttl is in milliseconds.
type store interface {
	// kind names the store in errors and logs: "redis" or "postgres".
	kind() string
	// durable reports whether the store keeps every write it has
	// acknowledged. One that may lose writes (Redis) gets two defences
	// (see the package doc): a number without a record is waited out, and
	// high-water marks run one TTL further ahead, so that a record that
	// lost its latest writes still covers what its owner issued.
	durable() bool
	// take leases the first free number of cands (in that order) to
	// token, and raises its high-water mark to reserve. A number held by
	// token already (a retried take whose first attempt ran) is still
	// the token's: take extends it and reports the mark it started
	// after then.
	take(ctx context.Context, r takeRequest) (taken, error)
	// renew extends the lease of worker held by token and raises its
	// high-water mark to reserve. A lease that is no longer the token's
	// is reported, not an error. It returns the mark the ownership
	// started after, so that a lease whose take-back ran but whose reply
	// was lost learns it.
	renew(ctx context.Context, worker int64, token string, ttl, reserve int64) (renewal, error)
	// release ends the lease of worker held by token, leaving final as
	// its high-water mark, or the mark the ownership started after if
	// that is higher. It does nothing when the lease is not the token's.
	release(ctx context.Context, worker int64, token string, final int64) error
}

type takeRequest struct {
	cands         []int64
	token, holder string
	ttl, reserve  int64
	now           int64 // the taker's time
}

// taken is the outcome of store.take.
type taken struct {
	worker int64 // -1: none taken
	// raced means a free number was found but another taker won it; the
	// caller tries again. Only a store that cannot scan and take in one
	// atomic step reports it.
	raced bool
	// prev is the number's high-water mark before this take, and
	// hadRecord whether it had one at all. When the number was the
	// token's already (own), they are what the token's first take found.
	prev      int64
	hadRecord bool
	own       bool
}

// renewal is the outcome of store.renew.
type renewal struct {
	// held means the lease was still the token's and is extended.
	held bool
	// prev is the high-water mark found before raising it (held only).
	prev int64
	// startAfter is the high-water mark the number had when this
	// ownership began, and hadStart whether it had one (held only).
	startAfter int64
	hadStart   bool
	// holder is the token or holder found instead of ours, "" if none.
	holder string
}

// maxRaces bounds how often Acquire retries after losing a race for a
// number (PostgreSQL only); each retry starts at a new random number.
const maxRaces = 16

// Acquire leases a free worker number, starting at a random one, and
// returns once a generator on the lease may issue IDs: when the clock has
// passed the number's high-water mark (set by its previous owners, or,
// for a number Redis has no record of, one TTL from now; see the package
// doc). The lease renews itself in the background until Close. Should
// the store be so slow that the number lapses before it is ready, Acquire
// starts over with another.
//
// The error wraps ErrNoFreeWorker when every number is held;
// idtype.ErrClockBehind when the clock would have to pass the high-water
// mark for longer than Options.MaxStartWait; ErrStore or the context's
// error otherwise. On error no lease is held.
func (p *Pool) Acquire(ctx context.Context) (l *Lease, err error) {
	if obs := p.opts.Observer; obs != nil {
		ctx = obs.Start(ctx, OpAcquire, -1)
		defer func() {
			worker := int64(-1)
			if l != nil {
				worker = l.worker
			}
			obs.End(ctx, OpAcquire, worker, err)
		}()
	}
	token := p.opts.Holder + "/" + randomHex(8)
	start := time.Now()
	for races := 0; ; races++ {
		now := p.nowMs()
		k := rand.IntN(len(p.cands))
		cands := append(append(make([]int64, 0, len(p.cands)), p.cands[k:]...), p.cands[:k]...)
		p.takes.Add(1)
		t, err := p.store.take(ctx, takeRequest{
			cands: cands, token: token, holder: p.opts.Holder,
			ttl: p.opts.TTL.Milliseconds(), reserve: p.reserve(now), now: now,
		})
		if err != nil {
			return nil, p.wrap("acquire", err)
		}
		if t.worker < 0 && t.raced && races < maxRaces {
			continue
		}
		if t.worker < 0 {
			return nil, fmt.Errorf("%w: all %d worker numbers of namespace %q in %s are taken (%d bits, %d reserved)",
				ErrNoFreeWorker, len(p.cands), p.opts.Namespace, p.store.kind(), p.opts.Layout.WorkerBits,
				p.opts.Layout.MaxWorker()+1-int64(len(p.cands)))
		}
		l := newLease(p, t.worker, token, now, p.floor(t))
		l.log.Info("workerid: lease acquired", floorAttr(l.floor), "had_record", t.hadRecord)
		if wait := time.Duration(l.floor-now) * time.Millisecond; wait > 0 {
			// Say why Acquire seems to hang: on a fresh Redis every number
			// is without a record and is waited out for one TTL.
			why := "the number's high-water mark is ahead of this clock"
			if !t.hadRecord {
				why = "the number has no record in the store, which may have lost it: waiting one TTL, by when any owner it forgot has stopped"
			}
			l.log.Info("workerid: waiting before the first ID", "wait", wait, "why", why)
		}
		if err := l.waitReady(ctx); err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.RenewEvery)
			_ = l.Close(cctx)
			cancel()
			if errors.Is(err, ErrTaken) && ctx.Err() == nil {
				// The store was too slow to keep the number even until
				// Acquire could return it: start over with another.
				races = 0
				token = p.opts.Holder + "/" + randomHex(8)
				continue
			}
			return nil, err
		}
		l.log.Debug("workerid: lease ready", "waited", time.Since(start))
		return l, nil
	}
}

// floor is the millisecond a new owner's first ID must come after: the
// number's high-water mark, or, when the number has no record in a store
// that may have lost it, one TTL from now, by when any owner the store
// forgot has stopped.
func (p *Pool) floor(t taken) int64 {
	if p.defences.noFloor {
		return 0
	}
	floor := t.prev
	if !t.hadRecord && !p.store.durable() {
		floor = max(floor, p.nowMs()+p.opts.TTL.Milliseconds())
	}
	return floor
}

// reserve is the high-water mark a renewal (or take) sent at start (Unix
// ms) persists: the end of the lease it extends, and one TTL more in a
// store that may lose writes.
func (p *Pool) reserve(start int64) int64 {
	r := start + p.opts.TTL.Milliseconds()
	if !p.store.durable() {
		r += p.opts.TTL.Milliseconds()
	}
	return r
}

// Layout returns the layout whose worker numbers the pool leases.
func (p *Pool) Layout() idtype.Layout { return p.opts.Layout }

// Size returns how many worker numbers the pool may lease: those of the
// layout less the reserved ones.
func (p *Pool) Size() int { return len(p.cands) }

func (p *Pool) nowMs() int64 { return p.opts.Clock.UnixNano() / int64(time.Millisecond) }

// wrap makes a store failure an ErrStore error, keeping context errors
// matchable as they are.
func (p *Pool) wrap(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("workerid: %s on %s: %w", op, p.store.kind(), err)
	}
	return fmt.Errorf("%w: %s on %s: %w", ErrStore, op, p.store.kind(), err)
}

// newPool makes a pool on the store that newStore makes for the resolved
// options; the store reads the pool's defences and counts its round trips
// in trips.
func newPool(opts Options, newStore func(o Options, defences *defences, trips *atomic.Int64) store) (*Pool, error) {
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	p := &Pool{opts: opts, cands: opts.candidates()}
	p.store = newStore(opts, &p.defences, &p.trips)
	if len(p.cands) == 0 {
		return nil, fmt.Errorf("%w: Reserved leaves no worker number of %d to lease", idtype.ErrInvalidOptions,
			opts.Layout.MaxWorker()+1)
	}
	return p, nil
}

func (p *Pool) logger(worker int64) *slog.Logger {
	return p.opts.Logger.With("store", p.store.kind(), "namespace", p.opts.Namespace, "worker", worker)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// unixMsTime converts Unix milliseconds, as the stores keep times, to a
// time in UTC.
func unixMsTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// floorAttr is the log attribute of a lease's floor (Unix ms), or none
// when the number had no high-water mark: the Unix epoch in a log line
// would read as a wrong time, not as "none".
func floorAttr(ms int64) slog.Attr {
	if ms == 0 {
		return slog.Attr{}
	}
	return slog.Time("floor", unixMsTime(ms))
}

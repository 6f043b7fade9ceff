package workerid

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// A Pool hands out leases on the worker numbers of one namespace, kept in
// Redis (see Redis) or PostgreSQL (see Postgres). It is safe for
// concurrent use and starts no goroutine of its own; each Lease runs one
// until it is closed or lost. One Pool can serve every lease of a process:
// on PostgreSQL it holds at most Options.MaxConns connections however many
// leases it serves.
type Pool struct {
	store    store
	opts     Options
	defences defences
	reserved []int64 // numbers never leased, sorted: Options.Reserved and SQLWorker, within the layout
	size     int     // the numbers a lease may take
}

// defences switch the pool's defences off, one by one, for the control
// runs of this package's tests, which show that each test reaches the
// fault its defence is for. The zero value, every defence on, is the only
// one a Pool made by Redis or Postgres has; only export_test.go passes
// another, to newPool, when the pool is made.
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
	// noDeclaredKeys: Redis's take script declares only the high-water
	// marks in KEYS and builds the names of the other keys itself.
	noDeclaredKeys bool
	// noFloor: a new owner does not start after the number's high-water
	// mark, nor after Redis's loss window.
	noFloor bool
	// noLossWait: a new owner on Redis does not wait out the loss window
	// that follows a sign that Redis may have lost data (a namespace
	// without its record, a server whose identity changed).
	noLossWait bool
	// noUptimeSign, noPromotedSign, noFlushSign, noClusterSign: a Redis
	// take that finds the namespace's record missing, or written on
	// another server, does not read that sign that the server may have
	// lost data within a loss window (see lossAge in redis.go): it
	// started within one; it was promoted from a replica; it ran
	// FLUSHALL or FLUSHDB; it is a Cluster node.
	noUptimeSign, noPromotedSign, noFlushSign, noClusterSign bool
	// noBackoff: a lease retries a failed renewal at RenewEvery/4 however
	// many have failed in a row, and all at the same moment.
	noBackoff bool
	// noUntil: the generator is not stopped when renewals fail; only a
	// lost lease stops it.
	noUntil bool
	// noSendTime: a confirmed renewal extends the generator's time from
	// when its reply arrived, not from when it was sent.
	noSendTime bool
	// noJitter: every renewal goes out exactly RenewEvery after the one
	// before it (the first RenewEvery after the take), so that leases
	// taken together renew together.
	noJitter bool
	// noServerTime: a Redis loss window runs from the taker's time alone,
	// which a take held up in the network (or retried by its client) sent
	// before Redis lost data, and so may end before an owner that Redis
	// forgot stops.
	noServerTime bool
}

// store is what a Pool needs of Redis or PostgreSQL. Times are Unix
// milliseconds by the pool's clock; ttl is in milliseconds. Every call
// costs O(log n) in the namespace's n numbers at most, and a take from a
// list of numbers O(k) in the k it lists: none scans the namespace.
type store interface {
	// kind names the store in errors and logs: "redis" or "postgres".
	kind() string
	// take leases a free number to r.token, or, when r.cands is not nil,
	// the first of r.cands that is free, and raises its high-water mark
	// to r.reserve. A number
	// held by r.token already (a retried take whose first attempt ran) is
	// still the token's: take extends it and reports the mark it started
	// after then.
	take(ctx context.Context, r takeRequest) (taken, error)
	// renew extends the lease of worker held by token and raises its
	// high-water mark to reserve. A lease that is no longer the token's,
	// or that has lapsed, is reported, not an error. It returns the mark
	// the ownership started after, so that a lease whose take-back ran
	// but whose reply was lost learns it.
	renew(ctx context.Context, worker int64, token string, ttl, reserve int64) (renewal, error)
	// release ends the lease of worker held by token, leaving final as
	// its high-water mark, or the mark the ownership started after if
	// that is higher. It does nothing when the lease is not the token's.
	release(ctx context.Context, worker int64, token string, final int64) error
}

type takeRequest struct {
	// cands are the numbers to try, in order: one for a take-back, a
	// range for a claim. Nil means any free number.
	cands         []int64
	token, holder string
	ttl, reserve  int64
	now           int64 // the taker's time
}

// taken is the outcome of store.take.
type taken struct {
	worker int64 // -1: none taken
	// prev is the number's high-water mark before this take, and
	// hadRecord whether it had one at all. When the number was the
	// token's already (own), they are what the token's first take found.
	prev      int64
	hadRecord bool
	own       bool
	// notBefore is the end of Redis's loss window (see the package doc),
	// 0 outside one: no new owner issues at or before it. why says what
	// opened the window.
	notBefore int64
	why       string
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
	// notBefore is the end of Redis's loss window, as take reports it.
	notBefore int64
	// holder is the token or holder found instead of ours, "" if none.
	holder string
}

// Acquire leases a free worker number and returns once a generator on the
// lease may issue IDs: when the clock has passed the number's high-water
// mark, set by its previous owners (and, on Redis that may have lost data,
// the end of the loss window; see the package doc). The lease renews
// itself in the background until Close. Should the store be so slow that
// the number lapses before it is ready, Acquire starts over with another.
//
// When every number is held, Acquire fails with an error wrapping
// ErrNoFreeWorker, or, with Options.WaitForFree, asks again until a
// number frees up or ctx ends; the error then wraps both ErrNoFreeWorker
// and ctx's error. The error wraps idtype.ErrClockBehind when the clock
// would have to pass the high-water mark for longer than
// Options.MaxStartWait; ErrStore or the context's error otherwise. On
// error no lease is held.
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
	token := p.newToken()
	start := time.Now()
	waiting := false
	for {
		now := p.nowMs()
		t, err := p.store.take(ctx, takeRequest{
			token: token, holder: p.opts.Holder,
			ttl: p.opts.TTL.Milliseconds(), reserve: p.reserve(now), now: now,
		})
		if err != nil {
			return nil, p.wrap("acquire", err)
		}
		if t.worker < 0 {
			full := fmt.Errorf("%w: all %d worker numbers of namespace %q in %s are taken (%d bits, %d reserved)",
				ErrNoFreeWorker, p.size, p.opts.Namespace, p.store.kind(), p.opts.Layout.WorkerBits,
				p.opts.Layout.MaxWorker()+1-int64(p.size))
			if !p.opts.WaitForFree {
				return nil, full
			}
			if !waiting {
				waiting = true
				p.opts.Logger.Info("workerid: every worker number is held; waiting for one to free up",
					"store", p.store.kind(), "namespace", p.opts.Namespace, "numbers", p.size)
			}
			if err := sleepCtx(ctx, jitter(p.opts.TTL/10, 0.5)); err != nil {
				return nil, fmt.Errorf("%w; waited %v for one to free up: %w", full, time.Since(start).Round(time.Millisecond), err)
			}
			continue
		}
		// The floor is read here, not from l: the lease's goroutine, started
		// by newLease, may already be raising l.floor.
		floor := p.floor(t)
		l := newLease(p, t.worker, token, now, floor)
		l.log.Info("workerid: lease acquired", floorAttr(floor), "had_record", t.hadRecord)
		if wait := time.Duration(floor-now) * time.Millisecond; wait > 0 {
			// Say why Acquire seems to hang.
			why := "the number's high-water mark is ahead of this clock"
			if t.notBefore > t.prev && !p.defences.noLossWait {
				why = lossWhy(t.why)
			}
			l.log.Info("workerid: waiting before the first ID", "wait", wait, "why", why)
		}
		if err := l.waitReady(ctx); err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.RenewEvery)
			if cerr := l.Close(cctx); cerr != nil {
				l.log.Warn("workerid: could not give the worker number back after a failed acquire; it stays taken until its TTL runs out",
					"error", cerr, "acquire_error", err)
			}
			cancel()
			if errors.Is(err, ErrTaken) && ctx.Err() == nil {
				// The store was too slow to keep the number even until
				// Acquire could return it: start over with another.
				token = p.newToken()
				continue
			}
			return nil, err
		}
		l.log.Debug("workerid: lease ready", "waited", time.Since(start))
		return l, nil
	}
}

// lossWhy says why Redis's loss window is open, for the log. Every case
// starts from a namespace's record that is missing (a new namespace, or
// one Redis lost) or that was written on another server.
func lossWhy(why string) string {
	const lead = "the namespace's record in Redis is missing or was written on another server, and "
	switch why {
	case "restarted":
		return lead + "the server started less than one TTL ago, so it may have lost leases then: " +
			"every new owner waits until one TTL after the start, by when any owner it forgot has stopped"
	case "promoted":
		return lead + "the server was promoted from a replica, which may not have had the latest leases: " +
			"every new owner waits one TTL"
	case "flushed":
		return lead + "the server ran FLUSHALL or FLUSHDB since it started, which may have dropped leases: " +
			"every new owner waits one TTL"
	case "cluster":
		return lead + "on a Redis Cluster the namespace's slot may have come from another node that lost it: " +
			"every new owner waits one TTL"
	case "unknown":
		return "the Redis server does not tell a script its run_id, master_replid and uptime, so the pool cannot tell " +
			"whether it lost data: every new owner waits one TTL"
	}
	return "Redis may have lost data"
}

// floor is the millisecond a new owner's first ID must come after: the
// number's high-water mark, or the end of Redis's loss window if later.
func (p *Pool) floor(t taken) int64 {
	if p.defences.noFloor {
		return 0
	}
	if p.defences.noLossWait {
		return t.prev
	}
	return max(t.prev, t.notBefore)
}

// reserve is the high-water mark a renewal (or take) sent at start (Unix
// ms) persists: the end of the lease it extends.
func (p *Pool) reserve(start int64) int64 { return start + p.opts.TTL.Milliseconds() }

// Layout returns the layout whose worker numbers the pool leases.
func (p *Pool) Layout() idtype.Layout { return p.opts.Layout }

// Size returns how many worker numbers the pool may lease: those of the
// layout less the reserved ones.
func (p *Pool) Size() int { return p.size }

func (p *Pool) nowMs() int64 { return p.opts.Clock.UnixNano() / int64(time.Millisecond) }

// wrap makes a store failure an ErrStore error, keeping context errors
// matchable as they are.
func (p *Pool) wrap(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("workerid: %s on %s: %w", op, p.store.kind(), err)
	}
	return fmt.Errorf("%w: %s on %s: %w", ErrStore, op, p.store.kind(), err)
}

// newPool makes a pool with the defences d on the store that newStore
// makes for the resolved options; the store reads the pool's defences.
func newPool(opts Options, d defences, newStore func(o Options, reserved []int64, d *defences) store) (*Pool, error) {
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	reserved := opts.reserved()
	p := &Pool{opts: opts, defences: d, reserved: reserved, size: int(opts.Layout.MaxWorker()+1) - len(reserved)}
	if p.size == 0 {
		return nil, fmt.Errorf("%w: Reserved leaves no worker number of %d to lease", idtype.ErrInvalidOptions,
			opts.Layout.MaxWorker()+1)
	}
	p.store = newStore(opts, reserved, &p.defences)
	return p, nil
}

func (p *Pool) newToken() string { return p.opts.Holder + "/" + randomHex(8) }

// jitter returns d less a random part of up to frac of it: a fleet that
// started together spreads its requests out.
func jitter(d time.Duration, frac float64) time.Duration {
	return d - time.Duration(rand.Float64()*frac*float64(d))
}

// sleepCtx sleeps for d, or until ctx ends, and returns ctx's error then.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
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

package workerid

import "context"

// An Observer is told when a Pool's Acquire and each lease's renewals
// start and end, so that metrics and tracing can time them and record
// spans; the renewals run on the lease's own goroutine, where nothing
// else could see them. Options.Observer sets it; nil, the default,
// observes nothing. The module
// github.com/snowkeyhq/snowkey/extra/snowkeyotel implements one for
// OpenTelemetry; the interface needs no dependency of its own. What a
// lease has become (held, expired, lost) is in Lease.Status.
//
// Start is called as an operation begins and returns the context it goes
// on with (for Acquire, derived from the caller's; for a renewal, from
// the lease's own, which has no caller), which End receives. End is
// called once, as the operation ends, with its error: nil when Acquire
// returned a lease or a renewal was confirmed. worker is the number:
// -1 at Acquire's Start, and at its End when it failed. Both must be safe
// for concurrent use and must not call the Pool or the Lease.
type Observer interface {
	Start(ctx context.Context, op Op, worker int64) context.Context
	End(ctx context.Context, op Op, worker int64, err error)
}

// Op names what an Observer hears of.
type Op string

// The operations an Observer hears of.
const (
	// OpAcquire is a call of Pool.Acquire, waits included.
	OpAcquire Op = "acquire"
	// OpRenew is one renewal of a lease, sent by its goroutine every
	// Options.RenewEvery (a quarter of that after a failure), with the
	// take-back of a number the store had let go. Its error wraps
	// ErrStore when the store failed, or idtype.ErrLeaseLost when the
	// number was taken over: the lease is then over.
	OpRenew Op = "renew"
)

package workerid

import "errors"

// Errors of this package. Each is wrapped with detail; match with
// errors.Is. Bad Options wrap idtype.ErrInvalidOptions. A generator on a lease returns idtype.ErrLeaseExpired and
// idtype.ErrLeaseLost; Lease.Err returns an error wrapping the latter.
var (
	// ErrNoFreeWorker means every worker number of the namespace is held
	// by a live lease; the error says how many numbers there are. Retry
	// later (a crashed owner's number frees up after one TTL), set
	// Options.WaitForFree, or use a layout with more worker bits.
	ErrNoFreeWorker = errors.New("workerid: no free worker number")
	// ErrClosed means the lease was ended by its own Close. Errors that
	// wrap it wrap idtype.ErrLeaseLost too.
	ErrClosed = errors.New("workerid: lease closed")
	// ErrTaken means another owner holds the lease's worker number now:
	// this lease's renewals stopped for longer than its TTL and the number
	// was taken over. Errors that wrap it wrap idtype.ErrLeaseLost too.
	ErrTaken = errors.New("workerid: worker number taken by another owner")
	// ErrLeaseInUse means Lease.NewGenerator was called on a lease that
	// has its generator already: one lease serves one generator, since two
	// on one worker number would issue the same IDs.
	ErrLeaseInUse = errors.New("workerid: the lease has its generator already")
	// ErrStore means the store (Redis or PostgreSQL) failed or answered
	// something unexpected; the error wraps the store's own error.
	ErrStore = errors.New("workerid: store error")
)

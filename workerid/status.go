package workerid

import (
	"errors"
	"fmt"
	"time"
)

// State is where a lease stands.
type State int

// The states of a lease.
const (
	// Held: the last renewal was confirmed in time; the generator may
	// issue.
	Held State = iota
	// Expired: no renewal has been confirmed for TTL - Margin; the
	// generator refuses with idtype.ErrLeaseExpired while the lease keeps
	// trying, and goes on once a renewal succeeds.
	Expired
	// Lost: another owner holds the number; final.
	Lost
	// Closed: given back by Close; final.
	Closed
)

// String returns the state's name in lower case.
func (s State) String() string {
	switch s {
	case Held:
		return "held"
	case Expired:
		return "expired"
	case Lost:
		return "lost"
	case Closed:
		return "closed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Status is a snapshot of a lease, for health checks and dashboards.
// Times are by the pool's clock.
type Status struct {
	// Worker is the leased number, Namespace its namespace and Store
	// "redis" or "postgres".
	Worker    int64
	Namespace string
	Store     string
	// Holder is how the store names this process.
	Holder string
	// State is where the lease stands; Err says why it ended.
	State State
	Err   error
	// Acquired is when the number was taken; LastRenewal when the last
	// confirmed renewal (or the acquisition) was sent.
	Acquired    time.Time
	LastRenewal time.Time
	// ValidUntil is the last moment the generator may issue at without a
	// further renewal: LastRenewal + TTL - Margin.
	ValidUntil time.Time
	// NotBefore is the high-water mark of the number's previous owners:
	// no ID of this lease is at or before it.
	NotBefore time.Time
	// HighWater is the high-water mark the lease has last persisted: the
	// end of the lease.
	HighWater time.Time
	// LastIssued is the time of the generator's last ID when the lease
	// last heard from it (at each grant), or NotBefore.
	LastIssued time.Time
	// Renewals counts confirmed renewals; Failures the renewals that have
	// failed since the last confirmed one, and LastError the last of them.
	Renewals  int64
	Failures  int64
	LastError error
}

// Status returns a snapshot of the lease.
func (l *Lease) Status() Status {
	p := l.pool
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Status{
		Worker:      l.worker,
		Namespace:   p.opts.Namespace,
		Store:       p.store.kind(),
		Holder:      p.opts.Holder,
		State:       Held,
		Err:         l.err,
		Acquired:    l.acquired,
		LastRenewal: l.lastRenewal,
		ValidUntil:  unixMsTime(l.until),
		NotBefore:   unixMsTime(l.floor),
		HighWater:   unixMsTime(l.highWater),
		LastIssued:  l.lastIssued,
		Renewals:    l.renewals,
		Failures:    l.failures,
		LastError:   l.lastErr,
	}
	switch {
	case l.ended && errors.Is(l.err, ErrClosed):
		s.State = Closed
	case l.ended:
		s.State = Lost
	case l.expired || p.nowMs() > l.until:
		s.State = Expired
	}
	if s.LastIssued.IsZero() {
		s.LastIssued = s.NotBefore
	}
	return s
}

package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
)

// errHashBusy means every password-hash slot is busy and the queue in
// front of them is full, or the wait for a slot ran out: the request is
// answered 503 with Retry-After instead of waiting without bound.
var errHashBusy = errors.New("password hashing is at capacity")

// hashPool bounds the password hashes computed at once, since each takes
// Argon2Params.Memory and a core, and the requests that wait for one: a
// flood from many addresses, which the per-address limits let through,
// gets 503s at once instead of a queue in which every login, a real
// user's too, waits for all the guesses ahead of it.
type hashPool struct {
	slots chan struct{}
	// limit is the most requests hashing or waiting at once; 0 means no
	// bound (a control run of the tests).
	limit int64
	wait  time.Duration

	pending  atomic.Int64  // hashing or waiting now
	hashes   atomic.Uint64 // hashes computed
	rejected atomic.Uint64 // requests answered errHashBusy
}

func newHashPool(o ThrottleOptions, unbounded bool) (*hashPool, error) {
	slots := max(2, runtime.GOMAXPROCS(0))
	switch {
	case o.HashQueue < 0:
		return nil, fmt.Errorf("%w: Throttle.HashQueue %d is negative", ErrConfig, o.HashQueue)
	case o.HashWait < 0:
		return nil, fmt.Errorf("%w: Throttle.HashWait %v is negative", ErrConfig, o.HashWait)
	}
	queue := o.HashQueue
	if queue == 0 {
		queue = 8 * slots
	}
	p := &hashPool{slots: make(chan struct{}, slots), limit: int64(slots + queue), wait: o.HashWait}
	if p.wait == 0 {
		p.wait = time.Second
	}
	if unbounded {
		p.limit, p.wait = 0, 0
	}
	return p, nil
}

// do runs f, a password hash, once a slot is free. It returns errHashBusy
// at once when the queue is full, or after waiting p.wait for a slot, and
// ctx's error if it ends first.
func (p *hashPool) do(ctx context.Context, f func() error) error {
	n := p.pending.Add(1)
	defer p.pending.Add(-1)
	if p.limit > 0 && n > p.limit {
		p.rejected.Add(1)
		return errHashBusy
	}
	var timeout <-chan time.Time
	if p.wait > 0 {
		t := time.NewTimer(p.wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case p.slots <- struct{}{}:
	case <-timeout:
		p.rejected.Add(1)
		return errHashBusy
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.slots }()
	p.hashes.Add(1)
	return f()
}

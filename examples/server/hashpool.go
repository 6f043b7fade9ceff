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

// A hashClass is the kind of password work a request brings to the pool.
type hashClass int

const (
	// classLogin checks a password against its hash: a login, or the
	// confirmation of a sign-up.
	classLogin hashClass = iota
	// classNewPassword judges a new password's strength and hashes it: a
	// sign-up or a password change. Anyone can send sign-ups from as many
	// addresses as they hold, so this class never takes every slot.
	classNewPassword
	numHashClasses
)

// hashPool bounds the password work done at once, since each hash takes
// Argon2Params.Memory and a core, and the requests that wait for it: a
// flood from many addresses, which the per-address limits let through,
// gets 503s at once instead of a queue in which every login, a real
// user's too, waits for all the guesses ahead of it.
//
// New passwords (sign-ups, password changes) may hold all slots but one,
// and have a queue of their own: a flood of sign-ups, each bringing the
// worst password the strength check has to judge, leaves a slot and the
// login queue to logins.
type hashPool struct {
	slots chan struct{}
	// classSlots[c] holds a token for each slot class c may hold: all of
	// them for logins, all but one for new passwords.
	classSlots [numHashClasses]chan struct{}
	// limit[c] is the most requests of class c hashing or waiting at
	// once; 0 means no bound (a control run of the tests).
	limit [numHashClasses]int64
	wait  time.Duration

	classPending [numHashClasses]atomic.Int64
	pending      atomic.Int64  // hashing or waiting now, every class
	hashes       atomic.Uint64 // jobs run (a hash each, and a strength check for a new password)
	rejected     atomic.Uint64 // requests answered errHashBusy
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
	p := &hashPool{slots: make(chan struct{}, slots), wait: o.HashWait}
	newSlots := slots - 1
	p.classSlots[classLogin] = make(chan struct{}, slots)
	p.classSlots[classNewPassword] = make(chan struct{}, newSlots)
	p.limit[classLogin] = int64(slots + queue)
	// New passwords queue as deep per slot as logins do.
	p.limit[classNewPassword] = int64(newSlots + max(1, queue*newSlots/slots))
	if p.wait == 0 {
		p.wait = time.Second
	}
	if unbounded {
		p.limit, p.wait = [numHashClasses]int64{}, 0
		p.classSlots[classNewPassword] = make(chan struct{}, slots)
	}
	return p, nil
}

// do runs f, a password hash (and, for classNewPassword, the strength
// check before it), once a slot is free for class c. It returns
// errHashBusy at once when c's queue is full, or after waiting p.wait for
// a slot, and ctx's error if it ends first.
func (p *hashPool) do(ctx context.Context, c hashClass, f func() error) error {
	p.pending.Add(1)
	defer p.pending.Add(-1)
	n := p.classPending[c].Add(1)
	defer p.classPending[c].Add(-1)
	if p.limit[c] > 0 && n > p.limit[c] {
		p.rejected.Add(1)
		return errHashBusy
	}
	var timeout <-chan time.Time
	if p.wait > 0 {
		t := time.NewTimer(p.wait)
		defer t.Stop()
		timeout = t.C
	}
	for _, sem := range []chan struct{}{p.classSlots[c], p.slots} {
		select {
		case sem <- struct{}{}:
			defer func() { <-sem }()
		case <-timeout:
			p.rejected.Add(1)
			return errHashBusy
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.hashes.Add(1)
	return f()
}

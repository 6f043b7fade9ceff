package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// errHashBusy means every password-hash slot a request may take is busy
// and the queue of its class is full, or the wait for a slot ran out:
// the request is answered 503 with Retry-After instead of waiting
// without bound.
var errHashBusy = errors.New("password hashing is at capacity")

// A hashClass is the kind of password work a request brings to the pool.
// The classes are in the order in which a freed slot goes to their
// waiting requests.
type hashClass int

const (
	// classKnownDevice checks a password from a device the account's
	// owner has logged in from (one with a valid device cookie, see
	// devices.go). No flood can send these: a device cookie is earned by
	// a successful login, and each one has a rate limit of its own.
	classKnownDevice hashClass = iota
	// classLogin checks any other password: a login or a password change
	// from another device, or the confirmation of a sign-up. Anyone can
	// send these from as many addresses as they hold.
	classLogin
	// classNewPassword judges a new password's strength and hashes it: a
	// sign-up or a password change. Anyone can send sign-ups too.
	classNewPassword
	numHashClasses
)

// hashPool bounds the password work done at once, since each hash takes
// Argon2Params.Memory and a core, and the requests that wait for it: a
// flood from many addresses, which the per-address limits let through,
// gets 503s at once instead of a queue in which every login, a real
// user's too, waits for all the guesses ahead of it.
//
// The slots are shared by class, so that what a flood can send cannot
// take what the owners of accounts need:
//
//   - logins from known devices may take every slot, and one slot is
//     theirs alone: a credential-stuffing or sign-up flood, however
//     many addresses it comes from, leaves it free;
//   - other logins and new passwords start only while they leave a slot
//     free, whoever holds the others: so they hold at most every slot
//     but one, and none starts beside known devices that hold all but
//     one (on two slots: none starts while a known device hashes);
//   - new passwords hold at most every slot but two (at least one), so
//     that on three slots or more a sign-up flood leaves the other
//     logins a slot too;
//   - a freed slot goes to a waiting known device first, then to a
//     waiting login, then to a new password: on two slots, where
//     sign-ups and other logins share one, a login waits for one
//     sign-up's job at most, not for the sign-ups queued before it.
//
// Each class has a queue of its own, so that a flood of one fills its
// own queue (and gets 503s) and no other's.
type hashPool struct {
	mu      sync.Mutex
	slots   int                           // slots in all
	running [numHashClasses]int           // jobs of each class holding a slot
	waiting [numHashClasses][]*hashWaiter // requests of each class waiting for a slot, oldest first
	most    [numHashClasses]int           // the slots each class may hold (see canRun)
	shared  int                           // other work than known devices' starts only while fewer slots are busy
	limit   [numHashClasses]int64         // the most requests of a class hashing or waiting
	wait    time.Duration                 // the longest wait for a slot

	classPending [numHashClasses]atomic.Int64
	pending      atomic.Int64  // hashing or waiting now, every class
	hashes       atomic.Uint64 // jobs run (a hash each, and a strength check for a new password)
	rejected     atomic.Uint64 // requests answered errHashBusy
}

// A hashWaiter is a request waiting for a slot. The pool closes ready
// once it has given the request a slot, under mu, with granted set.
type hashWaiter struct {
	ready   chan struct{}
	granted bool
}

// newHashPool makes the pool of max(2, GOMAXPROCS) slots.
func newHashPool(o ThrottleOptions) (*hashPool, error) {
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
	p := &hashPool{slots: slots, wait: o.HashWait, shared: slots - 1}
	p.most = [numHashClasses]int{classKnownDevice: slots, classLogin: slots - 1, classNewPassword: max(1, slots-2)}
	p.limit[classKnownDevice] = int64(slots + queue)
	p.limit[classLogin] = int64(slots + queue)
	// New passwords queue as deep per slot as logins do.
	p.limit[classNewPassword] = int64(p.most[classNewPassword] + max(1, queue*p.most[classNewPassword]/slots))
	if p.wait == 0 {
		p.wait = time.Second
	}
	return p, nil
}

// full reports whether a request of class c would be refused at once
// for want of room in its queue, as do would answer it now.
func (p *hashPool) full(c hashClass) bool {
	return p.classPending[c].Load() >= p.limit[c]
}

// canRun reports whether a job of class c may take a slot now. p.mu is
// held.
func (p *hashPool) canRun(c hashClass) bool {
	busy := 0
	for _, n := range p.running {
		busy += n
	}
	if busy >= p.slots || p.running[c] >= p.most[c] {
		return false
	}
	// Other work starts only while it leaves a slot free: never in the
	// known devices' own slot, nor beside a known device that has taken
	// it, whose hash then shares neither a core nor memory bandwidth
	// with a flood's.
	return c == classKnownDevice || busy < p.shared
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
	if n > p.limit[c] {
		p.rejected.Add(1)
		return errHashBusy
	}
	if err := p.acquire(ctx, c); err != nil {
		return err
	}
	defer p.release(c)
	p.hashes.Add(1)
	return f()
}

// acquire takes a slot for class c, waiting at most p.wait.
func (p *hashPool) acquire(ctx context.Context, c hashClass) error {
	p.mu.Lock()
	if len(p.waiting[c]) == 0 && p.canRun(c) {
		p.running[c]++
		p.mu.Unlock()
		return nil
	}
	w := &hashWaiter{ready: make(chan struct{})}
	p.waiting[c] = append(p.waiting[c], w)
	p.mu.Unlock()

	timeout := time.NewTimer(p.wait)
	defer timeout.Stop()
	var err error
	select {
	case <-w.ready:
		return nil
	case <-timeout.C:
		err = errHashBusy
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.granted {
		// The slot came as the wait ended: give it to the next.
		p.running[c]--
		p.grant()
	} else {
		p.waiting[c] = slices.DeleteFunc(p.waiting[c], func(x *hashWaiter) bool { return x == w })
	}
	if errors.Is(err, errHashBusy) {
		p.rejected.Add(1)
	}
	return err
}

// release gives back a slot of class c.
func (p *hashPool) release(c hashClass) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[c]--
	p.grant()
}

// grant gives free slots to waiting requests, known devices first, then
// logins, then new passwords, each class oldest first. p.mu is held.
func (p *hashPool) grant() {
	for c := range numHashClasses {
		for len(p.waiting[c]) > 0 && p.canRun(c) {
			w := p.waiting[c][0]
			p.waiting[c] = p.waiting[c][1:]
			p.running[c]++
			w.granted = true
			close(w.ready)
		}
	}
}

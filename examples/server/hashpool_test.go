package main

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testenv"
)

// TestHashPool fills every hash slot and the queue behind them: one more
// request is refused at once, a queued one gives up after HashWait, and
// the queued ones run once slots free up. In the control run, with no
// bound, the extra request waits in the pool instead, and runs once the
// slots free.
func TestHashPool(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "bounded", true: "control"}[control], func(t *testing.T) {
			ctx := testenv.Deadline(t, time.Minute)
			p, err := newHashPool(ThrottleOptions{HashQueue: 2, HashWait: time.Hour}, control)
			if err != nil {
				t.Fatal(err)
			}
			slots := cap(p.slots)
			release := make(chan struct{})
			var wg sync.WaitGroup
			errs := make(chan error, slots+3)
			for range slots + 2 { // every slot busy, and 2 queued
				wg.Go(func() { errs <- p.do(ctx, classLogin, func() error { <-release; return nil }) })
			}
			waitPending(ctx, t, p, slots+2)
			extra := make(chan error, 1)
			go func() { extra <- p.do(ctx, classLogin, func() error { return nil }) }()
			if control {
				// The extra request is in do, past the bound that would
				// refuse it, with every slot busy: nothing but a free slot
				// lets it return nil, which it must once they free.
				waitPending(ctx, t, p, slots+3)
				if n := p.rejected.Load(); n != 0 {
					t.Fatalf("control: %d requests refused with no bound", n)
				}
			} else if err := <-extra; !errors.Is(err, errHashBusy) || p.rejected.Load() != 1 {
				t.Fatalf("the request past the queue: %v (rejected %d), want errHashBusy at once", err, p.rejected.Load())
			}
			close(release)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Errorf("a queued request: %v", err)
				}
			}
			if control {
				if err := <-extra; err != nil || p.hashes.Load() != uint64(slots+3) {
					t.Errorf("control: the extra request after the slots freed: %v, %d hashes; want it run", err, p.hashes.Load())
				}
			}
		})
	}

	t.Run("wait", func(t *testing.T) {
		ctx := testenv.Deadline(t, time.Minute)
		p, err := newHashPool(ThrottleOptions{HashWait: 50 * time.Millisecond}, false)
		if err != nil {
			t.Fatal(err)
		}
		for range cap(p.slots) {
			p.slots <- struct{}{}
		}
		ran := false
		if err := p.do(ctx, classLogin, func() error { ran = true; return nil }); !errors.Is(err, errHashBusy) || ran {
			t.Fatalf("with no slot free for HashWait: %v, ran %v; want errHashBusy", err, ran)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		p.wait = time.Hour
		if err := p.do(cctx, classLogin, func() error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
			t.Fatalf("with the request canceled: %v, ran %v", err, ran)
		}
	})
}

// TestHashPoolClasses floods the pool with new passwords (sign-ups), each
// holding its slot: they take every slot but one, and their own queue,
// and a login still runs at once. In the control run, with no bound,
// the new passwords hold every slot, and the login waits for them.
func TestHashPoolClasses(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "bounded", true: "control"}[control], func(t *testing.T) {
			ctx := testenv.Deadline(t, time.Minute)
			p, err := newHashPool(ThrottleOptions{HashQueue: 4, HashWait: time.Hour}, control)
			if err != nil {
				t.Fatal(err)
			}
			slots := cap(p.slots)
			release := make(chan struct{})
			var wg sync.WaitGroup
			defer wg.Wait()
			defer close(release)
			// One sign-up more than the class admits (slots and queue).
			flood := int(p.limit[classNewPassword]) + 1
			if control {
				flood = slots + 2
			}
			var refused, ran atomic.Int64
			for range flood {
				wg.Go(func() {
					err := p.do(ctx, classNewPassword, func() error { ran.Add(1); <-release; return nil })
					if errors.Is(err, errHashBusy) {
						refused.Add(1)
					}
				})
			}
			// Every sign-up is running, queued or refused. A sign-up
			// counts in pending from the moment it enters do, also while
			// it is being refused, and in refused only once do returned:
			// with the bound, the flood has settled only once no more than
			// the class admits are pending (an unloaded run once saw all
			// of them pending and none refused yet).
			settled := func() bool {
				n := p.pending.Load()
				return n+refused.Load() == int64(flood) && ran.Load() >= int64(min(flood, cap(p.classSlots[classNewPassword]))) &&
					(control || n <= p.limit[classNewPassword])
			}
			for !settled() {
				select {
				case <-ctx.Done():
					t.Fatalf("the flood never settled: %d pending, %d refused, %d running", p.pending.Load(), refused.Load(), ran.Load())
				case <-time.After(time.Millisecond):
				}
			}
			held := len(p.slots)
			if control {
				if held != slots {
					t.Fatalf("control: the sign-ups hold %d of %d slots; the test proves nothing", held, slots)
				}
				return
			}
			if held != slots-1 || refused.Load() == 0 {
				t.Fatalf("the sign-ups hold %d of %d slots, %d refused; want all but one, and the rest of the flood refused", held, slots, refused.Load())
			}
			// The login gets the free slot while every sign-up holds its own.
			if err := p.do(ctx, classLogin, func() error { return nil }); err != nil {
				t.Fatalf("a login during the flood: %v", err)
			}
		})
	}
}

// waitPending waits until n requests are in p (hashing or waiting), or
// fails the test when ctx ends.
func waitPending(ctx context.Context, t *testing.T, p *hashPool, n int) {
	t.Helper()
	for p.pending.Load() != int64(n) {
		select {
		case <-ctx.Done():
			t.Fatalf("%d requests in the hash pool, not %d: %v", p.pending.Load(), n, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// TestHashPoolHTTP sees a login answered 503 with Retry-After when no
// hash slot frees up in time.
func TestHashPoolHTTP(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, time.Minute)
	cfg := embedded().config(t)
	cfg.Throttle = generous()
	cfg.Throttle.HashWait = 50 * time.Millisecond
	app, srv := startAppConfig(t, cfg)
	for range cap(app.hashes.slots) {
		app.hashes.slots <- struct{}{}
	}
	r := call(t, srv, "POST", "/api/login", "", `{"email":"x@example.com","password":"`+goodPassword+`"}`)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" {
		t.Fatalf("login with every hash slot busy: %d, Retry-After %q, %s; want 503 and 1", r.status, r.header.Get("Retry-After"), r.body)
	}
	for range cap(app.hashes.slots) {
		<-app.hashes.slots
	}
	if r := call(t, srv, "POST", "/api/login", "", `{"email":"x@example.com","password":"`+goodPassword+`"}`); r.status != 401 {
		t.Fatalf("login once the slots are free: %d %s", r.status, r.body)
	}
}

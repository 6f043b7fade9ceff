package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// occupy holds n of p's slots, as known devices' jobs (the class that may
// hold every slot), until the func it returns is called; calling that
// again does nothing. Tests use it to make every slot busy.
func (p *hashPool) occupy(n int) (release func()) {
	p.mu.Lock()
	p.running[classKnownDevice] += n
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.running[classKnownDevice] -= n
			p.grant()
		})
	}
}

// busy is how many slots of p are held now.
func (p *hashPool) busy() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.running {
		n += r
	}
	return n
}

// unbound lifts every bound of p, as a pool without them would run: its
// queues hold any number of requests, a request waits for a slot longer
// than any test runs, and every class may take every slot. It is the
// control of the pool's bounds, set from the test.
func unbound(p *hashPool) {
	for c := range numHashClasses {
		p.limit[c] = math.MaxInt64
		p.most[c] = p.slots
	}
	p.wait = 24 * time.Hour
	p.shared = p.slots
}

// TestHashPool fills the slots logins may hold and their queue: one more
// request is refused at once, a queued one gives up after HashWait, and
// the queued ones run once slots free up. In the control run, with no
// bound, the extra request waits in the pool instead, and runs once the
// slots free.
func TestHashPool(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "bounded", true: "control"}[control], func(t *testing.T) {
			ctx := testenv.Deadline(t, time.Minute)
			p, err := newHashPool(ThrottleOptions{HashQueue: 2, HashWait: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if control {
				unbound(p)
			}
			slots := p.slots
			release := make(chan struct{})
			var wg sync.WaitGroup
			errs := make(chan error, slots+3)
			for range slots + 2 { // the class's slots busy, and the rest of its bound queued
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
		p, err := newHashPool(ThrottleOptions{HashWait: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		release := p.occupy(p.slots)
		defer release()
		ran := false
		for _, c := range []hashClass{classKnownDevice, classLogin, classNewPassword} {
			if err := p.do(ctx, c, func() error { ran = true; return nil }); !errors.Is(err, errHashBusy) || ran {
				t.Fatalf("class %d with no slot free for HashWait: %v, ran %v; want errHashBusy", c, err, ran)
			}
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		p.wait = time.Hour
		if err := p.do(cctx, classLogin, func() error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
			t.Fatalf("with the request canceled: %v, ran %v", err, ran)
		}
		release()
		if n := p.busy(); n != 0 {
			t.Fatalf("%d slots held after every request ended", n)
		}
	})
}

// TestHashPoolClasses floods the pool with new passwords (sign-ups), each
// holding its slot: they take every slot but two (one on two slots), and
// their own queue, and the rest of the flood is refused. A login from a
// known device still runs at once; so does any other login on three
// slots or more, and on two it waits for one sign-up's job, not for the
// sign-ups queued before it. In the control run, with no bound, the new
// passwords hold every slot, and the logins wait for them.
func TestHashPoolClasses(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "bounded", true: "control"}[control], func(t *testing.T) {
			ctx := testenv.Deadline(t, time.Minute)
			p, err := newHashPool(ThrottleOptions{HashQueue: 4, HashWait: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if control {
				unbound(p)
			}
			slots := p.slots
			// Each sign-up's job ends when its own channel is told to.
			jobs := make(chan chan struct{}, 64)
			var wg sync.WaitGroup
			var stop sync.Once
			ends := make(chan struct{})
			defer wg.Wait()
			defer stop.Do(func() { close(ends) })
			// One sign-up more than the class admits (slots and queue).
			flood := int(p.limit[classNewPassword]) + 1
			if control {
				flood = slots + 2
			}
			var refused, ran atomic.Int64
			for range flood {
				wg.Go(func() {
					err := p.do(ctx, classNewPassword, func() error {
						ran.Add(1)
						end := make(chan struct{})
						jobs <- end
						select {
						case <-end:
						case <-ends:
						}
						return nil
					})
					if errors.Is(err, errHashBusy) {
						refused.Add(1)
					}
				})
			}
			// Every sign-up is running, queued or refused. A sign-up
			// counts in pending from the moment it enters do, also while
			// it is being refused, and in refused only once do returned:
			// with the bound, the flood has settled only once no more than
			// the class admits are pending.
			settled := func() bool {
				n := p.pending.Load()
				return n+refused.Load() == int64(flood) && ran.Load() >= int64(min(flood, p.most[classNewPassword])) &&
					(control || n <= p.limit[classNewPassword])
			}
			for !settled() {
				select {
				case <-ctx.Done():
					t.Fatalf("the flood never settled: %d pending, %d refused, %d running", p.pending.Load(), refused.Load(), ran.Load())
				case <-time.After(time.Millisecond):
				}
			}
			held := p.busy()
			if control {
				if held != slots {
					t.Fatalf("control: the sign-ups hold %d of %d slots; the test proves nothing", held, slots)
				}
				return
			}
			if want := max(1, slots-2); held != want || refused.Load() == 0 {
				t.Fatalf("the sign-ups hold %d of %d slots, %d refused; want %d, and the rest of the flood refused", held, slots, refused.Load(), want)
			}
			// A known device gets a free slot while every sign-up holds
			// its own.
			if err := p.do(ctx, classKnownDevice, func() error { return nil }); err != nil {
				t.Fatalf("a known device's login during the flood: %v", err)
			}
			login := make(chan error, 1)
			started := make(chan struct{})
			var signupsBefore int64 // the sign-ups that had started when the login ran
			go func() {
				login <- p.do(ctx, classLogin, func() error { signupsBefore = ran.Load(); close(started); return nil })
			}()
			if slots >= 3 {
				if err := <-login; err != nil {
					t.Fatalf("a login during the flood: %v", err)
				}
				return
			}
			// Two slots: the login waits behind the running sign-up, and
			// gets its slot before the sign-ups queued ahead of it.
			waitPending(ctx, t, p, int(p.limit[classNewPassword])+1)
			select {
			case <-started:
				t.Fatal("a login ran while the sign-ups held every slot it may take")
			default:
			}
			before := ran.Load()
			close(<-jobs) // one sign-up ends, and frees a slot
			if err := <-login; err != nil {
				t.Fatalf("a login during the flood: %v", err)
			}
			if signupsBefore != before {
				t.Fatalf("%d queued sign-ups took the freed slot before the waiting login", signupsBefore-before)
			}
		})
	}
}

// TestHashPoolKnownDevices floods the pool with logins from devices the
// accounts' owners never used, each holding its slot, as credential
// stuffing from many addresses does: they take every slot but one and
// their queue, and the rest of the flood is refused. A login from a
// known device runs at once, in the slot the flood cannot take, with a
// queue of its own. In the control run, where known devices wait with
// every other login, it is refused with the flood.
func TestHashPoolKnownDevices(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "own slot", true: "control"}[control], func(t *testing.T) {
			ctx := testenv.Deadline(t, time.Minute)
			p, err := newHashPool(ThrottleOptions{HashQueue: 4, HashWait: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			release := make(chan struct{})
			var wg sync.WaitGroup
			defer wg.Wait()
			defer close(release)
			flood := int(p.limit[classLogin]) + 1
			var refused atomic.Int64
			for range flood {
				wg.Go(func() {
					if err := p.do(ctx, classLogin, func() error { <-release; return nil }); errors.Is(err, errHashBusy) {
						refused.Add(1)
					}
				})
			}
			for p.pending.Load() != p.limit[classLogin] || refused.Load() != 1 {
				select {
				case <-ctx.Done():
					t.Fatalf("the flood never settled: %d pending, %d refused", p.pending.Load(), refused.Load())
				case <-time.After(time.Millisecond):
				}
			}
			if held := p.busy(); held != p.slots-1 {
				t.Fatalf("the flood holds %d of %d slots, want all but one", held, p.slots)
			}
			// The control serves the known device's login as any other.
			known := classKnownDevice
			if control {
				known = classLogin
			}
			err = p.do(ctx, known, func() error { return nil })
			switch {
			case control && !errors.Is(err, errHashBusy):
				t.Fatalf("control: a known device's login during the flood: %v; want it refused with the flood", err)
			case !control && err != nil:
				t.Fatalf("a known device's login during the flood: %v, want it run at once", err)
			}
		})
	}
}

// TestHashPoolBesideKnownDevice runs a known device's hash and sends
// other logins meanwhile: they start only while they leave a slot free,
// so beside the known device they hold every slot but two (none on two
// slots, where the known device's hash then shares a core with no
// flood's), and the next of them starts once it is done. In the control
// run, with no bound, they take every slot the known device left.
func TestHashPoolBesideKnownDevice(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "a slot left free", true: "control"}[control], func(t *testing.T) {
			ctx := testenv.Deadline(t, time.Minute)
			p, err := newHashPool(ThrottleOptions{HashQueue: 4, HashWait: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if control {
				unbound(p)
			}
			known, knownRuns := make(chan struct{}), make(chan struct{})
			var knownDone sync.Once
			endKnown := func() { knownDone.Do(func() { close(known) }) }
			release := make(chan struct{})
			var wg sync.WaitGroup
			defer wg.Wait()
			defer close(release)
			defer endKnown()
			wg.Go(func() { _ = p.do(ctx, classKnownDevice, func() error { close(knownRuns); <-known; return nil }) })
			<-knownRuns
			var ran atomic.Int64
			logins := p.slots
			for range logins {
				wg.Go(func() { _ = p.do(ctx, classLogin, func() error { ran.Add(1); <-release; return nil }) })
			}
			waitPending(ctx, t, p, 1+logins)
			want := int64(p.slots - 2)
			if control {
				want = int64(p.slots - 1)
			}
			for ran.Load() < want {
				select {
				case <-ctx.Done():
					t.Fatalf("%d logins run beside the known device, want %d", ran.Load(), want)
				case <-time.After(time.Millisecond):
				}
			}
			if n := ran.Load(); n != want || p.busy() != int(want)+1 {
				t.Fatalf("beside the known device: %d logins run, %d slots busy; want %d logins", n, p.busy(), want)
			}
			if control {
				return
			}
			endKnown()
			for ran.Load() < want+1 {
				select {
				case <-ctx.Done():
					t.Fatalf("no login started once the known device was done: %d run", ran.Load())
				case <-time.After(time.Millisecond):
				}
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
	release := app.hashes.occupy(app.hashes.slots)
	r := call(t, srv, "POST", "/api/login", "", `{"email":"x@example.com","password":"`+goodPassword+`"}`)
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" {
		t.Fatalf("login with every hash slot busy: %d, Retry-After %q, %s; want 503 and 1", r.status, r.header.Get("Retry-After"), r.body)
	}
	release()
	if r := call(t, srv, "POST", "/api/login", "", `{"email":"x@example.com","password":"`+goodPassword+`"}`); r.status != 401 {
		t.Fatalf("login once the slots are free: %d %s", r.status, r.body)
	}
}

// TestLoginShedding fills the queue of the logins from devices their
// owners never used and sends such a login, with no device cookie: it is
// answered 503 at once, before any rate limit and its database read, so
// the address's limit (a burst of 1) and the account's (a burst of 2,
// one spent by the sign-up's verification) are untouched, and the next
// login from that address, once the queue has room, reaches the password
// check (401). The owner's login with their device cookie is not shed.
// In the control run the logins go through spendFirst, so that the
// refused login spends the limits first, and the test sees the login
// after it refused 429.
func TestLoginShedding(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "shed early", true: "control"}[control], func(t *testing.T) {
			testenv.Deadline(t, time.Minute)
			cfg := Config{KeyPrefix: testenv.KeyPrefix(t), Throttle: generous(), Argon2: cheapArgon2}
			cfg.Throttle.LoginPerIP = redis_rate.Limit{Rate: 1, Period: 24 * time.Hour, Burst: 1}
			cfg.Throttle.LoginPerAccount = redis_rate.Limit{Rate: 1, Period: 24 * time.Hour, Burst: 2}
			app, _ := startAppConfig(t, cfg)
			h := app.Handler()
			if control {
				h = spendFirst(app)
			}
			const owner = "owner@example.com"
			_, device := signupVerified(t, app, "198.51.100.7:1", owner, goodPassword)
			guess := `{"email":"` + owner + `","password":"wrong-password-1"}`

			full := app.hashes.limit[classLogin]
			app.hashes.classPending[classLogin].Add(full)
			if r := fromHandler(t, h, "203.0.113.1:1", "POST", "/api/login", "", guess); r.status != http.StatusServiceUnavailable {
				t.Fatalf("a login with no device cookie, the queue full: %d %s, want 503", r.status, r.body)
			}
			if r := fromHandler(t, h, "198.51.100.8:1", "POST", "/api/login", "", `{"email":"`+owner+`","password":"`+goodPassword+`"}`, device); r.status != http.StatusOK {
				t.Errorf("the owner's device, the queue of other logins full: %d %s, want 200", r.status, r.body)
			}
			app.hashes.classPending[classLogin].Add(-full)

			r := fromHandler(t, h, "203.0.113.1:1", "POST", "/api/login", "", guess)
			switch {
			case control && r.status != http.StatusTooManyRequests:
				t.Fatalf("control: the login after the refused one: %d %s; want a 429", r.status, r.body)
			case !control && r.status != http.StatusUnauthorized:
				t.Fatalf("the login after the shed one: %d %s; want it checked, 401", r.status, r.body)
			}
		})
	}
}

// TestSignupShedding fills the new passwords' queue and sends a sign-up:
// it is answered 503 at once, before its rate limits, so the address's
// sign-up limit (a burst of 1) is untouched, and the first sign-up once
// the queue has room is taken (202). In the control run the sign-ups go
// through spendFirst, so that the refused sign-up spends the address's
// limit first, and the test sees the one after it refused 429.
func TestSignupShedding(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "shed early", true: "control"}[control], func(t *testing.T) {
			testenv.Deadline(t, time.Minute)
			cfg := Config{KeyPrefix: testenv.KeyPrefix(t), Throttle: generous(), Argon2: cheapArgon2}
			cfg.Throttle.SignupPerIP = redis_rate.Limit{Rate: 1, Period: 24 * time.Hour, Burst: 1}
			app, _ := startAppConfig(t, cfg)
			h := app.Handler()
			if control {
				h = spendFirst(app)
			}
			signup := `{"email":"new@example.com","password":"` + goodPassword + `","name":"N"}`
			full := app.hashes.limit[classNewPassword]
			app.hashes.classPending[classNewPassword].Add(full)
			if r := fromHandler(t, h, "203.0.113.1:1", "POST", "/api/signup", "", signup); r.status != http.StatusServiceUnavailable {
				t.Fatalf("a sign-up with the queue full: %d %s, want 503", r.status, r.body)
			}
			app.hashes.classPending[classNewPassword].Add(-full)
			r := fromHandler(t, h, "203.0.113.1:1", "POST", "/api/signup", "", signup)
			switch {
			case control && r.status != http.StatusTooManyRequests:
				t.Fatalf("control: the sign-up after the refused one: %d %s; want the address's 429", r.status, r.body)
			case !control && r.status != http.StatusAccepted:
				t.Fatalf("the sign-up after the shed one: %d %s; want 202", r.status, r.body)
			}
		})
	}
}

// spendFirst serves the App's Handler, but first spends on each sign-up,
// and on each login that brings no device cookie the server signed for
// its account, the rate limits the App spends on it, with the App's own
// throttle, and answers a 429 itself: a request the hash pool then
// refuses has spent them, as it did before the App shed such requests
// ahead of its limits. The control of TestLoginShedding and
// TestSignupShedding.
func spendFirst(app *App) http.Handler {
	h := app.Handler()
	return apiHandler(func(w http.ResponseWriter, r *http.Request) *apiError {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return badRequest("cannot read the request body: %v", err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var in credentials
		_ = json.Unmarshal(body, &in)
		address := addressKey(clientIP(r))
		switch {
		case r.Method != http.MethodPost:
		case r.URL.Path == "/api/signup":
			if e := app.throttled(r, signupIP, address); e != nil {
				return e
			}
		case r.URL.Path == "/api/login" && !app.devices.signed(r, normalEmail(in.Email)):
			if e := app.throttled(r, loginIP, address); e != nil {
				return e
			}
			if in.check(false) == nil {
				if _, e := app.loginThrottled(r, in.Email, false, 0); e != nil {
					return e
				}
			}
		}
		h.ServeHTTP(w, r)
		return nil
	})
}

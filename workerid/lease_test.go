package workerid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/faultproxy"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// oneNumber is a layout whose only leasable number, with 1 reserved, is 0.
var oneNumber = Options{
	Layout:   idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 1, SequenceBits: 12},
	Reserved: []int64{1},
}

// issueUntilError calls Next until it fails or timeout, stretched by the
// machine's load, has passed, and returns the IDs and the error.
func issueUntilError(g *idtype.Generator, timeout time.Duration) ([]idtype.ID, error) {
	var ids []idtype.ID
	deadline := time.Now().Add(testenv.Stretched(timeout))
	for time.Now().Before(deadline) {
		id, err := g.Next()
		if err != nil {
			return ids, err
		}
		ids = append(ids, id)
		time.Sleep(100 * time.Microsecond)
	}
	return ids, nil
}

// firstID waits until g issues an ID and returns it. A renewal held up
// by a busy machine may stop a fresh lease's generator for a while; a
// test that cuts a lease off needs an ID from before the cut, to compare
// what is issued after it with.
func firstID(t testing.TB, g *idtype.Generator) idtype.ID {
	t.Helper()
	var id idtype.ID
	waitFor(t, 10*time.Second, "the generator's first ID", func() bool {
		var err error
		id, err = g.Next()
		return err == nil
	})
	return id
}

// TestTakeover: a lease cut off from its store stops its generator before
// the lease could expire; another owner takes the number once it has
// expired, after the first owner's high-water mark; the first owner
// learns that it lost the number when the store is back.
func TestTakeover(t *testing.T) {
	forKinds(t, func(t *testing.T, b backend) {
		px := startProxy(t, b.addr)
		logs := &logRecorder{}
		oa := oneNumber
		oa.Logger = slog.New(logs)
		pa := b.pool(t, px.Addr(), oa)
		pb := b.pool(t, b.addr, oneNumber)
		a := acquire(t, pa)
		ga := generator(t, a)
		if _, err := pb.Acquire(context.Background()); !errors.Is(err, ErrNoFreeWorker) {
			t.Fatalf("Acquire of a held number: got %v, want ErrNoFreeWorker", err)
		}

		ids := []idtype.ID{firstID(t, ga)}
		px.Cut()
		more, err := issueUntilError(ga, 5*time.Second)
		if !errors.Is(err, idtype.ErrLeaseExpired) {
			t.Fatalf("cut off: got %v after %d IDs, want ErrLeaseExpired", err, len(more))
		}
		ids = append(ids, more...)
		st := a.Status()
		lastA := a.pool.Layout().Decode(ids[len(ids)-1]).Time
		if lastA.After(st.ValidUntil) || !st.ValidUntil.Before(st.LastRenewal.Add(pa.opts.TTL)) {
			t.Fatalf("last ID at %s, valid until %s, last renewal %s: want last <= valid < renewal + TTL",
				lastA, st.ValidUntil, st.LastRenewal)
		}
		t.Logf("generator stopped %v after the last confirmed renewal (TTL %v, margin %v)",
			time.Since(st.LastRenewal).Round(time.Millisecond), pa.opts.TTL, pa.opts.Margin)

		b2 := acquireWhenFree(t, pb, 10*time.Second) // once A's lease has expired in the store
		if b2.Worker() != a.Worker() {
			t.Fatalf("B took %d, want A's %d", b2.Worker(), a.Worker())
		}
		if nb := b2.Status().NotBefore; nb.Before(lastA) {
			t.Fatalf("B starts after %s, before A's last ID at %s", nb, lastA)
		}
		idB, err := generator(t, b2).Next()
		if err != nil {
			t.Fatal(err)
		}
		if idB <= ids[len(ids)-1] {
			t.Fatalf("B's first ID %d is not above A's last %d", idB, ids[len(ids)-1])
		}

		px.Restore()
		select {
		case <-a.Done():
		case <-time.After(testenv.Stretched(5 * time.Second)):
			t.Fatal("A did not learn it lost the number")
		}
		if err := a.Err(); !errors.Is(err, idtype.ErrLeaseLost) || !errors.Is(err, ErrTaken) {
			t.Fatalf("A.Err() = %v, want ErrLeaseLost and ErrTaken", err)
		}
		if _, err := ga.Next(); !errors.Is(err, idtype.ErrLeaseLost) {
			t.Fatalf("A's generator after the loss: got %v, want ErrLeaseLost", err)
		}
		if s := a.Status(); s.State != Lost {
			t.Fatalf("A's state %v, want lost", s.State)
		}
		for _, m := range []string{"renewal failed", "lease expired", "lease lost"} {
			if !logs.has(m) {
				t.Errorf("no log line saying %q; got:\n%s", m, logs)
			}
		}
	})
}

// TestOutage cuts a lease off its store for less than its TTL and for
// more: either way the generator stops within the margin, and goes on
// when the store is back: renewed if the lease survived, taken back
// after the high-water mark if it lapsed and nobody took the number.
func TestOutage(t *testing.T) {
	for _, long := range []bool{false, true} {
		name := map[bool]string{false: "short", true: "long"}[long]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forKinds(t, func(t *testing.T, b backend) {
				px := startProxy(t, b.addr)
				logs := &logRecorder{}
				o := oneNumber
				o.Logger = slog.New(logs)
				p := b.pool(t, px.Addr(), o)
				l := acquire(t, p)
				g := generator(t, l)
				ids := []idtype.ID{firstID(t, g)}
				px.Cut()
				cut := time.Now()
				more, err := issueUntilError(g, 5*time.Second)
				if !errors.Is(err, idtype.ErrLeaseExpired) {
					t.Fatalf("got %v, want ErrLeaseExpired", err)
				}
				ids = append(ids, more...)
				stopped := time.Since(cut)
				if long {
					waitLapsed(t, b.pool(t, b.addr, o), l.Worker()) // a pool not cut off, to look
				}
				px.Restore()
				var id idtype.ID
				waitFor(t, 10*time.Second, "the generator to issue again", func() bool {
					id, err = g.Next()
					return err == nil
				})
				if id <= ids[len(ids)-1] {
					t.Fatalf("ID %d after the outage is not above %d", id, ids[len(ids)-1])
				}
				s := l.Status()
				if s.State != Held {
					t.Fatalf("state %v after recovery, want held", s.State)
				}
				// A lapsed Redis key is gone and must be taken back; a lapsed
				// row still names its owner, who renews it.
				retaken := logs.has("taken back")
				if want := long && b.name == "redis"; want && !retaken {
					t.Fatalf("lapsed Redis lease not taken back; logs:\n%s", logs)
				}
				t.Logf("%s outage: stopped %v after the cut; recovered (taken back: %v)",
					name, stopped.Round(time.Millisecond), retaken)
			})
		})
	}
}

// TestRedisServerStopped stops the Redis server itself (with persistence,
// so the lease survives a short stop) and starts it again: the generator
// stops while it is down, and goes on after the restart above every ID it
// issued before.
func TestRedisServerStopped(t *testing.T) {
	testenv.Deadline(t, time.Minute)
	srv := private.StartRedis(t, "--appendonly", "yes", "--appendfsync", "always")
	p := redisPool(t, srv.Addr(), "stop:", oneNumber)
	trustRecord(t, p)
	l := acquire(t, p)
	g := generator(t, l)
	first, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	ids, err := issueUntilError(g, 5*time.Second)
	if !errors.Is(err, idtype.ErrLeaseExpired) {
		t.Fatalf("server stopped: got %v, want ErrLeaseExpired", err)
	}
	if s := l.Status(); s.State != Expired || s.Failures == 0 || s.LastError == nil {
		t.Fatalf("status %+v, want expired with failures", s)
	}
	last := first
	if len(ids) > 0 {
		last = ids[len(ids)-1]
	}
	srv.Restart()
	var next idtype.ID
	waitFor(t, 30*time.Second, "the generator to issue again", func() bool {
		next, err = g.Next()
		return err == nil
	})
	if next <= last {
		t.Fatalf("first ID after the restart %d is not above the last before the stop %d", next, last)
	}
}

func TestClose(t *testing.T) {
	forKinds(t, func(t *testing.T, b backend) {
		p := b.pool(t, b.addr, oneNumber)
		ctx := context.Background()
		l, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		g := generator(t, l)
		var last idtype.ID
		for range 1000 {
			if last, err = g.Next(); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(ctx); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		select {
		case <-l.Done():
		default:
			t.Fatal("Done not closed after Close")
		}
		if err := l.Err(); !errors.Is(err, ErrClosed) || !errors.Is(err, idtype.ErrLeaseLost) {
			t.Fatalf("Err() = %v, want ErrClosed and ErrLeaseLost", err)
		}
		if _, err := g.Next(); !errors.Is(err, idtype.ErrLeaseLost) || !errors.Is(err, ErrClosed) {
			t.Fatalf("Next after Close: got %v", err)
		}
		if s := l.Status(); s.State != Closed {
			t.Fatalf("state %v, want closed", s.State)
		}
		if g, err := l.NewGenerator(); g != nil || !errors.Is(err, idtype.ErrLeaseLost) || !errors.Is(err, ErrClosed) {
			t.Fatalf("generator on a closed lease: got %v, %v; want ErrLeaseLost and ErrClosed", g, err)
		}
		// The next owner starts right after the last ID, not a TTL ahead,
		// and waits for nothing: its floor is behind the clock as it asks.
		asked := time.Now()
		l2 := acquire(t, p)
		lastAt := l.pool.Layout().Decode(last).Time
		if nb := l2.Status().NotBefore; nb.Before(lastAt) || nb.After(lastAt.Add(time.Millisecond)) {
			t.Fatalf("next owner's floor %s, want the last ID's %s", nb, lastAt)
		}
		if nb := l2.Status().NotBefore; !nb.Before(asked) {
			t.Fatalf("next owner's floor %s is not behind the clock at Acquire, %s: it had to wait", nb, asked)
		}
		g2 := generator(t, l2)
		if id, err := g2.Next(); err != nil || id <= last {
			t.Fatalf("next owner's first ID %d, %v; want above %d", id, err, last)
		}
		if g, err := l2.NewGenerator(); g != nil || !errors.Is(err, ErrLeaseInUse) ||
			!strings.Contains(err.Error(), fmt.Sprintf("worker %d", l2.Worker())) {
			t.Fatalf("second generator on a lease: got %v, %v; want ErrLeaseInUse naming worker %d", g, err, l2.Worker())
		}
	})
}

// TestStartWait: a number whose high-water mark is far ahead of the clock
// (a restart with the clock set back) is given back when waiting for it
// would pass MaxStartWait. Acquire gives it back within RenewEvery; a
// store that a busy machine kept from answering that soon leaves the
// number taken until its TTL runs out, and says so in the log: such a
// run is not judged, and another is made once the number is free.
func TestStartWait(t *testing.T) {
	forKinds(t, func(t *testing.T, b backend) {
		p := b.pool(t, b.addr, oneNumber)
		waiting := oneNumber
		waiting.WaitForFree = true
		pw := b.pool(t, b.addr, waiting)
		for try := 1; ; try++ {
			l := acquire(t, pw)
			if _, err := generator(t, l).Next(); err != nil {
				t.Fatal(err)
			}
			closeLease(t, l)
			o := oneNumber
			o.Clock = offsetClock{idtype.SystemClock(), -time.Hour}
			o.MaxStartWait = 100 * time.Millisecond
			logs := &logRecorder{}
			o.Logger = slog.New(logs)
			behind := b.pool(t, b.addr, o)
			_, err := behind.Acquire(t.Context())
			if !errors.Is(err, idtype.ErrClockBehind) {
				t.Fatalf("got %v, want ErrClockBehind", err)
			}
			if logs.has("could not give the worker number back") {
				if try == 5 {
					t.Fatalf("in %d runs the store never took the number back within RenewEvery", try)
				}
				t.Logf("run %d: the give-back did not finish within RenewEvery: not judged", try)
				continue
			}
			// It gave the number back.
			acquire(t, p)
			return
		}
	})
}

// TestStartWaitGiveBackFails: an Acquire that fails before its lease is
// ready, and cannot give the number back because the store is cut off
// right after the take, says so in a warning, and the number stays taken
// (until its TTL, a minute here, runs out).
func TestStartWaitGiveBackFails(t *testing.T) {
	forKinds(t, func(t *testing.T, b backend) {
		p := b.pool(t, b.addr, oneNumber)
		l := acquire(t, p)
		if _, err := generator(t, l).Next(); err != nil {
			t.Fatal(err)
		}
		closeLease(t, l)
		px := startProxy(t, b.addr)
		o := oneNumber
		o.TTL = time.Minute
		o.Clock = offsetClock{idtype.SystemClock(), -time.Hour}
		o.MaxStartWait = 100 * time.Millisecond
		logs := &logRecorder{}
		o.Logger = slog.New(cutOnLog{logs, "lease acquired", px})
		behind := b.pool(t, px.Addr(), o)
		_, err := behind.Acquire(t.Context())
		if !errors.Is(err, idtype.ErrClockBehind) {
			t.Fatalf("got %v, want ErrClockBehind", err)
		}
		if !logs.has("could not give the worker number back") {
			t.Fatalf("no warning that the number was not given back; logged %q", logs.all())
		}
		if _, err := p.Acquire(t.Context()); !errors.Is(err, ErrNoFreeWorker) {
			t.Fatalf("Acquire after the failed give-back: %v, want ErrNoFreeWorker", err)
		}
	})
}

// cutOnLog is a logRecorder that cuts a proxy off when a message holding
// at is logged, before it returns to the logging code.
type cutOnLog struct {
	*logRecorder
	at string
	px *proxy
}

func (h cutOnLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h cutOnLog) WithGroup(string) slog.Handler      { return h }

func (h cutOnLog) Handle(ctx context.Context, rec slog.Record) error {
	if strings.Contains(rec.Message, h.at) {
		h.px.Cut()
	}
	return h.logRecorder.Handle(ctx, rec)
}

// offsetClock is a clock set off from another by a fixed amount.
type offsetClock struct {
	idtype.Clock
	offset time.Duration
}

func (c offsetClock) UnixNano() int64 { return c.Clock.UnixNano() + int64(c.offset) }

// pausingClock is a clock that stands still between pause and resume,
// and otherwise runs at the rate of the clock it wraps, behind it by the
// time it stood still. It never reads less than it did.
type pausingClock struct {
	idtype.Clock
	// step, when set, keeps the clock, once it has been resumed, from
	// moving on by more than step between two readings: a generator that
	// a busy machine lets issue only now and then still goes through
	// every millisecond, where it would have skipped most of them.
	step time.Duration

	mu       sync.Mutex
	from     int64 // where stepping starts; before it, the clock runs freely
	paused   bool
	resumed  bool
	pausedAt int64 // the wrapped clock's reading when paused
	behind   int64 // the time it stood still before
	last     int64 // the last reading
}

func (c *pausingClock) UnixNano() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.Clock.UnixNano() - c.behind
	switch {
	case c.paused:
		v = c.pausedAt - c.behind
	case c.step > 0 && c.resumed:
		v = min(v, c.limit(c.step))
	}
	c.last = max(c.last, v)
	return c.last
}

// Sleep sleeps for d on the wrapped clock; a clock that steps moves on by
// d as well (no further than the wrapped clock), as a waiting generator
// expects.
func (c *pausingClock) Sleep(d time.Duration) {
	c.Clock.Sleep(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.step > 0 && c.resumed && !c.paused {
		c.last = max(c.last, min(c.limit(d), c.Clock.UnixNano()-c.behind))
	}
}

// limit is how far a stepping clock may go from its last reading in one
// reading, or across a sleep of d: by d, and freely up to where stepping
// starts. c.mu is held.
func (c *pausingClock) limit(d time.Duration) int64 {
	return max(c.last+int64(d), c.from)
}

// stepFrom makes a stepping clock run freely, once resumed, up to t, and
// step only from there on: the readings a busy machine allows are spent
// where they matter.
func (c *pausingClock) stepFrom(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.from = t.UnixNano()
}

// pause stops the clock; it does nothing if the clock stands still.
func (c *pausingClock) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.paused {
		c.paused, c.pausedAt = true, c.Clock.UnixNano()
	}
}

// resume starts the clock again; it does nothing if the clock runs.
func (c *pausingClock) resume() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused {
		c.paused, c.resumed, c.behind = false, true, c.behind+c.Clock.UnixNano()-c.pausedAt
	}
}

// isPaused reports whether the clock stands still.
func (c *pausingClock) isPaused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused
}

// steppedClock stands still but for Sleep, which moves it on by the time
// asked, as if the sleep had passed.
type steppedClock struct{ ns atomic.Int64 }

func (c *steppedClock) UnixNano() int64       { return c.ns.Load() }
func (c *steppedClock) Sleep(d time.Duration) { c.ns.Add(int64(d)) }

// TestLeaseGeneratorOptions: the generator of a lease follows the pool's
// Layout, MaxWait and MaxDrift. On a clock that stands still, a batch of
// three milliseconds' IDs fails at once with MaxWait -1, waits for the
// clock (two sleeps) with the default MaxWait, and runs ahead of the clock
// without waiting with MaxDrift. (PostgreSQL, since Redis waits out a fresh
// number by the pool's clock, which would never get there.)
func TestLeaseGeneratorOptions(t *testing.T) {
	forKinds(t, func(t *testing.T, b backend) {
		perMs := int(idtype.DefaultLayout.MaxSequence()) + 1
		for _, tc := range []struct {
			name      string
			o         Options
			wantErr   error
			wantWaits int64
			wantAhead bool // the last ID is later than the clock
		}{
			{name: "never wait", o: Options{MaxWait: -1}, wantErr: idtype.ErrClockBehind},
			{name: "default wait", o: Options{}, wantWaits: 2},
			{name: "drift", o: Options{MaxDrift: 10 * time.Millisecond}, wantAhead: true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				clock := &steppedClock{}
				clock.ns.Store(time.Now().UnixNano())
				tc.o.Clock = clock
				tc.o.Layout = sixBits
				l := acquire(t, b.pool(t, b.addr, tc.o))
				g := generator(t, l)
				if g.Layout() != sixBits || g.Worker() != l.Worker() {
					t.Fatalf("generator on layout %+v, worker %d; want the pool's %+v and the lease's %d",
						g.Layout(), g.Worker(), sixBits, l.Worker())
				}
				ids := make([]idtype.ID, 3*perMs)
				err := g.NextN(ids)
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
					t.Fatalf("NextN of %d on a standing clock: %v, want %v", len(ids), err, tc.wantErr)
				}
				if w := g.Stats().Waits; w != tc.wantWaits {
					t.Fatalf("NextN waited %d times, want %d", w, tc.wantWaits)
				}
				if err != nil {
					return
				}
				last := sixBits.Decode(ids[len(ids)-1]).Time
				ahead := last.After(time.Unix(0, clock.UnixNano()).Truncate(time.Millisecond))
				if ahead != tc.wantAhead {
					t.Fatalf("last ID at %s, clock at %s: ahead %v, want %v",
						last, time.Unix(0, clock.UnixNano()).UTC(), ahead, tc.wantAhead)
				}
			})
		}
	}, "postgres")
}

// TestLeaseRandomSequenceStart: Options.RandomSequenceStart reaches the
// generators on the pool's leases. The control, without it, starts every
// millisecond at sequence 0.
func TestLeaseRandomSequenceStart(t *testing.T) {
	forKinds(t, func(t *testing.T, b backend) {
		for _, on := range []bool{true, false} {
			clock := &steppedClock{}
			clock.ns.Store(time.Now().UnixNano())
			l := acquire(t, b.pool(t, b.addr, Options{Clock: clock, RandomSequenceStart: on}))
			g := generator(t, l)
			starts := map[int64]bool{}
			for range 200 {
				clock.ns.Add(int64(3 * time.Millisecond))
				id, err := g.Next()
				if err != nil {
					t.Fatal(err)
				}
				starts[idtype.DefaultLayout.Decode(id).Sequence] = true
			}
			// 200 draws from 1,024 values are almost all distinct.
			if on && len(starts) < 150 {
				t.Errorf("RandomSequenceStart: the first IDs of 200 milliseconds have %d distinct sequences", len(starts))
			}
			if !on && (len(starts) != 1 || !starts[0]) {
				t.Errorf("control: without the option the first IDs' sequences are %v, want only 0", starts)
			}
		}
	}, "postgres") // Redis waits out a TTL by this clock, which stands still
}

// slowRenewal is a store whose renewals, once armed, take a while to
// answer: the next one runs on the server at once and its reply comes
// delay later; every renewal after it fails without reaching the server,
// as if the holder had been cut off as that reply arrived.
type slowRenewal struct {
	store
	delay   time.Duration
	armed   atomic.Bool
	delayed atomic.Bool // the delayed renewal has answered
}

func (s *slowRenewal) renew(ctx context.Context, worker int64, token string, ttl, reserve int64) (renewal, error) {
	if s.delayed.Load() {
		return renewal{}, errors.New("test: cut off")
	}
	if !s.armed.Load() {
		return s.store.renew(ctx, worker, token, ttl, reserve)
	}
	r, err := s.store.renew(ctx, worker, token, ttl, reserve)
	time.Sleep(s.delay)
	s.delayed.Store(true)
	return r, err
}

// cutOffScenario runs A's generator on the only number until A is cut off
// from the store (after a renewal whose reply took delay, if delay > 0),
// then lets B take the number once A's lease has lapsed and issue. It
// returns the duplicates once A's generator has stopped (or, if it never
// stops, issued past B's first IDs) and B has issued 200 IDs. A's pool
// has the defences in offA switched off: with none off, duplicates fail
// the test.
func cutOffScenario(t *testing.T, b backend, delay time.Duration, offA defences) int {
	t.Helper()
	testenv.Deadline(t, time.Minute)
	defended := offA == defences{}
	o := oneNumber
	o.TTL, o.Margin, o.RenewEvery = 2*time.Second, 400*time.Millisecond, 500*time.Millisecond
	pa := b.poolWithout(t, b.addr, o, offA)
	trustRecord(t, pa)
	slow := &slowRenewal{store: pa.store, delay: delay}
	pa.store = slow
	ob := o
	ob.WaitForFree = true
	pb := b.pool(t, b.addr, ob)
	c := newCollector()
	a := acquire(t, pa)
	c.run("A", generator(t, a))
	c.waitIssued(t, 10*time.Second, 100, "A")
	slow.armed.Store(true)
	waitFor(t, 30*time.Second, "A's last renewal to answer", slow.delayed.Load)
	lb := acquire(t, pb) // once A's lease has lapsed in the store
	c.run("B", generator(t, lb))
	c.waitIssued(t, 10*time.Second, 200, "B")
	firstB := lb.Status().NotBefore
	waitFor(t, 30*time.Second, "A to stop or to issue past B's start", func() bool {
		return a.Status().State != Held || a.pool.Layout().Decode(c.lastID("A")).Time.After(firstB)
	})
	lists := c.finish()
	dups, total := duplicates(lists)
	t.Logf("A issued %d IDs, B %d; %d duplicates", len(lists["A"]), len(lists["B"]), dups)
	if defended && dups > 0 {
		t.Fatalf("%d duplicate IDs among %d", dups, total)
	}
	return dups
}

// TestLeaseStopsCutOff: a lease cut off from its store stops its
// generator Margin before the store can give the number to another owner.
// The control run, whose generator is not stopped, repeats the next
// owner's IDs.
func TestLeaseStopsCutOff(t *testing.T) {
	for _, defended := range []bool{true, false} {
		name := map[bool]string{true: "defended", false: "control: generator not stopped"}[defended]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forKinds(t, func(t *testing.T, b backend) {
				if defended {
					cutOffScenario(t, b, 0, defences{})
					return
				}
				tryControl(t, func(t *testing.T) bool { return cutOffScenario(t, b, 0, defences{noUntil: true}) > 0 })
			})
		})
	}
}

// TestLeaseTimeFromSend: a renewal whose reply comes late extends the
// generator's time from when it was sent, as the store's lease runs from
// when it ran; the renewal after it never arrives. The control run, which
// counts from the reply, issues past the lease's end into the next
// owner's IDs.
func TestLeaseTimeFromSend(t *testing.T) {
	for _, defended := range []bool{true, false} {
		name := map[bool]string{true: "defended", false: "control: time from the reply"}[defended]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forKinds(t, func(t *testing.T, b backend) {
				if defended {
					cutOffScenario(t, b, time.Second, defences{})
					return
				}
				tryControl(t, func(t *testing.T) bool {
					return cutOffScenario(t, b, time.Second, defences{noSendTime: true}) > 0
				})
			})
		})
	}
}

// TestRenewalsSpread: leases taken together schedule their renewals
// apart. Each lease's first renewal waits a random part of RenewEvery (at
// least half of it) and each later one at least four fifths of it, so the
// waits 32 leases of one pool chose are all different. The control, with
// the jitter switched off, shows what the defence prevents: every lease
// waits exactly RenewEvery, so a fleet started together renews together.
// The verdict reads the waits the leases chose, not when renewals
// arrived, which a busy machine would move.
func TestRenewalsSpread(t *testing.T) {
	const n = 32
	forKinds(t, func(t *testing.T, b backend) {
		testenv.Deadline(t, 2*time.Minute)
		for _, control := range []bool{false, true} {
			t.Run(map[bool]string{false: "defended", true: "control"}[control], func(t *testing.T) {
				// A TTL long enough that a renewal a busy machine held up
				// still succeeds (it is given up after (TTL-Margin)/2):
				// the verdict needs renewals in the rhythm, and a failed
				// one is followed by a retry instead.
				p := b.poolWithout(t, b.addr, Options{Layout: sixBits, TTL: 10 * time.Second, Margin: 2 * time.Second,
					RenewEvery: 250 * time.Millisecond, MaxConns: 4}, defences{noJitter: control})
				every := p.opts.RenewEvery
				leases := acquireN(t, p, n)
				waitFor(t, time.Minute, "every lease to renew twice", func() bool {
					for _, l := range leases {
						if l.Status().Renewals < 2 {
							return false
						}
					}
					return true
				})
				distinct := map[time.Duration]bool{}
				scheduled := 0
				for _, l := range leases {
					l.mu.Lock()
					delays := slices.Clone(l.delays)
					l.mu.Unlock()
					closeLease(t, l)
					for i, w := range delays {
						d := w.d
						lo := every * 4 / 5
						if i == 0 {
							lo = every / 2
						}
						switch {
						case d == 0 && i == 0, w.failures > 0:
							// A renewal at once after a late take, or a
							// retry after a failed renewal: not the rhythm.
							continue
						case d < lo || d > every:
							t.Errorf("worker %d: wait %d before renewing was %v, outside [%v, %v]", l.Worker(), i, d, lo, every)
						}
						scheduled++
						distinct[d] = true
					}
				}
				t.Logf("%d leases scheduled %d renewals with %d different waits", n, scheduled, len(distinct))
				if scheduled < n {
					t.Fatalf("only %d renewals were scheduled in the rhythm, want at least %d", scheduled, n)
				}
				switch {
				case control && len(distinct) != 1:
					t.Errorf("control: jitter off, the renewals waited %d different times, want 1 (RenewEvery)", len(distinct))
				case !control && len(distinct) < scheduled*9/10:
					t.Errorf("%d renewals waited only %d different times: leases taken together renew together", scheduled, len(distinct))
				}
			})
		}
	})
}

// TestRenewalRetriesBackOff: while the store cannot be reached, a lease
// retries its renewal after RenewEvery/4, then after RenewEvery/2, each
// wait less up to half of it at random: a store that falls behind a fleet
// is sent half as many retries once they keep failing, and leases that
// failed together do not retry together; while half the time its generator has left is at least
// RenewEvery/4, no wait is longer than that half. Control (backoff off): every retry after
// RenewEvery/4.
func TestRenewalRetriesBackOff(t *testing.T) {
	const n = 8
	forKinds(t, func(t *testing.T, b backend) {
		testenv.Deadline(t, 2*time.Minute)
		for _, control := range []bool{false, true} {
			t.Run(map[bool]string{false: "defended", true: "control"}[control], func(t *testing.T) {
				proxy := faultproxy.Start(t, b.addr)
				p := b.poolWithout(t, proxy.Addr(), Options{Layout: sixBits}, defences{noBackoff: control})
				every := p.opts.RenewEvery
				leases := acquireN(t, p, n)
				// A renewal may fail before the cut (a starved CPU can hold
				// a reply past its deadline) and then succeed: only the
				// waits recorded after the cut must all follow failures.
				cutAt := make([]int, n)
				for i, l := range leases {
					l.mu.Lock()
					cutAt[i] = len(l.delays)
					l.mu.Unlock()
				}
				proxy.Cut()
				waitFor(t, time.Minute, "every lease to keep the waits of its first retries", func() bool {
					for _, l := range leases {
						l.mu.Lock()
						k := len(l.delays)
						l.mu.Unlock()
						if k < maxDelays {
							return false
						}
					}
					return true
				})
				proxy.Restore()
				distinct := map[time.Duration]bool{}
				retries, cutRetries, jittered, longest := 0, 0, 0, time.Duration(0)
				// Once the store was cut off, each lease, once a renewal
				// failed, recorded only failed ones; the renewal in flight
				// at the cut may still have succeeded. Every retry, before
				// the cut or after, must wait within the bounds.
				for i, l := range leases {
					l.mu.Lock()
					delays := slices.Clone(l.delays)
					l.mu.Unlock()
					failed := false
					for j, w := range delays {
						cut := j >= cutAt[i]
						if w.failures == 0 {
							if failed && cut {
								t.Errorf("worker %d renewed while the store was cut off (waits from %d on): %+v", l.Worker(), cutAt[i], delays)
							}
							continue
						}
						retries++
						if cut {
							failed = true
							cutRetries++
						}
						longest = max(longest, w.d)
						capped := w.left/2 >= every/4
						if !capped || w.d < w.left/2 {
							// Not cut to half the time left, which
							// leases renewed together share.
							jittered++
							distinct[w.d] = true
						}
						ceiling := every / 4
						if w.failures > 1 {
							ceiling = every / 2
						}
						floor := ceiling / 2
						if capped {
							// No later than half the time left.
							ceiling, floor = min(ceiling, w.left/2), min(floor, w.left/2)
						}
						switch {
						case control && w.d != every/4:
							t.Errorf("control: worker %d waited %v after %d failures, want RenewEvery/4 = %v", l.Worker(), w.d, w.failures, every/4)
						case !control && (w.d < floor || w.d > ceiling):
							t.Errorf("worker %d waited %v after %d failures in a row with %v left, outside [%v, %v]",
								l.Worker(), w.d, w.failures, w.left, floor, ceiling)
						}
					}
				}
				t.Logf("%d leases: %d retries, %d different waits of %d not cut to half the time left, the longest %v",
					n, retries, len(distinct), jittered, longest)
				if cutRetries < n {
					t.Fatalf("only %d retries recorded by %d leases after the cut: the store was not cut off", cutRetries, n)
				}
				if !control && jittered < n {
					t.Fatalf("only %d of %d retries were not cut to half the time left: too few to judge the jitter", jittered, retries)
				}
				switch {
				case control && longest != every/4:
					t.Errorf("control: the longest wait was %v, want %v", longest, every/4)
				case !control && longest <= every/4:
					t.Errorf("the longest of %d retries waited %v, want over RenewEvery/4 = %v: the retries did not back off", retries, longest, every/4)
				case !control && len(distinct) < jittered*9/10:
					t.Errorf("%d retries waited only %d different times: leases that failed together retry together", jittered, len(distinct))
				}
			})
		}
	})
}

// TestDefaultLoggerQuiet: without Options.Logger a lease logs nothing at
// info (acquired, released) and passes warnings and errors (a failed
// renewal, an expiry, a loss) to the default logger. It reads the
// resolved logger's levels, so it fails if the default were
// slog.Default() itself, whose handler takes info.
func TestDefaultLoggerQuiet(t *testing.T) {
	o, err := Options{}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if !slog.Default().Enabled(ctx, slog.LevelInfo) {
		t.Fatal("the default logger takes no info lines: the test would show nothing")
	}
	if o.Logger.Enabled(ctx, slog.LevelInfo) {
		t.Error("the default Logger takes info lines")
	}
	if !o.Logger.Enabled(ctx, slog.LevelWarn) || !o.Logger.With("worker", 1).Enabled(ctx, slog.LevelError) {
		t.Error("the default Logger drops warnings or errors")
	}
}

// TestLossLogsExpiry: a lease that first hears it lost its number after
// its time ran out (the renewals between held up) logs that it expired
// before it logs the loss, as a failed renewal would have; one that
// hears it in time logs the loss alone.
func TestLossLogsExpiry(t *testing.T) {
	forKinds(t, func(t *testing.T, b backend) {
		for _, late := range []bool{true, false} {
			clock := &steppedClock{}
			clock.ns.Store(time.Now().UnixNano())
			logs := &logRecorder{}
			// Renewals an hour apart: none runs while the test moves the
			// clock and ends the lease itself.
			l := acquire(t, b.pool(t, b.addr, Options{Clock: clock, Logger: slog.New(logs), TTL: 2 * time.Hour, RenewEvery: time.Hour}))
			if late {
				clock.ns.Add(int64(3 * time.Hour))
			}
			l.lose(fmt.Errorf("%w: worker %d held by another owner", ErrTaken, l.Worker()))
			lines := strings.Join(logs.all(), "\n")
			expired, lost := strings.Index(lines, "lease expired"), strings.Index(lines, "lease lost")
			switch {
			case lost < 0:
				t.Fatalf("late %v: no lease lost line:\n%s", late, lines)
			case late && (expired < 0 || expired > lost):
				t.Errorf("lost after its time ran out: want lease expired before lease lost:\n%s", lines)
			case !late && expired >= 0:
				t.Errorf("lost in time: want no lease expired line:\n%s", lines)
			}
		}
	}, "postgres")
}

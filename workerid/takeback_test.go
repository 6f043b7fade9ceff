package workerid

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// errReplyLost is what a client sees when the server ran its request but
// the reply never came back.
var errReplyLost = errors.New("test: reply lost after the request ran")

// replyLost is a store whose next drop takes run on the real server, as
// sent, and then fail as if their replies were lost on the way back.
type replyLost struct {
	store
	drop    atomic.Int64 // takes whose reply to lose
	dropped atomic.Int64 // takes whose reply was lost
	// stall makes every renewal after a lost reply fail without reaching
	// the server, so that nothing but Close tells the store more.
	stall    bool
	stalling atomic.Bool
	// clock, when set, is resumed by the first renewal that succeeds
	// after a lost reply.
	clock *pausingClock
}

func (s *replyLost) take(ctx context.Context, r takeRequest) (taken, error) {
	ctx, cancel := outlast(ctx)
	defer cancel()
	t, err := s.store.take(ctx, r)
	if err == nil && s.drop.Add(-1) >= 0 {
		s.stalling.Store(s.stall)
		s.dropped.Add(1)
		return taken{}, fmt.Errorf("%w (it took worker %d)", errReplyLost, t.worker)
	}
	return t, err
}

func (s *replyLost) renew(ctx context.Context, worker int64, token string, ttl, reserve int64) (renewal, error) {
	if s.stalling.Load() {
		return renewal{}, errors.New("test: renewal stalled")
	}
	r, err := s.store.renew(ctx, worker, token, ttl, reserve)
	if err == nil && s.clock != nil && s.dropped.Load() > 0 {
		s.clock.resume()
	}
	return r, err
}

// outlast returns a context for a take that the test's store wrapper
// decides the outcome of: ctx's values without its deadline, for 30 s.
// The lease gives a renewal and the take-back it sends half of what a
// lease lasts (650 ms with takeBackOptions), which a starved CPU can make
// a take-back that has run miss: its reply would then be lost to the
// deadline instead of to the wrapper, which would never see its fault
// while the lease learned of the take-back from its next renewal (the
// case the reply-lost test is about, met unseen). So the wrapper, not a
// deadline, decides: 30 s is far past any lease of these tests.
func outlast(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// takeBackOptions are the timings of the take-back scenario
// (takeBackScenario): TTL 2 s, Margin 700 ms, one number.
func takeBackOptions() Options {
	o := oneNumber
	o.TTL, o.Margin, o.RenewEvery = 2*time.Second, 700*time.Millisecond, 400*time.Millisecond
	return o
}

// issueFor issues IDs on g for d, one about every 50µs, waiting out
// refusals, and returns them.
func issueFor(t *testing.T, g *idtype.Generator, d time.Duration) []idtype.ID {
	t.Helper()
	var ids []idtype.ID
	for end := time.Now().Add(d); time.Now().Before(end); {
		id, err := g.Next()
		switch {
		case err == nil:
			ids = append(ids, id)
			time.Sleep(50 * time.Microsecond)
		case isLeaseErr(err):
			time.Sleep(time.Millisecond)
		default:
			t.Fatal(err)
		}
	}
	return ids
}

// takeBackScenario is the take-back scenario up to A's take-back: A, on a
// one-number pool behind a proxy, is cut off until its lease lapses in the
// store; B, whose clock runs 600 ms ahead (inside Margin), takes the
// number, issues for 600 ms and closes. Then the proxy lets A through
// again, and the reply to A's take-back is lost (the take ran). A's pool
// has the defences in offA switched off. It returns B's IDs once A's
// take-back has run, with A's generator issuing into c meanwhile. If
// lost.clock is set by tuneA, A's clock stands still from B's take until
// A's first renewal after the lost reply succeeds.
func takeBackScenario(t *testing.T, b backend, offA defences, tuneA func(p *Pool)) (c *collector, a *Lease, pa *Pool, lost *replyLost, idsB []idtype.ID) {
	t.Helper()
	px := startProxy(t, b.addr)
	pa = b.poolWithout(t, px.Addr(), takeBackOptions(), offA)
	lost = &replyLost{store: pa.store}
	pa.store = lost
	if tuneA != nil {
		tuneA(pa)
	}
	ob := takeBackOptions()
	ob.Clock = offsetClock{idtype.SystemClock(), 600 * time.Millisecond}
	pb := b.pool(t, b.addr, ob)

	a = acquire(t, pa)
	c = newCollector()
	c.run("A", generator(t, a))
	c.waitIssued(t, 30*time.Second, 100, "A")

	px.Cut()
	lb := acquireWhenFree(t, pb, 30*time.Second) // once A's lease has lapsed in the store
	if lb.Worker() != a.Worker() {
		t.Fatalf("B took %d, want A's %d", lb.Worker(), a.Worker())
	}
	if lost.clock != nil {
		lost.clock.pause()
	}
	idsB = issueFor(t, generator(t, lb), 600*time.Millisecond)
	closeLease(t, lb)
	if len(idsB) == 0 {
		notMet(t, "B issued no ID")
	}
	if lost.clock != nil {
		// No ID of A's before B's first can repeat one of B's.
		lost.clock.stepFrom(pb.Layout().Decode(idsB[0]).Time)
	}

	lost.drop.Store(1)
	px.Restore()
	if !waitUntil(30*time.Second, func() bool { return lost.dropped.Load() == 1 }) {
		// A's lease ended instead, or its renewals failed all along,
		// as a starved CPU can make them: the run did not reach its
		// fault.
		notMet(t, "A's take-back did not run in 30 s (A's lease: %+v)", a.Status())
	}
	return c, a, pa, lost, idsB
}

// TestTakeBackReplyLost is the take-back scenario: A's take-back runs but its
// reply is lost, so A learns that it holds the number again only from its
// next renewal. That renewal must raise A's floor to the mark B left, as
// the take-back's reply would have: A's IDs must not repeat B's. The
// control run, whose renewals do not raise the floor, must find
// duplicates.
func TestTakeBackReplyLost(t *testing.T) {
	t.Parallel()
	// run runs the scenario and returns how many duplicates it found, and
	// whether it reached its fault (see notMet).
	run := func(t *testing.T, b backend, defended bool) (dups int, reached bool) {
		logs := &logRecorder{}
		c, a, _, _, idsB := takeBackScenario(t, b, defences{noStartFloor: !defended}, func(p *Pool) {
			p.opts.Logger = slog.New(logs)
			// A's clock stands still from B's take until A learns from a
			// renewal that it holds the number again, as if that took no
			// time: A then reads 600 ms before B's first ID however busy
			// the machine, and from then on moves by at most a millisecond
			// a reading, so that a generator whose floor stayed low goes
			// through every millisecond B used however seldom it issues:
			// on a busy machine B's IDs are few and far apart in its
			// 600 ms, and a clock that ran freely would step over them.
			clock := &pausingClock{Clock: p.opts.Clock, step: time.Millisecond}
			p.opts.Clock = clock
			p.store.(*replyLost).clock = clock
		})
		waitFor(t, 30*time.Second, "A to be renewed", func() bool { return a.Status().State == Held })
		// A issues until its clock has passed B's last ID, a millisecond
		// a reading through B's: a busy machine can make that take many
		// seconds, so the wait fails only once A stops issuing.
		lastB := a.pool.Layout().Decode(idsB[len(idsB)-1]).Time
		c.waitWhileIssuing(t, "A", 30*time.Second, "A to issue past B's last ID", func() bool {
			return a.pool.Layout().Decode(c.lastID("A")).Time.After(lastB)
		})
		lists := c.finish()
		lists["B"] = idsB
		dups, total := duplicates(lists)
		t.Logf("A issued %d IDs, B %d; %d duplicates; A's floor %s", len(lists["A"]), len(idsB), dups,
			a.Status().NotBefore.Format(time.StampMilli))
		if shared := sharedMillis(a.pool.Layout(), lists["A"], idsB); !defended && shared == 0 {
			// A busy machine left A and B issuing too seldom to meet.
			notMet(t, "A issued in none of the milliseconds B used")
		}
		switch {
		case defended && dups > 0:
			t.Fatalf("%d of A's IDs repeat B's (%d IDs in all)", dups, total)
		case defended && !logs.has("the take-back's reply was lost"):
			t.Fatalf("A did not log that it learned of its take-back from a renewal; logs:\n%s", logs)
		}
		return dups, true
	}
	t.Run("defended", func(t *testing.T) {
		t.Parallel()
		forKinds(t, func(t *testing.T, b backend) {
			tryReach(t, func(t *testing.T) bool {
				_, reached := run(t, b, true)
				return reached
			})
		})
	})
	t.Run("control: renewal keeps the floor", func(t *testing.T) {
		t.Parallel()
		forKinds(t, func(t *testing.T, b backend) {
			tryControl(t, func(t *testing.T) bool {
				dups, reached := run(t, b, false)
				return reached && dups > 0
			})
		})
	})
}

// resumeAfterTake is a store whose takes start clock again once they
// return.
type resumeAfterTake struct {
	store
	clock *pausingClock
}

func (s resumeAfterTake) take(ctx context.Context, r takeRequest) (taken, error) {
	defer s.clock.resume()
	return s.store.take(ctx, r)
}

// TestCloseAfterTakeBackReplyLost: A's take-back runs, its reply is lost,
// and A closes before any renewal tells it that it holds the number
// again. Its release must not lower the mark below what B issued, or C,
// the next owner, repeats B's IDs. The control run (Redis only: a
// PostgreSQL release has always kept the mark) lets the release lower
// it and must find duplicates.
func TestCloseAfterTakeBackReplyLost(t *testing.T) {
	t.Parallel()
	// run runs the scenario and returns how many duplicates it found, and
	// whether it reached its fault (see notMet).
	run := func(t *testing.T, b backend, defended bool) (dups int, reached bool) {
		c, a, _, _, idsB := takeBackScenario(t, b, defences{noReleaseClamp: !defended}, func(p *Pool) {
			p.store.(*replyLost).stall = true
		})
		closeLease(t, a)
		lists := c.finish()
		// C's clock reads B's first ID's time as C starts, and stands
		// still until C's take returns, however long a busy machine took
		// to get here since B issued and to run the take (B's lead of
		// 600 ms is all a quiet one needs): C may issue in B's
		// milliseconds unless the mark holds it back past B's last.
		oc := takeBackOptions()
		clock := &pausingClock{Clock: offsetClock{idtype.SystemClock(), time.Until(a.pool.Layout().Decode(idsB[0]).Time)}}
		clock.pause()
		oc.Clock = clock
		pc := b.pool(t, b.addr, oc)
		pc.store = resumeAfterTake{pc.store, clock}
		lc := acquire(t, pc)
		lists["B"] = idsB
		lists["C"] = issueFor(t, generator(t, lc), 1500*time.Millisecond)
		dups, total := duplicates(lists)
		t.Logf("A issued %d IDs, B %d, C %d; %d duplicates; C started after %s (B's last ID at %s)",
			len(lists["A"]), len(idsB), len(lists["C"]), dups, lc.Status().NotBefore.Format(time.StampMilli),
			a.pool.Layout().Decode(idsB[len(idsB)-1]).Time.Format(time.StampMilli))
		switch {
		case len(lists["C"]) == 0:
			notMet(t, "C issued no ID")
		case !defended && sharedMillis(a.pool.Layout(), lists["C"], idsB) == 0:
			// A busy machine took long enough from C's take to its first
			// ID that C's clock had passed B's last ID.
			notMet(t, "C issued in none of the milliseconds B used")
		}
		if defended && dups > 0 {
			t.Fatalf("%d duplicate IDs among %d", dups, total)
		}
		return dups, true
	}
	t.Run("defended", func(t *testing.T) {
		t.Parallel()
		forKinds(t, func(t *testing.T, b backend) {
			tryReach(t, func(t *testing.T) bool {
				_, reached := run(t, b, true)
				return reached
			})
		})
	})
	// A PostgreSQL release has always kept GREATEST(final, start_after) in
	// its statement: no control there.
	t.Run("control: release lowers the mark", func(t *testing.T) {
		t.Parallel()
		forKinds(t, func(t *testing.T, b backend) {
			tryControl(t, func(t *testing.T) bool {
				dups, reached := run(t, b, false)
				return reached && dups > 0
			})
		}, "redis")
	})
}

// TestRedisReleaseKeepsStart: Redis's release never lowers a number's
// mark below the one its ownership started after, whatever final its
// caller sends; the control run's release does.
func TestRedisReleaseKeepsStart(t *testing.T) {
	t.Parallel()
	for _, defended := range []bool{true, false} {
		p := redisPoolWithout(t, testenv.Redis(t), testenv.KeyPrefix(t)+fmt.Sprint(defended), oneNumber,
			defences{noReleaseClamp: !defended})
		s := p.store.(*redisStore)
		rdb := redisClient(t, testenv.Redis(t))
		const start = 1_700_000_000_000
		if err := rdb.ZAdd(t.Context(), s.hw, redis.Z{Score: start, Member: "0"}).Err(); err != nil {
			t.Fatal(err)
		}
		tk, err := s.take(t.Context(), takeRequest{cands: []int64{0}, token: "me/1", ttl: 10_000, reserve: start + 20_000, now: start})
		if err != nil || tk.worker != 0 || tk.prev != start {
			t.Fatalf("take: %+v, %v", tk, err)
		}
		if err := s.release(t.Context(), 0, "me/1", start-5_000); err != nil {
			t.Fatal(err)
		}
		score, err := rdb.ZScore(t.Context(), s.hw, "0").Result()
		if err != nil {
			t.Fatal(err)
		}
		got := int64(score)
		switch {
		case defended && got != start:
			t.Fatalf("release to %d left the mark at %d; want the start %d", int64(start-5_000), got, int64(start))
		case !defended && got != start-5_000:
			t.Fatalf("control run: release left the mark at %d; want it lowered to %d", got, int64(start-5_000))
		}
	}
}

// resent is a store whose takes, once on, run twice on the real server,
// the second time with the same request, as a client that retries after
// losing the first reply sends them; the caller gets the second reply.
type resent struct {
	store
	on      atomic.Bool
	resends atomic.Int64 // takes sent twice
}

func (s *resent) take(ctx context.Context, r takeRequest) (taken, error) {
	if !s.on.Load() {
		return s.store.take(ctx, r)
	}
	ctx, cancel := outlast(ctx)
	defer cancel()
	if _, err := s.store.take(ctx, r); err != nil {
		return taken{}, err
	}
	s.resends.Add(1)
	return s.store.take(ctx, r)
}

// TestTakeBackResent: a take-back whose first attempt ran and whose reply
// was lost is sent again. The second attempt finds the number held by the
// lease's own token: that is still the lease's, not a takeover, and it
// keeps the mark its ownership started after. The control run, whose
// takes do not know their own token, must end the lease as taken over.
func TestTakeBackResent(t *testing.T) {
	t.Parallel()
	for _, defended := range []bool{true, false} {
		name := map[bool]string{true: "defended", false: "control: own token unknown"}[defended]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forKinds(t, func(t *testing.T, b backend) {
				px := startProxy(t, b.addr)
				pa := b.poolWithout(t, px.Addr(), takeBackOptions(), defences{noOwnToken: !defended})
				rs := &resent{store: pa.store}
				pa.store = rs
				ob := takeBackOptions()
				ob.Clock = offsetClock{idtype.SystemClock(), 600 * time.Millisecond}
				pb := b.pool(t, b.addr, ob)

				a := acquire(t, pa)
				ga := generator(t, a)
				px.Cut()
				lb := acquireWhenFree(t, pb, 30*time.Second)
				idsB := issueFor(t, generator(t, lb), 300*time.Millisecond)
				closeLease(t, lb)
				rs.on.Store(true)
				px.Restore()
				checkResent(t, a, ga, defended, idsB, func() bool { return rs.resends.Load() > 0 })
			})
		})
	}
}

// checkResent waits for the outcome of a resent take-back: the defended
// lease is held again and its generator issues after B's last ID; the
// control lease is lost.
func checkResent(t *testing.T, a *Lease, ga *idtype.Generator, defended bool, idsB []idtype.ID, resent func() bool) {
	t.Helper()
	waitFor(t, 30*time.Second, "the take-back to be sent twice", resent)
	if !defended {
		// The resent take-back has run: the lease ends in the renewal
		// that sent it, however slow the machine.
		select {
		case <-a.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("control run: the lease survived its resent take-back: the test does not reach the fault")
		}
		if err := a.Err(); !errors.Is(err, ErrTaken) {
			t.Fatalf("control run: lease ended with %v, want ErrTaken", err)
		}
		return
	}
	var id idtype.ID
	waitFor(t, 30*time.Second, "A to issue again", func() bool {
		var err error
		id, err = ga.Next()
		return err == nil
	})
	if err := a.Err(); err != nil {
		t.Fatalf("lease ended: %v", err)
	}
	if s := a.Status(); s.State != Held {
		t.Fatalf("state %v, want held", s.State)
	}
	// The floor is the mark the take-back found, B's last ID (none here
	// without B), not the reservation the first attempt wrote, which
	// would stall A for two TTLs.
	nb := a.Status().NotBefore
	if len(idsB) > 0 {
		lastB := a.pool.Layout().Decode(idsB[len(idsB)-1]).Time
		if id <= idsB[len(idsB)-1] || !nb.Equal(lastB) {
			t.Fatalf("A's first ID after the take-back is %d, after %s; want after B's last %d, at %s",
				id, nb, idsB[len(idsB)-1], lastB)
		}
	}
	if ahead := time.Until(nb); ahead > 0 {
		t.Fatalf("A's floor %s is %v ahead of the clock: the take-back's own reservation", nb, ahead)
	}
}

// TestTakeBackRetriedByGoRedis is TestTakeBackResent with the resend done
// by go-redis itself: a client with its default retries loses the reply
// to the take-back (the proxy drops it and closes the connection) and
// sends the script again on a new connection.
func TestTakeBackRetriedByGoRedis(t *testing.T) {
	t.Parallel()
	for _, defended := range []bool{true, false} {
		name := map[bool]string{true: "defended", false: "control: own token unknown"}[defended]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			addr := testenv.Redis(t)
			prefix := testenv.KeyPrefix(t)
			px := startProxy(t, addr)
			client := redis.NewClient(&redis.Options{Addr: px.Addr()}) // default retries
			t.Cleanup(func() { _ = client.Close() })
			pa, err := redisWithout(client, testOptions(t, withPrefix(takeBackOptions(), prefix)), defences{noOwnToken: !defended})
			if err != nil {
				t.Fatal(err)
			}
			a := acquire(t, pa)
			ga := generator(t, a)
			direct := redisClient(t, addr)
			take := []byte(redis.NewScript(takeScript).Hash())
			// go-redis resends the take-back only if the renewal's time
			// has not run out by then, which a busy machine can make it
			// do; the lease's next renewal then finds the number held by
			// its own token, and the run starts over.
			const tries = 5
			for try := 1; ; try++ {
				px.Cut()
				waitFor(t, 30*time.Second, "A's lease to lapse", func() bool {
					live, err := redisLeases(t.Context(), direct, pa.store.(*redisStore).leases)
					_, held := live[a.Worker()]
					return err == nil && !held
				})
				renewals := a.Status().Renewals
				px.DropReplies(take, 1)
				px.Restore()
				waitFor(t, 30*time.Second, "the take-back to be resent, or the lease to renew without a resend", func() bool {
					return px.Seen() >= 2 || a.Status().Renewals > renewals
				})
				if px.Seen() >= 2 {
					break
				}
				if try == tries {
					t.Fatalf("in %d tries go-redis never resent the take-back before the renewal's time ran out: the test does not reach its fault", tries)
				}
				t.Logf("try %d: go-redis did not resend the take-back in time; again", try)
			}
			checkResent(t, a, ga, defended, nil, func() bool { return px.Dropping() == 0 })
		})
	}
}

func withPrefix(o Options, prefix string) Options {
	o.KeyPrefix = prefix
	return o
}

package idtype

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"testing"
	"time"
)

var testStart = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func newTestGenerator(t testing.TB, cfg GeneratorOptions) (*Generator, *fakeClock) {
	t.Helper()
	clock := newFakeClock(testStart)
	if cfg.Clock == nil {
		cfg.Clock = clock
	}
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g, clock
}

// watchdog ends the test binary, with every goroutine's stack, if t has
// not finished within d: the bound on a test that waits for goroutines.
// (internal/testing/testenv's Deadline does this elsewhere; idtype's tests use the
// standard library alone, so that a module importing only idtype needs no
// other module.)
func watchdog(t *testing.T, d time.Duration) {
	name := t.Name()
	timer := time.AfterFunc(d, func() {
		debug.SetTraceback("all")
		panic(fmt.Sprintf("%s did not finish within %v", name, d))
	})
	t.Cleanup(func() { timer.Stop() })
}

// issuer checks, as IDs come out of a generator, that each is greater than
// the one before.
type issuer struct {
	t    testing.TB
	g    *Generator
	last ID
}

func (is *issuer) next() (ID, error) {
	is.t.Helper()
	id, err := is.g.Next()
	if err == nil {
		is.check(id)
	}
	return id, err
}

func (is *issuer) mustNext() ID {
	is.t.Helper()
	id, err := is.next()
	if err != nil {
		is.t.Fatalf("Next after %d: %v", is.last, err)
	}
	return id
}

func (is *issuer) check(id ID) {
	is.t.Helper()
	if id <= is.last {
		is.t.Fatalf("ID %d is not greater than the ID before it, %d", id, is.last)
	}
	is.last = id
}

func TestNewGeneratorRefuses(t *testing.T) {
	cases := map[string]struct {
		cfg  GeneratorOptions
		want error
	}{
		"worker -1":             {GeneratorOptions{Worker: -1}, ErrInvalidOptions},
		"worker 1024":           {GeneratorOptions{Worker: 1024}, ErrInvalidOptions},
		"negative drift":        {GeneratorOptions{MaxDrift: -time.Second}, ErrInvalidOptions},
		"drift over the cap":    {GeneratorOptions{MaxDrift: MaxDriftCap + time.Millisecond}, ErrInvalidOptions},
		"drift of a day":        {GeneratorOptions{MaxDrift: 24 * time.Hour}, ErrInvalidOptions},
		"bad layout":            {GeneratorOptions{Layout: Layout{WorkerBits: 10}}, ErrInvalidLayout},
		"NotBefore past layout": {GeneratorOptions{NotBefore: DefaultLayout.MaxTime().Add(time.Hour)}, ErrInvalidOptions},
		"layout already spent": {GeneratorOptions{Layout: Layout{Epoch: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
			WorkerBits: 21, SequenceBits: 21}}, ErrInvalidOptions},
	}
	for name, tc := range cases {
		if _, err := NewGenerator(tc.cfg); !errors.Is(err, tc.want) {
			t.Errorf("%s: NewGenerator error %v; want %v", name, err, tc.want)
		}
	}
}

func TestNextDecodes(t *testing.T) {
	for name, l := range testLayouts {
		worker := l.MaxWorker()
		g, clock := newTestGenerator(t, GeneratorOptions{Worker: worker, Layout: l})
		is := &issuer{t: t, g: g}
		perMs := l.MaxSequence() + 1
		for i := range int64(3) {
			id := is.mustNext()
			p := l.Decode(id)
			wantTime := testStart.Add(time.Duration(i/perMs) * time.Millisecond)
			if p.Worker != worker || !p.Time.Equal(wantTime) || p.Sequence != i%perMs {
				t.Errorf("%s: ID %d decodes to %+v; want worker %d, time %v, sequence %d", name, id, p, worker, wantTime, i%perMs)
			}
		}
		clock.Add(5 * time.Millisecond)
		now := time.Unix(0, clock.UnixNano()).UTC()
		if p := l.Decode(is.mustNext()); !p.Time.Equal(now) || p.Sequence != 0 {
			t.Errorf("%s: after the clock moved on, the ID decodes to %+v; want sequence 0 of %v", name, p, now)
		}
	}
}

// TestNeverIDZero: worker 0 in the epoch's first millisecond would issue
// ID 0, which means "not assigned"; the generator starts it at sequence 1,
// on every layout, with Next and NextN, and after a floor or a clock before
// the epoch alike.
func TestNeverIDZero(t *testing.T) {
	for name, l := range testLayouts {
		for _, c := range []struct {
			what  string
			start time.Duration // clock, from the epoch
			cfg   GeneratorOptions
		}{
			{"clock at the epoch", 0, GeneratorOptions{}},
			{"clock 3ms before the epoch", -3 * time.Millisecond, GeneratorOptions{}},
			{"NotBefore before the epoch", 0, GeneratorOptions{NotBefore: l.Epoch.Add(-time.Hour)}},
		} {
			for _, batch := range []int{0, 5} {
				cfg := c.cfg
				cfg.Layout = l
				clock := newFakeClock(l.Epoch.Add(c.start))
				cfg.Clock = clock
				g, err := NewGenerator(cfg)
				if err != nil {
					t.Fatalf("%s, %s: %v", name, c.what, err)
				}
				var first ID
				if batch == 0 {
					first, err = g.Next()
				} else {
					ids := make([]ID, batch)
					err = g.NextN(ids)
					first = ids[0]
				}
				if err != nil {
					t.Fatalf("%s, %s, batch %d: %v", name, c.what, batch, err)
				}
				if first == 0 {
					t.Errorf("%s, %s, batch %d: the first ID is 0, which means \"not assigned\"", name, c.what, batch)
				}
				// Without sequence bits, ID 0 is the epoch's first millisecond's
				// only ID: the first goes to the next.
				want := l.Epoch
				if l.MaxSequence() == 0 {
					want = want.Add(time.Millisecond)
				}
				if p := l.Decode(first); !p.Time.Equal(want) || p.Worker != 0 {
					t.Errorf("%s, %s, batch %d: first ID %d decodes to %+v; want worker 0 at %s", name, c.what, batch, first, p, want)
				}
				if st := g.Stats(); st.IDs != int64(max(batch, 1)) {
					t.Errorf("%s, %s, batch %d: Stats().IDs = %d", name, c.what, batch, st.IDs)
				}
			}
		}
	}
}

// TestBurstNeverPastCap: a batch far larger than the drift allowance, at
// the largest MaxDrift a generator accepts, issues IDs no further ahead of
// the clock than MaxDriftCap; it waits for the clock instead.
func TestBurstNeverPastCap(t *testing.T) {
	// 4 IDs a millisecond: three caps' worth of IDs is 120,000.
	l := Layout{Epoch: DefaultLayout.Epoch, WorkerBits: 10, SequenceBits: 2}
	perCap := int(MaxDriftCap/time.Millisecond) * 4
	g, clock := newTestGenerator(t, GeneratorOptions{Layout: l, MaxDrift: MaxDriftCap, MaxWait: time.Minute})
	ids := make([]ID, 3*perCap)
	if err := g.NextN(ids); err != nil {
		t.Fatal(err)
	}
	st := g.Stats()
	if st.MaxDrift > MaxDriftCap || st.MaxDrift < MaxDriftCap-time.Millisecond {
		t.Errorf("Stats().MaxDrift = %v; want just under the cap %v", st.MaxDrift, MaxDriftCap)
	}
	now := time.Unix(0, clock.UnixNano())
	if last := l.Decode(ids[len(ids)-1]).Time; last.After(now.Add(MaxDriftCap)) {
		t.Errorf("last ID at %s, %v after the clock's %s: past the cap %v", last, last.Sub(now), now, MaxDriftCap)
	}
	if sum(clock.Sleeps()) < 2*MaxDriftCap-time.Second {
		t.Errorf("slept %v in all; a batch of three caps' worth must wait about two", sum(clock.Sleeps()))
	}
}

func TestSequenceExhaustionWaitsForNextMillisecond(t *testing.T) {
	g, clock := newTestGenerator(t, GeneratorOptions{})
	is := &issuer{t: t, g: g}
	clock.Add(300 * time.Microsecond) // mid-millisecond
	for range 4096 {
		is.mustNext()
	}
	if s := clock.Sleeps(); len(s) != 0 {
		t.Fatalf("slept %v before the sequence was spent", s)
	}
	p := DefaultLayout.Decode(is.mustNext())
	if want := testStart.Add(time.Millisecond); !p.Time.Equal(want) || p.Sequence != 0 {
		t.Errorf("ID after 4,096 in one ms decodes to %+v; want sequence 0 of %v", p, want)
	}
	if s := clock.Sleeps(); len(s) != 1 || s[0] != 700*time.Microsecond {
		t.Errorf("slept %v; want exactly once, 700µs, to the start of the next ms", s)
	}
	if st := g.Stats(); st.Waits != 1 || st.IDs != 4097 || st.MaxDrift != 0 {
		t.Errorf("Stats() = %+v; want 1 wait, 4097 IDs, no drift", st)
	}
}

func TestFrozenClock(t *testing.T) {
	for _, drift := range []time.Duration{0, 5 * time.Millisecond} {
		g, clock := newTestGenerator(t, GeneratorOptions{MaxDrift: drift, MaxWait: 20 * time.Millisecond})
		clock.frozen = true
		is := &issuer{t: t, g: g}
		allowed := 4096 * (1 + int(drift/time.Millisecond))
		for range allowed {
			is.mustNext()
		}
		if _, err := is.next(); !errors.Is(err, ErrClockBehind) {
			t.Fatalf("drift %v: ID %d on a frozen clock gave %v; want ErrClockBehind", drift, allowed+1, err)
		}
		if total := sum(clock.Sleeps()); total > 20*time.Millisecond {
			t.Errorf("drift %v: Next slept %v in all, past MaxWait", drift, total)
		}
		before := sum(clock.Sleeps())
		if err := g.NextN(make([]ID, 1)); !errors.Is(err, ErrClockBehind) {
			t.Fatalf("drift %v: NextN on a frozen clock gave %v; want ErrClockBehind", drift, err)
		}
		if total := sum(clock.Sleeps()) - before; total > 20*time.Millisecond {
			t.Errorf("drift %v: NextN slept %v in all, past MaxWait", drift, total)
		}
		if st := g.Stats(); st.MaxDrift != drift || st.IDs != int64(allowed) {
			t.Errorf("drift %v: Stats() = %+v", drift, st)
		}
		// When the clock moves again, so does the generator.
		clock.frozen = false
		clock.Add(time.Second)
		is.mustNext()
	}
}

func TestClockStepsBack(t *testing.T) {
	for _, step := range []time.Duration{time.Millisecond, 10 * time.Millisecond, time.Second, time.Minute, time.Hour} {
		g, clock := newTestGenerator(t, GeneratorOptions{MaxWait: 100 * time.Millisecond})
		is := &issuer{t: t, g: g}
		clock.Add(7 * time.Millisecond)
		before := is.mustNext()
		clock.Add(-step)
		id, err := is.next()
		switch {
		case step <= 100*time.Millisecond:
			// A step back within MaxWait is waited out: the next ID is in
			// the same millisecond as the one before, never earlier.
			if err != nil {
				t.Fatalf("step back %v: %v", step, err)
			}
			if DefaultLayout.Decode(id).Time.Before(DefaultLayout.Decode(before).Time) {
				t.Errorf("step back %v: ID %d decodes earlier than %d", step, id, before)
			}
		default:
			var e error = err
			if !errors.Is(e, ErrClockBehind) {
				t.Fatalf("step back %v: got %d, %v; want ErrClockBehind", step, id, err)
			}
			if s := clock.Sleeps(); len(s) != 0 {
				t.Errorf("step back %v: slept %v before failing; want a fast failure", step, s)
			}
		}
		st := g.Stats()
		if st.BackwardSteps != 1 || st.MaxBackward != step {
			t.Errorf("step back %v: Stats() = %+v; want 1 backward step of %v", step, st, step)
		}
		// Once the clock is back where it was, IDs carry on above the old.
		clock.Add(step + time.Millisecond)
		is.mustNext()
	}
}

func TestClockStepsBackInBurstMode(t *testing.T) {
	g, clock := newTestGenerator(t, GeneratorOptions{MaxDrift: time.Second})
	is := &issuer{t: t, g: g}
	clock.Add(time.Second)
	is.mustNext()
	clock.Add(-500 * time.Millisecond)
	is.mustNext() // within the drift allowance: no wait
	if s := clock.Sleeps(); len(s) != 0 {
		t.Errorf("slept %v; want none within MaxDrift", s)
	}
	if st := g.Stats(); st.MaxDrift != 500*time.Millisecond {
		t.Errorf("Stats().MaxDrift = %v; want 500ms", st.MaxDrift)
	}
}

func TestClockJumpsForward(t *testing.T) {
	g, clock := newTestGenerator(t, GeneratorOptions{})
	is := &issuer{t: t, g: g}
	is.mustNext()
	clock.Add(90 * 24 * time.Hour)
	id := is.mustNext()
	if got := DefaultLayout.Decode(id).Time; !got.Equal(testStart.Add(90 * 24 * time.Hour)) {
		t.Errorf("after a forward jump the ID decodes to %v", got)
	}
}

func TestNotBefore(t *testing.T) {
	// The clock reads 5 ms before the floor: the first ID must come after
	// the floor's millisecond, after waiting for it.
	floor := testStart.Add(5 * time.Millisecond)
	g, clock := newTestGenerator(t, GeneratorOptions{NotBefore: floor.Add(400 * time.Microsecond)})
	id, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	if got := DefaultLayout.Decode(id).Time; !got.After(floor) {
		t.Errorf("first ID decodes to %v; want after NotBefore's ms %v", got, floor)
	}
	if s := clock.Sleeps(); len(s) != 1 || s[0] != 6*time.Millisecond {
		t.Errorf("slept %v; want one 6ms wait", s)
	}
	// A floor in the clock's past changes nothing.
	g, _ = newTestGenerator(t, GeneratorOptions{NotBefore: testStart.Add(-time.Hour)})
	if id, _ := g.Next(); !DefaultLayout.Decode(id).Time.Equal(testStart) {
		t.Errorf("with a past NotBefore the first ID decodes to %v; want the clock's %v", DefaultLayout.Decode(id).Time, testStart)
	}
	// A floor further ahead than MaxWait fails at once, and in burst mode
	// it is issued ahead of the clock.
	g, clock = newTestGenerator(t, GeneratorOptions{NotBefore: testStart.Add(5 * time.Second)})
	if _, err := g.Next(); !errors.Is(err, ErrClockBehind) || len(clock.Sleeps()) != 0 {
		t.Errorf("NotBefore 5s ahead: %v after sleeping %v; want ErrClockBehind at once", err, clock.Sleeps())
	}
	g, _ = newTestGenerator(t, GeneratorOptions{NotBefore: testStart.Add(5 * time.Second), MaxDrift: 6 * time.Second})
	if id, err := g.Next(); err != nil || !DefaultLayout.Decode(id).Time.After(testStart.Add(5*time.Second)) {
		t.Errorf("NotBefore 5s ahead in burst mode: %d, %v", id, err)
	}
}

func TestMaxWait(t *testing.T) {
	g, clock := newTestGenerator(t, GeneratorOptions{MaxWait: -1})
	is := &issuer{t: t, g: g}
	for range 4096 {
		is.mustNext()
	}
	if _, err := is.next(); !errors.Is(err, ErrClockBehind) || len(clock.Sleeps()) != 0 {
		t.Errorf("MaxWait < 0: %v after sleeping %v; want ErrClockBehind without a wait", err, clock.Sleeps())
	}
	clock.Add(time.Millisecond)
	is.mustNext()
}

// stretchedClock is a fakeClock on a busy machine: each sleep lasts
// factor times what was asked for.
type stretchedClock struct {
	*fakeClock
	factor int64
}

func (c stretchedClock) Sleep(d time.Duration) { c.fakeClock.Sleep(time.Duration(c.factor) * d) }

// TestMaxWaitCountsAsked: MaxWait counts the sleeps a call asks for, and a
// sleep that lasts longer counts as asked. A NextN of 1,500 IDs with one a
// millisecond, on a clock whose sleeps last three times what was asked,
// asks for 1 ms a sleep and takes one ID after each (in the clock's
// millisecond): it fails with ErrClockBehind once its asked-for sleeps
// pass MaxWait (1 s), after about 1,000 of them, 3 s on the clock.
func TestMaxWaitCountsAsked(t *testing.T) {
	clock := stretchedClock{newFakeClock(testStart), 3}
	l := Layout{Epoch: DefaultLayout.Epoch, WorkerBits: 10, SequenceBits: 0}
	g, _ := newTestGenerator(t, GeneratorOptions{Layout: l, Clock: clock, MaxWait: time.Second})
	err := g.NextN(make([]ID, 1500))
	if !errors.Is(err, ErrClockBehind) {
		t.Fatalf("NextN of 1,500 IDs: %v; want ErrClockBehind", err)
	}
	asked := sum(clock.Sleeps()) / 3
	if asked > time.Second || asked < time.Second-time.Millisecond {
		t.Errorf("NextN asked for %v of sleeps in all; want within 1 ms below MaxWait (1s)", asked)
	}
}

func TestTimeExhausted(t *testing.T) {
	l := Layout{Epoch: testStart.Add(-time.Duration(1<<20-3) * time.Millisecond), WorkerBits: 21, SequenceBits: 22}
	g, clock := newTestGenerator(t, GeneratorOptions{Layout: l})
	is := &issuer{t: t, g: g}
	is.mustNext()
	clock.Add(2 * time.Millisecond) // the last millisecond
	is.mustNext()
	clock.Add(time.Millisecond)
	if _, err := is.next(); !errors.Is(err, ErrTimeExhausted) {
		t.Errorf("past MaxTime: %v; want ErrTimeExhausted", err)
	}
	if err := g.NextN(make([]ID, 3)); !errors.Is(err, ErrTimeExhausted) {
		t.Errorf("NextN past MaxTime: %v; want ErrTimeExhausted", err)
	}
}

func TestNextN(t *testing.T) {
	g, clock := newTestGenerator(t, GeneratorOptions{Worker: 9})
	is := &issuer{t: t, g: g}
	is.mustNext()
	batch := make([]ID, 1000)
	if err := g.NextN(batch); err != nil {
		t.Fatal(err)
	}
	for _, id := range batch {
		is.check(id)
	}
	if len(clock.Sleeps()) != 0 {
		t.Errorf("a batch that fits slept %v", clock.Sleeps())
	}
	// 10,000 IDs need three milliseconds of a 4,096 sequence: two waits.
	big := make([]ID, 10_000)
	if err := g.NextN(big); err != nil {
		t.Fatal(err)
	}
	for i, id := range big {
		is.check(id)
		if p := DefaultLayout.Decode(id); p.Worker != 9 {
			t.Fatalf("big[%d] decodes to %+v", i, p)
		}
	}
	if got := DefaultLayout.Decode(big[len(big)-1]).Time; !got.Equal(testStart.Add(2 * time.Millisecond)) {
		t.Errorf("last of 11,001 IDs decodes to %v; want the third ms", got)
	}
	if st := g.Stats(); st.IDs != 11_001 || st.Waits != 2 {
		t.Errorf("Stats() = %+v; want 11,001 IDs, 2 waits", st)
	}
	if err := g.NextN(nil); err != nil {
		t.Errorf("NextN(nil) = %v", err)
	}
	// Burst mode hands out a batch spanning milliseconds ahead of the clock
	// in one step.
	g, clock = newTestGenerator(t, GeneratorOptions{MaxDrift: 10 * time.Millisecond})
	if err := g.NextN(make([]ID, 40_000)); err != nil || len(clock.Sleeps()) != 0 {
		t.Errorf("burst NextN(40,000): %v, slept %v", err, clock.Sleeps())
	}
	if st := g.Stats(); st.MaxDrift != 9*time.Millisecond || st.IDs != 40_000 {
		t.Errorf("burst Stats() = %+v", st)
	}
}

func TestConcurrentUnique(t *testing.T) {
	watchdog(t, 2*time.Minute)
	perGoroutine := 1_000_000
	if raceEnabled || testing.Short() {
		perGoroutine = 25_000
	}
	const goroutines = 8
	g, err := NewGenerator(GeneratorOptions{Worker: 1})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([][]ID, goroutines)
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Go(func() {
			out := make([]ID, 0, perGoroutine)
			batch := make([]ID, 100)
			for len(out) < perGoroutine {
				if w%2 == 0 || perGoroutine-len(out) < len(batch) {
					id, err := g.Next()
					if err != nil {
						t.Error(err)
						return
					}
					out = append(out, id)
					continue
				}
				if err := g.NextN(batch); err != nil {
					t.Error(err)
					return
				}
				out = append(out, batch...)
			}
			ids[w] = out
		})
	}
	wg.Wait()
	checkUniqueAndIncreasing(t, ids)
	if st := g.Stats(); st.IDs != int64(goroutines*perGoroutine) {
		t.Errorf("Stats().IDs = %d; want %d", st.IDs, goroutines*perGoroutine)
	}
}

// TestConcurrentChaoticClock runs goroutines against a clock that throws
// itself forward and back by up to an hour (chaosClock).
//
// The generators never go back, so they make progress only while the
// clock is at the highest it has been (or within MaxWait of it). A
// symmetric random walk returns to its maximum after a heavy-tailed time,
// so this test, which once let the clock walk, could run for ever. Here
// the clock's high only rises by construction: a jump forward is kept,
// and a step back lasts for one to four readings. The steps come from the
// readings themselves, one in 16 on average, so the generators meet the
// chaos at the same pace however the goroutines are scheduled. The test
// still bounds its own time and says so when it runs out.
func TestConcurrentChaoticClock(t *testing.T) {
	watchdog(t, 2*time.Minute)
	perGoroutine := 200_000
	if raceEnabled || testing.Short() {
		perGoroutine = 10_000
	}
	const (
		goroutines = 8
		timeLimit  = 2 * time.Minute
		// The goroutines issue until the clock has been stepped this often
		// (and they have their IDs), so that they meet the chaos even when
		// they would otherwise be done before it started.
		minRounds = 500
	)
	deadline := time.Now().Add(timeLimit)
	clock := &chaosClock{ns: testStart.UnixNano(), r: rand.New(rand.NewPCG(1, 2))}
	g, err := NewGenerator(GeneratorOptions{Clock: clock, MaxWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([][]ID, goroutines)
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Go(func() {
			out := make([]ID, 0, perGoroutine)
			batch := make([]ID, 1+w*50)
			// ... and until the generator has seen a step back.
			for len(out) < perGoroutine || clock.rounds() < minRounds || g.backwardSteps.Load() == 0 {
				if time.Now().After(deadline) {
					t.Errorf("goroutine %d issued %d of %d IDs in %v, with the clock stepped %d times: the generator stalled",
						w, len(out), perGoroutine, timeLimit, clock.rounds())
					return
				}
				if w%2 == 0 {
					id, err := g.Next()
					if err == nil {
						out = append(out, id)
					} else if !errors.Is(err, ErrClockBehind) {
						t.Error(err)
						return
					}
					continue
				}
				n := len(batch)
				if err := g.NextN(batch[:n]); err == nil {
					out = append(out, batch[:n]...)
				} else if !errors.Is(err, ErrClockBehind) {
					t.Error(err)
					return
				}
			}
			ids[w] = out
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	checkUniqueAndIncreasing(t, ids)
	st := g.Stats()
	t.Logf("%d steps back, %d jumps forward; %+v", clock.backSteps, clock.forwardJumps, st)
	if st.BackwardSteps == 0 {
		t.Errorf("Stats() = %+v; the clock stepped back %d times but the generator saw none", st, clock.backSteps)
	}
}

// chaosClock is a Clock that steps itself at random, on one reading in 16
// on average: forward by 1 ms to an hour, kept, or back by as much for the
// next one to four readings. Sleep moves it forward by the time slept.
type chaosClock struct {
	mu                      sync.Mutex
	r                       *rand.Rand
	ns                      int64
	jumped                  time.Duration
	back                    int64 // how far the next backReads readings lie behind ns
	backReads               int
	backSteps, forwardJumps int
}

// chaosSteps are the sizes of a chaosClock's steps. chaosMaxJumped keeps
// the forward jumps from running the clock past the layout's end (2080)
// however long a test runs.
var chaosSteps = []time.Duration{time.Millisecond, 7 * time.Millisecond, time.Second, time.Minute, time.Hour}

const chaosMaxJumped = 20 * 365 * 24 * time.Hour

func (c *chaosClock) UnixNano() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.backReads == 0 && c.r.IntN(16) == 0 {
		d := chaosSteps[c.r.IntN(len(chaosSteps))]
		if c.r.IntN(2) == 0 {
			if c.jumped+d > chaosMaxJumped {
				d = time.Millisecond
			}
			c.jumped += d
			c.ns += int64(d)
			c.forwardJumps++
		} else {
			c.back, c.backReads = int64(d), 1+c.r.IntN(4)
			c.backSteps++
		}
	}
	if c.backReads > 0 {
		c.backReads--
		return c.ns - c.back
	}
	return c.ns
}

func (c *chaosClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ns += int64(d)
}

// rounds is how many times the clock has stepped.
func (c *chaosClock) rounds() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.backSteps + c.forwardJumps
}

// checkUniqueAndIncreasing checks that each goroutine's IDs increase and
// that no ID appears twice across all of them.
func checkUniqueAndIncreasing(t *testing.T, ids [][]ID) {
	t.Helper()
	var all []ID
	for w, out := range ids {
		for i := 1; i < len(out); i++ {
			if out[i] <= out[i-1] {
				t.Fatalf("goroutine %d: ID %d at %d is not greater than %d before it", w, out[i], i, out[i-1])
			}
		}
		all = append(all, out...)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("ID %d issued twice", all[i])
		}
	}
	if len(all) == 0 {
		t.Fatal("no IDs issued")
	}
}

func sum(ds []time.Duration) time.Duration {
	var total time.Duration
	for _, d := range ds {
		total += d
	}
	return total
}

// TestCrossingJudgedByClock: a call that saw room in the clock's
// millisecond and then reserved with an add can find that others took
// the rest of it in between, so that its add carried the state into the
// next millisecond. The generator judges the reservation after the add:
// strict, it holds it and waits for the clock to reach its millisecond
// before it issues it. The control, which does not wait, issues the ID a
// millisecond ahead of the clock.
func TestCrossingJudgedByClock(t *testing.T) {
	for _, control := range []bool{false, true} {
		clock := newStepClock(testStart)
		g, err := NewGenerator(GeneratorOptions{Worker: 3, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		g.setDefences(defences{noClockJudge: control})
		perMs := int(DefaultLayout.MaxSequence()) + 1
		if err := g.NextN(make([]ID, perMs-1)); err != nil {
			t.Fatal(err)
		}
		// The call about to add has seen one ID left; another call takes
		// it before the add.
		var took ID
		g.setHooks(&hooks{beforeReserve: func() {
			g.setHooks(nil)
			if took, err = g.Next(); err != nil {
				t.Error(err)
			}
		}})
		id, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		if p := DefaultLayout.Decode(took); !p.Time.Equal(testStart) || p.Sequence != int64(perMs-1) {
			t.Fatalf("control %v: the other call took %+v; want the last sequence of the clock's millisecond", control, p)
		}
		p, now := DefaultLayout.Decode(id), clock.Now().UTC()
		switch {
		case control && p.Time.After(now):
			continue // the fault: an ID ahead of the clock
		case control:
			t.Fatalf("control: Next gave %+v with the clock at %s; want an ID ahead of the clock", p, now)
		case p.Time.After(now):
			t.Fatalf("Next gave %+v, ahead of the clock at %s", p, now)
		case !p.Time.Equal(testStart.Add(time.Millisecond)) || p.Sequence != 0 || g.Stats().Waits != 1:
			// The met fault: the call reserved sequence 0 of the next
			// millisecond, and waited for the clock to reach it.
			t.Fatalf("Next gave %+v after %d waits; want sequence 0 of the next millisecond after one wait", p, g.Stats().Waits)
		}
		if st := g.Stats(); st.IDs != int64(perMs+1) {
			t.Fatalf("Stats().IDs = %d; want %d", st.IDs, perMs+1)
		}
	}
}

// TestCrossingStress runs goroutines through many millisecond crossings
// at once, with Next and NextN, on a sequence of 8 IDs a millisecond and a
// clock that another goroutine moves forward one millisecond at a time
// (run it with -race). Every ID is unique, each goroutine's increase, none
// is ahead of the clock (plus MaxDrift) when its call returns, and Stats
// counts exactly the IDs issued.
func TestCrossingStress(t *testing.T) {
	watchdog(t, 2*time.Minute)
	perGoroutine := 20_000
	if raceEnabled || testing.Short() {
		perGoroutine = 3_000
	}
	l := Layout{Epoch: DefaultLayout.Epoch, WorkerBits: 10, SequenceBits: 3}
	for _, drift := range []time.Duration{0, 3 * time.Millisecond} {
		t.Run(fmt.Sprintf("MaxDrift=%v", drift), func(t *testing.T) {
			clock := newStepClock(testStart)
			g, err := NewGenerator(GeneratorOptions{Worker: 7, Layout: l, Clock: clock, MaxDrift: drift})
			if err != nil {
				t.Fatal(err)
			}
			const goroutines = 8
			done := make(chan struct{})
			ticked := make(chan struct{})
			go func() {
				defer close(ticked)
				for {
					select {
					case <-done:
						return
					default:
					}
					clock.Add(time.Millisecond)
					runtime.Gosched()
				}
			}()
			ids := make([][]ID, goroutines)
			var wg sync.WaitGroup
			for w := range goroutines {
				wg.Go(func() {
					out := make([]ID, 0, perGoroutine)
					batch := make([]ID, 1+w%4*3)
					for len(out) < perGoroutine {
						var got []ID
						if w%2 == 0 {
							id, err := g.Next()
							if err != nil {
								t.Error(err)
								return
							}
							got = []ID{id}
						} else {
							if err := g.NextN(batch); err != nil {
								t.Error(err)
								return
							}
							got = batch
						}
						now := clock.Now()
						for _, id := range got {
							if at := l.Decode(id).Time; at.After(now.Add(drift)) {
								t.Errorf("ID %d at %s is ahead of the clock's %s plus MaxDrift %v", id, at, now, drift)
								return
							}
						}
						out = append(out, got...)
					}
					ids[w] = out
				})
			}
			wg.Wait()
			close(done)
			<-ticked
			if t.Failed() {
				return
			}
			checkUniqueAndIncreasing(t, ids)
			total := 0
			for _, out := range ids {
				total += len(out)
			}
			if st := g.Stats(); st.IDs != int64(total) {
				t.Errorf("Stats().IDs = %d; %d were issued", st.IDs, total)
			}
		})
	}
}

package idtype

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a Clock under a test's control. Sleep moves it forward by
// the time slept, unless it is frozen.
type fakeClock struct {
	mu     sync.Mutex
	ns     int64
	frozen bool
	sleeps []time.Duration
}

func newFakeClock(at time.Time) *fakeClock { return &fakeClock{ns: at.UnixNano()} }

func (c *fakeClock) UnixNano() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ns
}

func (c *fakeClock) Sleep(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	if !c.frozen {
		c.ns += int64(d)
	}
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ns += int64(d)
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// fakeSource stands in for the machine's clocks under an anchoredClock:
// a wall clock a test can step anywhere and a monotonic clock that only
// runs forward.
type fakeSource struct {
	mu         sync.Mutex
	wall, mono int64
}

func (s *fakeSource) elapsed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mono
}

func (s *fakeSource) read() (int64, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wall, s.mono
}

func (s *fakeSource) sleep(d time.Duration) { s.run(d) }

// run lets d pass on both clocks.
func (s *fakeSource) run(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wall += int64(d)
	s.mono += int64(d)
}

// stepWall sets the wall clock by d, as NTP or an operator would.
func (s *fakeSource) stepWall(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wall += int64(d)
}

func TestAnchoredClockIgnoresWallStepsBack(t *testing.T) {
	watchdog(t, 2*time.Minute)
	for _, step := range []time.Duration{time.Millisecond, time.Second, time.Hour} {
		src := &fakeSource{wall: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).UnixNano(), mono: 5e9}
		c := newAnchoredClock(src)
		before := c.UnixNano()
		src.stepWall(-step)
		src.run(time.Second) // many wall checks' worth of time
		if got, want := c.UnixNano(), before+int64(time.Second); got != want {
			t.Errorf("step back %v: clock reads %v after 1s; want %v (monotonic, ignoring the step)",
				step, time.Duration(got-before), time.Second)
		}
	}
}

func TestAnchoredClockFollowsWallForward(t *testing.T) {
	watchdog(t, 2*time.Minute)
	src := &fakeSource{wall: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).UnixNano()}
	c := newAnchoredClock(src)
	c.UnixNano()
	src.stepWall(time.Hour) // resumed from a suspend: monotonic stood still
	src.run(time.Duration(wallCheckEvery))
	wall, _ := src.read()
	if got := c.UnixNano(); got != wall {
		t.Errorf("after a 1h forward step the clock is %v behind the wall; want it to follow within %v",
			time.Duration(wall-got), time.Duration(wallCheckEvery))
	}
	// And a later step back does not undo it.
	src.stepWall(-time.Hour)
	src.run(time.Second)
	if got := c.UnixNano(); got != wall+int64(time.Second) {
		t.Errorf("step back after a forward step moved the clock by %v", time.Duration(got-wall))
	}
}

func TestSystemClock(t *testing.T) {
	c := SystemClock()
	// The wall clock read on both sides of the call: however long the
	// machine keeps the test off the processor between two reads, the
	// clock's reading must fall between them, give or take 5 ms.
	before := time.Now().UnixNano()
	last := c.UnixNano()
	after := time.Now().UnixNano()
	if last < before-int64(5*time.Millisecond) || last > after+int64(5*time.Millisecond) {
		t.Fatalf("SystemClock read %v after the wall clock's first read and %v before its second, not within 5ms of them",
			time.Duration(last-before), time.Duration(after-last))
	}
	for range 100_000 {
		now := c.UnixNano()
		if now < last {
			t.Fatalf("SystemClock went back by %v", time.Duration(last-now))
		}
		last = now
	}
	for _, d := range []time.Duration{0, 50 * time.Microsecond, 700 * time.Microsecond, 4 * time.Millisecond} {
		start := c.UnixNano()
		c.Sleep(d)
		if slept := time.Duration(c.UnixNano() - start); slept < d {
			t.Errorf("Sleep(%v) returned after %v", d, slept)
		}
	}
}

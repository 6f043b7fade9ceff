package idtype

import (
	"runtime"
	"sync/atomic"
	"time"
)

// A Clock tells a Generator the time and lets it wait. Inject one in
// GeneratorOptions.Clock to test clock trouble; production code uses SystemClock.
//
// A Generator never trusts a Clock to be monotonic: whatever a Clock
// returns, the Generator's own time does not go backwards (see Generator).
type Clock interface {
	// UnixNano returns the current time in nanoseconds since the Unix epoch.
	UnixNano() int64
	// Sleep waits for about d: at least d on this clock, as little more as
	// it can manage.
	Sleep(d time.Duration)
}

// wallCheckEvery is how often a system clock compares its monotonic
// reckoning with the wall clock.
const wallCheckEvery = int64(10 * time.Millisecond)

// sleepSlack is how much earlier than the deadline a system clock's Sleep
// hands over from the OS timer to yielding: time.Sleep on Linux wakes up
// to about a millisecond late, which would waste most of the next
// millisecond's sequence space.
const sleepSlack = 1500 * time.Microsecond

// SystemClock returns a Clock that reads the monotonic clock anchored to
// the wall clock at the moment it is made, and follows the wall clock
// forward but never back:
//
//   - A wall-clock step back (NTP correction, an operator, a VM restored
//     from a snapshot of the clock) is ignored: time keeps running at the
//     monotonic rate from where it was.
//   - A wall-clock step forward (a host resumed from suspend, during which
//     the monotonic clock stood still, or NTP catching up) is followed
//     within 10 ms, so IDs keep telling the real time.
//
// Its Sleep uses the OS timer for the bulk of a wait and yields the
// processor for the last 1.5 ms, so that a generator waiting for the next
// millisecond wakes within microseconds of it, not a millisecond late.
//
// Each call returns a new clock with its own anchor.
func SystemClock() Clock {
	return newAnchoredClock(nil)
}

// anchoredClock is SystemClock with its time source injectable, so tests
// can give it a wall clock that jumps while monotonic time runs evenly.
type anchoredClock struct {
	src    timeSource // nil: the real clocks, read without an interface call
	anchor time.Time  // carries the monotonic reading elapsed time is measured from
	// base is the reckoning at the anchor: the wall time at the anchor,
	// plus how far the wall clock has since been found ahead of it and
	// monotonic elapsed time. It only grows.
	base atomic.Int64
	// nextCheck is the elapsed time (ns) at which to look at the wall
	// clock again.
	nextCheck atomic.Int64
}

// timeSource is what an anchoredClock reads, for tests.
type timeSource interface {
	// elapsed returns monotonic nanoseconds since the source began.
	elapsed() int64
	// read returns the wall clock (Unix ns) and elapsed, read together.
	read() (wallNs, elapsed int64)
	// sleep waits for d of monotonic time.
	sleep(d time.Duration)
}

func newAnchoredClock(src timeSource) *anchoredClock {
	c := &anchoredClock{src: src}
	if src == nil {
		c.anchor = time.Now()
		c.base.Store(c.anchor.UnixNano())
	} else {
		wall, elapsed := src.read()
		c.base.Store(wall - elapsed)
	}
	return c
}

func (c *anchoredClock) elapsed() int64 {
	if c.src != nil {
		return c.src.elapsed()
	}
	return int64(time.Since(c.anchor))
}

func (c *anchoredClock) read() (wallNs, elapsed int64) {
	if c.src != nil {
		return c.src.read()
	}
	t := time.Now()
	return t.UnixNano(), int64(t.Sub(c.anchor))
}

// UnixNano returns the anchored reckoning: anchor wall time plus monotonic
// elapsed time plus the largest forward jump of the wall clock seen. Only
// the monotonic clock is read on the fast path; the wall clock once per
// wallCheckEvery.
func (c *anchoredClock) UnixNano() int64 {
	elapsed := c.elapsed()
	if elapsed >= c.nextCheck.Load() {
		c.followWall()
	}
	return c.base.Load() + elapsed
}

// followWall moves the reckoning forward to the wall clock when the wall
// clock is ahead of it; it never moves it back.
func (c *anchoredClock) followWall() {
	wall, elapsed := c.read()
	raiseMax(&c.base, wall-elapsed)
	c.nextCheck.Store(elapsed + wallCheckEvery)
}

// Sleep waits for d of monotonic time: the OS timer for all but the last
// sleepSlack, then yielding to other goroutines until d has passed.
func (c *anchoredClock) Sleep(d time.Duration) {
	if c.src != nil {
		c.src.sleep(d)
		return
	}
	deadline := c.elapsed() + int64(d)
	for {
		left := time.Duration(deadline - c.elapsed())
		switch {
		case left <= 0:
			return
		case left > 2*sleepSlack:
			time.Sleep(left - sleepSlack)
		default:
			runtime.Gosched()
		}
	}
}

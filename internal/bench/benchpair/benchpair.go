// Package benchpair times two pieces of work side by side inside every op
// of a benchmark, for ratios that must hold still on a noisy machine: both
// sides see the same moments of whatever else the machine is doing, where
// two separate benchmarks would each see different ones.
package benchpair

import (
	"sync"
	"testing"
	"time"
)

// Times runs x and y once each per op of b, alternating which of them goes
// first so that neither always pays for a cold start, and returns the total
// time spent in each.
func Times(b *testing.B, x, y func()) (tx, ty time.Duration) {
	op := 0
	for b.Loop() {
		for k := range 2 {
			start := time.Now()
			if (op+k)%2 == 0 {
				x()
				tx += time.Since(start)
			} else {
				y()
				ty += time.Since(start)
			}
		}
		op++
	}
	return tx, ty
}

// Parallel returns a function that runs body on goroutines goroutines at
// once and returns when every one has returned: one side of a paired
// benchmark under contention, for Times. body holds its own loop, so that
// the measured work pays no call per iteration; starting the goroutines
// costs both sides alike, so make each side's work long (a millisecond or
// more) for it to vanish in the ratio.
func Parallel(goroutines int, body func()) func() {
	return func() {
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(body)
		}
		wg.Wait()
	}
}

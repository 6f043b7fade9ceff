package idtype

import (
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/bench/benchpair"
)

// msClock is a Clock that is a millisecond later at every reading, so
// that every Next starts a new millisecond: the path where
// RandomSequenceStart draws its start. One goroutine only.
type msClock struct{ ns int64 }

func (c *msClock) UnixNano() int64       { c.ns += int64(time.Millisecond); return c.ns }
func (c *msClock) Sleep(d time.Duration) { c.ns += int64(d) }

// BenchmarkRandomSequenceStart compares generators with and without
// RandomSequenceStart, side by side in every op (internal/bench/benchpair), so
// the ratios compare the same moments of a noisy machine:
//
//   - "saturation": each issues 102,400 IDs (25 ms of the default
//     layout's 4,096 a millisecond) with Next on the system clock, as fast
//     as the clock allows; "on/off-ids/ms" is the ratio of IDs a
//     millisecond. Each such burst may lose the start of its first
//     millisecond (512 IDs on average, 0.5%); short bursts keep the two
//     sides close in time on a noisy machine.
//   - "next-new-ms": 1,000 Next calls on a clock a millisecond later at
//     every reading, so every call draws a random start; "on/off" is the
//     ratio of times.
//   - "next": 1,000 Next calls back to back on the system clock, on the
//     41/1/21 layout so that none waits; "on/off" is the ratio of times.
func BenchmarkRandomSequenceStart(b *testing.B) {
	gen := func(opts GeneratorOptions) *Generator {
		g, err := NewGenerator(opts)
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	calls := func(g *Generator, n int) func() {
		return func() {
			for range n {
				if _, err := g.Next(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("saturation", func(b *testing.B) {
		const perOp = 102_400
		on := gen(GeneratorOptions{Worker: 1, RandomSequenceStart: true})
		off := gen(GeneratorOptions{Worker: 2})
		tOn, tOff := benchpair.Times(b, calls(on, perOp), calls(off, perOp))
		ids := float64(perOp) * float64(b.N)
		b.ReportMetric(ids/float64(tOn.Milliseconds()), "on-ids/ms")
		b.ReportMetric(ids/float64(tOff.Milliseconds()), "off-ids/ms")
		b.ReportMetric(tOff.Seconds()/tOn.Seconds(), "on/off-ids/ms")
	})
	b.Run("next-new-ms", func(b *testing.B) {
		on := gen(GeneratorOptions{Worker: 1, RandomSequenceStart: true, Clock: &msClock{ns: time.Now().UnixNano()}})
		off := gen(GeneratorOptions{Worker: 2, Clock: &msClock{ns: time.Now().UnixNano()}})
		tOn, tOff := benchpair.Times(b, calls(on, 1000), calls(off, 1000))
		b.ReportMetric(tOn.Seconds()/tOff.Seconds(), "on/off")
	})
	b.Run("next", func(b *testing.B) {
		wide := Layout{Epoch: DefaultLayout.Epoch, WorkerBits: 1, SequenceBits: 21}
		on := gen(GeneratorOptions{Worker: 1, Layout: wide, RandomSequenceStart: true})
		off := gen(GeneratorOptions{Worker: 0, Layout: wide})
		tOn, tOff := benchpair.Times(b, calls(on, 1000), calls(off, 1000))
		b.ReportMetric(tOn.Seconds()/tOff.Seconds(), "on/off")
	})
}

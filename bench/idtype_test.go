package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/bwmarrin/snowflake"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/bench/benchpair"
)

// wideLayout is a layout whose sequence is not the limit: 2,097,152 IDs per
// millisecond, more than one core can take (bwmarrin allows at most 22
// bits for worker and sequence together). Both libraries get the same
// widths and epoch.
var wideLayout = idtype.Layout{Epoch: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), WorkerBits: 1, SequenceBits: 21}

// burstSize is how many IDs a burst-mode benchmark takes from one
// generator before starting a fresh one: a quarter of the 4,096,000 IDs
// that one second of drift allows on 41/10/12, so the benchmark measures
// burst mode, not the ceiling it falls back to once the allowance is spent.
const burstSize = 1_000_000

func snowkeyGen(b *testing.B, cfg idtype.GeneratorOptions) *idtype.Generator {
	b.Helper()
	g, err := idtype.NewGenerator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// bwmarrinNode makes a bwmarrin node for a layout. bwmarrin keeps its
// layout in package variables read by NewNode, so they are set, used and
// put back.
func bwmarrinNode(b *testing.B, l idtype.Layout) *snowflake.Node {
	b.Helper()
	epoch, nodeBits, stepBits := snowflake.Epoch, snowflake.NodeBits, snowflake.StepBits
	defer func() { snowflake.Epoch, snowflake.NodeBits, snowflake.StepBits = epoch, nodeBits, stepBits }()
	snowflake.Epoch = l.Epoch.UnixMilli()
	snowflake.NodeBits = uint8(l.WorkerBits)
	snowflake.StepBits = uint8(l.SequenceBits)
	n, err := snowflake.NewNode(1)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkNext is one goroutine taking IDs flat out.
func BenchmarkNext(b *testing.B) {
	for _, layout := range []struct {
		name string
		l    idtype.Layout
	}{{"strict", idtype.DefaultLayout}, {"wide", wideLayout}} {
		b.Run(layout.name+"/snowkey", func(b *testing.B) {
			g := snowkeyGen(b, idtype.GeneratorOptions{Worker: 1, Layout: layout.l})
			for b.Loop() {
				if _, err := g.Next(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(layout.name+"/bwmarrin", func(b *testing.B) {
			n := bwmarrinNode(b, layout.l)
			for b.Loop() {
				n.Generate()
			}
		})
	}
	b.Run("burst/snowkey", func(b *testing.B) {
		cfg := idtype.GeneratorOptions{Worker: 1, MaxDrift: time.Second}
		g := snowkeyGen(b, cfg)
		taken := 0
		for i := 0; i < b.N; i++ {
			if taken == burstSize {
				b.StopTimer()
				g, taken = snowkeyGen(b, cfg), 0
				b.StartTimer()
			}
			if _, err := g.Next(); err != nil {
				b.Fatal(err)
			}
			taken++
		}
	})
}

// BenchmarkNextParallel is every core taking IDs from one generator.
func BenchmarkNextParallel(b *testing.B) {
	for _, layout := range []struct {
		name string
		l    idtype.Layout
	}{{"strict", idtype.DefaultLayout}, {"wide", wideLayout}} {
		b.Run(layout.name+"/snowkey", func(b *testing.B) {
			g := snowkeyGen(b, idtype.GeneratorOptions{Worker: 1, Layout: layout.l})
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := g.Next(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		b.Run(layout.name+"/bwmarrin", func(b *testing.B) {
			n := bwmarrinNode(b, layout.l)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n.Generate()
				}
			})
		})
	}
}

// contention is how many goroutines the contention benchmarks run: on a
// 2-core machine 2 is one a core, and 8 and 64 queue for the cores as a
// busy server's request goroutines do.
var contention = []int{2, 8, 64}

// BenchmarkContention is Next under contention: in every op, G goroutines
// take IDs from one snowkey generator and G goroutines from one bwmarrin
// node, one side after the other in alternating order (benchpair), so the
// ratio compares the same moments of a noisy machine. Each side issues a
// few milliseconds' worth of IDs an op, so that starting its goroutines
// is lost in the ratio: on 41/1/21 the sequence is never the limit and the
// generators run flat out; on the default 41/10/12 both run at the
// layout's ceiling of 4,096 IDs a millisecond.
func BenchmarkContention(b *testing.B) {
	for _, layout := range []struct {
		name string
		l    idtype.Layout
		ids  int // a side's IDs per op
	}{{"wide", wideLayout, 1 << 17}, {"strict", idtype.DefaultLayout, 1 << 14}} {
		for _, goroutines := range contention {
			b.Run(fmt.Sprintf("%s/%d", layout.name, goroutines), func(b *testing.B) {
				g := snowkeyGen(b, idtype.GeneratorOptions{Worker: 1, Layout: layout.l})
				n := bwmarrinNode(b, layout.l)
				each := layout.ids / goroutines
				ours := benchpair.Parallel(goroutines, func() {
					for range each {
						if _, err := g.Next(); err != nil {
							b.Error(err)
							return
						}
					}
				})
				theirs := benchpair.Parallel(goroutines, func() {
					for range each {
						n.Generate()
					}
				})
				pairedRatio(b, ours, theirs, each*goroutines)
			})
		}
	}
}

// BenchmarkClock is the cost of the clock reading each library takes per
// ID: snowkey's SystemClock, and the monotonic reading of time.Since that
// bwmarrin takes. It is the floor under one goroutine's time per ID, and
// what a lock that holds the reading inside it serializes.
func BenchmarkClock(b *testing.B) {
	b.Run("snowkey", func(b *testing.B) {
		c := idtype.SystemClock()
		for b.Loop() {
			c.UnixNano()
		}
	})
	b.Run("since", func(b *testing.B) {
		start := time.Now()
		for b.Loop() {
			_ = time.Since(start)
		}
	})
}

// BenchmarkNextN takes batches of 1,000 IDs, as an insert of 1,000 rows
// does; ns/id is the time per ID. bwmarrin has no batch call, so its batch
// is 1,000 calls.
func BenchmarkNextN(b *testing.B) {
	const batch = 1000
	b.Run("wide/snowkey", func(b *testing.B) {
		g := snowkeyGen(b, idtype.GeneratorOptions{Worker: 1, Layout: wideLayout})
		dst := make([]idtype.ID, batch)
		for b.Loop() {
			if err := g.NextN(dst); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/id")
	})
	b.Run("wide/bwmarrin", func(b *testing.B) {
		n := bwmarrinNode(b, wideLayout)
		dst := make([]snowflake.ID, batch)
		for b.Loop() {
			for i := range dst {
				dst[i] = n.Generate()
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/id")
	})
}

// BenchmarkPaired times snowkey and bwmarrin inside every op, in turns and
// in alternating order, and reports the ratio of their times (snowkey /
// bwmarrin, lower is better for snowkey). On a noisy machine a ratio of
// two separate benchmarks swings with whatever else runs; a paired one
// sees the same noise on both sides.
func BenchmarkPaired(b *testing.B) {
	const chunk = 2048
	b.Run("next-wide", func(b *testing.B) {
		g := snowkeyGen(b, idtype.GeneratorOptions{Worker: 1, Layout: wideLayout})
		n := bwmarrinNode(b, wideLayout)
		ours := func() {
			for range chunk {
				if _, err := g.Next(); err != nil {
					b.Fatal(err)
				}
			}
		}
		theirs := func() {
			for range chunk {
				n.Generate()
			}
		}
		pairedRatio(b, ours, theirs, chunk)
	})
	b.Run("nextn-1000-wide", func(b *testing.B) {
		g := snowkeyGen(b, idtype.GeneratorOptions{Worker: 1, Layout: wideLayout})
		n := bwmarrinNode(b, wideLayout)
		dst := make([]idtype.ID, 1000)
		their := make([]snowflake.ID, 1000)
		ours := func() {
			if err := g.NextN(dst); err != nil {
				b.Fatal(err)
			}
		}
		theirs := func() {
			for i := range their {
				their[i] = n.Generate()
			}
		}
		pairedRatio(b, ours, theirs, 1000)
	})
}

// pairedRatio runs ours and theirs once per op and reports ns per ID of
// each and their ratio.
func pairedRatio(b *testing.B, ours, theirs func(), ids int) {
	tOurs, tTheirs := benchpair.Times(b, ours, theirs)
	per := float64(b.N * ids)
	b.ReportMetric(float64(tOurs.Nanoseconds())/per, "snowkey-ns/id")
	b.ReportMetric(float64(tTheirs.Nanoseconds())/per, "bwmarrin-ns/id")
	b.ReportMetric(float64(tOurs)/float64(tTheirs), "ratio")
}

package idtype

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// gammaQ is the regularized upper incomplete gamma function Q(a, x), by
// its series below a+1 and its continued fraction above (both converge
// fast there), for chi-square p-values: p = Q(df/2, chi2/2).
func gammaQ(a, x float64) float64 {
	if x <= 0 {
		return 1
	}
	lnPre := a*math.Log(x) - x - lgamma(a)
	if x < a+1 {
		sum, term := 1/a, 1/a
		for n := 1; n < 10000; n++ {
			term *= x / (a + float64(n))
			sum += term
			if math.Abs(term) < math.Abs(sum)*1e-15 {
				break
			}
		}
		return 1 - sum*math.Exp(lnPre)
	}
	// Lentz's method for the continued fraction of Q.
	const tiny = 1e-300
	b := x + 1 - a
	c, d := 1/tiny, 1/b
	h := d
	for i := 1; i < 10000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		delta := d * c
		h *= delta
		if math.Abs(delta-1) < 1e-15 {
			break
		}
	}
	return math.Exp(lnPre) * h
}

func lgamma(x float64) float64 {
	v, _ := math.Lgamma(x)
	return v
}

// chiSquareP is the p-value of the chi-square test that counts come from
// a uniform distribution over their bins.
func chiSquareP(counts []int) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	want := float64(total) / float64(len(counts))
	chi := 0.0
	for _, c := range counts {
		d := float64(c) - want
		chi += d * d / want
	}
	return gammaQ(float64(len(counts)-1)/2, chi/2)
}

func TestChiSquareP(t *testing.T) {
	// Known values: the 0.01 critical values of the chi-square
	// distribution, as tables give them, for 1, 9 and 1023 degrees of
	// freedom, and the median of 1 degree (0.4549).
	for _, c := range []struct{ df, x, p float64 }{
		{1, 6.635, 0.01}, {9, 21.666, 0.01}, {1023, 1131.165, 0.01}, {1, 0.4549, 0.5}, {99, 134.642, 0.01},
	} {
		if p := gammaQ(c.df/2, c.x/2); math.Abs(p-c.p) > c.p*0.01 {
			t.Errorf("p of chi2 %v with %v degrees = %v, want %v", c.x, c.df, p, c.p)
		}
	}
}

// shardNs are the shard counts tested: powers of two that sharding
// middleware likes, and others.
var shardNs = []int{2, 3, 4, 8, 10, 16, 64, 100, 1024}

// lowTraffic issues k IDs, about one every 5 ms (4 to 6 ms apart, to the
// nanosecond, from a jitter drawn with seed), half with Next and half with
// NextN of one, from a generator on worker 5 with RandomSequenceStart on
// or off.
func lowTraffic(t *testing.T, on bool, seed uint64, k int) []ID {
	t.Helper()
	g, clock := newTestGenerator(t, GeneratorOptions{Worker: 5, RandomSequenceStart: on})
	jitter := rand.New(rand.NewPCG(seed, 2))
	ids := make([]ID, k)
	for i := range ids {
		clock.Add(4*time.Millisecond + time.Duration(jitter.Int64N(int64(2*time.Millisecond))))
		var err error
		if i%2 == 0 {
			ids[i], err = g.Next()
		} else {
			err = g.NextN(ids[i : i+1])
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func shardCounts(ids []ID, n int) []int {
	counts := make([]int, n)
	for _, id := range ids {
		counts[int64(id)%int64(n)]++
	}
	return counts
}

// TestRandomSequenceStartShards: at one ID every 5 ms, id % n is uniform
// for every n of shardNs by a chi-square test at p > 0.01 with
// RandomSequenceStart, and far from it without (the control): there every
// ID has sequence 0, so id % 2^k is 0 and id % 10 and id % 100 are even.
// (id % 3 is uniform even without the option: 2^12 and 2^22 are 1 modulo
// 3, so the varying time spreads it.)
//
// The arrival times come from fixed seeds, so the test is the same at
// every run. Each n is tested on 10 seeds; a fair source fails a test at
// p <= 0.01 one time in a hundred, so more than 2 failures of 10 (odds of
// about 1 in 10,000) mean the spread is not uniform. The same holds for
// IDs exactly 1 to 10 ms apart.
func TestRandomSequenceStartShards(t *testing.T) {
	const k = 20 * 1024 // 20 IDs a shard at n = 1024
	fails := map[int]int{}
	worst := map[int]float64{}
	for seed := range uint64(10) {
		ids := lowTraffic(t, true, seed, k)
		for _, n := range shardNs {
			p := chiSquareP(shardCounts(ids, n))
			if p <= 0.01 {
				fails[n]++
			}
			if _, ok := worst[n]; !ok || p < worst[n] {
				worst[n] = p
			}
		}
	}
	// Callers on a timer: IDs exactly 1, 2, ... 10 ms apart, where a weak
	// hash of the clock (a multiplication alone) lines the starts up.
	exactFails := map[int]int{}
	for step := range 10 {
		g, clock := newTestGenerator(t, GeneratorOptions{Worker: 5, RandomSequenceStart: true})
		exact := make([]ID, k)
		for i := range exact {
			clock.Add(time.Duration(step+1) * time.Millisecond)
			var err error
			if exact[i], err = g.Next(); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range shardNs {
			if chiSquareP(shardCounts(exact, n)) <= 0.01 {
				exactFails[n]++
			}
		}
	}
	for _, n := range shardNs {
		if exactFails[n] > 2 {
			t.Errorf("with RandomSequenceStart and IDs exactly 1..10 ms apart, id %% %d failed the chi-square test for %d of 10 steps",
				n, exactFails[n])
		}
		if fails[n] > 2 {
			t.Errorf("with RandomSequenceStart, id %% %d failed the chi-square test at p <= 0.01 for %d of 10 seeds", n, fails[n])
		}
	}
	t.Logf("with the option, the lowest p of 10 seeds: %v", worst)

	ids := lowTraffic(t, false, 0, k)
	for _, n := range shardNs {
		p := chiSquareP(shardCounts(ids, n))
		if n%2 == 0 && p > 1e-6 {
			t.Errorf("control: without the option, id %% %d passes the chi-square test (p = %v): the skew is not shown", n, p)
		}
		if n == 3 {
			t.Logf("without the option, id %% 3 has p = %v", p)
		}
	}
}

// TestRandomSequenceStartLeased: the starts spread over 0..1023 at low
// traffic on a gated generator (a lease's) as well as on a fixed worker.
func TestRandomSequenceStartLeased(t *testing.T) {
	fixed, fixedClock := newTestGenerator(t, GeneratorOptions{Worker: 3, RandomSequenceStart: true})
	leased, _, leaseClock := newGated(t, GeneratorOptions{RandomSequenceStart: true})
	for name, c := range map[string]struct {
		g   *Generator
		add func(time.Duration)
	}{"fixed": {fixed, fixedClock.Add}, "leased": {leased, leaseClock.Add}} {
		seen := map[int64]bool{}
		maxSeq := int64(0)
		for range 2000 {
			c.add(5 * time.Millisecond)
			id, err := c.g.Next()
			if err != nil {
				t.Fatal(err)
			}
			seq := DefaultLayout.Decode(id).Sequence
			seen[seq] = true
			maxSeq = max(maxSeq, seq)
		}
		// 2,000 draws from 1,024 values hit about 886 of them.
		if len(seen) < 700 || maxSeq > 1023 {
			t.Errorf("%s: first IDs of 2,000 milliseconds have %d distinct sequences, the largest %d; want most of 0..1023",
				name, len(seen), maxSeq)
		}
	}
}

// TestRandomSequenceStartSaturated: a saturated generator loses at most
// the start of its first millisecond, since a millisecond after a spent one
// starts at 0. The control starts every millisecond at random and needs
// more milliseconds for the same IDs.
func TestRandomSequenceStartSaturated(t *testing.T) {
	const ids = 4096 * 50
	spans := map[string]int64{}
	for _, mode := range []string{"off", "on", "control"} {
		g, _ := newTestGenerator(t, GeneratorOptions{Worker: 1, RandomSequenceStart: mode != "off"})
		g.setDefences(defences{spreadAfterSpent: mode == "control"})
		batch := make([]ID, 1024)
		var first, last ID
		for i := 0; i < ids; i += len(batch) {
			// Next and NextN alike: the clock moves only while they wait.
			if i%2048 == 0 {
				if err := g.NextN(batch); err != nil {
					t.Fatal(err)
				}
			} else {
				for j := range batch {
					var err error
					if batch[j], err = g.Next(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if i == 0 {
				first = batch[0]
			}
			last = batch[len(batch)-1]
		}
		l := DefaultLayout
		spans[mode] = l.Decode(last).Time.Sub(l.Decode(first).Time).Milliseconds() + 1
	}
	t.Logf("milliseconds for %d IDs: %v", ids, spans)
	if spans["off"] != 50 || spans["on"] > 51 {
		t.Errorf("%d IDs took %d ms without the option and %d with it; want 50 and at most 51", ids, spans["off"], spans["on"])
	}
	// Starts below 1,024 lose 512 IDs a millisecond on average: 50 ms of
	// IDs need 56 or so.
	if spans["control"] < 53 {
		t.Errorf("control: with a random start in every millisecond, %d IDs took %d ms; want several more than 51",
			ids, spans["control"])
	}
}

// TestRandomSequenceStartPromises: with the option, IDs from goroutines
// mixing Next and NextN under a clock that jumps about stay unique and
// increasing per goroutine, keep their worker, and never pass the
// layout's sequence.
func TestRandomSequenceStartPromises(t *testing.T) {
	watchdog(t, 2*time.Minute)
	g, clock := newTestGenerator(t, GeneratorOptions{Worker: 9, RandomSequenceStart: true})
	stop := make(chan struct{})
	var ticker sync.WaitGroup
	ticker.Add(1)
	go func() {
		defer ticker.Done()
		r := rand.New(rand.NewPCG(3, 3))
		for {
			select {
			case <-stop:
				return
			default:
				clock.Add(time.Duration(r.Int64N(int64(3 * time.Millisecond))))
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	const workers, perWorker = 4, 20000
	out := make([][]ID, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 4))
			ids := make([]ID, 0, perWorker+64)
			for len(ids) < perWorker {
				if r.IntN(2) == 0 {
					id, err := g.Next()
					if err != nil {
						t.Error(err)
						return
					}
					ids = append(ids, id)
					continue
				}
				batch := make([]ID, 1+r.IntN(50))
				if err := g.NextN(batch); err != nil {
					t.Error(err)
					return
				}
				ids = append(ids, batch...)
			}
			out[w] = ids
		}()
	}
	wg.Wait()
	close(stop)
	ticker.Wait()
	seen := map[ID]bool{}
	for w, ids := range out {
		for i, id := range ids {
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("goroutine %d: ID %d after %d", w, id, ids[i-1])
			}
			if seen[id] {
				t.Fatalf("ID %d issued twice", id)
			}
			seen[id] = true
			if p := DefaultLayout.Decode(id); p.Worker != 9 {
				t.Fatalf("ID %d has worker %d", id, p.Worker)
			}
		}
	}
	if st := g.Stats(); st.IDs != int64(len(seen)) {
		t.Errorf("Stats().IDs = %d, want %d", st.IDs, len(seen))
	}
}

// A layout with a sequence too narrow to spread takes the option and
// starts at 0.
func TestRandomSequenceStartNarrow(t *testing.T) {
	l := Layout{Epoch: DefaultLayout.Epoch, WorkerBits: 10, SequenceBits: 2}
	g, clock := newTestGenerator(t, GeneratorOptions{Worker: 1, Layout: l, RandomSequenceStart: true})
	for range 100 {
		clock.Add(5 * time.Millisecond)
		id, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		if seq := l.Decode(id).Sequence; seq != 0 {
			t.Fatalf("2 sequence bits: sequence %d, want 0", seq)
		}
	}
}

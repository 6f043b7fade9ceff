package idtype

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Errors a Generator returns. Each is wrapped with detail; match with
// errors.Is.
var (
	// ErrInvalidOptions means a constructor was given options that cannot
	// work: NewGenerator here, and every constructor of snowkey's other
	// packages (workerid, tokens, gormplugin, migrations), which wrap this
	// one sentinel. The error names the field and its value.
	ErrInvalidOptions = errors.New("idtype: invalid options")
	// ErrClockBehind means issuing the next ID would take a longer wait for
	// the clock than GeneratorOptions.MaxWait allows: the sequence of the current
	// millisecond is spent and the clock is slow to move on, or the clock
	// is behind the generator's own time (a clock set back, a NotBefore in
	// the clock's future). Nothing was issued; calling again later is safe.
	ErrClockBehind = errors.New("idtype: clock is behind the generator")
	// ErrTimeExhausted means the clock is past the last millisecond the
	// layout can represent (Layout.MaxTime).
	ErrTimeExhausted = errors.New("idtype: layout time exhausted")
)

// DefaultMaxWait is how long Next and NextN wait for the clock when
// GeneratorOptions.MaxWait is zero.
const DefaultMaxWait = time.Second

// MaxDriftCap is the largest GeneratorOptions.MaxDrift a generator accepts: 10 s.
//
// A burst borrows IDs from the future, and everything that keeps IDs
// unique across a restart reckons with how far: a process with a fixed
// worker number that ran MaxDrift ahead and comes back sooner than that
// repeats IDs unless it is given NotBefore, and the time an ID tells is
// off by as much. 10 s keeps both within what an operator already waits
// for a restart and reads as "now" in a log, while it still lends 40.96
// million IDs on the default layout (4,096 a millisecond), far more than
// one batch should ever take; a larger batch waits for the clock at the
// cap instead of running further ahead. It equals workerid's default
// lease TTL, whose grants bound a leased generator's drift anyway.
const MaxDriftCap = 10 * time.Second

// GeneratorOptions configures a Generator (NewGenerator,
// NewGatedGenerator). The zero value of every field is a safe default, said
// in the field's doc; Worker's zero is worker 0, a valid number, which is
// right for one fixed generator and wrong for two.
type GeneratorOptions struct {
	// Worker is this generator's worker number, 0..Layout.MaxWorker().
	// Zero means worker 0. Two generators that share a worker number and
	// layout issue the same IDs: lease the number (package workerid, whose
	// Lease.NewGenerator fills this in) unless one box runs a single
	// generator.
	Worker int64
	// Layout is the bit layout. The zero Layout means DefaultLayout.
	Layout Layout
	// Clock is the time source. Nil means SystemClock().
	Clock Clock
	// NotBefore makes the generator issue no ID in the millisecond of
	// NotBefore or earlier. A restarted worker sets it to the last
	// millisecond it may have used, so that no ID repeats even when the
	// clock now reads earlier than it did. The zero time means no floor.
	NotBefore time.Time
	// MaxWait bounds how long one call of Next or NextN waits for the
	// clock before it fails with ErrClockBehind. Zero means
	// DefaultMaxWait (1 s); a negative value means never wait.
	MaxWait time.Duration
	// MaxDrift lets the generator run ahead of the clock by up to this
	// much (rounded down to whole milliseconds) instead of waiting when a
	// millisecond's sequence is spent: burst mode, the way Baidu
	// uid-generator borrows future seconds. IDs then carry times up to
	// MaxDrift in the future, and a burst that outruns the allowance waits
	// like strict mode. Zero means strict: no ID carries a time later than
	// the clock's. At most MaxDriftCap.
	MaxDrift time.Duration
	// RandomSequenceStart starts the sequence of a millisecond at a number
	// drawn at random below 2^(SequenceBits-2) (1,024 on the default
	// layout) instead of 0, unless the millisecond before spent its
	// sequence, so that
	// id % n spreads evenly over shards when traffic is low and each
	// millisecond issues one ID or a few (see spread.go). It costs a
	// saturated generator at most the start of a burst's first
	// millisecond. False, the zero value, starts at 0.
	RandomSequenceStart bool
}

// Config is the name GeneratorOptions had.
//
// Deprecated: use GeneratorOptions, the name every snowkey options struct
// follows (it is named for what it configures). Config goes in the next
// release.
type Config = GeneratorOptions

// Stats is a snapshot of what a Generator has done.
type Stats struct {
	// IDs is how many IDs the generator has issued.
	IDs int64
	// Waits is how many times a call waited for the clock.
	Waits int64
	// BackwardSteps is how many times the clock was found earlier than a
	// reading before it (counted once per step, not per call).
	BackwardSteps int64
	// MaxBackward is the largest such step.
	MaxBackward time.Duration
	// MaxDrift is the furthest ahead of its clock the generator has
	// issued an ID (burst mode, or a clock behind NotBefore or behind
	// earlier IDs).
	MaxDrift time.Duration
}

// cachePad is two cache lines: x86 prefetches lines in pairs.
const cachePad = 128

// Generator issues IDs for one worker number. It is safe for any number of
// goroutines and takes no lock.
//
// Its invariant: every ID it returns is greater than every ID it returned
// before, whatever the interleaving of goroutines and whatever its Clock
// does. It keeps one word of state, the millisecond and sequence of the
// last ID issued, and moves it only forward with compare-and-swap:
//
//   - When the clock reads a later millisecond than the state, the next ID
//     takes that millisecond with sequence 0 (or a random start, with
//     RandomSequenceStart).
//   - Otherwise the next ID is the state plus one: the next sequence in the
//     same millisecond, or, when the sequence is spent, sequence 0 of the
//     millisecond after. That is how a frozen or backward-stepping clock is
//     absorbed: the generator keeps counting from its own time.
//   - A next ID whose millisecond is later than the clock (plus MaxDrift)
//     is not issued: the call waits for the clock, up to MaxWait, or fails
//     with ErrClockBehind. No ID is ever issued at or before NotBefore.
//   - A gated generator (NewGatedGenerator) issues no ID in a millisecond
//     past its Gate's latest Grant.Until, and the state only moves forward
//     when a grant raises the floor. The grant is one atomic word, loaded
//     after the state, so the check costs one load and compare.
//
// With SystemClock (the default) the clock itself never steps back (see
// SystemClock), so waits happen only when a millisecond's 2^SequenceBits
// IDs are spent, and last until the next millisecond.
type Generator struct {
	// Read-only after NewGenerator; laid out before the contended state.
	clock      Clock
	layout     Layout
	worker     int64
	seqBits    uint
	timeShift  uint  // WorkerBits + SequenceBits
	seqMask    int64 // MaxSequence
	workerPart int64 // worker << SequenceBits
	epochNs    int64
	maxTime    int64 // last millisecond the layout holds, since the epoch
	maxDriftMs int64
	maxWait    time.Duration // < 0: never wait
	initState  int64
	spread     int64 // mask of the random sequence start; 0: off
	spreadAll  bool  // tests' control: a random start even after a spent millisecond

	// The padding keeps the read-only fields above and the statistics
	// below off the cache lines of state and limit, which every call of
	// every goroutine touches and whose compare-and-swap would otherwise
	// evict them from the other cores. Without it the layout, and with it
	// the speed on all cores, changed with any field added.
	_ [cachePad]byte

	// state is (ms since epoch << SequenceBits) | sequence of the last ID
	// issued, or initState before the first.
	state atomic.Int64
	// limit is the last millisecond (since the epoch) an ID may take: the
	// layout's last, or less when a Gate grants less; -1 allows nothing.
	// It shares state's cache line, which every call touches anyway.
	limit atomic.Int64
	// clockHigh is the highest clock reading seen (ms since epoch); a
	// reading below it is a backward step.
	clockHigh atomic.Int64
	behind    atomic.Bool // the clock is below clockHigh now

	_ [cachePad]byte

	// skipped counts state values passed over when the state jumps to a
	// new millisecond, so that IDs issued = state - initState - skipped
	// without a counter on the hot path.
	skipped       atomic.Int64
	waits         atomic.Int64
	backwardSteps atomic.Int64
	maxBackward   atomic.Int64 // ms
	maxDrift      atomic.Int64 // ms

	// gateErr is why a Gate stopped the generator (Grant.Err), or nil.
	gateErr atomic.Pointer[error]
}

// NewGenerator checks opts and returns a generator. The error wraps
// ErrInvalidOptions or ErrInvalidLayout and names the bad field.
func NewGenerator(opts GeneratorOptions) (*Generator, error) {
	return newGenerator(opts, false)
}

// newGenerator is NewGenerator, and, gated, NewGatedGenerator's generator,
// which may issue nothing until its Gate grants.
func newGenerator(opts GeneratorOptions, gated bool) (*Generator, error) {
	l := opts.Layout
	if l.IsZero() {
		l = DefaultLayout
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if opts.Worker < 0 || opts.Worker > l.MaxWorker() {
		return nil, fmt.Errorf("%w: Worker %d is outside 0..%d for %d worker bits",
			ErrInvalidOptions, opts.Worker, l.MaxWorker(), l.WorkerBits)
	}
	if opts.MaxDrift < 0 || opts.MaxDrift > MaxDriftCap {
		return nil, fmt.Errorf("%w: MaxDrift %v is outside 0..%v (MaxDriftCap)", ErrInvalidOptions, opts.MaxDrift, MaxDriftCap)
	}
	g := &Generator{
		clock:      opts.Clock,
		layout:     l,
		worker:     opts.Worker,
		seqBits:    l.SequenceBits,
		timeShift:  l.WorkerBits + l.SequenceBits,
		seqMask:    l.MaxSequence(),
		workerPart: opts.Worker << l.SequenceBits,
		epochNs:    l.epochMs() * int64(time.Millisecond),
		maxTime:    l.maxTimeField(),
		maxDriftMs: opts.MaxDrift.Milliseconds(),
		maxWait:    opts.MaxWait,
	}
	if g.clock == nil {
		g.clock = SystemClock()
	}
	if opts.RandomSequenceStart {
		g.spread = spreadMask(l)
	}
	if g.maxWait == 0 {
		g.maxWait = DefaultMaxWait
	}
	// Before the first ID the state is "sequence spent in the millisecond
	// of NotBefore", so the first ID comes after it.
	floor := int64(-1)
	if !opts.NotBefore.IsZero() {
		floor = l.fieldOf(opts.NotBefore)
		if floor > g.maxTime {
			return nil, fmt.Errorf("%w: NotBefore %s is past the layout's last time %s",
				ErrInvalidOptions, opts.NotBefore.Format(time.RFC3339Nano), l.MaxTime().Format(time.RFC3339Nano))
		}
		floor = max(floor, -1)
	}
	if now, _ := g.now(); now > g.maxTime {
		return nil, fmt.Errorf("%w: %v", ErrInvalidOptions, g.exhausted(now))
	}
	g.initState = floor<<g.seqBits | g.seqMask
	if opts.Worker == 0 {
		// Worker 0's first ID in the epoch's first millisecond would be
		// ID 0, which means "not assigned": count it as used.
		g.initState = max(g.initState, 0)
	}
	g.state.Store(g.initState)
	if gated {
		g.limit.Store(-1) // nothing until the first Grant
	} else {
		g.limit.Store(g.maxTime)
	}
	return g, nil
}

// Worker returns the generator's worker number.
func (g *Generator) Worker() int64 { return g.worker }

// Layout returns the generator's layout.
func (g *Generator) Layout() Layout { return g.layout }

// now reads the clock as milliseconds since the epoch, and the raw
// nanoseconds for precise waits.
func (g *Generator) now() (ms, ns int64) {
	ns = g.clock.UnixNano()
	return (ns - g.epochNs) / int64(time.Millisecond), ns
}

// observe keeps clockHigh and the backward-step statistics. Callers skip it
// when the clock reads the millisecond of the last ID: the clock has then
// neither stepped back past that ID nor moved on.
func (g *Generator) observe(ms int64) {
	high := g.clockHigh.Load()
	switch {
	case ms > high:
		if g.clockHigh.CompareAndSwap(high, ms) && g.behind.Load() {
			g.behind.Store(false)
		}
	case ms < high:
		if g.behind.CompareAndSwap(false, true) {
			g.backwardSteps.Add(1)
		}
		raiseMax(&g.maxBackward, high-ms)
	}
}

// raiseMax stores v in m if v is larger.
func raiseMax(m *atomic.Int64, v int64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}

// compose turns a state value into the ID it stands for.
func (g *Generator) compose(state int64) ID {
	return ID((state>>g.seqBits)<<g.timeShift | g.workerPart | state&g.seqMask)
}

// Next returns a new ID, greater than every ID the generator returned
// before. It waits for the clock when the current millisecond's sequence is
// spent (see Generator); the error wraps ErrClockBehind when that wait
// would pass GeneratorOptions.MaxWait, or ErrTimeExhausted past the layout's last
// time. On error nothing was issued.
func (g *Generator) Next() (ID, error) {
	var waited time.Duration
	for {
		now, nowNs := g.now()
		old := g.state.Load()
		if now != old>>g.seqBits {
			g.observe(now)
		}
		var next int64
		if now > old>>g.seqBits {
			if now > g.limit.Load() {
				return 0, g.pastLimit(now)
			}
			next = now << g.seqBits
			if g.spread != 0 {
				next = g.firstOf(now, old, nowNs)
			}
			if !g.state.CompareAndSwap(old, next) {
				continue
			}
			g.skipped.Add(next - old - 1)
			return g.compose(next), nil
		}
		next = old + 1
		t := next >> g.seqBits
		if t > now+g.maxDriftMs {
			if err := g.wait(t-g.maxDriftMs, nowNs, &waited); err != nil {
				return 0, err
			}
			continue
		}
		if t > g.limit.Load() {
			return 0, g.pastLimit(t)
		}
		if g.state.CompareAndSwap(old, next) {
			if t > now {
				raiseMax(&g.maxDrift, t-now)
			}
			return g.compose(next), nil
		}
	}
}

// NextN fills dst with new IDs in increasing order, each greater than
// every ID the generator returned before. It reserves the whole batch with
// one clock read and one compare-and-swap when the batch fits in what the
// clock allows (2^SequenceBits IDs a millisecond, plus MaxDrift); a larger
// batch takes what fits, waits for the clock and goes on. Errors are those
// of Next; on error, dst may be partly filled and the rest left as it was.
func (g *Generator) NextN(dst []ID) error {
	var waited time.Duration
	for len(dst) > 0 {
		now, nowNs := g.now()
		old := g.state.Load()
		if now != old>>g.seqBits {
			g.observe(now)
		}
		first := old + 1
		lim := g.limit.Load()
		if now > old>>g.seqBits {
			if now > lim {
				return g.pastLimit(now)
			}
			first = now << g.seqBits
			if g.spread != 0 {
				first = g.firstOf(now, old, nowNs)
			}
		}
		// The last state the clock allows: the end of the millisecond
		// now+MaxDrift, or of the layout or the Gate's grant.
		limitT := min(now+g.maxDriftMs, lim)
		limit := (limitT+1)<<g.seqBits - 1
		if first > limit {
			t := first >> g.seqBits
			if t > lim {
				return g.pastLimit(t)
			}
			if err := g.wait(t-g.maxDriftMs, nowNs, &waited); err != nil {
				return err
			}
			continue
		}
		n := min(int64(len(dst)), limit-first+1)
		last := first + n - 1
		if !g.state.CompareAndSwap(old, last) {
			continue
		}
		if first != old+1 {
			g.skipped.Add(first - old - 1)
		}
		if t := last >> g.seqBits; t > now {
			raiseMax(&g.maxDrift, t-now)
		}
		// Within a millisecond consecutive states are consecutive IDs, so
		// compose once per millisecond and count up.
		for i := int64(0); i < n; {
			s := first + i
			id := g.compose(s)
			run := min(n-i, g.seqMask-s&g.seqMask+1)
			for j := int64(0); j < run; j++ {
				dst[i+j] = id + ID(j)
			}
			i += run
		}
		dst = dst[n:]
	}
	return nil
}

// wait sleeps until the clock reaches the millisecond untilMs (since the
// epoch), counting the time against MaxWait for this call. It fails at
// once, without sleeping, when the wait would pass MaxWait.
func (g *Generator) wait(untilMs, nowNs int64, waited *time.Duration) error {
	need := time.Duration(g.epochNs + untilMs*int64(time.Millisecond) - nowNs)
	if need <= 0 {
		return nil
	}
	if g.maxWait < 0 || *waited+need > g.maxWait {
		return fmt.Errorf("%w: the next ID belongs to %s, %v after the clock's %s, and MaxWait is %v",
			ErrClockBehind, g.layout.timeAt(untilMs).Format(time.RFC3339Nano),
			need, time.Unix(0, nowNs).UTC().Format(time.RFC3339Nano), max(g.maxWait, 0))
	}
	g.waits.Add(1)
	g.clock.Sleep(need)
	*waited += need
	return nil
}

func (g *Generator) exhausted(t int64) error {
	return fmt.Errorf("%w: millisecond %s is past %s", ErrTimeExhausted,
		g.layout.timeAt(t).Format(time.RFC3339Nano),
		g.layout.MaxTime().Format(time.RFC3339Nano))
}

// Stats returns a snapshot of the generator's counters.
func (g *Generator) Stats() Stats {
	// Read skipped first: a jump adds to state before skipped, so this
	// order can only overcount IDs transiently, never go negative.
	skipped := g.skipped.Load()
	state := g.state.Load()
	return Stats{
		IDs:           state - g.initState - skipped,
		Waits:         g.waits.Load(),
		BackwardSteps: g.backwardSteps.Load(),
		MaxBackward:   time.Duration(g.maxBackward.Load()) * time.Millisecond,
		MaxDrift:      time.Duration(g.maxDrift.Load()) * time.Millisecond,
	}
}

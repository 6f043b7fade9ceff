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
	// clock before it fails with ErrClockBehind: the sum of the sleeps it
	// asks for, each until a millisecond the clock has not reached. A
	// sleep that a busy machine makes longer counts as asked. Zero means
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
// last ID reserved, which only ever grows. Each state value is reserved by
// exactly one atomic step, so no two calls get the same one, and an ID is
// the value's millisecond and sequence with the worker number between:
//
//   - When the clock reads a later millisecond than the state, the next ID
//     takes that millisecond with sequence 0 (or a random start, with
//     RandomSequenceStart): the call moves the state there with
//     compare-and-swap. This happens once a millisecond however busy the
//     generator is, and a call whose swap fails looks at the state again
//     with the clock reading it already has: the failure means another
//     call moved the state, not that time has passed.
//   - Otherwise the next ID is the state plus one: the next sequence in the
//     same millisecond, or, when the sequence is spent, sequence 0 of the
//     millisecond after. That is how a frozen or backward-stepping clock is
//     absorbed: the generator keeps counting from its own time. A call that
//     has seen room for it reserves it with one atomic add, which never
//     fails however many goroutines add at once, so the millisecond's IDs
//     cost no retries.
//   - A reservation is judged after it is made. An add can carry the state
//     past what the call saw (others added in between, and took the rest
//     of the millisecond): no ID is issued in a millisecond later than the
//     clock plus MaxDrift, so the call holds its reservation and waits for
//     the clock, up to MaxWait; past that it drops it and fails with
//     ErrClockBehind. Then the reservation is judged by the grant in force
//     (below); one refused is never issued. What is never issued is
//     counted as skipped. No ID is ever issued at or before NotBefore.
//   - A gated generator (NewGatedGenerator) issues no ID outside its Gate's
//     latest grant: after Grant.NotBefore's millisecond and no later than
//     Grant.Until's. The grant is one immutable record behind an atomic
//     pointer, read before a reservation (so that a call does not reserve
//     what it may not issue) and again after it (so that a grant made in
//     between is obeyed). A grant that ends the generator (ErrLeaseLost)
//     draws a line at the state: what was reserved at or below it is
//     judged by the grant before, and nothing above it is ever issued (see
//     Gate.Grant).
//
// With SystemClock (the default) the clock itself never steps back (see
// SystemClock), so waits happen only when a millisecond's 2^SequenceBits
// IDs are spent, and last until the next millisecond.
//
// What every call touches is laid out for many cores: the state alone on
// its cache lines, written by every call; the configuration and the grant
// pointer on lines that are only read; what changes once a millisecond or
// more rarely (the clock's high mark, the statistics) on lines of their
// own, so that the writes of one core do not evict what the others read.
type Generator struct {
	// Read-only after NewGenerator, and grant, which only a Gate's Grant
	// changes: lines every call reads and almost never written.
	clock      Clock
	sys        *anchoredClock // the clock when it is SystemClock's, read without an interface call
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
	defences   defences
	grant      atomic.Pointer[grant]

	_ [cachePad]byte

	// state is (ms since epoch << SequenceBits) | sequence of the last
	// value reserved, or initState before the first.
	state atomic.Int64

	_ [cachePad]byte

	// clockHigh is the highest clock reading seen (ms since epoch); a
	// reading below it is a backward step.
	clockHigh atomic.Int64
	behind    atomic.Bool // the clock is below clockHigh now

	// skipped counts state values never issued: passed over when the
	// state jumps to a new millisecond or a floor, or reserved and then
	// refused, so that IDs issued = state - initState - skipped without a
	// counter on the hot path.
	skipped       atomic.Int64
	waits         atomic.Int64
	backwardSteps atomic.Int64
	maxBackward   atomic.Int64 // ms
	maxDrift      atomic.Int64 // ms

	_ [cachePad]byte
}

// defences switches a generator's defences off one at a time, for the
// controls of the tests that prove each, and holds the tests' hooks. The
// zero value, every defence on and no hook, is every generator's outside
// the tests; only export_test.go changes it.
type defences struct {
	// spreadAfterSpent draws a random start even for the millisecond after
	// a spent one (RandomSequenceStart).
	spreadAfterSpent bool
	// noClockJudge issues a reservation an add carried past the clock
	// without waiting for the clock to reach it.
	noClockJudge bool
	// noGrantJudge issues a reservation without judging it by the grant in
	// force after it was made.
	noGrantJudge bool
	// noStopLine judges a reservation made before a stop by the stop, not
	// by the grant before it.
	noStopLine bool
	// hooks, when set, run a test's code where a call reserves state
	// values.
	hooks *hooks
}

// hooks run a test's code just before and just after a call reserves
// state values, so that the test can make another call or a Grant happen
// exactly there.
type hooks struct {
	beforeReserve, afterReserve func()
}

// add is state.Add(1) between the hooks.
func (h *hooks) add(state *atomic.Int64) int64 {
	h.before()
	defer h.after()
	return state.Add(1)
}

func (h *hooks) before() {
	if h.beforeReserve != nil {
		h.beforeReserve()
	}
}

func (h *hooks) after() {
	if h.afterReserve != nil {
		h.afterReserve()
	}
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
	if c, ok := g.clock.(*anchoredClock); ok && c.src == nil {
		g.sys = c
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
		g.grant.Store(g.newGrant(-1, floor, nil)) // nothing until the first Grant
	} else {
		g.grant.Store(g.newGrant(g.maxTime, floor, nil))
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
	if c := g.sys; c != nil {
		ns = c.UnixNano()
	} else {
		ns = g.clock.UnixNano()
	}
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
	return ID(g.msOf(state)<<(g.timeShift&63) | g.workerPart | state&g.seqMask)
}

// msOf is the millisecond (since the epoch) of a state value, and
// stateAt the state value of sequence 0 in millisecond ms. The shifts
// are masked to what a layout allows, so that they compile to one
// instruction each.
func (g *Generator) msOf(state int64) int64 { return state >> (g.seqBits & 63) }
func (g *Generator) stateAt(ms int64) int64 { return ms << (g.seqBits & 63) }

// Next returns a new ID, greater than every ID the generator returned
// before. It waits for the clock when the current millisecond's sequence is
// spent (see Generator); the error wraps ErrClockBehind when that wait
// would pass GeneratorOptions.MaxWait, or ErrTimeExhausted past the layout's last
// time. On error nothing was issued.
func (g *Generator) Next() (ID, error) {
	var waited time.Duration
	// A turn of the loop that fails (a lost swap, a refused reservation)
	// reuses the clock reading: it means another call moved the state, not
	// that time passed. Only a wait decision reads the clock again (see
	// catchUp). Each reading is observed (clock steps, for Stats) once, on
	// the turn it was taken for: a reading kept while other calls moved
	// the clock's high mark on is not a step back.
	//
	// The system clock's common case is read here rather than through
	// now, which the compiler does not inline: a call less on the path
	// every ID takes (see anchoredClock.UnixNano).
	var now, nowNs int64
	if c := g.sys; c != nil {
		if e := int64(time.Since(c.anchor)); e < c.nextCheck.Load() {
			nowNs = c.base.Load() + e
			now = (nowNs - g.epochNs) / int64(time.Millisecond)
		} else {
			now, nowNs = g.now()
		}
	} else {
		now, nowNs = g.now()
	}
	observed := false
	for {
		old, gr := g.state.Load(), g.grant.Load()
		if now != g.msOf(old) && !observed {
			g.observe(now)
		}
		observed = true
		if old < gr.floorState {
			g.raiseFloor(gr.floorState)
			continue
		}
		if now > g.msOf(old) {
			// The clock has moved past the state: the crossing into its
			// millisecond, once a millisecond, by compare-and-swap.
			next, err := g.crossing(gr, old, now, nowNs)
			if err != nil {
				return 0, err
			}
			if ok, err := g.swap(old, next, next); !ok {
				if err != nil {
					return 0, err
				}
				continue
			}
			return g.compose(next), nil
		}
		want := g.msOf(old + 1)
		if want > now+g.maxDriftMs {
			var err error
			if now, nowNs, err = g.catchUp(want, &waited); err != nil {
				return 0, err
			}
			observed = false
			continue
		}
		if want > gr.limit {
			return 0, g.pastLimit(gr, want)
		}
		// Within the clock's millisecond (or the drift allowed): one add.
		var v int64
		if h := g.defences.hooks; h == nil {
			v = g.state.Add(1)
		} else {
			v = h.add(&g.state)
		}
		t := g.msOf(v)
		// The common case judged here: the grant checked above is still in
		// force, and v is in the millisecond the call saw room in. v lies
		// above old, so after the floor; t is old+1's millisecond, so
		// within the clock (plus MaxDrift) and the grant's limit.
		if g.grant.Load() != gr || t != want || g.defences.hooks != nil {
			if t > now+g.maxDriftMs && !g.defences.noClockJudge {
				// Others took the rest of the millisecond between the
				// look and the add: hold the reservation until the clock
				// reaches its millisecond.
				var err error
				if now, nowNs, err = g.catchUp(t, &waited); err != nil {
					g.drop(v-1, v)
					return 0, err
				}
			}
			if ok, err := g.judge(v-1, v, v); !ok {
				if err != nil {
					return 0, err
				}
				continue
			}
		}
		if t > now {
			raiseMax(&g.maxDrift, t-now)
		}
		return g.compose(v), nil
	}
}

// Next and NextN begin each turn of their loops alike: they read the
// state and the grant in force, observe the clock's reading once, and
// raise the state to the grant's floor when it is below it. Those few
// lines are written out in both, not in a helper: with a call in it, no
// helper is small enough for the compiler to inline, and every ID would
// pay for the call (in burst mode, where the state runs ahead of the
// clock, a call more per ID). What follows, a crossing into a new
// millisecond and its reservation, is shared: crossing and swap.

// crossing returns the first state value of millisecond now, which the
// clock (read at nowNs) has reached and the state, old, has not: sequence
// 0, or a random start (RandomSequenceStart). The error is the grant's
// when now is past its limit.
func (g *Generator) crossing(gr *grant, old, now, nowNs int64) (int64, error) {
	if now > gr.limit {
		return 0, g.pastLimit(gr, now)
	}
	if g.spread != 0 {
		return g.firstOf(now, old, nowNs), nil
	}
	return g.stateAt(now), nil
}

// swap reserves the state values first..last by moving the state from
// old to last with compare-and-swap, between a test's hooks (see hooks),
// and judges them (see judge). It returns false when the swap lost, which
// means another call moved the state, or when judge refused them.
func (g *Generator) swap(old, first, last int64) (bool, error) {
	h := g.defences.hooks
	if h != nil {
		h.before()
	}
	if !g.state.CompareAndSwap(old, last) {
		return false, nil
	}
	if h != nil {
		h.after()
	}
	return g.judge(old, first, last)
}

// judge decides whether the state values first..last, reserved by moving
// the state from old to last in one atomic step, may be issued, and keeps
// skipped: the values from old to first were passed over, and refused
// values are never issued.
//
// They are refused when they fall outside the grant in force now: at or
// before its floor, or after its limit. A stopped generator (see
// Gate.Grant) judges values at or below its line by the grant before the
// stop, and refuses the rest with the stop's error (see drop).
func (g *Generator) judge(old, first, last int64) (bool, error) {
	if !g.defences.noGrantJudge {
		gr := g.grant.Load()
		if gr.before != nil {
			switch {
			case g.defences.noStopLine:
				g.skipped.Add(last - old)
				return false, gr.err
			case first > g.lineOf(gr):
				return false, gr.err
			}
			gr = gr.before
		}
		if g.msOf(last) > gr.limit || g.msOf(first) <= gr.floor {
			g.skipped.Add(last - old)
			return false, nil
		}
	}
	if gap := first - old - 1; gap > 0 {
		g.skipped.Add(gap)
	}
	return true, nil
}

// drop counts the state values old+1..last, reserved or passed over and
// never issued, as skipped, unless they lie above a stop's line: Stats
// ignores the state above it, so they are not counted at all.
func (g *Generator) drop(old, last int64) {
	if gr := g.grant.Load(); gr.before != nil && old >= g.lineOf(gr) {
		return
	}
	g.skipped.Add(last - old)
}

// NextN fills dst with new IDs in increasing order, each greater than
// every ID the generator returned before. It reserves the whole batch with
// one clock read and one compare-and-swap when the batch fits in what the
// clock allows (2^SequenceBits IDs a millisecond, plus MaxDrift); a larger
// batch takes what fits, waits for the clock and goes on. Errors are those
// of Next; on error, dst may be partly filled and the rest left as it was.
func (g *Generator) NextN(dst []ID) error {
	var waited time.Duration
	now, nowNs := g.now() // reused, and observed once, as in Next
	observed := false
	for len(dst) > 0 {
		old, gr := g.state.Load(), g.grant.Load()
		if now != g.msOf(old) && !observed {
			g.observe(now)
		}
		observed = true
		if old < gr.floorState {
			g.raiseFloor(gr.floorState)
			continue
		}
		first := old + 1
		if now > g.msOf(old) {
			var err error
			if first, err = g.crossing(gr, old, now, nowNs); err != nil {
				return err
			}
		}
		// The last state the clock allows: the end of the millisecond
		// now+MaxDrift, or of the layout or the grant.
		limitT := min(now+g.maxDriftMs, gr.limit)
		limit := g.stateAt(limitT+1) - 1
		if first > limit {
			t := g.msOf(first)
			if t > gr.limit {
				return g.pastLimit(gr, t)
			}
			var err error
			if now, nowNs, err = g.catchUp(t, &waited); err != nil {
				return err
			}
			observed = false
			continue
		}
		n := min(int64(len(dst)), limit-first+1)
		last := first + n - 1
		if ok, err := g.swap(old, first, last); !ok {
			if err != nil {
				return err
			}
			continue
		}
		if t := g.msOf(last); t > now {
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

// catchUp is called when the next ID falls in millisecond t (since the
// epoch), past a reading of the clock plus MaxDrift. It reads the clock
// again, after the state was loaded, so that a call delayed between its
// reading and its look at the state does not wait for time that has
// already passed; if the clock still does not allow t, it waits for it
// (see wait). It returns the reading to go on with.
func (g *Generator) catchUp(t int64, waited *time.Duration) (now, nowNs int64, err error) {
	now, nowNs = g.now()
	if t > now+g.maxDriftMs {
		if err := g.wait(t-g.maxDriftMs, nowNs, waited); err != nil {
			return 0, 0, err
		}
		now, nowNs = g.now()
	}
	return now, nowNs, nil
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
	// Read skipped first: a reservation moves the state before skipped
	// counts what it passed over or refused, so this order can only
	// overcount IDs transiently, never go negative.
	skipped := g.skipped.Load()
	state := g.state.Load()
	if gr := g.grant.Load(); gr.before != nil {
		// Stopped: nothing above the line is ever issued or counted.
		if line := gr.line.Load(); line != noLine {
			state = min(state, line)
		}
	}
	return Stats{
		IDs:           state - g.initState - skipped,
		Waits:         g.waits.Load(),
		BackwardSteps: g.backwardSteps.Load(),
		MaxBackward:   time.Duration(g.maxBackward.Load()) * time.Millisecond,
		MaxDrift:      time.Duration(g.maxDrift.Load()) * time.Millisecond,
	}
}

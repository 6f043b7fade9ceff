package idtype

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// stepClock is a Clock that stands still until a test moves it; Sleep
// moves it forward by the time asked, as if the sleep had passed.
type stepClock struct{ ns atomic.Int64 }

func newStepClock(at time.Time) *stepClock {
	c := &stepClock{}
	c.ns.Store(at.UnixNano())
	return c
}

func (c *stepClock) UnixNano() int64       { return c.ns.Load() }
func (c *stepClock) Sleep(d time.Duration) { c.ns.Add(int64(d)) }
func (c *stepClock) Add(d time.Duration)   { c.ns.Add(int64(d)) }
func (c *stepClock) Now() time.Time        { return time.Unix(0, c.ns.Load()) }

// newGated returns a gated generator for worker 5 of the default layout
// on a stepClock, granted a minute from the clock's time.
func newGated(t testing.TB, opts GeneratorOptions) (*Generator, *Gate, *stepClock) {
	t.Helper()
	clock := newStepClock(testStart)
	opts.Worker, opts.Clock = 5, clock
	g, gate, err := NewGatedGenerator(opts)
	if err != nil {
		t.Fatal(err)
	}
	gate.Grant(Grant{Until: testStart.Add(time.Minute)})
	return g, gate, clock
}

func TestGatedGeneratorOptions(t *testing.T) {
	clock := newStepClock(testStart)
	other := Layout{Epoch: DefaultLayout.Epoch, WorkerBits: 8, SequenceBits: 14}
	tests := []struct {
		name    string
		opts    GeneratorOptions
		wantErr string // "" for success
	}{
		{name: "worker and layout", opts: GeneratorOptions{Worker: 9, Layout: other, Clock: clock}},
		{name: "worker outside the layout", opts: GeneratorOptions{Worker: 256, Layout: other, Clock: clock},
			wantErr: "Worker 256 is outside 0..255"},
		{name: "drift over the cap", opts: GeneratorOptions{Worker: 1, Clock: clock, MaxDrift: MaxDriftCap + time.Millisecond},
			wantErr: "MaxDrift"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, gate, err := NewGatedGenerator(tt.opts)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tt.wantErr) || g != nil || gate != nil {
					t.Fatalf("NewGatedGenerator: got %v, %v, %v; want only ErrInvalidOptions saying %q", g, gate, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.Worker() != tt.opts.Worker || g.Layout() != tt.opts.Layout {
				t.Fatalf("worker %d layout %+v, want %d %+v", g.Worker(), g.Layout(), tt.opts.Worker, tt.opts.Layout)
			}
			gate.Grant(Grant{Until: testStart.Add(time.Minute)})
			id, err := g.Next()
			if err != nil {
				t.Fatal(err)
			}
			if p := g.Layout().Decode(id); p.Worker != tt.opts.Worker {
				t.Fatalf("ID %d decodes to worker %d, want %d", id, p.Worker, tt.opts.Worker)
			}
		})
	}
}

// TestGatedGeneratorWaitsForGrant: a gated generator issues nothing before
// its Gate's first Grant; the control is an ungated generator on the same
// options, which issues at once.
func TestGatedGeneratorWaitsForGrant(t *testing.T) {
	clock := newStepClock(testStart)
	opts := GeneratorOptions{Worker: 5, Clock: clock}
	for _, nx := range nexters {
		t.Run(nx.name, func(t *testing.T) {
			g, gate, err := NewGatedGenerator(opts)
			if err != nil {
				t.Fatal(err)
			}
			ids, err := nx.next(g)
			if !errors.Is(err, ErrLeaseExpired) || !strings.Contains(err.Error(), "no grant") || len(ids) != 0 {
				t.Fatalf("before the first Grant: got %v, %v; want no ID and ErrLeaseExpired saying there is no grant", ids, err)
			}
			if s := g.Stats(); s.IDs != 0 {
				t.Fatalf("Stats().IDs = %d before any grant", s.IDs)
			}
			if last := gate.Grant(Grant{Until: clock.Now().Add(time.Second)}); !last.Before(testStart) {
				t.Fatalf("first Grant returned %s as the last issued time; want before the clock's %s", last, testStart)
			}
			if _, err := nx.next(g); err != nil {
				t.Fatalf("after the first Grant: %v", err)
			}
		})
	}
	// The control: without a gate the same options issue at once.
	ungated, err := NewGenerator(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ungated.Next(); err != nil {
		t.Fatalf("control: an ungated generator: %v", err)
	}
}

func TestGateNotBefore(t *testing.T) {
	tests := []struct {
		name      string
		notBefore time.Duration // GeneratorOptions.NotBefore, from the clock's time
		lease     time.Duration // the first Grant's NotBefore, as a lease sends it
		wantAfter time.Duration
	}{
		{name: "lease floor", lease: 3 * time.Second, wantAfter: 3 * time.Second},
		{name: "config floor higher", notBefore: 4 * time.Second, lease: 3 * time.Second, wantAfter: 4 * time.Second},
		{name: "lease floor higher", notBefore: 2 * time.Second, lease: 3 * time.Second, wantAfter: 3 * time.Second},
		{name: "floor in the past", lease: -time.Hour, wantAfter: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newStepClock(testStart)
			opts := GeneratorOptions{Worker: 5, Clock: clock, MaxWait: -1}
			if tt.notBefore != 0 {
				opts.NotBefore = testStart.Add(tt.notBefore)
			}
			g, gate, err := NewGatedGenerator(opts)
			if err != nil {
				t.Fatal(err)
			}
			gate.Grant(Grant{NotBefore: testStart.Add(tt.lease), Until: testStart.Add(time.Minute)})
			floor := testStart.Add(tt.wantAfter)
			if tt.wantAfter > 0 {
				if _, err := g.Next(); !errors.Is(err, ErrClockBehind) {
					t.Fatalf("Next with the clock before the floor: got %v, want ErrClockBehind", err)
				}
				clock.Add(tt.wantAfter + time.Millisecond)
			}
			id, err := g.Next()
			if err != nil {
				t.Fatal(err)
			}
			at := DefaultLayout.Decode(id).Time
			if tt.wantAfter > 0 && !at.After(floor.Truncate(time.Millisecond)) {
				t.Fatalf("first ID at %s, want after %s", at, floor)
			}
			if tt.wantAfter <= 0 && !at.Equal(testStart) {
				t.Fatalf("first ID at %s, want the clock's %s", at, testStart)
			}
			if s := g.Stats(); s.IDs != 1 {
				t.Fatalf("Stats().IDs = %d after one ID", s.IDs)
			}
		})
	}
}

// nexter issues IDs one way or the other, for tests that run over both.
type nexter struct {
	name string
	next func(g *Generator) ([]ID, error)
}

var nexters = []nexter{
	{"Next", func(g *Generator) ([]ID, error) {
		id, err := g.Next()
		if err != nil {
			return nil, err
		}
		return []ID{id}, nil
	}},
	{"NextN", func(g *Generator) ([]ID, error) {
		ids := make([]ID, 3)
		err := g.NextN(ids)
		if err != nil { // what was filled before the error is issued
			for i, id := range ids {
				if id == 0 {
					return ids[:i], err
				}
			}
		}
		return ids, err
	}},
}

func TestGateUntil(t *testing.T) {
	for _, nx := range nexters {
		t.Run(nx.name, func(t *testing.T) {
			g, gate, clock := newGated(t, GeneratorOptions{MaxWait: -1})
			gate.Grant(Grant{Until: clock.Now().Add(10 * time.Millisecond)})
			if _, err := nx.next(g); err != nil {
				t.Fatal(err)
			}
			clock.Add(10 * time.Millisecond)
			if _, err := nx.next(g); err != nil {
				t.Fatalf("in the last granted millisecond: %v", err)
			}
			clock.Add(time.Millisecond)
			_, err := nx.next(g)
			if !errors.Is(err, ErrLeaseExpired) || !strings.Contains(err.Error(), "last millisecond its lease has confirmed") {
				t.Fatalf("past Until: got %v, want ErrLeaseExpired", err)
			}
			// A renewal lets it go on.
			gate.Grant(Grant{Until: clock.Now().Add(time.Second)})
			ids, err := nx.next(g)
			if err != nil {
				t.Fatalf("after renewal: %v", err)
			}
			if at := DefaultLayout.Decode(ids[0]).Time; !at.Equal(clock.Now().Truncate(time.Millisecond).UTC()) {
				t.Fatalf("ID after renewal at %s, want the clock's %s", at, clock.Now())
			}
		})
	}
}

func TestGateGrantErr(t *testing.T) {
	expired := fmt.Errorf("%w: renewal failed: connection refused", ErrLeaseExpired)
	lost := fmt.Errorf("%w: worker 5 taken by another owner", ErrLeaseLost)
	tests := []struct {
		name  string
		grant func(now time.Time) Grant
		want  error
	}{
		{"expired", func(now time.Time) Grant { return Grant{Until: now.Add(-time.Millisecond), Err: expired} }, expired},
		{"expired, Until still ahead", func(now time.Time) Grant { return Grant{Until: now.Add(time.Second), Err: expired} }, nil},
		{"lost", func(now time.Time) Grant { return Grant{Until: now.Add(time.Second), Err: lost} }, lost},
		{"lost without Until", func(time.Time) Grant { return Grant{Err: lost} }, lost},
		{"no Until", func(time.Time) Grant { return Grant{} }, ErrLeaseExpired},
	}
	for _, tt := range tests {
		for _, nx := range nexters {
			t.Run(tt.name+"/"+nx.name, func(t *testing.T) {
				g, gate, clock := newGated(t, GeneratorOptions{})
				ids, err := nx.next(g)
				if err != nil {
					t.Fatal(err)
				}
				last := ids[len(ids)-1]
				final := gate.Grant(tt.grant(clock.Now()))
				if at := DefaultLayout.Decode(last).Time; final.Before(at) {
					t.Fatalf("grant returned %s, before the last ID's %s", final, at)
				}
				_, err = nx.next(g)
				switch {
				case tt.want == nil && err != nil:
					t.Fatalf("got %v, want an ID", err)
				case tt.want != nil && !errors.Is(err, tt.want):
					t.Fatalf("got %v, want %v", err, tt.want)
				}
			})
		}
	}
}

func TestGateRaiseFloor(t *testing.T) {
	g, gate, clock := newGated(t, GeneratorOptions{})
	if _, err := g.Next(); err != nil {
		t.Fatal(err)
	}
	floor := clock.Now().Add(2 * time.Second)
	gate.Grant(Grant{NotBefore: floor, Until: clock.Now().Add(time.Minute)})
	clock.Add(2*time.Second + time.Millisecond)
	id, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	if at := DefaultLayout.Decode(id).Time; !at.After(floor.Truncate(time.Millisecond)) {
		t.Fatalf("ID at %s, want after the raised floor %s", at, floor)
	}
	// A lower floor later changes nothing.
	gate.Grant(Grant{NotBefore: floor.Add(-time.Second), Until: clock.Now().Add(time.Minute)})
	next, err := g.Next()
	if err != nil || next <= id {
		t.Fatalf("after a lower floor: %d, %v; want an ID above %d", next, err, id)
	}
	if s := g.Stats(); s.IDs != 3 {
		t.Fatalf("Stats().IDs = %d, want 3", s.IDs)
	}
}

// TestGateNextNStopsAtUntil fills what the grant allows and no more.
func TestGateNextNStopsAtUntil(t *testing.T) {
	g, gate, clock := newGated(t, GeneratorOptions{})
	gate.Grant(Grant{Until: clock.Now()})
	ids := make([]ID, 5000)
	err := g.NextN(ids)
	if !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("NextN of 5,000 in one granted millisecond: got %v, want ErrLeaseExpired", err)
	}
	perMs := int(DefaultLayout.MaxSequence()) + 1
	if ids[perMs-1] == 0 || ids[perMs] != 0 {
		t.Fatalf("want the first %d filled and the rest untouched; got ids[%d]=%d ids[%d]=%d",
			perMs, perMs-1, ids[perMs-1], perMs, ids[perMs])
	}
}

// TestGateStopIsFinal runs goroutines issuing IDs while the lease is lost
// (once each has issued some): the time the lost grant returns bounds every
// ID ever issued, and none is issued after it.
func TestGateStopIsFinal(t *testing.T) {
	for _, nx := range nexters {
		t.Run(nx.name, func(t *testing.T) {
			watchdog(t, time.Minute)
			g, gate, err := NewGatedGenerator(GeneratorOptions{Worker: 5})
			if err != nil {
				t.Fatal(err)
			}
			gate.Grant(Grant{Until: time.Now().Add(time.Minute)})
			var (
				wg      sync.WaitGroup
				running sync.WaitGroup // each goroutine has issued
				mu      sync.Mutex
				issued  []ID
				start   = make(chan struct{})
			)
			running.Add(4)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					var mine []ID
					for {
						ids, err := nx.next(g)
						if len(mine) == 0 && len(ids) > 0 {
							running.Done()
						}
						mine = append(mine, ids...)
						if err != nil {
							if !errors.Is(err, ErrLeaseLost) {
								t.Errorf("got %v, want ErrLeaseLost", err)
							}
							if len(mine) == 0 {
								running.Done() // nothing issued: the test fails, without waiting on it
							}
							break
						}
					}
					mu.Lock()
					issued = append(issued, mine...)
					mu.Unlock()
				}()
			}
			close(start)
			running.Wait()
			final := gate.Grant(Grant{Err: fmt.Errorf("%w: closed", ErrLeaseLost)})
			atStop := g.Stats().IDs
			wg.Wait()
			if len(issued) == 0 {
				t.Fatal("no IDs issued before the stop")
			}
			// Nothing is issued beyond what Stats counted when the stop
			// returned. Stats may still count, for a moment, the unused
			// rest of a millisecond that a call in flight crossed out of
			// (it counts it as skipped just after its reservation): it
			// overcounts transiently, as its doc says, and is exact once
			// the calls have returned.
			if int64(len(issued)) > atStop {
				t.Fatalf("%d IDs issued, but Stats said %d when the stop returned", len(issued), atStop)
			}
			if quiet := g.Stats().IDs; int64(len(issued)) != quiet {
				t.Fatalf("%d IDs issued, but Stats says %d once every call returned (%d when the stop returned)", len(issued), quiet, atStop)
			}
			for _, id := range issued {
				if at := DefaultLayout.Decode(id).Time; at.After(final) {
					t.Fatalf("ID %d at %s is after the final time %s", id, at, final)
				}
			}
		})
	}
}

// TestGrantJudgesReservation: a grant made while a call holds a
// reservation it has not yet judged, or between the call's look at the
// grant and its reservation, binds that call. A floor raised after the
// reservation refuses it (the call then waits for the floor: MaxWait is
// negative here, so it fails with ErrClockBehind), a limit dropped after it
// refuses it, and a stop before it refuses it with the stop's error. The
// controls, which issue what they reserved without judging it, issue an ID
// at the floor, past the limit, or after the stop's final time.
func TestGrantJudgesReservation(t *testing.T) {
	lost := fmt.Errorf("%w: taken by another owner", ErrLeaseLost)
	expired := fmt.Errorf("%w: renewal failed", ErrLeaseExpired)
	tests := []struct {
		name  string
		after bool // the grant comes after the reservation, else before it
		grant func(now time.Time) Grant
		want  error
		// broken says what is wrong with an ID at the time at, issued by
		// the call, given the grant and the time Grant returned; "" when
		// nothing is.
		broken func(at, final time.Time, gr Grant) string
	}{
		{"floor raised after the reservation", true,
			func(now time.Time) Grant { return Grant{NotBefore: now.Add(time.Second), Until: now.Add(time.Minute)} },
			ErrClockBehind,
			func(at, _ time.Time, gr Grant) string {
				if !at.After(gr.NotBefore.Truncate(time.Millisecond)) {
					return "at or before the floor " + gr.NotBefore.String()
				}
				return ""
			}},
		{"limit dropped after the reservation", true,
			func(now time.Time) Grant { return Grant{Until: now.Add(-time.Millisecond), Err: expired} },
			expired,
			func(at, _ time.Time, gr Grant) string {
				if at.After(gr.Until) {
					return "past the limit " + gr.Until.String()
				}
				return ""
			}},
		{"stopped before the reservation", false,
			func(time.Time) Grant { return Grant{Err: lost} },
			lost,
			func(_, final time.Time, _ Grant) string {
				return "issued by a call that reserved it after the stop (final time " + final.String() + ")"
			}},
	}
	for _, tt := range tests {
		for _, nx := range nexters {
			for _, control := range []bool{false, true} {
				name := tt.name + "/" + nx.name
				if control {
					name += "/control"
				}
				t.Run(name, func(t *testing.T) {
					g, gate, clock := newGated(t, GeneratorOptions{MaxWait: -1})
					g.setDefences(defences{noGrantJudge: control})
					if _, err := nx.next(g); err != nil {
						t.Fatal(err)
					}
					var (
						gr       Grant
						final    time.Time
						reserved int64 = -1 // the state the grant met, after a reservation
					)
					run := func() {
						g.setHooks(nil)
						gr = tt.grant(clock.Now())
						if tt.after {
							reserved = g.state.Load()
						}
						final = gate.Grant(gr)
					}
					if tt.after {
						g.setHooks(&hooks{afterReserve: run})
					} else {
						g.setHooks(&hooks{beforeReserve: run})
					}
					ids, err := nx.next(g)
					if final.IsZero() {
						t.Fatal("the hook never ran: the call reserved nothing")
					}
					if tt.after && tt.broken(DefaultLayout.Decode(g.compose(reserved)).Time, final, gr) == "" {
						t.Fatalf("the grant met a reservation at %s, which it allows: no fault", DefaultLayout.Decode(g.compose(reserved)).Time)
					}
					var faults []string
					for _, id := range ids {
						if f := tt.broken(DefaultLayout.Decode(id).Time, final, gr); f != "" {
							faults = append(faults, fmt.Sprintf("ID %d %s", id, f))
						}
					}
					switch {
					case control && len(faults) == 0:
						t.Fatalf("control: got %v, %v; want an ID the grant forbids", ids, err)
					case control:
						t.Logf("control: %s", strings.Join(faults, "; "))
					case len(faults) > 0:
						t.Fatal(strings.Join(faults, "; "))
					case !errors.Is(err, tt.want) || len(ids) != 0:
						t.Fatalf("got %v, %v; want no ID and %v", ids, err, tt.want)
					}
				})
			}
		}
	}
}

// TestStopLine: a stop that comes while a call holds a reservation it has
// not yet judged lets the call issue it, as the grant before the stop
// allows, and counts it in Stats when Grant returns; the final time Grant
// returns bounds it. The control, which judges every reservation by the
// stop, refuses that one after Grant returned, so Stats counted an ID that
// was never issued.
func TestStopLine(t *testing.T) {
	for _, nx := range nexters {
		for _, control := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/control=%v", nx.name, control), func(t *testing.T) {
				g, gate, _ := newGated(t, GeneratorOptions{})
				g.setDefences(defences{noStopLine: control})
				first, err := nx.next(g)
				if err != nil {
					t.Fatal(err)
				}
				var (
					final   time.Time
					counted int64 = -1
				)
				g.setHooks(&hooks{afterReserve: func() {
					g.setHooks(nil)
					final = gate.Grant(Grant{Err: fmt.Errorf("%w: closed", ErrLeaseLost)})
					counted = g.Stats().IDs
				}})
				ids, err := nx.next(g)
				if counted < 0 {
					t.Fatal("the hook never ran: the call reserved nothing")
				}
				issued := int64(len(first) + len(ids))
				if control {
					if errors.Is(err, ErrLeaseLost) && counted != issued {
						t.Logf("control: Stats counted %d IDs when the stop returned; %d were issued", counted, issued)
						return
					}
					t.Fatalf("control: got %v, %v and Stats %d of %d; want the reservation refused after Stats counted it", ids, err, counted, issued)
				}
				if err != nil || len(ids) == 0 {
					t.Fatalf("got %v, %v; want the reservation made before the stop issued", ids, err)
				}
				if counted != issued {
					t.Fatalf("Stats counted %d IDs when the stop returned; %d were issued", counted, issued)
				}
				for _, id := range ids {
					if at := DefaultLayout.Decode(id).Time; at.After(final) {
						t.Fatalf("ID %d at %s is after the stop's final time %s", id, at, final)
					}
				}
				if _, err := nx.next(g); !errors.Is(err, ErrLeaseLost) {
					t.Fatalf("after the stop: %v; want ErrLeaseLost", err)
				}
			})
		}
	}
}

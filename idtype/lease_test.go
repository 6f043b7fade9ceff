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

// testLease is a Lease under a test's control: it grants first at Bind,
// then whatever the test sends through give.
type testLease struct {
	worker  int64
	layout  Layout
	clock   Clock
	first   Grant
	bindErr error

	mu    sync.Mutex
	grant func(Grant) time.Time
}

func (l *testLease) Worker() int64  { return l.worker }
func (l *testLease) Layout() Layout { return l.layout }
func (l *testLease) Clock() Clock   { return l.clock }

func (l *testLease) Bind(grant func(Grant) time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bindErr != nil {
		return l.bindErr
	}
	if l.grant != nil {
		return errors.New("lease already bound")
	}
	l.grant = grant
	grant(l.first)
	return nil
}

func (l *testLease) give(g Grant) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.grant(g)
}

// newLeased returns a generator on a testLease for worker 5 of the default
// layout, granted a minute from the clock's time.
func newLeased(t testing.TB, cfg GeneratorOptions) (*Generator, *testLease, *stepClock) {
	t.Helper()
	clock := newStepClock(testStart)
	lease := &testLease{worker: 5, layout: DefaultLayout, clock: clock,
		first: Grant{Until: testStart.Add(time.Minute)}}
	cfg.Lease = lease
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g, lease, clock
}

func TestLeaseConfig(t *testing.T) {
	clock := newStepClock(testStart)
	other := Layout{Epoch: DefaultLayout.Epoch, WorkerBits: 8, SequenceBits: 14}
	ok := Grant{Until: testStart.Add(time.Minute)}
	tests := []struct {
		name    string
		cfg     GeneratorOptions
		lease   *testLease
		wantErr string // "" for success
		worker  int64
		layout  Layout
	}{
		{name: "worker and layout from the lease",
			lease: &testLease{worker: 9, layout: other, clock: clock, first: ok}, worker: 9, layout: other},
		{name: "same worker and layout",
			cfg:   GeneratorOptions{Worker: 9, Layout: other},
			lease: &testLease{worker: 9, layout: other, clock: clock, first: ok}, worker: 9, layout: other},
		{name: "same layout, epoch in another zone",
			cfg:   GeneratorOptions{Layout: Layout{Epoch: other.Epoch.In(time.FixedZone("x", 3600)), WorkerBits: 8, SequenceBits: 14}},
			lease: &testLease{worker: 9, layout: other, clock: clock, first: ok}, worker: 9, layout: other},
		{name: "clock set beside the lease",
			cfg:     GeneratorOptions{Clock: clock},
			lease:   &testLease{worker: 1, layout: DefaultLayout, clock: clock, first: ok},
			wantErr: "Clock is set together with Lease"},
		{name: "lease without clock",
			lease:   &testLease{worker: 1, layout: DefaultLayout, first: ok},
			wantErr: "Lease has no clock"},
		{name: "another worker",
			cfg:     GeneratorOptions{Worker: 2},
			lease:   &testLease{worker: 1, layout: DefaultLayout, clock: clock, first: ok},
			wantErr: "Worker 2 is set, but the lease holds worker 1"},
		{name: "another layout",
			cfg:     GeneratorOptions{Layout: DefaultLayout},
			lease:   &testLease{worker: 1, layout: other, clock: clock, first: ok},
			wantErr: "differs from the lease's"},
		{name: "worker outside the lease's layout",
			lease:   &testLease{worker: 256, layout: other, clock: clock, first: ok},
			wantErr: "Worker 256 is outside 0..255"},
		{name: "bind refused",
			lease:   &testLease{worker: 1, layout: DefaultLayout, clock: clock, bindErr: errors.New("lease closed")},
			wantErr: "Lease: lease closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Lease = tt.lease
			g, err := NewGenerator(tt.cfg)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NewGenerator: got %v, want ErrInvalidOptions saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g.Worker() != tt.worker || g.Layout() != tt.layout && !g.Layout().Epoch.Equal(tt.layout.Epoch) {
				t.Fatalf("worker %d layout %+v, want %d %+v", g.Worker(), g.Layout(), tt.worker, tt.layout)
			}
			id, err := g.Next()
			if err != nil {
				t.Fatal(err)
			}
			if p := g.Layout().Decode(id); p.Worker != tt.worker {
				t.Fatalf("ID %d decodes to worker %d, want %d", id, p.Worker, tt.worker)
			}
		})
	}
}

func TestLeaseBindsOnce(t *testing.T) {
	_, lease, _ := newLeased(t, GeneratorOptions{})
	if _, err := NewGenerator(GeneratorOptions{Lease: lease}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("second generator on one lease: got %v, want ErrInvalidOptions", err)
	}
}

func TestLeaseNotBefore(t *testing.T) {
	tests := []struct {
		name      string
		notBefore time.Duration // GeneratorOptions.NotBefore, from the clock's time
		lease     time.Duration // the first Grant's NotBefore
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
			lease := &testLease{worker: 5, layout: DefaultLayout, clock: clock,
				first: Grant{NotBefore: testStart.Add(tt.lease), Until: testStart.Add(time.Minute)}}
			cfg := GeneratorOptions{Lease: lease, MaxWait: -1}
			if tt.notBefore != 0 {
				cfg.NotBefore = testStart.Add(tt.notBefore)
			}
			g, err := NewGenerator(cfg)
			if err != nil {
				t.Fatal(err)
			}
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

func TestLeaseUntil(t *testing.T) {
	for _, nx := range nexters {
		t.Run(nx.name, func(t *testing.T) {
			g, lease, clock := newLeased(t, GeneratorOptions{MaxWait: -1})
			lease.give(Grant{Until: clock.Now().Add(10 * time.Millisecond)})
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
			lease.give(Grant{Until: clock.Now().Add(time.Second)})
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

func TestLeaseGrantErr(t *testing.T) {
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
				g, lease, clock := newLeased(t, GeneratorOptions{})
				ids, err := nx.next(g)
				if err != nil {
					t.Fatal(err)
				}
				last := ids[len(ids)-1]
				final := lease.give(tt.grant(clock.Now()))
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

func TestLeaseRaiseFloor(t *testing.T) {
	g, lease, clock := newLeased(t, GeneratorOptions{})
	if _, err := g.Next(); err != nil {
		t.Fatal(err)
	}
	floor := clock.Now().Add(2 * time.Second)
	lease.give(Grant{NotBefore: floor, Until: clock.Now().Add(time.Minute)})
	clock.Add(2*time.Second + time.Millisecond)
	id, err := g.Next()
	if err != nil {
		t.Fatal(err)
	}
	if at := DefaultLayout.Decode(id).Time; !at.After(floor.Truncate(time.Millisecond)) {
		t.Fatalf("ID at %s, want after the raised floor %s", at, floor)
	}
	// A lower floor later changes nothing.
	lease.give(Grant{NotBefore: floor.Add(-time.Second), Until: clock.Now().Add(time.Minute)})
	next, err := g.Next()
	if err != nil || next <= id {
		t.Fatalf("after a lower floor: %d, %v; want an ID above %d", next, err, id)
	}
	if s := g.Stats(); s.IDs != 3 {
		t.Fatalf("Stats().IDs = %d, want 3", s.IDs)
	}
}

// TestLeaseNextNStopsAtUntil fills what the grant allows and no more.
func TestLeaseNextNStopsAtUntil(t *testing.T) {
	g, lease, clock := newLeased(t, GeneratorOptions{})
	lease.give(Grant{Until: clock.Now()})
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

// TestLeaseStopIsFinal runs goroutines issuing IDs while the lease is lost:
// the time the lost grant returns bounds every ID ever issued, and none is
// issued after it.
func TestLeaseStopIsFinal(t *testing.T) {
	for _, nx := range nexters {
		t.Run(nx.name, func(t *testing.T) {
			lease := &testLease{worker: 5, layout: DefaultLayout, clock: SystemClock(),
				first: Grant{Until: time.Now().Add(time.Minute)}}
			g, err := NewGenerator(GeneratorOptions{Lease: lease})
			if err != nil {
				t.Fatal(err)
			}
			var (
				wg     sync.WaitGroup
				mu     sync.Mutex
				issued []ID
				start  = make(chan struct{})
			)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					var mine []ID
					for {
						ids, err := nx.next(g)
						mine = append(mine, ids...)
						if err != nil {
							if !errors.Is(err, ErrLeaseLost) {
								t.Errorf("got %v, want ErrLeaseLost", err)
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
			time.Sleep(20 * time.Millisecond)
			final := lease.give(Grant{Err: fmt.Errorf("%w: closed", ErrLeaseLost)})
			after := g.Stats().IDs
			wg.Wait()
			if len(issued) == 0 {
				t.Fatal("no IDs issued before the stop")
			}
			if int64(len(issued)) != after {
				t.Fatalf("%d IDs issued, but Stats said %d when the stop returned", len(issued), after)
			}
			for _, id := range issued {
				if at := DefaultLayout.Decode(id).Time; at.After(final) {
					t.Fatalf("ID %d at %s is after the final time %s", id, at, final)
				}
			}
		})
	}
}

package workerid

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// sixBits is a layout with 64 worker numbers.
var sixBits = idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 6, SequenceBits: 12}

func TestAcquireAllNumbers(t *testing.T) {
	forKinds(t, func(t *testing.T, b backend) {
		// A TTL twice the default: a starved CPU can hold the 64
		// Acquires past a lease of 10 s, and a lease that lapsed leaves
		// its number rightly free to a later Acquire. The namespace's
		// record is old, so that Redis has no loss window to wait out.
		p := b.pool(t, b.addr, Options{Layout: sixBits, TTL: 20 * time.Second})
		trustRecord(t, p)
		if p.Size() != 64 {
			t.Fatalf("Size() = %d, want 64 (1023 is outside 6 bits)", p.Size())
		}
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			leases []*Lease
			errs   []error
		)
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				l, err := p.Acquire(ctx)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				leases = append(leases, l)
			}()
		}
		wg.Wait()
		for _, l := range leases {
			t.Cleanup(func() { closeLease(t, l) })
		}
		if len(errs) > 0 {
			t.Fatalf("%d of 64 Acquires failed; first: %v", len(errs), errs[0])
		}
		var workers []int64
		for _, l := range leases {
			workers = append(workers, l.Worker())
		}
		slices.Sort(workers)
		if workers = slices.Compact(workers); len(workers) != 64 {
			t.Fatalf("64 leases hold %d distinct numbers: %v", len(workers), workers)
		}

		_, err := p.Acquire(context.Background())
		if !errors.Is(err, ErrNoFreeWorker) || !strings.Contains(err.Error(), "all 64 worker numbers") {
			t.Fatalf("65th Acquire: got %v, want ErrNoFreeWorker saying all 64 are taken", err)
		}

		// A number given back can be taken again, and only that one.
		closeLease(t, leases[17])
		l := acquire(t, p)
		if l.Worker() != leases[17].Worker() {
			t.Fatalf("after closing worker %d, Acquire got %d", leases[17].Worker(), l.Worker())
		}
	})
}

func TestAcquireSkipsReserved(t *testing.T) {
	twoBits := idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 2, SequenceBits: 12}
	forKinds(t, func(t *testing.T, b backend) {
		p := b.pool(t, b.addr, Options{Layout: twoBits, Reserved: []int64{1, 3}})
		a, c := acquire(t, p), acquire(t, p)
		got := []int64{a.Worker(), c.Worker()}
		slices.Sort(got)
		if !slices.Equal(got, []int64{0, 2}) {
			t.Fatalf("leased %v, want [0 2] with 1 and 3 reserved", got)
		}
		if _, err := p.Acquire(context.Background()); !errors.Is(err, ErrNoFreeWorker) ||
			!strings.Contains(err.Error(), "2 reserved") {
			t.Fatalf("third Acquire: got %v, want ErrNoFreeWorker naming 2 reserved", err)
		}
	})
}

func TestReserved(t *testing.T) {
	tests := []struct {
		name     string
		layout   idtype.Layout
		reserved []int64
		want     []int64
	}{
		{"default layout skips snowflake_id's 1023", idtype.DefaultLayout, nil, []int64{1023}},
		{"and the reserved", idtype.DefaultLayout, []int64{5, 0}, []int64{0, 5, 1023}},
		{"6 bits", sixBits, nil, nil},
		{"6 bits, reserved twice", sixBits, []int64{9, 9}, []int64{9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newPool(Options{Layout: tt.layout, Reserved: tt.reserved}, defences{},
				func(Options, []int64, *defences) store { return &pgStore{} })
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.reserved, tt.want) || p.Size() != int(tt.layout.MaxWorker()+1)-len(tt.want) {
				t.Fatalf("reserved %v, size %d; want %v, %d", p.reserved, p.Size(), tt.want,
					int(tt.layout.MaxWorker()+1)-len(tt.want))
			}
		})
	}
}

func TestOptions(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string // in the error; "" for none
	}{
		{"zero", Options{}, ""},
		{"ttl only", Options{TTL: time.Minute}, ""},
		{"tiny ttl", Options{TTL: time.Millisecond}, "TTL 1ms is under 10ms"},
		{"margin past ttl", Options{TTL: time.Second, Margin: time.Second}, "Margin 1s is outside"},
		{"negative margin", Options{Margin: -time.Second}, "Margin -1s is outside"},
		{"renew too slow", Options{TTL: time.Second, Margin: 500 * time.Millisecond, RenewEvery: 500 * time.Millisecond},
			"RenewEvery 500ms is outside (0, TTL - Margin = 500ms)"},
		{"reserved out of range", Options{Layout: sixBits, Reserved: []int64{64}}, "Reserved number 64 is outside 0..63"},
		{"bad layout", Options{Layout: idtype.Layout{WorkerBits: 40}}, "Layout"},
		{"negative start wait", Options{MaxStartWait: -1}, "MaxStartWait"},
		{"negative connections", Options{MaxConns: -1}, "MaxConns -1 is negative"},
		{"negative drift", Options{MaxDrift: -time.Millisecond}, "MaxDrift -1ms is outside"},
		{"drift over the cap", Options{MaxDrift: idtype.MaxDriftCap + time.Millisecond}, "MaxDrift 10.001s is outside"},
		{"never wait", Options{MaxWait: -1}, ""},
		{"everything reserved", Options{Layout: idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 1, SequenceBits: 12},
			Reserved: []int64{0, 1}}, "leaves no worker number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newPool(tt.o, defences{}, func(Options, []int64, *defences) store { return &pgStore{} })
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, idtype.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want idtype.ErrInvalidOptions saying %q", err, tt.want)
			}
		})
	}
	if _, err := Redis(nil, Options{}); !errors.Is(err, idtype.ErrInvalidOptions) {
		t.Fatalf("Redis(nil): got %v", err)
	}
	if _, err := Postgres(nil, Options{}); !errors.Is(err, idtype.ErrInvalidOptions) {
		t.Fatalf("Postgres(nil): got %v", err)
	}
}

// TestRedisPrefersUsedNumbers: a Redis pool takes a number given back
// before one never leased, so that a namespace's numbers stay few.
func TestRedisPrefersUsedNumbers(t *testing.T) {
	twoBits := idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 2, SequenceBits: 12}
	p := redisPool(t, testenv.Redis(t), testenv.KeyPrefix(t), Options{Layout: twoBits})
	trustRecord(t, p)
	first := acquire(t, p)
	closeLease(t, first)
	for i := range 8 {
		l := acquire(t, p)
		if l.Worker() != first.Worker() {
			t.Fatalf("round %d: took fresh number %d, not the used %d", i, l.Worker(), first.Worker())
		}
		closeLease(t, l)
	}
}

// TestAcquireStartsAfterMark: A issues and gives its number back; B, whose
// clock is 1 s behind, takes it and starts after A's last ID, waiting for
// its clock to get there. The control run, whose B does not start after
// the number's high-water mark, repeats A's IDs. (Renewals are 3 s apart:
// the first renewal, which raises the floor to the mark the ownership
// started after, comes after B has gone through A's milliseconds.)
func TestAcquireStartsAfterMark(t *testing.T) {
	for _, defended := range []bool{true, false} {
		name := map[bool]string{true: "defended", false: "control: no floor"}[defended]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			forKinds(t, func(t *testing.T, b backend) {
				run := func(t *testing.T) int {
					testenv.Deadline(t, time.Minute)
					o := oneNumber
					o.TTL, o.Margin, o.RenewEvery = 10*time.Second, 2*time.Second, 3*time.Second
					pa := b.pool(t, b.addr, o)
					trustRecord(t, pa)
					ob := o
					ob.Clock = offsetClock{idtype.SystemClock(), -time.Second}
					pb := b.poolWithout(t, b.addr, ob, defences{noFloor: !defended})
					c := newCollector()
					a := acquire(t, pa)
					c.run("A", generator(t, a))
					c.waitIssued(t, 10*time.Second, 500, "A")
					closeLease(t, a)
					lastA := pa.Layout().Decode(c.lastID("A")).Time
					lb := acquire(t, pb)
					c.run("B", generator(t, lb))
					waitFor(t, 30*time.Second, "B to issue past A's last ID", func() bool {
						return pb.Layout().Decode(c.lastID("B")).Time.After(lastA)
					})
					lists := c.finish()
					dups, total := duplicates(lists)
					t.Logf("A issued %d IDs, B %d; %d duplicates; B's floor %s, A's last ID at %s", len(lists["A"]),
						len(lists["B"]), dups, lb.Status().NotBefore.Format(time.StampMilli), lastA.Format(time.StampMilli))
					if defended && dups > 0 {
						t.Fatalf("%d duplicate IDs among %d", dups, total)
					}
					return dups
				}
				if defended {
					run(t)
					return
				}
				tryControl(t, func(t *testing.T) bool { return run(t) > 0 })
			})
		})
	}
}

// TestAcquireLogsNoZeroFloor: the "lease acquired" line of a number that
// never had an owner names no floor (the Unix epoch there reads as a
// wrong time, not as "none"), and the line of a number taken again names
// the floor it starts after, so the check can see one.
func TestAcquireLogsNoZeroFloor(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	dsn := testenv.Postgres(t)
	migrate(t, dsn)
	var log testenv.LogBuffer
	p := postgresPool(t, dsn, Options{Layout: sixBits, Reserved: allBut(sixBits, 9),
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	acquiredLine := func() string {
		t.Helper()
		lines := strings.Split(log.String(), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if strings.Contains(lines[i], `msg="workerid: lease acquired"`) {
				return lines[i]
			}
		}
		t.Fatalf("no lease acquired line in:\n%s", log.String())
		return ""
	}

	l, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if line := acquiredLine(); strings.Contains(line, "floor=") {
		t.Errorf("a number without a high-water mark logs a floor: %s", line)
	}
	if _, err := generator(t, l).Next(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if line := acquiredLine(); !strings.Contains(line, "floor="+strconv.Itoa(time.Now().Year())) {
		t.Errorf("a number taken again logs no floor of this year: %s", line)
	}
}

// allBut returns every worker number of layout except those in keep, for
// Options.Reserved of a pool that may take only keep.
func allBut(layout idtype.Layout, keep ...int64) []int64 {
	var r []int64
	for w := range layout.MaxWorker() + 1 {
		if !slices.Contains(keep, w) {
			r = append(r, w)
		}
	}
	return r
}

// TestWaitForFree: with every number held, Acquire with
// Options.WaitForFree waits, says so in the log, and takes the number
// once its holder closes it; when its context ends first, the error wraps
// ErrNoFreeWorker and the context's error. Without the option it fails at
// once with ErrNoFreeWorker.
func TestWaitForFree(t *testing.T) {
	forKinds(t, func(t *testing.T, b backend) {
		ctx := testenv.Deadline(t, time.Minute)
		pa := b.pool(t, b.addr, oneNumber)
		trustRecord(t, pa)
		a := acquire(t, pa)
		if _, err := pa.Acquire(ctx); !errors.Is(err, ErrNoFreeWorker) {
			t.Fatalf("Acquire without WaitForFree, every number held: %v, want ErrNoFreeWorker", err)
		}

		var log testenv.LogBuffer
		ob := oneNumber
		ob.WaitForFree = true
		ob.Logger = slog.New(slog.NewTextHandler(&log, nil))
		pb := b.pool(t, b.addr, ob)
		waiting := func(n int) {
			t.Helper()
			waitFor(t, 30*time.Second, "Acquire to say it waits", func() bool {
				return strings.Count(log.String(), "waiting for one to free up") >= n
			})
		}
		// The context ends while Acquire waits.
		short, cancel := context.WithCancel(ctx)
		ended := make(chan error, 1)
		go func() {
			_, err := pb.Acquire(short)
			ended <- err
		}()
		waiting(1)
		cancel()
		if err := <-ended; !errors.Is(err, ErrNoFreeWorker) || !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire whose context ended while every number was held: %v, want ErrNoFreeWorker and Canceled", err)
		}

		got := make(chan *Lease, 1)
		go func() {
			l, err := pb.Acquire(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		waiting(2)
		select {
		case l := <-got:
			t.Fatalf("Acquire returned worker %v while every number was held", l)
		default:
		}
		closeLease(t, a)
		select {
		case l := <-got:
			if l == nil {
				t.FailNow()
			}
			if l.Worker() != a.Worker() {
				t.Errorf("took %d, want the number given back, %d", l.Worker(), a.Worker())
			}
			closeLease(t, l)
		case <-ctx.Done():
			t.Fatal("Acquire did not take the number given back")
		}
	})
}

// TestJitter: a lease's first renewal goes out between half of RenewEvery
// and all of it, and the next ones between four fifths of it and all of
// it, at random, so that a fleet started together spreads its renewals.
func TestJitter(t *testing.T) {
	const every = time.Second
	for _, tc := range []struct {
		frac   float64
		lo, hi time.Duration
	}{{0.5, every / 2, every}, {0.2, every * 4 / 5, every}} {
		seen := map[time.Duration]bool{}
		for range 1000 {
			d := jitter(every, tc.frac)
			if d <= tc.lo || d > tc.hi {
				t.Fatalf("jitter(%v, %v) = %v, outside (%v, %v]", every, tc.frac, d, tc.lo, tc.hi)
			}
			seen[d/time.Millisecond] = true
		}
		// 1000 draws of a uniform spread over 200 or 500 ms fill most of
		// its milliseconds; a fixed delay fills one.
		if len(seen) < 100 {
			t.Errorf("jitter(%v, %v) took %d distinct milliseconds in 1000 draws", every, tc.frac, len(seen))
		}
	}
}

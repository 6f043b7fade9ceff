package workerid

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testenv"
)

// sixBits is a layout with 64 worker numbers.
var sixBits = idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 6, SequenceBits: 12}

func TestAcquireAllNumbers(t *testing.T) {
	forKinds(t, func(t *testing.T, b backend) {
		// A TTL twice the default: under heavy load (load average 35 was
		// seen) a lease of 10 s lapsed before the 65th Acquire, which then
		// rightly found its number free. (A fresh Redis waits out one TTL
		// before the first ID, hence the Acquires' 60 s.)
		p := b.pool(t, b.addr, Options{Layout: sixBits, TTL: 20 * time.Second})
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
		t.Logf("64 concurrent Acquires sent %d take statements or scripts", p.takes.Load())
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

func TestCandidates(t *testing.T) {
	tests := []struct {
		name     string
		layout   idtype.Layout
		reserved []int64
		want     int // how many
		without  []int64
	}{
		{"default layout skips snowflake_id's 1023", idtype.DefaultLayout, nil, 1023, []int64{1023}},
		{"and the reserved", idtype.DefaultLayout, []int64{0, 5}, 1021, []int64{0, 5, 1023}},
		{"6 bits", sixBits, nil, 64, nil},
		{"6 bits, reserved twice", sixBits, []int64{9, 9}, 63, []int64{9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Options{Layout: tt.layout, Reserved: tt.reserved}.resolve()
			if err != nil {
				t.Fatal(err)
			}
			c := o.candidates()
			if len(c) != tt.want {
				t.Fatalf("%d candidates, want %d", len(c), tt.want)
			}
			for _, w := range tt.without {
				if slices.Contains(c, w) {
					t.Fatalf("candidates hold %d", w)
				}
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
		{"negative drift", Options{MaxDrift: -time.Millisecond}, "MaxDrift -1ms is outside"},
		{"drift over the cap", Options{MaxDrift: idtype.MaxDriftCap + time.Millisecond}, "MaxDrift 10.001s is outside"},
		{"never wait", Options{MaxWait: -1}, ""},
		{"everything reserved", Options{Layout: idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 1, SequenceBits: 12},
			Reserved: []int64{0, 1}}, "leaves no worker number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newPool(tt.o, func(Options, *defences, *atomic.Int64) store { return &pgStore{} })
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

// TestRedisPrefersUsedNumbers: a Redis pool takes a number with a record
// before a fresh one, which it would have to wait out for one TTL.
func TestRedisPrefersUsedNumbers(t *testing.T) {
	twoBits := idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 2, SequenceBits: 12}
	p := redisPool(t, testenv.Redis(t), testenv.KeyPrefix(t), Options{Layout: twoBits})
	first := acquire(t, p) // fresh: waits out one TTL
	closeLease(t, first)
	for i := range 8 { // from random starts
		start := time.Now()
		l := acquire(t, p)
		if l.Worker() != first.Worker() {
			t.Fatalf("round %d: took fresh number %d, not the used %d", i, l.Worker(), first.Worker())
		}
		if waited := time.Since(start); waited > p.opts.TTL/2 {
			t.Fatalf("round %d: Acquire of a used number waited %v", i, waited)
		}
		closeLease(t, l)
	}
}

// TestPostgresSkipsDatabaseReserved: a Postgres pool skips the number the
// database's snowflake_id() uses, also when it was moved.
func TestPostgresSkipsDatabaseReserved(t *testing.T) {
	dsn := testenv.Postgres(t)
	db := openDB(t, dsn)
	if err := MigrateDB(t.Context(), db, 2); err != nil {
		t.Fatal(err)
	}
	twoBits := idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 2, SequenceBits: 12}
	p := postgresPool(t, dsn, Options{Layout: twoBits})
	var got []int64
	for _, l := range acquireN(t, p, 3) {
		got = append(got, l.Worker())
	}
	slices.Sort(got)
	if !slices.Equal(got, []int64{0, 1, 3}) {
		t.Fatalf("leased %v, want [0 1 3]: snowflake_id() uses 2", got)
	}
	if _, err := p.Acquire(t.Context()); !errors.Is(err, ErrNoFreeWorker) {
		t.Fatalf("fourth Acquire: got %v, want ErrNoFreeWorker", err)
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

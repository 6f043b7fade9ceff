package idtype

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// testLayouts are the layouts every layout test runs on: the default,
// another epoch, the classic datacenter/worker and machine/process/
// clock-back splits (both 10 worker bits), and wide or narrow sequences.
var testLayouts = map[string]Layout{
	"default 41/10/12":       DefaultLayout,
	"epoch 2024, 41/10/12":   {Epoch: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), WorkerBits: 10, SequenceBits: 12},
	"sonyflake-like 39/16/8": {Epoch: time.Date(2014, 9, 1, 0, 0, 0, 0, time.UTC), WorkerBits: 16, SequenceBits: 8},
	"wide sequence 39/8/16":  {Epoch: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), WorkerBits: 8, SequenceBits: 16},
	"single worker 43/0/20":  {Epoch: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), WorkerBits: 0, SequenceBits: 20},
	"no sequence 50/13/0":    {Epoch: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), WorkerBits: 13, SequenceBits: 0},
}

func TestLayoutValidate(t *testing.T) {
	for name, l := range testLayouts {
		if err := l.Validate(); err != nil {
			t.Errorf("%s: Validate() = %v", name, err)
		}
	}
	bad := map[string]Layout{
		"zero":           {},
		"no epoch":       {WorkerBits: 10, SequenceBits: 12},
		"future epoch":   {Epoch: time.Now().Add(time.Hour), WorkerBits: 10, SequenceBits: 12},
		"too few time":   {Epoch: DefaultLayout.Epoch, WorkerBits: 22, SequenceBits: 22},
		"no time at all": {Epoch: DefaultLayout.Epoch, WorkerBits: 31, SequenceBits: 31},
		"worker bits":    {Epoch: DefaultLayout.Epoch, WorkerBits: 40, SequenceBits: 1},
		"sequence bits":  {Epoch: DefaultLayout.Epoch, WorkerBits: 1, SequenceBits: 40},
		"wrapping sum":   {Epoch: DefaultLayout.Epoch, WorkerBits: math.MaxUint - 1, SequenceBits: 12},
		"before 1970":    {Epoch: time.Date(1969, 12, 31, 23, 59, 59, 999e6, time.UTC), WorkerBits: 10, SequenceBits: 12},
		"year 1600":      {Epoch: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), WorkerBits: 10, SequenceBits: 12},
	}
	for name, l := range bad {
		if err := l.Validate(); !errors.Is(err, ErrInvalidLayout) {
			t.Errorf("%s: Validate() = %v; want ErrInvalidLayout", name, err)
		}
	}
	// An epoch before 1970 is named in the error, and a generator refuses
	// it rather than failing every call (its nanoseconds overflow before
	// 1678, and the time field is counted from a negative Unix time).
	l := bad["year 1600"]
	if err := l.Validate(); err == nil || !strings.Contains(err.Error(), "1600-01-01T00:00:00Z") {
		t.Errorf("Validate() of an epoch in 1600 = %v; want an error naming it", err)
	}
	if _, err := NewGenerator(GeneratorOptions{Layout: l}); !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("NewGenerator with an epoch in 1600: %v; want ErrInvalidLayout", err)
	}
	// 1970 itself is fine.
	unix := Layout{Epoch: time.Unix(0, 0).UTC(), WorkerBits: 10, SequenceBits: 12}
	if err := unix.Validate(); err != nil {
		t.Errorf("Validate() of the Unix epoch = %v", err)
	}
}

func TestLayoutDefault(t *testing.T) {
	l := DefaultLayout
	if l.TimeBits() != 41 || l.MaxWorker() != 1023 || l.MaxSequence() != 4095 {
		t.Errorf("DefaultLayout is %d/%d/%d bits", l.TimeBits(), l.WorkerBits, l.SequenceBits)
	}
	if got := l.Epoch.UnixMilli(); got != 1288834974657 {
		t.Errorf("DefaultLayout epoch = %d ms; want Twitter's 1288834974657", got)
	}
	// 2^41 ms after 2010-11-04 is in 2080.
	if got := l.MaxTime(); got.Year() != 2080 {
		t.Errorf("MaxTime() = %v; want a day in 2080", got)
	}
}

func TestLayoutComposeDecode(t *testing.T) {
	for name, l := range testLayouts {
		times := []time.Time{l.Epoch, l.Epoch.Add(time.Millisecond), time.Now().Truncate(time.Millisecond), l.MaxTime()}
		for _, at := range times {
			for _, worker := range []int64{0, l.MaxWorker() / 2, l.MaxWorker()} {
				for _, seq := range []int64{0, l.MaxSequence() / 2, l.MaxSequence()} {
					id, err := l.Compose(at, worker, seq)
					if err != nil {
						t.Fatalf("%s: Compose(%v, %d, %d): %v", name, at, worker, seq, err)
					}
					if id < 0 {
						t.Fatalf("%s: Compose gave a negative ID %d", name, id)
					}
					p := l.Decode(id)
					if !p.Time.Equal(at) || p.Worker != worker || p.Sequence != seq {
						t.Errorf("%s: Decode(Compose(%v, %d, %d)) = %+v", name, at, worker, seq, p)
					}
					if first, last := l.FirstID(at), l.LastID(at); id < first || id > last {
						t.Errorf("%s: ID %d outside [FirstID %d, LastID %d] of its ms", name, id, first, last)
					}
				}
			}
		}
		// The widths add up: the largest ID of the last millisecond is
		// 2^63-1 exactly.
		if got := l.LastID(l.MaxTime()); got != MaxID {
			t.Errorf("%s: LastID(MaxTime) = %d; want %d", name, got, MaxID)
		}
	}
}

func TestLayoutComposeRefuses(t *testing.T) {
	l := DefaultLayout
	cases := map[string]struct {
		at          time.Time
		worker, seq int64
	}{
		"before epoch":   {l.Epoch.Add(-time.Millisecond), 0, 0},
		"after max time": {l.MaxTime().Add(time.Millisecond), 0, 0},
		"worker -1":      {l.Epoch, -1, 0},
		"worker 1024":    {l.Epoch, 1024, 0},
		"sequence -1":    {l.Epoch, 0, -1},
		"sequence 4096":  {l.Epoch, 0, 4096},
	}
	for name, tc := range cases {
		if _, err := l.Compose(tc.at, tc.worker, tc.seq); !errors.Is(err, ErrInvalidLayout) {
			t.Errorf("%s: Compose error %v; want ErrInvalidLayout", name, err)
		}
	}
}

func TestFirstIDRanges(t *testing.T) {
	l := DefaultLayout
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	first, last := l.FirstID(at), l.LastID(at)
	if next := l.FirstID(at.Add(time.Millisecond)); next != last+1 {
		t.Errorf("FirstID of the next ms = %d; want LastID+1 = %d", next, last+1)
	}
	// Sub-millisecond parts fall into their millisecond.
	if got := l.FirstID(at.Add(999 * time.Microsecond)); got != first {
		t.Errorf("FirstID(at+999µs) = %d; want %d", got, first)
	}
	if got := l.FirstID(l.Epoch.Add(-time.Hour)); got != 0 {
		t.Errorf("FirstID(before epoch) = %d; want 0", got)
	}
	if got := l.FirstID(l.MaxTime().Add(time.Hour)); got != MaxID {
		t.Errorf("FirstID(after MaxTime) = %d; want MaxID", got)
	}
	if got := l.LastID(l.Epoch.Add(-time.Hour)); got != 0 {
		t.Errorf("LastID(before epoch) = %d; want 0", got)
	}
}

func TestLayoutIsZero(t *testing.T) {
	if !(Layout{}).IsZero() {
		t.Error("Layout{}.IsZero() = false")
	}
	for _, l := range []Layout{DefaultLayout, {WorkerBits: 1}, {SequenceBits: 1}, {Epoch: DefaultLayout.Epoch}} {
		if l.IsZero() {
			t.Errorf("%+v.IsZero() = true", l)
		}
	}
}

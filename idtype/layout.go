package idtype

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Bit layout of an ID, from the most significant bit:
//
//	 63  62 ............. S+W   S+W-1 ...... S   S-1 ....... 0
//	+---+--------------------+----------------+---------------+
//	| 0 |  time: ms since    |  worker number |  sequence in  |
//	|   |  Layout.Epoch      |  (WorkerBits)  |  the ms       |
//	+---+--------------------+----------------+---------------+
//	     TimeBits = 63 - W - S
//
// The sign bit is always 0, so IDs sort the same as int64, as BIGINT in
// PostgreSQL and as decimal strings of equal length. DefaultLayout is
// 41/10/12: 69 years from 2010-11-04, 1,024 workers, 4,096 IDs per
// millisecond per worker, the layout Twitter published and most snowflake
// tools decode.

// Twitter's epoch and widths, the default.
const (
	twitterEpochMs      = 1288834974657
	defaultWorkerBits   = 10
	defaultSequenceBits = 12
)

// DefaultLayout is the classic 41/10/12 layout with Twitter's epoch
// (2010-11-04T01:42:54.657Z), so IDs decode the same in every snowflake
// tool. Treat it as a constant: ID.Time decodes with these same values
// whatever this variable holds.
var DefaultLayout = Layout{
	Epoch:        time.UnixMilli(twitterEpochMs).UTC(),
	WorkerBits:   defaultWorkerBits,
	SequenceBits: defaultSequenceBits,
}

// ErrInvalidLayout means a Layout's widths or epoch cannot work; the error
// says which.
var ErrInvalidLayout = errors.New("idtype: invalid layout")

// Layout says how the 63 usable bits of an ID are split between time,
// worker and sequence, and where time starts. The zero Layout is not
// valid; start from DefaultLayout.
//
// Choose a layout and epoch once, before the first ID is stored, and never
// change them: IDs from two layouts neither sort nor decode together.
//
// Classic variants fit in it. A 5-bit datacenter and 5-bit worker split is
// WorkerBits: 10, with worker = datacenter<<5 | worker. A 3-bit machine,
// 5-bit process and 2 "clock-back" bits split is WorkerBits: 10 as well,
// with worker = machine<<7 | process<<2 | clockBack. Clock-back bits exist
// so that a generator whose clock stepped back can switch to another bit
// pattern instead of repeating IDs. A Generator here never needs them: it
// never lets its own time go backwards (see Generator), so those two bits
// can go to the sequence instead, doubling the per-millisecond rate.
type Layout struct {
	// Epoch is time zero of the layout, kept to the millisecond. It must
	// be in 1970 or later and not in the future.
	Epoch time.Time
	// WorkerBits is the width of the worker number.
	WorkerBits uint
	// SequenceBits is the width of the per-millisecond sequence.
	SequenceBits uint
}

// Parts is an ID taken apart by Layout.Decode.
type Parts struct {
	// Time is when the ID was issued, to the millisecond, in UTC.
	Time time.Time
	// Worker is the worker number that issued it.
	Worker int64
	// Sequence is its place among the IDs of that worker and millisecond.
	Sequence int64
}

// TimeBits returns the width of the time field: 63 - WorkerBits -
// SequenceBits, or 0 when the widths leave no room.
func (l Layout) TimeBits() uint {
	if l.WorkerBits+l.SequenceBits >= 63 {
		return 0
	}
	return 63 - l.WorkerBits - l.SequenceBits
}

// MaxWorker returns the largest worker number the layout holds.
func (l Layout) MaxWorker() int64 { return 1<<l.WorkerBits - 1 }

// MaxSequence returns the largest sequence number, one less than the IDs a
// worker can issue in a millisecond.
func (l Layout) MaxSequence() int64 { return 1<<l.SequenceBits - 1 }

// MaxTime returns the last millisecond the layout can represent. A
// generator refuses to issue past it.
func (l Layout) MaxTime() time.Time {
	return l.timeAt(l.maxTimeField())
}

func (l Layout) epochMs() int64      { return l.Epoch.UnixMilli() }
func (l Layout) maxTimeField() int64 { return 1<<l.TimeBits() - 1 }

// timeAt converts a time field, milliseconds since the layout's epoch, to
// the time it stands for, in UTC.
func (l Layout) timeAt(ms int64) time.Time { return time.UnixMilli(l.epochMs() + ms).UTC() }

// fieldOf is the inverse of timeAt: the milliseconds from the layout's
// epoch to t, which the time field of an ID at t holds.
func (l Layout) fieldOf(t time.Time) int64 { return t.UnixMilli() - l.epochMs() }

// IsZero reports whether l is the zero Layout, which options structs take
// to mean DefaultLayout. A Layout with only some fields set is not zero, and
// Validate judges it.
func (l Layout) IsZero() bool {
	return l.Epoch.IsZero() && l.WorkerBits == 0 && l.SequenceBits == 0
}

// Validate reports whether the layout can work: the widths leave at least
// 20 time bits (17 minutes; the default has 41), each width is at most 31
// bits, and the epoch is set, not before 1970 and not in the future. The error wraps
// ErrInvalidLayout and names the bad field.
func (l Layout) Validate() error {
	switch {
	case l.WorkerBits > 31:
		return fmt.Errorf("%w: WorkerBits %d is over 31", ErrInvalidLayout, l.WorkerBits)
	case l.SequenceBits > 31:
		return fmt.Errorf("%w: SequenceBits %d is over 31", ErrInvalidLayout, l.SequenceBits)
	case l.TimeBits() < 20:
		return fmt.Errorf("%w: WorkerBits %d + SequenceBits %d leave %d time bits, fewer than 20",
			ErrInvalidLayout, l.WorkerBits, l.SequenceBits, l.TimeBits())
	case l.Epoch.IsZero():
		return fmt.Errorf("%w: Epoch is not set", ErrInvalidLayout)
	case l.Epoch.UnixMilli() < 0:
		// A generator counts from the epoch in Unix nanoseconds, which
		// overflow before 1678, and times before 1970 are negative.
		return fmt.Errorf("%w: Epoch %s is before 1970-01-01T00:00:00Z", ErrInvalidLayout, l.Epoch.Format(time.RFC3339Nano))
	case l.Epoch.After(time.Now()):
		return fmt.Errorf("%w: Epoch %s is in the future", ErrInvalidLayout, l.Epoch.Format(time.RFC3339Nano))
	}
	return nil
}

// Decode takes an ID apart. It does not check the ID: a negative ID or one
// from another layout decodes to meaningless parts.
func (l Layout) Decode(id ID) Parts {
	u := uint64(id) & math.MaxInt64
	shift := l.WorkerBits + l.SequenceBits
	return Parts{
		Time:     l.timeAt(int64(u >> shift)),
		Worker:   int64(u>>l.SequenceBits) & l.MaxWorker(),
		Sequence: int64(u) & l.MaxSequence(),
	}
}

// Compose builds the ID of worker's seq-th ID in the millisecond of t. It
// refuses a time before the epoch or past MaxTime, and a worker or
// sequence that does not fit; the error wraps ErrInvalidLayout.
func (l Layout) Compose(t time.Time, worker, seq int64) (ID, error) {
	ms := l.fieldOf(t)
	switch {
	case ms < 0:
		return 0, fmt.Errorf("%w: time %s is before the epoch %s", ErrInvalidLayout,
			t.Format(time.RFC3339Nano), l.Epoch.Format(time.RFC3339Nano))
	case ms > l.maxTimeField():
		return 0, fmt.Errorf("%w: time %s is past the layout's last time %s", ErrInvalidLayout,
			t.Format(time.RFC3339Nano), l.MaxTime().Format(time.RFC3339Nano))
	case worker < 0 || worker > l.MaxWorker():
		return 0, fmt.Errorf("%w: worker %d is outside 0..%d", ErrInvalidLayout, worker, l.MaxWorker())
	case seq < 0 || seq > l.MaxSequence():
		return 0, fmt.Errorf("%w: sequence %d is outside 0..%d", ErrInvalidLayout, seq, l.MaxSequence())
	}
	return l.compose(ms, worker, seq), nil
}

func (l Layout) compose(ms, worker, seq int64) ID {
	return ID(ms<<(l.WorkerBits+l.SequenceBits) | worker<<l.SequenceBits | seq)
}

// FirstID returns the smallest ID any worker can issue in the millisecond
// of t, for time-range queries on the key alone:
//
//	WHERE id >= layout.FirstID(from) AND id < layout.FirstID(to)
//
// Times before the epoch give 0 and times past MaxTime give MaxID, so the
// bounds stay usable at both ends.
func (l Layout) FirstID(t time.Time) ID { return l.clamped(t, 0, 0) }

// LastID returns the largest ID any worker can issue in the millisecond of
// t, for inclusive upper bounds (WHERE id <= layout.LastID(to)). Times
// before the epoch give 0 and times past MaxTime give MaxID.
func (l Layout) LastID(t time.Time) ID { return l.clamped(t, l.MaxWorker(), l.MaxSequence()) }

// clamped composes an ID in the millisecond of t, giving 0 before the
// epoch and MaxID past MaxTime.
func (l Layout) clamped(t time.Time, worker, seq int64) ID {
	ms := l.fieldOf(t)
	switch {
	case ms < 0:
		return 0
	case ms > l.maxTimeField():
		return MaxID
	}
	return l.compose(ms, worker, seq)
}

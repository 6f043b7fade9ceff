package partition

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Errors of the partition helpers. Each is wrapped with detail that names
// the table, partition or field at fault; match with errors.Is. Bad options
// wrap idtype.ErrInvalidOptions instead, the one sentinel of every snowkey
// constructor.
var (
	// ErrNotPartitioned means the table does not exist, or is not what
	// Maintain works on: a table partitioned BY RANGE on one bigint
	// column. A plain table cannot be partitioned in place; PostgreSQL
	// needs a new partitioned table and the rows moved into it.
	ErrNotPartitioned = errors.New("partition: not a table partitioned by range on a bigint key")
	// ErrKey means the model cannot be partitioned by its key as
	// PostgreSQL requires: the key is not a 64-bit integer column, or the
	// primary key or a unique constraint or index does not include it
	// (PostgreSQL enforces uniqueness per partition, so it refuses any
	// unique constraint that leaves out the partition key).
	ErrKey = errors.New("partition: model cannot be partitioned by its key")
	// ErrOverlap means a partition that Maintain did not make
	// covers part of a period it must create, so it can neither create
	// the period nor count it as there. Maintain never splits or merges
	// partitions; this happens when the table was partitioned by hand or
	// with another Period.
	ErrOverlap = errors.New("partition: partition overlaps a period")
	// ErrServer means the PostgreSQL server is too old for what
	// is asked: a default partition needs PostgreSQL 11, a foreign key
	// into a partitioned table PostgreSQL 12.
	ErrServer = errors.New("partition: PostgreSQL too old for this partitioning")
)

// A Period is how much time one partition holds. Periods start at
// midnight UTC: a day, a week from Monday, a calendar month.
type Period int

// The periods. The zero Period means Day in Options.
const (
	Day Period = iota + 1
	Week
	Month
)

// String returns "day", "week" or "month".
func (p Period) String() string {
	switch p {
	case Day:
		return "day"
	case Week:
		return "week"
	case Month:
		return "month"
	}
	return fmt.Sprintf("Period(%d)", int(p))
}

// start returns the start of the period that holds t, in UTC.
func (p Period) start(t time.Time) time.Time {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch p {
	case Week:
		return day.AddDate(0, 0, -(int(day.Weekday())+6)%7)
	case Month:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return day
}

// next returns the start of the period after the one that starts at s.
func (p Period) next(s time.Time) time.Time {
	switch p {
	case Week:
		return s.AddDate(0, 0, 7)
	case Month:
		return s.AddDate(0, 1, 0)
	}
	return s.AddDate(0, 0, 1)
}

// suffix is what a partition's name adds to the table's: _pYYYYMMDD for
// days and weeks (the week's Monday), _pYYYYMM for months. The names sort
// as the periods do.
func (p Period) suffix(s time.Time) string {
	if p == Month {
		return s.Format("_p200601")
	}
	return s.Format("_p20060102")
}

// Defaults of Options.
const (
	// DefaultPremake is how many periods after the current one Maintain
	// keeps created when Options.Premake is zero.
	DefaultPremake = 4
	// DefaultInterval is how often Run maintains when
	// Options.Interval is zero.
	DefaultInterval = time.Hour
	// DefaultLockTimeout bounds each maintenance step's wait for table
	// locks when Options.LockTimeout is zero.
	DefaultLockTimeout = 5 * time.Second
)

// LockClass is the first key of the transaction-level advisory
// lock that Maintain holds for each step, pg_advisory_xact_lock(
// LockClass, table OID), and that Create holds while it
// creates a table ("skpt" in ASCII). Apps that take two-key advisory
// locks of their own should keep clear of it.
const LockClass int32 = 0x736b7074

// Options configures a Table. The zero value of each field
// is a documented default, so Options{} partitions by day, keeps
// four days ready ahead and removes nothing.
type Options struct {
	// Period is how much time each partition holds. Zero means Day.
	Period Period
	// Premake is how many periods after the current one Maintain keeps
	// created ahead of time, so that rows never wait for maintenance to
	// find their partition. Zero means DefaultPremake; -1 means none: only
	// the current period.
	Premake int
	// Retention is how long rows are kept: Maintain removes every
	// partition it made whose whole period ended more than Retention ago,
	// and never one that still holds a younger row. Zero means forever:
	// Maintain removes nothing.
	Retention time.Duration
	// Detach makes Maintain detach expired partitions, leaving each as a
	// table of its own to archive and drop, instead of dropping them. The
	// default (false) drops them.
	Detach bool
	// Column is the key column Create partitions by. Zero ("") means
	// the model's primary key, when that is one column. Maintain reads the
	// key from the table itself.
	Column string
	// Interval is how often Run maintains. Zero means DefaultInterval.
	Interval time.Duration
	// LockTimeout bounds how long each step of Maintain waits for the
	// table's locks (PostgreSQL's lock_timeout), so that a step stuck
	// behind a long query fails, to be tried again, instead of queueing
	// every later query of the table behind itself. Zero means
	// DefaultLockTimeout; -1 means no bound other than the context's.
	LockTimeout time.Duration
	// Clock tells Maintain the time. Nil means idtype.SystemClock().
	Clock idtype.Clock
	// Logger gets what Run does and every error it meets. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// Table keeps a table that is partitioned by range on its snowflake
// key cut into periods of time: the bounds of each partition are the first
// IDs (Layout.FirstID) of its period's start and end, so a row lands in
// the partition of its key's time, and a query that bounds the key by time
// reads only the partitions of that time.
//
// It holds no connection and no state beyond its options; each method
// takes the database it acts on. Make one with New.
type Table struct {
	schema, table string // schema "" when the name is not qualified
	layout        idtype.Layout
	period        Period
	premake       int
	retention     time.Duration
	detach        bool
	column        string
	interval      time.Duration
	lockTimeout   time.Duration // < 0: none
	clock         idtype.Clock
	logger        *slog.Logger

	d defences
}

// defences lists the defences of maintenance, each of which a test may
// switch off (export_test.go) to show that it fails without it; the zero
// value has every defence on.
type defences struct {
	noLock bool // take no advisory lock
	noMove bool // create partitions without moving rows out of the default
}

// maxNameLen is PostgreSQL's limit on a name (NAMEDATALEN - 1); longer
// names are cut short, silently.
const maxNameLen = 63

// New returns a Table for table, whose keys are IDs of
// layout (pass the Source's Layout(), never assume the default). table is
// the table's name as GORM names it, "table" or "schema.table", taken
// literally (not SQL-quoted). It checks its arguments and does no I/O;
// opts is at most one Options. The error wraps
// idtype.ErrInvalidOptions and names the bad argument.
func New(table string, layout idtype.Layout, o Options) (*Table, error) {
	p := &Table{
		layout:      layout,
		period:      o.Period,
		premake:     o.Premake,
		retention:   o.Retention,
		detach:      o.Detach,
		column:      o.Column,
		interval:    o.Interval,
		lockTimeout: o.LockTimeout,
		clock:       o.Clock,
		logger:      o.Logger,
	}
	parts := strings.Split(table, ".")
	switch {
	case len(parts) == 1 && parts[0] != "":
		p.table = parts[0]
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		p.schema, p.table = parts[0], parts[1]
	default:
		return nil, fmt.Errorf(`%w: table %q: want "table" or "schema.table"`, idtype.ErrInvalidOptions, table)
	}
	if longest := len(p.table) + len(Day.suffix(time.Time{})); longest > maxNameLen || len(p.schema) > maxNameLen {
		return nil, fmt.Errorf("%w: table %q: its partitions' names (%s) would pass PostgreSQL's %d bytes",
			idtype.ErrInvalidOptions, table, p.table+Day.suffix(time.Time{}), maxNameLen)
	}
	if err := layout.Validate(); err != nil {
		return nil, fmt.Errorf("%w: layout: %w", idtype.ErrInvalidOptions, err)
	}
	switch {
	case p.period == 0:
		p.period = Day
	case p.period < Day || p.period > Month:
		return nil, fmt.Errorf("%w: Period %d is not Day, Week or Month", idtype.ErrInvalidOptions, int(p.period))
	}
	switch {
	case p.premake == 0:
		p.premake = DefaultPremake
	case p.premake == -1:
		p.premake = 0
	case p.premake < 0:
		return nil, fmt.Errorf("%w: Premake %d: want a count, 0 for the default or -1 for none", idtype.ErrInvalidOptions, p.premake)
	}
	if p.retention < 0 {
		return nil, fmt.Errorf("%w: Retention %v is negative; zero keeps every partition", idtype.ErrInvalidOptions, p.retention)
	}
	switch {
	case p.interval == 0:
		p.interval = DefaultInterval
	case p.interval < 0:
		return nil, fmt.Errorf("%w: Interval %v is negative", idtype.ErrInvalidOptions, p.interval)
	}
	switch {
	case p.lockTimeout == 0:
		p.lockTimeout = DefaultLockTimeout
	case p.lockTimeout == -1:
	case p.lockTimeout < time.Millisecond:
		return nil, fmt.Errorf("%w: LockTimeout %v: want at least 1ms, 0 for the default or -1 for none",
			idtype.ErrInvalidOptions, p.lockTimeout)
	}
	if p.clock == nil {
		p.clock = idtype.SystemClock()
	}
	if p.logger == nil {
		p.logger = slog.Default()
	}
	return p, nil
}

// Table returns the table's name as New was given it.
func (p *Table) Name() string {
	if p.schema == "" {
		return p.table
	}
	return p.schema + "." + p.table
}

// Bounds returns the key range of the period that holds t: from the first
// ID of the period's start up to, not including, the first ID of the next
// period's. A query with these bounds reads one partition.
func (p *Table) Bounds(t time.Time) (from, to idtype.ID) {
	s := p.period.start(t)
	return p.layout.FirstID(s), p.layout.FirstID(p.period.next(s))
}

// PartitionName returns the name of the partition that holds t's period,
// in the table's schema: the table's name with _pYYYYMMDD (days, weeks
// by their Monday) or _pYYYYMM (months) added.
func (p *Table) PartitionName(t time.Time) string {
	return p.table + p.period.suffix(p.period.start(t))
}

// defaultName is the name the default partition gets when Maintain makes
// it.
func (p *Table) defaultName() string { return p.table + "_default" }

// now reads the clock.
func (p *Table) now() time.Time { return time.Unix(0, p.clock.UnixNano()).UTC() }

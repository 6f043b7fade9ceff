package partition

import (
	"log/slog"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Defaults of Options.
const (
	// DefaultPremake is how many periods after the current one Maintain
	// keeps created when Options.Premake is zero.
	DefaultPremake = 4
	// DefaultInterval is how often Run maintains when Options.Interval is
	// zero.
	DefaultInterval = time.Hour
	// DefaultLockTimeout bounds each maintenance step's wait for table
	// locks when Options.LockTimeout is zero.
	DefaultLockTimeout = 5 * time.Second
)

// MaxClockSkew is how far the app's clock (Options.Clock) may be from the
// database's before Run logs a warning. Maintain decides on the
// database's clock alone; the app's only makes keys, and a clock far
// off makes keys of another period than the database's now.
const MaxClockSkew = time.Minute

// LockClass is the first key of the transaction-level advisory lock that
// Maintain holds for each step, pg_advisory_xact_lock(LockClass, table
// OID), and that Create holds while it creates a table ("skpt" in ASCII).
// Apps that take two-key advisory locks of their own should keep clear of
// it.
const LockClass int32 = 0x736b7074

// Options configures a Table. The zero value of each field is a
// documented default, so Options{} partitions by day, keeps four days
// ready ahead and removes nothing.
type Options struct {
	// Period is how much time each partition holds. Zero means Day.
	Period Period
	// Premake is how many periods after the current one Maintain keeps
	// created ahead of time, so that rows never wait for maintenance in
	// the default partition: with a period made ahead, a row of it lands
	// in its partition from the first one, and the default partition
	// stays empty. Zero means DefaultPremake; -1 means none: only the
	// current period, so that every row written in a new period before
	// Maintain runs lands in the default partition, to be moved.
	Premake int
	// Retention is how long rows are kept: Maintain removes every
	// partition it made whose whole period ended more than Retention ago,
	// and never one that still holds a younger row, nor one whose rows
	// other rows still refer to (Report.Kept). Zero means forever:
	// Maintain removes nothing.
	Retention time.Duration
	// Detach makes Maintain detach expired partitions, leaving each as a
	// table of its own to archive and drop, instead of detaching and
	// dropping them. The default (false) drops them.
	Detach bool
	// Column is the key column Create partitions by. Zero ("") means the
	// model's primary key, when that is one column. Maintain reads the key
	// from the table itself.
	Column string
	// Interval is how often Run maintains. Zero means DefaultInterval.
	Interval time.Duration
	// LockTimeout bounds how long each step of Maintain waits for the
	// table's lock (PostgreSQL's lock_timeout), so that a step stuck
	// behind a long query fails, to be tried again, instead of queueing
	// every later query of the table behind itself. (On a table that
	// others refer to, a step waits for each lock briefly and tries again;
	// see Maintain.) Zero means DefaultLockTimeout (5 s). A negative
	// value is an error, and so is one under 1ms, lock_timeout's unit.
	LockTimeout time.Duration
	// Clock is the app's clock. Maintain decides on the database's clock,
	// read in the transaction of each step, so that every instance
	// decides alike whatever its own clock says; it reads this one only
	// to report how far it is from the database's (Report.ClockSkew),
	// which Run logs when it passes MaxClockSkew. Nil means
	// idtype.SystemClock().
	Clock idtype.Clock
	// Logger gets what Run does and every error it meets. Nil means
	// slog.Default() as it is when New is called, at warn and error
	// only: Run says nothing about routine maintenance, as pgx and
	// go-redis say nothing while all is well, but its failures, which no
	// caller sees returned, still reach the default logger.
	Logger *slog.Logger
}

package partition

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Table keeps a table that is partitioned by range on its snowflake key
// cut into periods of time: the bounds of each partition are the first IDs
// (Layout.FirstID) of its period's start and end, so a row lands in the
// partition of its key's time, and a query that bounds the key by time
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
	lockTimeout   time.Duration
	clock         idtype.Clock
	logger        *slog.Logger

	// nowSQL is the SQL expression each step reads the database's time
	// from; tests move it (export_test.go).
	nowSQL   string
	defences defences // zero: every defence on; only export_test.go turns one off
}

// defences lists the defences of maintenance, each of which a test may
// switch off (export_test.go) to show that it fails without it; the zero
// value has every defence on.
type defences struct {
	noLock         bool // take no advisory lock
	noMove         bool // create partitions without moving rows out of the default
	noRefCheck     bool // move rows other rows refer to without session_replication_role
	noTriggerGuard bool // move rows with the user's triggers enabled
	appClock       bool // decide on Options.Clock instead of the database's clock
	plainDrop      bool // drop expired partitions without detaching them first
	noKeepCheck    bool // detach expired partitions without looking for rows that refer to theirs
	stopAtLeft     bool // end Maintain with an error at the first period it cannot finish
	parentFirst    bool // lock the table alone, and the referring tables as PostgreSQL's DDL gets to them
	filtered       bool // decide on reads under the session's row_security, which lets policies filter them
	rawRefusals    bool // return PostgreSQL's refusal of a read or lock as it comes, naming no table or grant
}

// maxNameLen is PostgreSQL's limit on a name (NAMEDATALEN - 1); longer
// names are cut short, silently.
const maxNameLen = 63

// New returns a Table for table, whose keys are IDs of layout (pass the
// Source's Layout(), never assume the default). table is the table's name
// as GORM names it, "table" or "schema.table", taken literally (not
// SQL-quoted). It checks its arguments and does no I/O. A bad argument
// or option is an error wrapping idtype.ErrInvalidOptions that names it.
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
		nowSQL:      "pg_catalog.statement_timestamp()",
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
	case p.lockTimeout < 0:
		return nil, fmt.Errorf("%w: LockTimeout %v is negative", idtype.ErrInvalidOptions, p.lockTimeout)
	case p.lockTimeout == 0:
		p.lockTimeout = DefaultLockTimeout
	case p.lockTimeout < time.Millisecond:
		return nil, fmt.Errorf("%w: LockTimeout %v is under 1ms", idtype.ErrInvalidOptions, p.lockTimeout)
	}
	if p.clock == nil {
		p.clock = idtype.SystemClock()
	}
	if p.logger == nil {
		p.logger = slog.New(warnAndUp{slog.Default().Handler()})
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

// now reads the app's clock.
func (p *Table) now() time.Time { return time.Unix(0, p.clock.UnixNano()).UTC() }

// warnAndUp passes a handler's warnings and errors, and drops the rest.
type warnAndUp struct{ slog.Handler }

func (h warnAndUp) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnAndUp) WithAttrs(as []slog.Attr) slog.Handler { return warnAndUp{h.Handler.WithAttrs(as)} }
func (h warnAndUp) WithGroup(name string) slog.Handler    { return warnAndUp{h.Handler.WithGroup(name)} }

package partition

import (
	"fmt"
	"strings"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Report says what one Maintain call changed, and what it left.
type Report struct {
	// Created lists the partitions made, the default partition first if
	// it was missing, then the periods in the order made: those due now
	// (the current one and Premake after it, and any gap since the newest
	// partition) from the oldest, then the periods whose rows were found
	// in the default partition, from the oldest.
	Created []string
	// Removed lists the partitions dropped, or detached with
	// Options.Detach, from the oldest.
	Removed []string
	// Moved is how many rows were moved out of the default partition into
	// partitions made for their periods.
	Moved int64
	// Left lists the periods whose rows stay in the default partition,
	// each with why: rows other rows refer to (ErrReferenced), rows of an
	// expired period (ErrExpired), a partition made by hand in the way
	// (ErrOverlap), keys of no time (ErrOutsideLayout), rows whose
	// referring rows the role could not count whole (ErrRowSecurity,
	// ErrPrivilege, which Maintain returns too). Every other step ran all
	// the same.
	Left []Left
	// Kept lists the expired partitions that stay because rows of other
	// tables, or of the table itself, still refer to their rows
	// (ErrReferenced), or might: the role could not count those rows
	// whole (ErrRowSecurity, ErrPrivilege, which Maintain returns too).
	// They are removed once nothing refers to them.
	Kept []Kept
	// DatabaseTime is the database's clock when the first step ran, the
	// time every decision of the call was made on (each step reads it
	// again in its own transaction).
	DatabaseTime time.Time
	// ClockSkew is the app's clock (Options.Clock) less the database's,
	// read together at the first step. It decides nothing.
	ClockSkew time.Duration
}

// Left is a period whose rows stay in the default partition.
type Left struct {
	// Partition is the partition the period would have; "" when the keys
	// belong to no period (ErrOutsideLayout).
	Partition string
	// From and To bound the period: from its first instant up to, not
	// including, the next period's.
	From, To time.Time
	// Rows is the number of the period's rows in the default partition,
	// and Keys the lowest of their keys, at most MaxLeftKeys.
	Rows int64
	Keys []idtype.ID
	// Referrers names, for ErrReferenced, each foreign key that refers to
	// the rows and how many rows refer, as "public.notes.event_id
	// (notes_event_id_fkey): 3 rows".
	Referrers []string
	// Err says why; match it with errors.Is against ErrReferenced,
	// ErrExpired, ErrOverlap, ErrOutsideLayout, ErrRowSecurity or
	// ErrPrivilege.
	Err error
}

// MaxLeftKeys bounds the keys a Left names.
const MaxLeftKeys = 10

// String says what was left, where, and why, in one line.
func (l Left) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d rows of [%s, %s) left in the default partition", l.Rows,
		l.From.Format(time.RFC3339), l.To.Format(time.RFC3339))
	if l.Partition != "" {
		fmt.Fprintf(&b, " (partition %s not made)", l.Partition)
	}
	if len(l.Keys) > 0 {
		fmt.Fprintf(&b, ", keys %v", l.Keys)
	}
	fmt.Fprintf(&b, ": %v", l.Err)
	if len(l.Referrers) > 0 {
		fmt.Fprintf(&b, ": %s", strings.Join(l.Referrers, ", "))
	}
	return b.String()
}

// Kept is an expired partition that stays.
type Kept struct {
	// Partition is its name; From and To bound its period.
	Partition string
	From, To  time.Time
	// Referrers names each foreign key that refers to its rows and how
	// many rows refer, as Left.Referrers does.
	Referrers []string
	// Err says why: ErrReferenced, or ErrRowSecurity or ErrPrivilege
	// when the role could not count the rows that refer to it whole.
	Err error
}

// String says which partition was kept, and why, in one line.
func (k Kept) String() string {
	return fmt.Sprintf("expired partition %s [%s, %s) kept: %v: %s", k.Partition, k.From.Format(time.RFC3339),
		k.To.Format(time.RFC3339), k.Err, strings.Join(k.Referrers, ", "))
}

package partition

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Run maintains the table now and then every Interval until ctx is done,
// for apps that keep their partitions from within: every instance may run
// it, since Maintain is safe to run at once. It logs to Logger what each
// Maintain changed, each error, each period left in the default
// partition and each expired partition kept (once per Run, each), and a
// warning when the app's clock is more than MaxClockSkew from the
// database's; after an error it tries again within a minute (sooner if
// Interval is shorter). It returns ctx's error once ctx is done, and
// stops no sooner than the Maintain under way notices.
func (p *Table) Run(ctx context.Context, db *sql.DB) error {
	logged := map[string]bool{}
	once := func(key string) bool {
		if logged[key] {
			return false
		}
		logged[key] = true
		return true
	}
	for {
		rep, err := p.Maintain(ctx, db)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := p.interval
		if len(rep.Created)+len(rep.Removed) > 0 || rep.Moved > 0 {
			p.logger.InfoContext(ctx, "partition: partitions maintained", "table", p.Name(),
				"created", rep.Created, "removed", rep.Removed, "moved_rows", rep.Moved)
		}
		for _, l := range rep.Left {
			if once("left " + l.Partition + " " + reason(l.Err)) {
				p.logger.WarnContext(ctx, "partition: rows left in the default partition", "table", p.Name(),
					"partition", l.Partition, "from", l.From, "to", l.To, "rows", l.Rows, "keys", l.Keys,
					"referrers", l.Referrers, "reason", l.Err)
			}
		}
		for _, k := range rep.Kept {
			if once("kept " + k.Partition) {
				p.logger.WarnContext(ctx, "partition: expired partition kept", "table", p.Name(),
					"partition", k.Partition, "from", k.From, "to", k.To, "referrers", k.Referrers, "reason", k.Err)
			}
		}
		if skew := rep.ClockSkew; !rep.DatabaseTime.IsZero() && (skew > MaxClockSkew || skew < -MaxClockSkew) {
			p.logger.WarnContext(ctx, "partition: the app's clock is far from the database's; maintenance goes by the database's",
				"table", p.Name(), "skew", skew, "database_time", rep.DatabaseTime)
		}
		if err != nil {
			p.logger.ErrorContext(ctx, "partition: maintenance failed", "table", p.Name(), "error", err)
			wait = min(wait, time.Minute)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

// reason is what an entry of a report is about, for logging it once: its
// sentinel, whose detail (times, counts) changes from call to call.
func reason(err error) string {
	for _, s := range []error{ErrReferenced, ErrExpired, ErrOverlap, ErrOutsideLayout, ErrRowSecurity, ErrPrivilege} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return err.Error()
}

package partition

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestDatabaseClock: an app instance whose clock runs a month ahead of
// the database's maintains by the database's clock: with 30 days'
// retention it removes what 30 days before the database's now ends, no
// more, and makes nothing a month ahead; its report says how far its
// clock is, and Run logs it. The control decides on the app's clock and
// drops a month of partitions early.
func TestDatabaseClock(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	for _, control := range []bool{false, true} {
		_, db := openDB(t)
		clock := newDBClock(t, db, date("2025-01-01T12:00:00Z"))
		rawTable(t, db, "events")
		if _, err := clock.table("events", Options{Premake: 90}).Maintain(ctx, db); err != nil {
			t.Fatal(err)
		}
		clock.Set(date("2025-03-10T12:00:00Z"))
		ahead := newClock(date("2025-04-09T12:00:00Z"))
		var logs testenv.LogBuffer
		p := clock.tableWithout("events", Options{Premake: 1, Retention: 30 * 24 * time.Hour, Clock: ahead,
			Interval: time.Hour, Logger: slogTo(&logs)}, defences{appClock: control})
		rep, err := p.Maintain(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		// The cutoff is 02-08 12:00: the days up to the 7th have ended.
		last := rep.Removed[len(rep.Removed)-1]
		t.Logf("control=%v: removed %d days, %s to %s; skew %v", control, len(rep.Removed), rep.Removed[0], last, rep.ClockSkew)
		switch {
		case !control && (len(rep.Removed) != 38 || last != "events_p20250207" || len(rep.Created) != 0):
			t.Errorf("removed %d days up to %s, made %v; want the 38 days up to February 7th removed, nothing made",
				len(rep.Removed), last, rep.Created)
		case control && last <= "events_p20250207":
			t.Errorf("control: on the app's clock the last day removed is %s: the test does not reach the fault", last)
		}
		if !control {
			if rep.ClockSkew != 30*24*time.Hour || !rep.DatabaseTime.Equal(date("2025-03-10T12:00:00Z")) {
				t.Errorf("report: skew %v, database time %v; want 720h at 2025-03-10 12:00", rep.ClockSkew, rep.DatabaseTime)
			}
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- p.Run(runCtx, db) }()
			waitFor(t, ctx, "Run to log the clock", func() bool { return strings.Contains(logs.String(), "skew=720h0m0s") })
			cancel()
			<-done
		}
	}
}

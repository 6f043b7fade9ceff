package partition

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// referredDays makes referredSchema with the days of March 1st to 10th
// made, ten events in each, and returns the keys by day (1 to 10).
func referredDays(t testing.TB, ctx context.Context) (*sql.DB, *dbClock, map[int][]int64) {
	t.Helper()
	db, clock := referredDB(t)
	clock.Set(date("2025-03-01T12:00:00Z"))
	if _, err := clock.table("events", Options{Premake: 9}).Maintain(ctx, db); err != nil {
		t.Fatal(err)
	}
	days := map[int][]int64{}
	for d := 1; d <= 10; d++ {
		for _, id := range insertEvents(t, db, date(fmt.Sprintf("2025-03-%02dT10:00:00Z", d)), 10) {
			days[d] = append(days[d], int64(id))
		}
	}
	return db, clock, days
}

// TestRetentionReferenced: the table is referred to by foreign keys, and
// the expired days go all the same, detached and dropped, except the one
// whose rows a note still refers to: it stays, attached, with its rows,
// named in the report with the note's foreign key, until the note goes.
// With Detach the expired days stay as tables of their own.
func TestRetentionReferenced(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	for _, detach := range []bool{false, true} {
		t.Run(fmt.Sprintf("detach=%v", detach), func(t *testing.T) {
			db, clock, days := referredDays(t, ctx)
			if _, err := db.Exec("INSERT INTO notes_noaction (event_id) VALUES ($1)", days[3][4]); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec("INSERT INTO notes_cascade (event_id) VALUES ($1)", days[8][0]); err != nil {
				t.Fatal(err)
			}
			clock.Set(date("2025-03-10T12:00:00Z"))
			p := clock.table("events", Options{Premake: -1, Retention: 72 * time.Hour, Detach: detach})
			rep, err := p.Maintain(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			removed := []string{"events_p20250301", "events_p20250302", "events_p20250304", "events_p20250305", "events_p20250306"}
			if !same(rep.Removed, removed) || len(rep.Kept) != 1 {
				t.Fatalf("report %+v; want %v removed and the 3rd kept", rep, removed)
			}
			k := rep.Kept[0]
			if k.Partition != "events_p20250303" || !errors.Is(k.Err, ErrReferenced) || !k.From.Equal(date("2025-03-03T00:00:00Z")) ||
				len(k.Referrers) != 1 || k.Referrers[0] != "public.notes_noaction.event_id (notes_noaction_event_id_fkey): 1 rows" {
				t.Errorf("kept %s; want the 3rd, naming the note's foreign key", k)
			}
			var third, notes int
			if err := db.QueryRow("SELECT count(*) FROM events_p20250303").Scan(&third); err != nil || third != 10 {
				t.Errorf("the kept 3rd holds %d rows, %v; want 10", third, err)
			}
			if err := db.QueryRow("SELECT (SELECT count(*) FROM notes_noaction) + (SELECT count(*) FROM notes_cascade)").Scan(&notes); err != nil || notes != 2 {
				t.Errorf("%d notes, %v; retention must delete none", notes, err)
			}

			// The note goes; the 3rd goes at the next Maintain.
			if _, err := db.Exec("DELETE FROM notes_noaction"); err != nil {
				t.Fatal(err)
			}
			rep, err = p.Maintain(ctx, db)
			if err != nil || !same(rep.Removed, []string{"events_p20250303"}) || len(rep.Kept) != 0 {
				t.Errorf("once nothing refers to the 3rd: %+v, %v; want it removed", rep, err)
			}
			var standalone int
			if err := db.QueryRow(`SELECT count(*) FROM pg_class WHERE relname LIKE 'events\_p%' AND relkind = 'r'
				AND NOT relispartition`).Scan(&standalone); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{false: 0, true: 6}[detach]; standalone != want {
				t.Errorf("%d expired days left as tables of their own, want %d", standalone, want)
			}
		})
	}
}

// TestRetentionDetachControl: DROP TABLE of an expired partition fails
// on a table that foreign keys refer to, even when no row refers to the
// partition's rows (2BP01), and retention never happens: the control,
// which drops without detaching.
func TestRetentionDetachControl(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	db, clock, _ := referredDays(t, ctx)
	clock.Set(date("2025-03-10T12:00:00Z"))
	p := clock.tableWithout("events", Options{Premake: -1, Retention: 72 * time.Hour}, defences{plainDrop: true})
	rep, err := p.Maintain(ctx, db)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "2BP01" || len(rep.Removed) != 0 {
		t.Errorf("control: %+v, %v; want DROP refused with 2BP01 and nothing removed", rep, err)
	}
}

// TestRetentionKeepControl: detaching an expired partition whose rows a
// note refers to fails (23503), and with it the removal of every other
// expired day: the control, which does not look for referring rows first.
func TestRetentionKeepControl(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	db, clock, days := referredDays(t, ctx)
	if _, err := db.Exec("INSERT INTO notes_noaction (event_id) VALUES ($1)", days[3][4]); err != nil {
		t.Fatal(err)
	}
	clock.Set(date("2025-03-10T12:00:00Z"))
	p := clock.tableWithout("events", Options{Premake: -1, Retention: 72 * time.Hour}, defences{noKeepCheck: true})
	rep, err := p.Maintain(ctx, db)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23503" || len(rep.Removed) != 0 ||
		!strings.Contains(err.Error(), "events_p20250303") {
		t.Errorf("control: %+v, %v; want the 3rd's detach refused (23503) and nothing removed", rep, err)
	}
}

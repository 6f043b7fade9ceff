package partition

import (
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestMaintainSeesEveryRow: a role that reads every row of the tables
// with row-level security (one with BYPASSRLS, their owner when they do
// not FORCE it, a member of their owner's role) maintains as before,
// under row_security = off: the days whose events notes refer to, hidden
// from its sessions by the policy or not, stay in the default partition
// with ErrReferenced and the count of every note; the day nothing refers
// to moves; the expired days that notes refer to are kept, and the other
// removed; nothing is lost, and Maintain does not fail.
func TestMaintainSeesEveryRow(t *testing.T) {
	ctx := testenv.Deadline(t, 3*time.Minute)
	for _, c := range []struct {
		name string
		kind accessKind
		fix  accessFix
	}{
		{"BYPASSRLS/move", forcedPolicy, bypassRLS},
		{"BYPASSRLS/retention", retentionPolicy, bypassRLS},
		{"owner without FORCE/move", forcedPolicy, noForce},
		{"owner without FORCE/retention", retentionPolicy, noForce},
		{"member of the owner/move", otherPolicy, ownerMember},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := buildAccess(t, ctx, c.kind, c.fix, rand.New(rand.NewPCG(uint64(c.kind), uint64(c.fix))))
			rep, err := w.table(defences{}).Maintain(ctx, w.as)
			if err != nil {
				t.Fatalf("Maintain: %v", err)
			}
			violations, _ := w.check(t, rep, err, false)
			for _, v := range violations {
				t.Error(v)
			}
			// Every note counted, hidden or not.
			want := map[string][]string{}
			for _, n := range w.notes {
				name := "events_p" + w.days[w.events[n.event]].Format("20060102")
				want[name] = append(want[name], n.table)
			}
			got := map[string]bool{}
			check := func(name string, referrers []string, err error) {
				got[name] = true
				var labels []string
				for _, table := range accessNoteTables {
					if n := count(want[name], table); n > 0 {
						labels = append(labels, fmt.Sprintf("public.%[1]s.event_id (%[1]s_event_id_fkey): %[2]d rows", table, n))
					}
				}
				if !errors.Is(err, ErrReferenced) || !slices.Equal(referrers, labels) {
					t.Errorf("%s: %v, referrers %q; want ErrReferenced and %q", name, err, referrers, labels)
				}
			}
			for _, l := range rep.Left {
				check(l.Partition, l.Referrers, l.Err)
			}
			for _, k := range rep.Kept {
				check(k.Partition, k.Referrers, k.Err)
			}
			for name := range want {
				if !got[name] {
					t.Errorf("%s, which notes refer to, is neither left nor kept: %+v", name, rep)
				}
			}
			free := "events_p" + w.days[2].Format("20060102")
			switch {
			case c.kind == retentionPolicy && !slices.Equal(rep.Removed, []string{free}):
				t.Errorf("removed %v; want %s, which nothing refers to", rep.Removed, free)
			case c.kind != retentionPolicy && (!slices.Contains(rep.Created, free) || rep.Moved != int64(countDay(w, 2))):
				t.Errorf("created %v, moved %d; want %s made and its %d rows moved", rep.Created, rep.Moved, free, countDay(w, 2))
			}
		})
	}
}

func count(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// countDay counts the events w wrote on its day d.
func countDay(w *accessWorld, d int) int {
	n := 0
	for _, day := range w.events {
		if day == d {
			n++
		}
	}
	return n
}

// TestHiddenReferrers: the owner's tables FORCE row-level security with
// a tenant policy, and the owner, which may not set
// session_replication_role, maintains in a session whose tenant sees
// none of the two ON DELETE CASCADE notes that refer to an event. In the
// default partition, the event's day is left, with ErrRowSecurity, and
// both notes stay; the control, which reads under the policy, counts no
// note, moves the event, and the cascade deletes both, with Moved 1
// and nothing left. In an expired partition, the partition is kept, with
// ErrRowSecurity; the control drops it, and the notes refer to an event
// that is gone while their foreign key is still marked valid.
func TestHiddenReferrers(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	for _, retention := range []bool{false, true} {
		for _, control := range []bool{false, true} {
			t.Run(fmt.Sprintf("retention=%v/control=%v", retention, control), func(t *testing.T) {
				_, db := openDB(t)
				clock := newDBClock(t, db, accessNow)
				if _, err := db.ExecContext(ctx, accessSchema); err != nil {
					t.Fatal(err)
				}
				day := accessNow.Truncate(24 * time.Hour)
				if retention {
					day = date("2025-03-01T00:00:00Z")
					clock.Set(day.Add(12 * time.Hour))
					if _, err := clock.table("events", Options{Premake: -1}).Maintain(ctx, db); err != nil {
						t.Fatal(err)
					}
					clock.Set(accessNow)
				}
				ev := insertTenantEvent(t, db, day.Add(10*time.Hour))
				for range 2 {
					if _, err := db.ExecContext(ctx, "INSERT INTO notes_cascade (event_id, tenant) VALUES ($1, 'b')", ev); err != nil {
						t.Fatal(err)
					}
				}
				role, as := maintainer(t, db)
				own(t, db, role)
				for _, q := range []string{tenantPolicy("events", true), tenantPolicy("notes_cascade", true),
					tenantPolicy("notes_setnull", true), "ALTER ROLE " + role + " SET app.tenant = 'a'"} {
					if _, err := db.ExecContext(ctx, q); err != nil {
						t.Fatal(err)
					}
				}
				opts := Options{Premake: -1}
				if retention {
					opts.Retention = 72 * time.Hour
				}
				p := clock.tableWithout("events", opts, defences{filtered: control})
				rep, err := p.Maintain(ctx, as)

				var notes int
				var part sql.NullString
				var valid bool
				if err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM notes_cascade),
					(SELECT tableoid::regclass::text FROM events WHERE id = $1),
					(SELECT convalidated FROM pg_constraint WHERE conname = 'notes_cascade_event_id_fkey')`, ev).
					Scan(&notes, &part, &valid); err != nil {
					t.Fatal(err)
				}
				t.Logf("Maintain as %s: %+v, error: %v; %d of 2 notes there; the event in %q; foreign key marked valid: %v",
					role, rep, err, notes, part.String, valid)
				name := p.PartitionName(day)
				switch {
				case control && !retention && (err != nil || rep.Moved != 1 || len(rep.Left) != 0 || notes != 0):
					t.Errorf("control: want success, Moved 1, nothing left and both notes deleted: the test does not reach the fault")
				case control && retention && (err != nil || !slices.Contains(rep.Removed, name) || notes != 2 || part.Valid || !valid):
					t.Errorf("control: want success, %s removed, and both notes left referring to its event, gone, "+
						"under a valid foreign key: the test does not reach the fault", name)
				case control:
				case !errors.Is(err, ErrRowSecurity) || notes != 2:
					t.Errorf("want ErrRowSecurity and both notes kept")
				case !retention && (rep.Moved != 0 || len(rep.Left) != 1 || rep.Left[0].Partition != name ||
					!errors.Is(rep.Left[0].Err, ErrRowSecurity) || part.String != "events_default"):
					t.Errorf("want %s left with ErrRowSecurity, nothing moved, the event in the default partition", name)
				case retention && (len(rep.Removed) != 0 || len(rep.Kept) != 1 || rep.Kept[0].Partition != name ||
					!errors.Is(rep.Kept[0].Err, ErrRowSecurity) || part.String != name):
					t.Errorf("want %s kept with ErrRowSecurity, with the event", name)
				}
			})
		}
	}
}

// insertTenantEvent inserts an event of tenant "b" with a key of time at.
func insertTenantEvent(t *testing.T, db *sql.DB, at time.Time) idtype.ID {
	t.Helper()
	gen, _ := generator(t, 1, at)
	id, err := gen.Next()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO events VALUES ($1, 'b')", id); err != nil {
		t.Fatal(err)
	}
	return id
}

package partition

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestCreateTable: a GORM model's table is made partitioned, with its
// default partition and the current and premade days, and rows created
// through gormplugin land in the partition of their key's time (the
// default partition outside the days made). A second call changes
// nothing; AutoMigrate afterwards adds a column and keeps the partitions.
func TestCreateTable(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	gdb, sqlDB := openDB(t)
	parts := newDBClock(t, sqlDB, date("2025-03-10T12:00:00Z")).table("events", Options{Premake: 2})
	if err := parts.Create(ctx, gdb, &Event{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"events_default", "events_p20250310", "events_p20250311", "events_p20250312"}
	if got := partitions(t, sqlDB, "events"); !same(got, want) {
		t.Fatalf("partitions %v, want %v", got, want)
	}
	if err := parts.Create(ctx, gdb, &Event{}); err != nil {
		t.Fatalf("Create again: %v", err)
	}
	if got := partitions(t, sqlDB, "events"); !same(got, want) {
		t.Fatalf("after Create again: %v, want %v", got, want)
	}

	gen, clk := generator(t, 3, date("2025-03-09T00:00:00Z"))
	if err := gdb.Use(gormplugin.New(gen, gormplugin.Options{})); err != nil {
		t.Fatal(err)
	}
	made := map[idtype.ID]string{}
	for _, at := range []string{"2025-03-09T23:59:59.999Z", "2025-03-10T00:00:00Z", "2025-03-10T23:59:59.999Z",
		"2025-03-11T00:00:00Z", "2025-03-11T13:00:00Z", "2025-03-12T23:59:59.999Z", "2025-03-13T00:00:00Z"} {
		clk.Set(date(at))
		batch := make([]Event, 50)
		if err := gdb.WithContext(ctx).Create(&batch).Error; err != nil {
			t.Fatal(err)
		}
		for _, e := range batch {
			part := parts.PartitionName(e.ID.Time())
			if !slices.Contains(want, part) {
				part = "events_default"
			}
			made[e.ID] = part
		}
	}
	got := where(t, sqlDB, "events")
	if len(got) != len(made) {
		t.Errorf("%d rows in the table, %d created", len(got), len(made))
	}
	for id, part := range made {
		if got[id] != part {
			t.Errorf("ID %d of %s is in %q, want %q", id, id.Time().Format(time.RFC3339Nano), got[id], part)
		}
	}

	// GORM's AutoMigrate on the partitioned table: it finds it there and
	// only adds the new column, which every partition gets.
	type EventV2 struct {
		ID     idtype.ID `gorm:"primaryKey"`
		Kind   string    `gorm:"index"`
		Body   string
		Source string
	}
	if err := gdb.WithContext(ctx).Table("events").AutoMigrate(&EventV2{}); err != nil {
		t.Fatalf("AutoMigrate after Create: %v", err)
	}
	var kind string
	var withColumn int
	if err := sqlDB.QueryRowContext(ctx, `SELECT relkind::text, (SELECT count(*) FROM pg_attribute a JOIN pg_inherits i
		ON a.attrelid = i.inhrelid WHERE i.inhparent = c.oid AND a.attname = 'source')
		FROM pg_class c WHERE c.oid = 'events'::regclass`).Scan(&kind, &withColumn); err != nil {
		t.Fatal(err)
	}
	if kind != "p" || withColumn != len(want) {
		t.Errorf("after AutoMigrate: relkind %s, %d partitions with the new column; want p and %d", kind, withColumn, len(want))
	}
}

// Models Create refuses.
type (
	UniqueEmail struct {
		ID    idtype.ID `gorm:"primaryKey"`
		Email string    `gorm:"uniqueIndex"`
	}
	Plain struct {
		ID   idtype.ID `gorm:"primaryKey"`
		Body string
	}
)

// TestCreateTableRefuses: what PostgreSQL cannot partition is refused
// with an error that says why, before anything is made.
func TestCreateTableRefuses(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	gdb, sqlDB := openDB(t)

	// A unique index without the key: ErrKey, and no table. The
	// control shows PostgreSQL itself refuses it, so the check is not
	// stricter than it needs to be.
	clock := newDBClock(t, sqlDB, date("2025-03-10T12:00:00Z"))
	u := clock.table("unique_emails", Options{})
	err := u.Create(ctx, gdb, &UniqueEmail{})
	if !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), "email") {
		t.Errorf("a unique email: %v, want ErrKey naming it", err)
	}
	if gdb.Migrator().HasTable("unique_emails") {
		t.Errorf("the table was made anyway")
	}
	err = gdb.Set("gorm:table_options", " PARTITION BY RANGE (id)").Migrator().CreateTable(&UniqueEmail{})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !strings.Contains(pgErr.Message, "partition") {
		t.Errorf("control: PostgreSQL took a unique index without the partition key: %v", err)
	}

	// AutoMigrate first made a plain table: it cannot be partitioned in place.
	if err := gdb.AutoMigrate(&Plain{}); err != nil {
		t.Fatal(err)
	}
	pl := clock.table("plains", Options{})
	if err := pl.Create(ctx, gdb, &Plain{}); !errors.Is(err, ErrNotPartitioned) ||
		!strings.Contains(err.Error(), "in place") {
		t.Errorf("over a plain table: %v, want ErrNotPartitioned saying it cannot be done in place", err)
	}
	if _, err := pl.Maintain(ctx, sqlDB); !errors.Is(err, ErrNotPartitioned) {
		t.Errorf("Maintain of a plain table: %v, want ErrNotPartitioned", err)
	}
	missing := clock.table("missing", Options{})
	if _, err := missing.Maintain(ctx, sqlDB); !errors.Is(err, ErrNotPartitioned) {
		t.Errorf("Maintain of no table: %v, want ErrNotPartitioned", err)
	}
	if _, err := sqlDB.ExecContext(ctx, "CREATE TABLE listed (id bigint, k int) PARTITION BY LIST (k)"); err != nil {
		t.Fatal(err)
	}
	listed := clock.table("listed", Options{})
	if _, err := listed.Maintain(ctx, sqlDB); !errors.Is(err, ErrNotPartitioned) || !strings.Contains(err.Error(), "list") {
		t.Errorf("Maintain of a list-partitioned table: %v, want ErrNotPartitioned", err)
	}

	// The wrong model, or a transaction.
	if err := clock.table("events", Options{}).Create(ctx, gdb, &Plain{}); !errors.Is(err, idtype.ErrInvalidOptions) {
		t.Errorf("a model of another table: %v, want idtype.ErrInvalidOptions", err)
	}
	err = gdb.Transaction(func(tx *gorm.DB) error {
		return clock.table("events", Options{}).Create(ctx, tx, &Event{})
	})
	if !errors.Is(err, idtype.ErrInvalidOptions) {
		t.Errorf("in a transaction: %v, want idtype.ErrInvalidOptions", err)
	}
}

// TestPruning: a query whose key bounds lie within one period, and a
// query by one key, read one partition, as EXPLAIN shows. The control
// turns pruning off and finds every partition read, so the count is real.
func TestPruning(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	gdb, sqlDB := openDB(t)
	parts := newDBClock(t, sqlDB, date("2025-03-10T12:00:00Z")).table("events", Options{})
	if err := parts.Create(ctx, gdb, &Event{}); err != nil {
		t.Fatal(err)
	}
	all := partitions(t, sqlDB, "events")
	if len(all) != 6 {
		t.Fatalf("partitions %v, want the default and 5 days", all)
	}
	gen, clk := generator(t, 1, date("2025-03-10T00:00:00Z"))
	if err := gdb.Use(gormplugin.New(gen, gormplugin.Options{})); err != nil {
		t.Fatal(err)
	}
	var one Event
	for day := range 5 {
		clk.Set(date("2025-03-10T06:00:00Z").AddDate(0, 0, day))
		batch := make([]Event, 200)
		if err := gdb.WithContext(ctx).Create(&batch).Error; err != nil {
			t.Fatal(err)
		}
		if day == 2 {
			one = batch[7]
		}
	}
	if _, err := sqlDB.ExecContext(ctx, "ANALYZE events"); err != nil {
		t.Fatal(err)
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	l := idtype.DefaultLayout
	from, to := parts.Bounds(date("2025-03-11T15:00:00Z"))
	cases := []struct {
		name  string
		query string
		args  []any
		want  []string
	}{
		{"one day", "SELECT * FROM events WHERE id >= $1 AND id < $2", []any{from, to}, []string{"events_p20250311"}},
		{"part of a day", "SELECT * FROM events WHERE id >= $1 AND id < $2",
			[]any{l.FirstID(date("2025-03-13T06:00:00Z")), l.FirstID(date("2025-03-13T18:00:00Z"))}, []string{"events_p20250313"}},
		{"one key", "SELECT * FROM events WHERE id = $1", []any{one.ID}, []string{"events_p20250312"}},
		{"literal bounds", fmt.Sprintf("SELECT count(*) FROM events WHERE id >= %d AND id < %d", from, to), nil,
			[]string{"events_p20250311"}},
		{"two days", "SELECT * FROM events WHERE id >= $1 AND id < $2",
			[]any{l.FirstID(date("2025-03-11T12:00:00Z")), l.FirstID(date("2025-03-12T12:00:00Z"))},
			[]string{"events_p20250311", "events_p20250312"}},
	}
	for _, c := range cases {
		if got := scanned(t, conn, c.query, c.args...); !same(got, c.want) {
			t.Errorf("%s: the plan reads %v, want %v", c.name, got, c.want)
		}
	}
	// Control: without pruning the same queries read every partition.
	if _, err := conn.ExecContext(ctx, "SET enable_partition_pruning = off"); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases[:3] {
		if got := scanned(t, conn, c.query, c.args...); len(got) != len(all) {
			t.Errorf("control, %s without pruning: the plan reads %v, want all %d partitions", c.name, got, len(all))
		}
	}
}

// TestMaintainConcurrent: 8 app instances maintain one table at once and
// leave exactly the expected partitions, each made once. The control,
// without the advisory lock, fails: instances make the same partition.
func TestMaintainConcurrent(t *testing.T) {
	ctx := testenv.Deadline(t, 3*time.Minute)
	_, sqlDB := openDB(t)
	clock := newDBClock(t, sqlDB, date("2025-03-10T12:00:00Z"))
	opts := Options{Premake: 6}
	want := []string{"ev_default", "ev_p20250310", "ev_p20250311", "ev_p20250312", "ev_p20250313", "ev_p20250314",
		"ev_p20250315", "ev_p20250316"}

	for round := range 3 {
		table := fmt.Sprintf("ev%d", round)
		rawTable(t, sqlDB, table)
		reps, errs := maintainAtOnce(t, ctx, sqlDB, 8, func() *Table { return clock.table(table, opts) })
		made := 0
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, instance %d: %v", round, i, err)
			}
			made += len(reps[i].Created)
		}
		wantHere := make([]string, len(want))
		for i, w := range want {
			wantHere[i] = table + strings.TrimPrefix(w, "ev")
		}
		if got := partitions(t, sqlDB, table); !same(got, wantHere) {
			t.Errorf("round %d: partitions %v, want %v", round, got, wantHere)
		}
		if made != len(want) {
			t.Errorf("round %d: the instances report %d partitions made, want %d (each once)", round, made, len(want))
		}
	}

	// Control: the same without the lock. Instances that read the table
	// at once both make the partition, and one fails.
	failed, rounds := 0, 0
	var sample error
	for ; rounds < 6 && failed == 0; rounds++ {
		round := rounds
		table := fmt.Sprintf("nolock%d", round)
		rawTable(t, sqlDB, table)
		_, errs := maintainAtOnce(t, ctx, sqlDB, 8, func() *Table {
			return clock.tableWithout(table, opts, defences{noLock: true})
		})
		for _, err := range errs {
			if err != nil {
				failed, sample = failed+1, err
			}
		}
	}
	t.Logf("control: without the lock, %d of %d instances failed in %d rounds, e.g. %v", failed, 8*rounds, rounds, sample)
	if failed == 0 {
		t.Errorf("control: without the advisory lock, 6 rounds of 8 instances at once all succeeded")
	}
}

// TestRetention: Maintain removes the days that ended before the cutoff,
// and only those: the day the cutoff falls in stays, with its rows; a day
// that ends exactly at the cutoff goes; partitions made by hand stay.
// With Detach, the expired days become tables of their own, rows and all.
func TestRetention(t *testing.T) {
	for _, detach := range []bool{false, true} {
		t.Run(fmt.Sprintf("detach=%v", detach), func(t *testing.T) {
			ctx := testenv.Deadline(t, 2*time.Minute)
			gdb, sqlDB := openDB(t)
			clock := newDBClock(t, sqlDB, date("2025-03-01T12:00:00Z"))
			build := clock.table("events", Options{Premake: 9})
			if err := build.Create(ctx, gdb, &Event{}); err != nil {
				t.Fatal(err)
			}
			l := idtype.DefaultLayout
			if _, err := sqlDB.ExecContext(ctx, fmt.Sprintf("CREATE TABLE events_archive PARTITION OF events FOR VALUES FROM (%d) TO (%d)",
				l.FirstID(date("2025-02-01T00:00:00Z")), l.FirstID(date("2025-02-02T00:00:00Z")))); err != nil {
				t.Fatal(err)
			}
			gen, clk := generator(t, 2, date("2025-02-01T00:00:00Z"))
			if err := gdb.Use(gormplugin.New(gen, gormplugin.Options{})); err != nil {
				t.Fatal(err)
			}
			insertAt(t, ctx, gdb, clk, date("2025-02-01T10:00:00Z"), 10)
			insertAt(t, ctx, gdb, clk, date("2025-02-20T10:00:00Z"), 10) // the default partition
			perDay := map[string]int{}
			for day := 1; day <= 10; day++ {
				at := date(fmt.Sprintf("2025-03-%02dT23:59:59.999Z", day))
				insertAt(t, ctx, gdb, clk, at, 100)
				perDay[build.PartitionName(at)] = 100
			}

			clock.Set(date("2025-03-10T12:00:00Z"))
			keep := clock.table("events", Options{Premake: -1, Retention: 72 * time.Hour, Detach: detach})
			rep, err := keep.Maintain(ctx, sqlDB)
			if err != nil {
				t.Fatal(err)
			}
			// The cutoff is 03-07 12:00: the 6th ends at 03-07 00:00, before
			// it; the 7th ends after it and holds rows younger than it.
			removed := []string{"events_p20250301", "events_p20250302", "events_p20250303", "events_p20250304",
				"events_p20250305", "events_p20250306"}
			if !same(rep.Removed, removed) || len(rep.Created) != 0 {
				t.Errorf("at 03-10 12:00 with 3 days' retention: removed %v, created %v; want %v and nothing made",
					rep.Removed, rep.Created, removed)
			}
			left := []string{"events_archive", "events_default", "events_p20250307", "events_p20250308", "events_p20250309", "events_p20250310"}
			if got := partitions(t, sqlDB, "events"); !same(got, left) {
				t.Errorf("partitions %v, want %v", got, left)
			}
			rows := where(t, sqlDB, "events")
			count := map[string]int{}
			for _, part := range rows {
				count[part]++
			}
			for _, part := range left[2:] {
				if count[part] != perDay[part] {
					t.Errorf("%s holds %d rows, want %d", part, count[part], perDay[part])
				}
			}
			if count["events_archive"] != 10 || count["events_default"] != 10 || len(rows) != 420 {
				t.Errorf("rows by partition: %v; want 10 in the archive and the default, 420 in all", count)
			}

			// At 03-11 00:00 the cutoff is 03-08 00:00, the end of the 7th.
			clock.Set(date("2025-03-11T00:00:00Z"))
			rep, err = keep.Maintain(ctx, sqlDB)
			if err != nil {
				t.Fatal(err)
			}
			if !same(rep.Removed, []string{"events_p20250307"}) || !same(rep.Created, []string{"events_p20250311"}) {
				t.Errorf("at 03-11 00:00: removed %v, created %v; want the 7th removed and the 11th made", rep.Removed, rep.Created)
			}

			var standalone int
			if err := sqlDB.QueryRowContext(ctx, `SELECT count(*) FROM pg_class WHERE relname LIKE 'events\_p%'
				AND relkind = 'r' AND NOT relispartition`).Scan(&standalone); err != nil {
				t.Fatal(err)
			}
			wantStandalone := 0
			if detach {
				wantStandalone = 7
				var n int
				if err := sqlDB.QueryRowContext(ctx, "SELECT count(*) FROM events_p20250303").Scan(&n); err != nil || n != 100 {
					t.Errorf("the detached 3rd holds %d rows, %v; want 100", n, err)
				}
			}
			if standalone != wantStandalone {
				t.Errorf("%d expired days are left as tables of their own, want %d", standalone, wantStandalone)
			}
		})
	}
}

// TestDefaultMove: rows of days with no partition yet wait in the default
// partition, and move, every one once, when their day's partition is
// made: a day due (the 14th) and a day ahead of Premake whose rows are in
// the default partition (the 16th). The control makes the partition
// without moving them, and PostgreSQL refuses.
func TestDefaultMove(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	gdb, sqlDB := openDB(t)
	clock := newDBClock(t, sqlDB, date("2025-03-10T12:00:00Z"))
	parts := clock.table("events", Options{Premake: 1})
	if err := parts.Create(ctx, gdb, &Event{}); err != nil {
		t.Fatal(err)
	}
	gen, clk := generator(t, 4, date("2025-03-10T12:00:00Z"))
	if err := gdb.Use(gormplugin.New(gen, gormplugin.Options{})); err != nil {
		t.Fatal(err)
	}
	insertAt(t, ctx, gdb, clk, date("2025-03-10T13:00:00Z"), 100)
	insertAt(t, ctx, gdb, clk, date("2025-03-14T10:00:00Z"), 3000)
	insertAt(t, ctx, gdb, clk, date("2025-03-16T10:00:00Z"), 100)
	before := where(t, sqlDB, "events")
	inDefault := 0
	for _, part := range before {
		if part == "events_default" {
			inDefault++
		}
	}
	if inDefault != 3100 {
		t.Fatalf("%d rows in the default partition, want 3100", inDefault)
	}

	// Control: made without the move, the 16th's partition is refused
	// while its rows sit in the default partition, and nothing changes.
	clock.Set(date("2025-03-16T12:00:00Z"))
	noMove := clock.tableWithout("events", Options{Premake: -1}, defences{noMove: true})
	rep, err := noMove.Maintain(ctx, sqlDB)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
		t.Errorf("control, without the move: %v (report %+v), want PostgreSQL's check violation 23514", err, rep)
	}
	if _, err := sqlDB.ExecContext(ctx, "DROP TABLE IF EXISTS events_p20250312, events_p20250313, events_p20250314, events_p20250315"); err != nil {
		t.Fatal(err)
	}
	if got := where(t, sqlDB, "events"); len(got) != len(before) {
		t.Fatalf("after the control: %d rows, want %d", len(got), len(before))
	}

	clock.Set(date("2025-03-14T12:00:00Z"))
	rep, err = parts.Maintain(ctx, sqlDB)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Moved != 3100 || !same(rep.Created, []string{"events_p20250312", "events_p20250313", "events_p20250314", "events_p20250315",
		"events_p20250316"}) || len(rep.Left) != 0 {
		t.Errorf("report %+v; want the 12th to the 16th made and 3100 rows moved", rep)
	}
	after := where(t, sqlDB, "events")
	if len(after) != len(before) {
		t.Errorf("%d rows after the move, %d before", len(after), len(before))
	}
	for id, was := range before {
		now, ok := after[id]
		want := parts.PartitionName(id.Time())
		if !ok || now != want {
			t.Errorf("ID %d (%s, was in %s) is in %q, want %s", id, id.Time().Format(time.RFC3339), was, now, want)
		}
	}
}

// TestDefaultMoveUnderWrites: writers keep inserting rows of a day whose
// partition Maintain makes meanwhile, so rows wait in the default
// partition up to the move and go straight to the new partition after it.
// Every row a writer was told is in is there once, in the day's partition.
func TestDefaultMoveUnderWrites(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	_, sqlDB := openDB(t)
	rawTable(t, sqlDB, "events")
	clock := newDBClock(t, sqlDB, date("2025-03-10T12:00:00Z"))
	parts := clock.table("events", Options{Premake: -1})
	if _, err := parts.Maintain(ctx, sqlDB); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var inserted []idtype.ID
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var written atomic.Int64
	for w := range 4 {
		gen, _ := generator(t, int64(10+w), date("2025-03-11T08:00:00Z"))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id, err := gen.Next()
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := sqlDB.ExecContext(ctx, "INSERT INTO events (id, body) VALUES ($1, 'w')", id); err != nil {
					t.Error(err)
					return
				}
				written.Add(1)
				mu.Lock()
				inserted = append(inserted, id)
				mu.Unlock()
			}
		}()
	}
	for written.Load() < 500 {
		time.Sleep(5 * time.Millisecond)
	}
	clock.Set(date("2025-03-11T00:00:00Z"))
	rep, err := parts.Maintain(ctx, sqlDB)
	if err != nil {
		t.Error(err)
	}
	atMove := written.Load()
	for written.Load() < atMove+500 {
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	if rep.Moved < 500 || !same(rep.Created, []string{"events_p20250311"}) {
		t.Errorf("report %+v; want the 11th made and at least 500 rows moved", rep)
	}
	got := where(t, sqlDB, "events")
	if len(got) != len(inserted) {
		t.Errorf("%d rows in the table, %d inserted", len(got), len(inserted))
	}
	for _, id := range inserted {
		if got[id] != "events_p20250311" {
			t.Errorf("ID %d is in %q, want events_p20250311", id, got[id])
		}
	}
}

// TestRun: the loop maintains at once and then every Interval, follows
// the clock into the next day, keeps going after errors, and returns when
// its context ends.
func TestRun(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	_, sqlDB := openDB(t)
	clock := newDBClock(t, sqlDB, date("2025-03-10T12:00:00Z"))
	var logs testenv.LogBuffer
	parts := clock.table("events", Options{Premake: -1, Interval: 20 * time.Millisecond, Logger: slogTo(&logs)})

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- parts.Run(runCtx, sqlDB) }()

	// No table yet: Run logs the error and tries again.
	waitFor(t, ctx, "an error logged", func() bool { return strings.Contains(logs.String(), "does not exist") })
	rawTable(t, sqlDB, "events")
	waitFor(t, ctx, "the first partitions", func() bool {
		return same(partitions(t, sqlDB, "events"), []string{"events_default", "events_p20250310"})
	})
	clock.Set(date("2025-03-11T00:00:01Z"))
	waitFor(t, ctx, "the next day", func() bool {
		return same(partitions(t, sqlDB, "events"), []string{"events_default", "events_p20250310", "events_p20250311"})
	})
	// Run logs after Maintain has committed.
	waitFor(t, ctx, "the log to name the partition made", func() bool { return strings.Contains(logs.String(), "events_p20250311") })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not return after its context ended")
	}
}

// TestMaintainSchema: a table in a schema off the search_path keeps its
// partitions beside it.
func TestMaintainSchema(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	_, sqlDB := openDB(t)
	if _, err := sqlDB.ExecContext(ctx, "CREATE SCHEMA app"); err != nil {
		t.Fatal(err)
	}
	rawTable(t, sqlDB, "app.logs")
	parts := newDBClock(t, sqlDB, date("2025-12-31T23:00:00Z")).table("app.logs", Options{Premake: 1, Period: Month})
	rep, err := parts.Maintain(ctx, sqlDB)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"logs_default", "logs_p202512", "logs_p202601"}
	if !same(rep.Created, want) {
		t.Errorf("created %v, want %v", rep.Created, want)
	}
	var n int
	if err := sqlDB.QueryRowContext(ctx, `SELECT count(*) FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
		WHERE s.nspname = 'app' AND c.relispartition AND c.relkind = 'r'`).Scan(&n); err != nil || n != 3 {
		t.Errorf("%d partitions in schema app, %v; want 3", n, err)
	}
}

// TestMaintainLockTimeout: a step that cannot get the table's lock, held
// by a long transaction, fails after LockTimeout instead of queueing every
// later query behind itself, and succeeds once the lock is free. The
// control, whose bound is an hour, is still waiting when its 1s context
// ends.
func TestMaintainLockTimeout(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	_, sqlDB := openDB(t)
	rawTable(t, sqlDB, "events")
	clock := newDBClock(t, sqlDB, date("2025-03-10T12:00:00Z"))
	parts := clock.table("events", Options{Premake: -1, LockTimeout: 200 * time.Millisecond})
	if _, err := parts.Maintain(ctx, sqlDB); err != nil {
		t.Fatal(err)
	}
	long, err := sqlDB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = long.Rollback() }()
	if _, err := long.ExecContext(ctx, "SELECT count(*) FROM events"); err != nil {
		t.Fatal(err)
	}
	clock.Set(date("2025-03-11T12:00:00Z"))
	start := time.Now()
	_, err = parts.Maintain(ctx, sqlDB)
	// 55P03 is the server's own lock_timeout firing: the step gave up on
	// the lock, which the reader holds until the test ends, however long
	// the machine took to get there.
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Errorf("behind a reader, after %v: %v, want lock_timeout's 55P03", time.Since(start), err)
	}

	unbounded := clock.table("events", Options{Premake: -1, LockTimeout: time.Hour})
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := unbounded.Maintain(short, sqlDB); err == nil || short.Err() == nil {
		t.Errorf("control, LockTimeout an hour: %v; want it still waiting when its 1s context ended", err)
	}

	if err := long.Rollback(); err != nil {
		t.Fatal(err)
	}
	rep, err := parts.Maintain(ctx, sqlDB)
	if err != nil || !same(rep.Created, []string{"events_p20250311"}) {
		t.Errorf("once the lock is free: %+v, %v", rep, err)
	}
}

package migrations

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// timeLayouts are the layouts the time functions are checked on: the
// default (through both forms), other epochs and widths, the fewest time
// bits a layout may have (20) and one whose last time is 35,000 years
// away, past where float arithmetic on milliseconds stays exact.
var timeLayouts = map[string]idtype.Layout{
	"default 41/10/12":      idtype.DefaultLayout,
	"epoch 2024, 41/10/12":  {Epoch: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), WorkerBits: 10, SequenceBits: 12},
	"sonyflake 39/16/8":     {Epoch: time.Date(2014, 9, 1, 0, 0, 0, 0, time.UTC), WorkerBits: 16, SequenceBits: 8},
	"wide 41/1/21":          {Epoch: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), WorkerBits: 1, SequenceBits: 21},
	"fewest time 20/21/22":  {Epoch: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), WorkerBits: 21, SequenceBits: 22},
	"no sequence 50/13/0":   {Epoch: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), WorkerBits: 13, SequenceBits: 0},
	"epoch 1970, 43/0/20":   {Epoch: time.UnixMilli(0).UTC(), WorkerBits: 0, SequenceBits: 20},
	"odd epoch ms 41/10/12": {Epoch: time.UnixMilli(1700000000123).UTC(), WorkerBits: 10, SequenceBits: 12},
}

// layoutArgs is how the variants take a layout: (epoch, worker_bits,
// sequence_bits).
func layoutArgs(l idtype.Layout) []any {
	return []any{l.Epoch, int32(l.WorkerBits), int32(l.SequenceBits)}
}

// edgeIDs are the IDs of l that sit on a boundary: the first ones, both
// sides of a millisecond, the last millisecond, MaxID, and a spread of
// random ones from a fixed seed.
func edgeIDs(l idtype.Layout) []idtype.ID {
	shift := l.WorkerBits + l.SequenceBits
	maxMs := int64(1)<<l.TimeBits() - 1
	ids := []idtype.ID{1, 2, idtype.ID(1)<<shift - 1, idtype.ID(1) << shift, idtype.ID(1)<<shift + 1,
		idtype.ID(maxMs) << shift, idtype.ID(maxMs)<<shift + 1, idtype.ID(maxMs-1)<<shift | idtype.ID(1)<<shift - 1,
		idtype.MaxID - 1, idtype.MaxID}
	r := rand.New(rand.NewPCG(1, uint64(shift)))
	for range 500 {
		ids = append(ids, idtype.ID(r.Int64N(math.MaxInt64)+1))
	}
	return ids
}

func ints(ids []idtype.ID) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}

// TestTimeFunctions checks snowflake_time, snowflake_worker and
// snowflake_sequence against Layout.Decode on the same IDs, in both forms
// for the default layout and through the variant for every other.
func TestTimeFunctions(t *testing.T) {
	db, _ := migrated(t, Options{})
	ctx := testenv.Deadline(t, 2*time.Minute)
	check := func(t *testing.T, l idtype.Layout, query string, args ...any) {
		t.Helper()
		ids := edgeIDs(l)
		rows, err := db.QueryContext(ctx, query, append([]any{ints(ids)}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := 0
		for ; rows.Next(); n++ {
			var id idtype.ID
			var ts time.Time
			var worker, seq int64
			if err := rows.Scan(&id, &ts, &worker, &seq); err != nil {
				t.Fatal(err)
			}
			want := l.Decode(id)
			if !ts.Equal(want.Time) || worker != want.Worker || seq != want.Sequence {
				t.Errorf("ID %d: SQL says %s worker %d sequence %d; idtype says %s worker %d sequence %d",
					id, ts.UTC().Format(time.RFC3339Nano), worker, seq,
					want.Time.Format(time.RFC3339Nano), want.Worker, want.Sequence)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if n != len(ids) {
			t.Fatalf("%d rows, want %d", n, len(ids))
		}
	}
	t.Run("default", func(t *testing.T) {
		check(t, idtype.DefaultLayout, `SELECT x, snowflake_time(x), snowflake_worker(x), snowflake_sequence(x)
			FROM unnest($1::bigint[]) x`)
	})
	// The default form computes in float8 (see the migration); the variant
	// in exact integer parts. On a million milliseconds, half of them in
	// the layout's last years, where float8 has the least to spare, they
	// must agree to the microsecond.
	t.Run("default float vs exact", func(t *testing.T) {
		var differ int
		var sample sql.NullInt64
		err := db.QueryRowContext(ctx, `SELECT count(*), min(x) FROM (
				SELECT (floor(random() * 2199023255552)::bigint << 22) | 4194303 AS x FROM generate_series(1, 500000)
				UNION ALL
				SELECT ((2199023255551 - floor(random() * 5 * 365 * 86400000)::bigint) << 22) FROM generate_series(1, 500000)
			) s WHERE snowflake_time(x) <> snowflake_time(x, $1, 10, 12)`, idtype.DefaultLayout.Epoch).Scan(&differ, &sample)
		if err != nil {
			t.Fatal(err)
		}
		if differ != 0 {
			t.Errorf("%d of 1,000,000 IDs decode differently in float8 and in exact arithmetic, e.g. %d", differ, sample.Int64)
		}
	})
	for name, l := range timeLayouts {
		t.Run(name, func(t *testing.T) {
			check(t, l, `SELECT x, snowflake_time(x, $2, $3, $4), snowflake_worker(x, $2, $3, $4),
				snowflake_sequence(x, $2, $3, $4) FROM unnest($1::bigint[]) x`, layoutArgs(l)...)
		})
	}
}

// edgeTimes are the times at which FirstID changes behaviour for l: both
// sides of the epoch and of the last millisecond, to the microsecond
// (PostgreSQL's precision), and random ones around and inside the layout.
func edgeTimes(l idtype.Layout) []time.Time {
	last := l.MaxTime()
	ts := []time.Time{time.Unix(0, 0), l.Epoch.Add(-time.Millisecond), l.Epoch.Add(-time.Microsecond), l.Epoch,
		l.Epoch.Add(time.Microsecond), l.Epoch.Add(999 * time.Microsecond), l.Epoch.Add(time.Millisecond),
		last.Add(-time.Microsecond), last, last.Add(999 * time.Microsecond), last.Add(time.Millisecond),
		time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)}
	r := rand.New(rand.NewPCG(2, uint64(l.WorkerBits)))
	span := last.Sub(l.Epoch) + 48*time.Hour
	if last.Year() > 2200 { // time.Duration ends in 2262
		span = 200 * 365 * 24 * time.Hour
	}
	for range 500 {
		ts = append(ts, l.Epoch.Add(-24*time.Hour+time.Duration(r.Int64N(int64(span)))).Truncate(time.Microsecond))
	}
	return ts
}

// TestFirstID checks snowflake_first_id against Layout.FirstID, which
// gives 0 before the epoch and MaxID past the last time.
func TestFirstID(t *testing.T) {
	db, _ := migrated(t, Options{})
	ctx := testenv.Deadline(t, 2*time.Minute)
	check := func(t *testing.T, l idtype.Layout, query string, args ...any) {
		t.Helper()
		ts := edgeTimes(l)
		rows, err := db.QueryContext(ctx, query, append([]any{ts}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		n := 0
		for ; rows.Next(); n++ {
			var at time.Time
			var id idtype.ID
			if err := rows.Scan(&at, &id); err != nil {
				t.Fatal(err)
			}
			if want := l.FirstID(at); id != want {
				t.Errorf("first ID of %s: SQL says %d, idtype says %d", at.UTC().Format(time.RFC3339Nano), id, want)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if n != len(ts) {
			t.Fatalf("%d rows, want %d", n, len(ts))
		}
	}
	t.Run("default", func(t *testing.T) {
		check(t, idtype.DefaultLayout, `SELECT x, snowflake_first_id(x) FROM unnest($1::timestamptz[]) x`)
	})
	for name, l := range timeLayouts {
		t.Run(name, func(t *testing.T) {
			check(t, l, `SELECT x, snowflake_first_id(x, $2, $3, $4) FROM unnest($1::timestamptz[]) x`, layoutArgs(l)...)
		})
	}
	var lo, hi idtype.ID
	if err := db.QueryRowContext(ctx, "SELECT snowflake_first_id('-infinity'), snowflake_first_id('infinity')").Scan(&lo, &hi); err != nil {
		t.Fatal(err)
	}
	if lo != 0 || hi != idtype.MaxID {
		t.Errorf("first IDs of -infinity and infinity = %d, %d; want 0, MaxID", lo, hi)
	}
}

// wantSQLState fails unless err is a PostgreSQL error with the code.
func wantSQLState(t *testing.T, what string, err error, code string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != code {
		t.Errorf("%s: %v, want SQLSTATE %s", what, err, code)
	}
}

// TestTimeFunctionsRefuse: an ID of 0 or less, and a layout that
// idtype refuses, are errors with their own SQLSTATE, never a made-up
// answer; NULL gives NULL.
func TestTimeFunctionsRefuse(t *testing.T) {
	db, _ := migrated(t, Options{})
	ctx := testenv.Deadline(t, time.Minute)
	epoch := idtype.DefaultLayout.Epoch
	for _, id := range []int64{0, -1, math.MinInt64} {
		for _, f := range []string{"snowflake_time", "snowflake_worker", "snowflake_sequence"} {
			var x any
			err := db.QueryRowContext(ctx, "SELECT "+f+"($1::bigint)", id).Scan(&x)
			wantSQLState(t, fmt.Sprintf("%s(%d)", f, id), err, SQLStateInvalidID)
			err = db.QueryRowContext(ctx, "SELECT "+f+"($1::bigint, $2, 10, 12)", id, epoch).Scan(&x)
			wantSQLState(t, fmt.Sprintf("%s(%d, layout)", f, id), err, SQLStateInvalidID)
		}
	}
	// A column of IDs with one bad one fails the whole statement.
	_, err := db.ExecContext(ctx, "SELECT snowflake_time(x) FROM unnest(ARRAY[5, 0, 7]::bigint[]) x")
	wantSQLState(t, "a column with a 0", err, SQLStateInvalidID)

	badLayouts := []struct {
		epoch  time.Time
		wb, sb int32
	}{
		{epoch, 32, 12}, {epoch, 10, 32}, {epoch, -1, 12}, {epoch, 10, -1}, {epoch, 22, 22},
		{time.Date(1969, 12, 31, 23, 59, 59, 999e6, time.UTC), 10, 12},
	}
	for _, bl := range badLayouts {
		for _, q := range []string{"SELECT snowflake_time(5, $1, $2, $3)", "SELECT snowflake_worker(5, $1, $2, $3)",
			"SELECT snowflake_sequence(5, $1, $2, $3)", "SELECT snowflake_first_id(now(), $1, $2, $3)"} {
			var x any
			err := db.QueryRowContext(ctx, q, bl.epoch, bl.wb, bl.sb).Scan(&x)
			wantSQLState(t, fmt.Sprintf("%s with (%s, %d, %d)", q, bl.epoch.Format(time.RFC3339Nano), bl.wb, bl.sb),
				err, SQLStateInvalidLayout)
		}
		// Every layout idtype refuses, SQL refuses, and the other way round.
		l := idtype.Layout{Epoch: bl.epoch, WorkerBits: uint(max(bl.wb, 0)), SequenceBits: uint(max(bl.sb, 0))}
		if bl.wb >= 0 && bl.sb >= 0 && l.Validate() == nil {
			t.Errorf("idtype accepts the layout %+v that SQL refuses", l)
		}
	}

	var ts sql.NullTime
	var w, s, f sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT snowflake_time(NULL), snowflake_worker(NULL), snowflake_sequence(NULL),
		snowflake_first_id(NULL)`).Scan(&ts, &w, &s, &f); err != nil {
		t.Fatal(err)
	}
	if ts.Valid || w.Valid || s.Valid || f.Valid {
		t.Errorf("NULL in, %v %v %v %v out; want NULLs", ts, w, s, f)
	}
	if err := db.QueryRowContext(ctx, `SELECT snowflake_time(NULL, $1, 10, 12), snowflake_time(5, NULL, 10, 12),
		snowflake_first_id(NULL, $1, 10, 12)`, epoch).Scan(&ts, &ts, &f); err != nil {
		t.Fatal(err)
	}
	if ts.Valid || f.Valid {
		t.Errorf("NULL in, %v %v out; want NULLs", ts, f)
	}
}

// TestTimeFunctionsImmutable: the functions work where PostgreSQL takes
// only IMMUTABLE ones (an index expression, a generated column, a
// partition bound), the planner inlines them into the query instead of
// calling them row by row, and they work for a caller whose search_path
// does not hold their schema.
func TestTimeFunctionsImmutable(t *testing.T) {
	db, url := migrated(t, Options{})
	ctx := testenv.Deadline(t, time.Minute)
	for _, ddl := range []string{
		`CREATE TABLE events (
			id bigint PRIMARY KEY,
			created timestamptz GENERATED ALWAYS AS (snowflake_time(id)) STORED,
			created2 timestamptz GENERATED ALWAYS AS (snowflake_time(id, '2010-11-04T01:42:54.657Z', 10, 12)) STORED)`,
		`CREATE INDEX events_time ON events (snowflake_time(id))`,
		`CREATE INDEX events_worker ON events (snowflake_worker(id), snowflake_sequence(id))`,
		`CREATE TABLE parted (id bigint PRIMARY KEY) PARTITION BY RANGE (id)`,
		`CREATE TABLE parted_2024 PARTITION OF parted
			FOR VALUES FROM (snowflake_first_id('2024-01-01T00:00:00Z')) TO (snowflake_first_id('2025-01-01T00:00:00Z'))`,
	} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			t.Fatalf("%s: %v", strings.Fields(ddl)[:3], err)
		}
	}
	at := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	id, _ := idtype.DefaultLayout.Compose(at, 5, 7)
	if _, err := db.ExecContext(ctx, "INSERT INTO events (id) VALUES ($1)", id); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO parted (id) VALUES ($1)", id); err != nil {
		t.Fatalf("a 2024 ID does not fit the 2024 partition: %v", err)
	}
	var created, created2 time.Time
	if err := db.QueryRowContext(ctx, "SELECT created, created2 FROM events").Scan(&created, &created2); err != nil {
		t.Fatal(err)
	}
	if !created.Equal(at) || !created2.Equal(at) {
		t.Errorf("generated columns hold %v and %v, want %v", created, created2, at)
	}

	called := regexp.MustCompile(`snowflake_(time|worker|sequence|first_id)\(`)
	for _, q := range []string{
		"SELECT snowflake_time(id), snowflake_worker(id), snowflake_sequence(id) FROM events",
		"SELECT snowflake_time(id, '2024-01-01T00:00:00Z', 10, 12) FROM events",
		"SELECT id FROM events WHERE id >= snowflake_first_id(now() - interval '1 day')",
	} {
		var plan strings.Builder
		rows, err := db.QueryContext(ctx, "EXPLAIN VERBOSE "+q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		rows.Close()
		if called.MatchString(plan.String()) {
			t.Errorf("%s: the plan calls the function instead of inlining it:\n%s", q, plan.String())
		}
	}

	// A caller whose search_path lacks the functions' schema still gets
	// their errors, not "function snowflake_refuse does not exist".
	other := openDB(t, withParams(t, url, "", map[string]string{"search_path": "pg_catalog"}))
	var x any
	err := other.QueryRowContext(ctx, "SELECT public.snowflake_time(0)").Scan(&x)
	wantSQLState(t, "public.snowflake_time(0) with search_path pg_catalog", err, SQLStateInvalidID)
	if err := other.QueryRowContext(ctx, "SELECT public.snowflake_time($1::bigint)", id).Scan(&created); err != nil || !created.Equal(at) {
		t.Errorf("public.snowflake_time with search_path pg_catalog = %v, %v; want %v", created, err, at)
	}
}

package partition

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// benchDays is how many days of rows the partition benchmarks keep, and
// benchExpire how many of the oldest retention removes.
const (
	benchDays   = 100
	benchExpire = 30
)

// benchRowsPerDay is the rows of each day of BenchmarkPartitions and
// BenchmarkMaintain, 10,000 unless SNOWKEY_BENCH_ROWS_PER_DAY says
// otherwise: a million rows a table.
func benchRowsPerDay(b *testing.B) int {
	if s := os.Getenv("SNOWKEY_BENCH_ROWS_PER_DAY"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 86_400_000 {
			b.Fatalf("SNOWKEY_BENCH_ROWS_PER_DAY=%q: want 1..86400000", s)
		}
		return n
	}
	return 10_000
}

// benchDay0 is the first day of the data.
var benchDay0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func benchDay(d int) time.Time { return benchDay0.AddDate(0, 0, d) }

// benchLoad inserts rows/day rows into table for each day in [from, to),
// spread evenly over the day, the same rows whatever the table.
func benchLoad(b *testing.B, conn *sql.Conn, table string, from, to, rows int) {
	b.Helper()
	l := idtype.DefaultLayout
	dayLen := l.FirstID(benchDay(1)) - l.FirstID(benchDay(0))
	step := dayLen / idtype.ID(rows)
	_, err := conn.ExecContext(context.Background(), "INSERT INTO "+table+` (id, n, payload)
		SELECT $1::bigint + d * $2::bigint + g * $3::bigint, g, md5(g::text)
		FROM generate_series($4::int, $5::int - 1) d, generate_series(0, $6::int - 1) g`,
		l.FirstID(benchDay0), dayLen, step, from, to, rows)
	if err != nil {
		b.Fatal(err)
	}
}

// benchExec runs q on conn or fails b.
func benchExec(b *testing.B, conn *sql.Conn, q string, args ...any) sql.Result {
	b.Helper()
	res, err := conn.ExecContext(context.Background(), q, args...)
	if err != nil {
		b.Fatalf("%s: %v", q, err)
	}
	return res
}

// pairReset times x and y once each per op, given the op's number, in
// alternating order so that neither always runs first, with reset run
// untimed after both.
func pairReset(b *testing.B, x, y func(op int), reset func()) (tx, ty time.Duration) {
	op := 0
	for b.Loop() {
		for k := range 2 {
			start := time.Now()
			if (op+k)%2 == 0 {
				x(op)
				tx += time.Since(start)
			} else {
				y(op)
				ty += time.Since(start)
			}
		}
		if reset != nil {
			b.StopTimer()
			reset()
			b.StartTimer()
		}
		op++
	}
	return tx, ty
}

// BenchmarkPartitions compares a table partitioned by day (Table) with the
// same table unpartitioned, with a B-tree on the key, on the same rows:
// 100 days of benchRowsPerDay rows (id, an int, a 32-character text).
// Every op runs the two sides once each, in alternating order, so the
// ratios compare the same moments of a noisy machine:
//
//   - "read-day": one day's rows read by key range (count and sum of the
//     text's length, so that every row is read), a different day each op.
//     "partitioned/plain" is the ratio of times.
//   - "insert": 1,000 rows with IDs of now (the newest day) in one
//     INSERT ... SELECT FROM unnest; "insert-row": 100 one-row INSERTs.
//     "partitioned/plain-rows/s" is the ratio of throughputs.
//
// Retention is BenchmarkRetention's.
func BenchmarkPartitions(b *testing.B) {
	rows := benchRowsPerDay(b)
	_, db := openDB(b)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	benchExec(b, conn, "CREATE TABLE parted (id bigint PRIMARY KEY, n int NOT NULL, payload text NOT NULL) PARTITION BY RANGE (id)")
	benchExec(b, conn, "CREATE TABLE plain (id bigint PRIMARY KEY, n int NOT NULL, payload text NOT NULL)")
	// Made at day 0 with 99 days ahead: the 100 days of data.
	all := newDBClock(b, db, benchDay(0)).table("parted", Options{Premake: benchDays - 1})
	if _, err := all.Maintain(ctx, db); err != nil {
		b.Fatal(err)
	}
	for _, table := range []string{"parted", "plain"} {
		benchLoad(b, conn, table, 0, benchDays, rows)
		benchExec(b, conn, "VACUUM ANALYZE "+table)
	}
	b.ResetTimer()

	b.Run("read-day", func(b *testing.B) {
		// Both sides of an op read the same day; the next op the next day.
		read := func(table string) func(op int) {
			return func(op int) {
				from, to := all.Bounds(benchDay(op % benchDays))
				var n, length int64
				if err := conn.QueryRowContext(ctx, "SELECT count(*), sum(length(payload)) FROM "+table+
					" WHERE id >= $1 AND id < $2", from, to).Scan(&n, &length); err != nil || n != int64(rows) {
					b.Fatalf("%s, day %d: %d rows, %v; want %d", table, op%benchDays, n, err, rows)
				}
			}
		}
		tx, ty := pairReset(b, read("parted"), read("plain"), nil)
		b.ReportMetric(tx.Seconds()/ty.Seconds(), "partitioned/plain")
	})

	// One generator for both, so that no key repeats: IDs of now, in the
	// data's last day.
	gen, _ := generator(b, 5, benchDay(benchDays-1).Add(time.Hour))
	b.Run("insert", func(b *testing.B) { benchInsert(b, conn, gen, 1000, 1) })
	b.Run("insert-row", func(b *testing.B) { benchInsert(b, conn, gen, 1, 100) })
}

// benchInsert inserts batches of size rows, n statements per op, into each
// table, with keys from gen.
func benchInsert(b *testing.B, conn *sql.Conn, gen *idtype.Generator, size, n int) {
	ctx := context.Background()
	ids, ns, payloads := make([]int64, size), make([]int32, size), make([]string, size)
	insert := func(table string) func(int) {
		q := "INSERT INTO " + table + " (id, n, payload) SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[])"
		if size == 1 {
			q = "INSERT INTO " + table + " (id, n, payload) VALUES ($1, $2, $3)"
		}
		return func(int) {
			for range n {
				for i := range size {
					id, err := gen.Next()
					if err != nil {
						b.Fatal(err)
					}
					ids[i], ns[i], payloads[i] = int64(id), int32(i), fmt.Sprintf("%032x", int64(id))
				}
				var err error
				if size == 1 {
					_, err = conn.ExecContext(ctx, q, ids[0], ns[0], payloads[0])
				} else {
					_, err = conn.ExecContext(ctx, q, ids, ns, payloads)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	tx, ty := pairReset(b, insert("parted"), insert("plain"), nil)
	perOp := float64(size * n * b.N)
	b.ReportMetric(perOp/tx.Seconds(), "partitioned-rows/s")
	b.ReportMetric(perOp/ty.Seconds(), "plain-rows/s")
	b.ReportMetric(ty.Seconds()/tx.Seconds(), "partitioned/plain-rows/s")
}

// retentionSizes are the rows a day of BenchmarkRetention, unless
// SNOWKEY_BENCH_RETENTION_ROWS lists others (comma-separated).
func retentionSizes(b *testing.B) []int {
	sizes := []int{10_000, 100_000, 1_000_000}
	if s := os.Getenv("SNOWKEY_BENCH_RETENTION_ROWS"); s != "" {
		sizes = sizes[:0]
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 86_400_000 {
				b.Fatalf("SNOWKEY_BENCH_RETENTION_ROWS=%q: want rows a day, 1..86400000, comma-separated", s)
			}
			sizes = append(sizes, n)
		}
	}
	return sizes
}

// BenchmarkRetention expires one day of rows, at each of 10,000, 100,000
// and 1,000,000 rows a day, two ways: a DELETE of the day's key range
// from an unpartitioned table (a B-tree on the key), and Maintain removing
// the day's partition (detached and dropped) from a table partitioned by
// day. Each table also holds the next day's rows. Every op expires a day
// of each size on both sides (the DELETE first at even ops, Maintain
// first at odd ones), and puts them back untimed; the VACUUM that makes a
// DELETE's space reusable is timed apart.
//
// A DELETE costs per row, a drop per partition, so their ratio grows with
// the rows a day: it reports, for each size, delete/drop and
// delete+vacuum/drop, and the times; then the slope of log(delete/drop)
// against log(rows a day) fitted by least squares over the sizes, and the
// rows a day at which the fitted line reaches 100.
func BenchmarkRetention(b *testing.B) {
	sizes := retentionSizes(b)
	_, db := openDB(b)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	clock := newDBClock(b, db, benchDay(0))
	type side struct {
		del, drop, vacuum time.Duration
		day               int // the day that expires
	}
	sides := make([]side, len(sizes))
	for i, n := range sizes {
		table := fmt.Sprintf("r%d", i)
		benchExec(b, conn, "CREATE TABLE "+table+"_parted (id bigint PRIMARY KEY, n int NOT NULL, payload text NOT NULL) PARTITION BY RANGE (id)")
		benchExec(b, conn, "CREATE TABLE "+table+"_plain (id bigint PRIMARY KEY, n int NOT NULL, payload text NOT NULL)")
		// Each size its own days, three apart: the expiring day, the next
		// (kept), and the day Maintain runs on.
		sides[i].day = 3 * i
		clock.Set(benchDay(sides[i].day))
		if _, err := clock.table(table+"_parted", Options{Premake: 2}).Maintain(ctx, db); err != nil {
			b.Fatal(err)
		}
		for _, t := range []string{table + "_parted", table + "_plain"} {
			benchLoad(b, conn, t, sides[i].day, sides[i].day+2, n)
			benchExec(b, conn, "VACUUM ANALYZE "+t)
		}
	}
	b.ResetTimer()
	op := 0
	for b.Loop() {
		for i, n := range sizes {
			table := fmt.Sprintf("r%d", i)
			s := &sides[i]
			l := idtype.DefaultLayout
			from, to := l.FirstID(benchDay(s.day)), l.FirstID(benchDay(s.day+1))
			// At noon of the day after next, 36 hours' retention cuts at the
			// start of the next day: the expiring day alone has ended.
			clock.Set(benchDay(s.day + 2).Add(12 * time.Hour))
			keep := clock.table(table+"_parted", Options{Premake: -1, Retention: 36 * time.Hour})
			del := func() {
				start := time.Now()
				if got, _ := benchExec(b, conn, "DELETE FROM "+table+"_plain WHERE id >= $1 AND id < $2", from, to).RowsAffected(); got != int64(n) {
					b.Fatalf("DELETE removed %d rows, want %d", got, n)
				}
				s.del += time.Since(start)
			}
			drop := func() {
				start := time.Now()
				rep, err := keep.Maintain(ctx, db)
				if err != nil || len(rep.Removed) != 1 || len(rep.Created) != 0 {
					b.Fatalf("Maintain: %+v, %v; want one day removed, nothing made", rep, err)
				}
				s.drop += time.Since(start)
			}
			if op%2 == 0 {
				del()
				drop()
			} else {
				drop()
				del()
			}
			b.StopTimer()
			start := time.Now()
			benchExec(b, conn, "VACUUM "+table+"_plain")
			s.vacuum += time.Since(start)
			clock.Set(benchDay(s.day))
			if _, err := clock.table(table+"_parted", Options{Premake: 2}).Maintain(ctx, db); err != nil {
				b.Fatal(err)
			}
			for _, t := range []string{table + "_parted", table + "_plain"} {
				benchLoad(b, conn, t, s.day, s.day+1, n)
				benchExec(b, conn, "ANALYZE "+t)
			}
			b.StartTimer()
		}
		op++
	}
	var xs, ys []float64
	for i, n := range sizes {
		s := sides[i]
		name := rowsName(n)
		ratio := s.del.Seconds() / s.drop.Seconds()
		b.ReportMetric(ratio, "delete/drop-"+name)
		b.ReportMetric((s.del+s.vacuum).Seconds()/s.drop.Seconds(), "delete+vacuum/drop-"+name)
		b.ReportMetric(s.del.Seconds()/float64(b.N)*1e3, "delete-ms-"+name)
		b.ReportMetric(s.drop.Seconds()/float64(b.N)*1e3, "drop-ms-"+name)
		xs, ys = append(xs, math.Log10(float64(n))), append(ys, math.Log10(ratio))
	}
	if len(sizes) >= 2 {
		slope, intercept := leastSquares(xs, ys)
		b.ReportMetric(slope, "log-slope")
		if slope > 0 {
			b.ReportMetric(math.Pow(10, (2-intercept)/slope), "rows/day-at-100x")
		}
	}
}

// rowsName writes a row count as "10k", "1M".
func rowsName(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return strconv.Itoa(n/1_000_000) + "M"
	case n >= 1000 && n%1000 == 0:
		return strconv.Itoa(n/1000) + "k"
	}
	return strconv.Itoa(n)
}

// leastSquares fits y = slope*x + intercept.
func leastSquares(xs, ys []float64) (slope, intercept float64) {
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	n := float64(len(xs))
	slope = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	return slope, (sy - slope*sx) / n
}

// BenchmarkMaintain times Maintain on a table of 100 daily partitions of
// benchRowsPerDay rows (10,000: a million rows) that a notes table refers
// to (a foreign key with ON DELETE CASCADE, indexed; a note for every
// hundredth row):
//
//   - "steady": the hourly call with nothing to do, every period made:
//     ms per call.
//   - "retention": the oldest 30 days expire, their notes deleted, and one
//     Maintain detaches and drops their 30 partitions, after checking each
//     for rows that refer to it; paired in every op with the same on an
//     identical table that nothing refers to, which needs no check and
//     could be dropped alone: "referenced/plain" is the ratio of times,
//     "retention-ms" the referenced table's.
//   - "move": a day's rows (with notes) that landed in the default
//     partition, moved by the Maintain that makes their day, as a
//     superuser, under session_replication_role: ms per call.
func BenchmarkMaintain(b *testing.B) {
	rows := benchRowsPerDay(b)
	_, db := openDB(b)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	clock := newDBClock(b, db, benchDay(0))
	for _, t := range []string{"events", "lone"} {
		benchExec(b, conn, "CREATE TABLE "+t+" (id bigint PRIMARY KEY, n int NOT NULL, payload text NOT NULL) PARTITION BY RANGE (id)")
		if _, err := clock.table(t, Options{Premake: benchDays - 1}).Maintain(ctx, db); err != nil {
			b.Fatal(err)
		}
		benchLoad(b, conn, t, 0, benchDays, rows)
	}
	benchExec(b, conn, "CREATE TABLE notes (id bigserial PRIMARY KEY, event_id bigint NOT NULL REFERENCES events ON DELETE CASCADE)")
	benchExec(b, conn, "CREATE INDEX ON notes (event_id)")
	addNotes := func(from, to int) {
		l := idtype.DefaultLayout
		benchExec(b, conn, "INSERT INTO notes (event_id) SELECT id FROM events WHERE id >= $1 AND id < $2 AND n % 100 = 0",
			l.FirstID(benchDay(from)), l.FirstID(benchDay(to)))
	}
	addNotes(0, benchDays)
	benchExec(b, conn, "VACUUM ANALYZE events, lone, notes")
	b.ResetTimer()

	// Every op at noon of the last day, four days made ahead already.
	clock.Set(benchDay(benchDays - 1).Add(12 * time.Hour))
	for _, t := range []string{"events", "lone"} {
		if _, err := clock.table(t, Options{Premake: 4}).Maintain(ctx, db); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("steady", func(b *testing.B) {
		p := clock.table("events", Options{Premake: 4})
		start := time.Now()
		for b.Loop() {
			rep, err := p.Maintain(ctx, db)
			if err != nil || len(rep.Created)+len(rep.Removed) != 0 {
				b.Fatalf("%+v, %v; want nothing to do", rep, err)
			}
		}
		b.ReportMetric(time.Since(start).Seconds()/float64(b.N)*1e3, "steady-ms")
	})

	b.Run("retention", func(b *testing.B) {
		// 69.5 days' retention at noon of the last day cuts at the start of
		// day 30: days 0 to 29 have ended before it.
		retention := (benchDays-benchExpire)*24*time.Hour - 12*time.Hour
		l := idtype.DefaultLayout
		benchExec(b, conn, "DELETE FROM notes WHERE event_id < $1", l.FirstID(benchDay(benchExpire)))
		remove := func(t string) func(int) {
			p := clock.table(t, Options{Premake: 4, Retention: retention})
			return func(int) {
				rep, err := p.Maintain(ctx, db)
				if err != nil || len(rep.Removed) != benchExpire || len(rep.Kept) != 0 {
					b.Fatalf("%s: %+v, %v; want %d days removed", t, rep, err, benchExpire)
				}
			}
		}
		tx, ty := pairReset(b, remove("events"), remove("lone"), func() {
			clock.Set(benchDay(0))
			for _, t := range []string{"events", "lone"} {
				if _, err := clock.table(t, Options{Premake: benchExpire - 1}).Maintain(ctx, db); err != nil {
					b.Fatal(err)
				}
				benchLoad(b, conn, t, 0, benchExpire, rows)
				benchExec(b, conn, "ANALYZE "+t)
			}
			clock.Set(benchDay(benchDays - 1).Add(12 * time.Hour))
		})
		b.ReportMetric(tx.Seconds()/ty.Seconds(), "referenced/plain")
		b.ReportMetric(tx.Seconds()/float64(b.N)*1e3, "retention-ms")
	})

	// The day whose rows land in the default partition, a new one each
	// op: after the days made ahead. (go test calls a benchmark's function
	// more than once.)
	day := benchDays + 4
	b.Run("move", func(b *testing.B) {
		var took time.Duration
		for b.Loop() {
			b.StopTimer()
			benchLoad(b, conn, "events", day, day+1, rows) // into the default partition
			addNotes(day, day+1)
			clock.Set(benchDay(day).Add(time.Hour))
			p := clock.table("events", Options{Premake: -1})
			b.StartTimer()
			start := time.Now()
			rep, err := p.Maintain(ctx, db)
			took += time.Since(start)
			if err != nil || rep.Moved != int64(rows) || len(rep.Left) != 0 {
				b.Fatalf("%+v, %v; want the day's %d rows moved", rep, err, rows)
			}
			day++
		}
		b.ReportMetric(took.Seconds()/float64(b.N)*1e3, "move-ms")
	})
}

package partition_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/pgkit/partition"
)

// benchDays is how many days of rows the partition benchmarks keep, and
// benchExpire how many of the oldest retention removes: the figures issue
// 11 names.
const (
	benchDays   = 100
	benchExpire = 30
)

// benchRowsPerDay is the rows of each day, 10,000 unless
// SNOWKEY_BENCH_ROWS_PER_DAY says otherwise: a million rows a table, which
// two tables and five runs load in about a minute on two cores. What
// retention saves grows with it, since a DELETE costs per row and a DROP
// per partition (see BenchmarkPartitions).
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

// BenchmarkPartitions compares a table partitioned by day (Table)
// with the same table unpartitioned, with a B-tree on the key, on the
// same rows: 100 days of benchRowsPerDay rows (id, an int, a 32-character
// text). Every op runs the two sides once each, in alternating order, so
// the ratios compare the same moments of a noisy machine:
//
//   - "retention": the oldest 30 days go, by Maintain dropping their
//     partitions, and by DELETE WHERE id < FirstID(day 30). Both are put
//     back, untimed, after each op. "delete/drop" is the ratio of their
//     times; "delete+vacuum/drop" adds the VACUUM that makes the deleted
//     rows' space reusable (run, and timed apart, while putting them back).
//   - "read-day": one day's rows read by key range (count and sum of the
//     text's length, so that every row is read), a different day each op.
//     "partitioned/plain" is the ratio of times.
//   - "insert": 1,000 rows with IDs of now (the newest day) in one
//     INSERT ... SELECT FROM unnest; "insert-row": 100 one-row INSERTs.
//     "partitioned/plain-rows/s" is the ratio of throughputs.
func BenchmarkPartitions(b *testing.B) {
	rows := benchRowsPerDay(b)
	_, db := openDB(b)
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	exec := func(q string, args ...any) sql.Result {
		res, err := conn.ExecContext(ctx, q, args...)
		if err != nil {
			b.Fatalf("%s: %v", q, err)
		}
		return res
	}
	exec("CREATE TABLE parted (id bigint PRIMARY KEY, n int NOT NULL, payload text NOT NULL) PARTITION BY RANGE (id)")
	exec("CREATE TABLE plain (id bigint PRIMARY KEY, n int NOT NULL, payload text NOT NULL)")
	// Made at day 0 with 99 days ahead: the 100 days of data.
	all := newPartitioner(b, "parted", partition.Options{Premake: benchDays - 1, Clock: newClock(benchDay(0))})
	if _, err := all.Maintain(ctx, db); err != nil {
		b.Fatal(err)
	}
	for _, table := range []string{"parted", "plain"} {
		benchLoad(b, conn, table, 0, benchDays, rows)
		exec("VACUUM ANALYZE " + table)
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

	b.Run("retention", func(b *testing.B) {
		// At noon of the last day, 69.5 days' retention cuts at the start of
		// day 30: days 0 to 29 have ended before it.
		drop := newPartitioner(b, "parted", partition.Options{Premake: -1,
			Retention: (benchDays-benchExpire)*24*time.Hour - 12*time.Hour, Clock: newClock(benchDay(benchDays - 1).Add(12 * time.Hour))})
		cut := idtype.DefaultLayout.FirstID(benchDay(benchExpire))
		var vacuum time.Duration
		tx, ty := pairReset(b, func(int) {
			rep, err := drop.Maintain(ctx, db)
			if err != nil || len(rep.Removed) != benchExpire || len(rep.Created) != 0 {
				b.Fatalf("Maintain: %+v, %v; want %d days removed and nothing made", rep, err, benchExpire)
			}
		}, func(int) {
			if n, _ := exec("DELETE FROM plain WHERE id < $1", cut).RowsAffected(); n != int64(benchExpire*rows) {
				b.Fatalf("DELETE removed %d rows, want %d", n, benchExpire*rows)
			}
		}, func() {
			if _, err := all.Maintain(ctx, db); err != nil {
				b.Fatal(err)
			}
			// A DELETE leaves its rows' space to VACUUM; a job that
			// expires rows that way pays for it too.
			start := time.Now()
			exec("VACUUM plain")
			vacuum += time.Since(start)
			benchLoad(b, conn, "parted", 0, benchExpire, rows)
			benchLoad(b, conn, "plain", 0, benchExpire, rows)
			exec("ANALYZE parted")
			exec("ANALYZE plain")
		})
		b.ReportMetric(ty.Seconds()/tx.Seconds(), "delete/drop")
		b.ReportMetric((ty+vacuum).Seconds()/tx.Seconds(), "delete+vacuum/drop")
		b.ReportMetric(float64(benchExpire*rows)*float64(b.N)/ty.Seconds(), "delete-rows/s")
		b.ReportMetric(tx.Seconds()/float64(b.N)*1e3, "drop-ms")
	})
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

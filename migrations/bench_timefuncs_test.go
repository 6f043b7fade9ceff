package migrations

import (
	"context"
	"testing"

	"github.com/snowkeyhq/snowkey/internal/bench/benchpair"
)

// timeBenchRows is how many rows each statement of BenchmarkTimeFunction
// reads.
const timeBenchRows = 1_000_000

// BenchmarkTimeFunction compares snowflake_time(id) with to_timestamp of a
// plain bigint column of Unix seconds, the cheapest way a table without
// time in its key tells a row's time, over the same 1,000,000 rows: each
// op runs `SELECT max(f(col)) FROM t` once with each, in alternating
// order, on one connection without parallel workers or JIT (so that the
// figure is the functions' cost, not the planner's choices), and reports
// the ratio of their times ("snowflake_time/to_timestamp"). "default" is
// the one-argument form; "layout" the variant given the same layout.
func BenchmarkTimeFunction(b *testing.B) {
	db, _ := migrated(b, Options{})
	ctx := b.Context()
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		"SET max_parallel_workers_per_gather = 0",
		"SET jit = off",
		// A year of IDs from 2025, one every 31.5 s, and the same second
		// as a plain bigint.
		`CREATE TABLE bench_time AS
			SELECT ((1735689600000 - 1288834974657 + g::bigint * 31536) << 22) | (7 << 12) | (g % 4096) AS id,
			       1735689600 + g::bigint * 31536 / 1000 AS secs
			FROM generate_series(1, 1000000) g`,
		"VACUUM ANALYZE bench_time",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct{ name, expr string }{
		{"default", "snowflake_time(id)"},
		{"layout", "snowflake_time(id, '2010-11-04T01:42:54.657Z', 10, 12)"},
	} {
		b.Run(c.name, func(b *testing.B) {
			exec := func(q string) func() {
				return func() {
					var x any
					if err := conn.QueryRowContext(context.Background(), q).Scan(&x); err != nil {
						b.Fatal(err)
					}
				}
			}
			tx, ty := benchpair.Times(b,
				exec("SELECT max("+c.expr+") FROM bench_time"),
				exec("SELECT max(to_timestamp(secs)) FROM bench_time"))
			rows := float64(timeBenchRows) * float64(b.N)
			b.ReportMetric(rows/tx.Seconds(), "snowflake_time-rows/s")
			b.ReportMetric(rows/ty.Seconds(), "to_timestamp-rows/s")
			b.ReportMetric(tx.Seconds()/ty.Seconds(), "snowflake_time/to_timestamp")
		})
	}
}

package migrations

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// benchRows is how many IDs each statement makes inside PostgreSQL.
const benchRows = 100_000

// BenchmarkInPostgres compares snowflake_id() with nextval(), PostgreSQL's
// own key source, for 100,000 rows per statement: generating the values
// alone ("generate"), and inserting rows whose key defaults to each
// ("insert"). The machine's load drifts, so each op runs both statements,
// in alternating order, and the ratio of their times over the same seconds
// is reported ("snowflake_id/nextval"), with each one's rows/s. ns/op is
// the time of both.
func BenchmarkInPostgres(b *testing.B) {
	db, _ := migrated(b, Options{})
	ctx := b.Context()
	for _, ddl := range []string{
		"CREATE SEQUENCE bench_seq",
		"CREATE TABLE bench_serial (id bigserial PRIMARY KEY, n int NOT NULL)",
		"CREATE TABLE bench_snowflake (id bigint PRIMARY KEY DEFAULT snowflake_id(), n int NOT NULL)",
	} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("generate", func(b *testing.B) {
		pair(b, db,
			"SELECT count(snowflake_id()) FROM generate_series(1, 100000)", "",
			"SELECT count(nextval('bench_seq')) FROM generate_series(1, 100000)", "")
	})
	b.Run("insert", func(b *testing.B) {
		pair(b, db,
			"INSERT INTO bench_snowflake (n) SELECT g FROM generate_series(1, 100000) g", "TRUNCATE bench_snowflake",
			"INSERT INTO bench_serial (n) SELECT g FROM generate_series(1, 100000) g", "TRUNCATE bench_serial")
	})
}

// pair times statement x and statement y once each per op, in alternating
// order, each after its untimed reset statement (if any).
func pair(b *testing.B, db *sql.DB, x, resetX, y, resetY string) {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	exec := func(q string) {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	var tx, ty time.Duration
	op := 0
	for b.Loop() {
		for k := range 2 {
			q, reset, spent := x, resetX, &tx
			if (op+k)%2 == 1 {
				q, reset, spent = y, resetY, &ty
			}
			if reset != "" {
				b.StopTimer()
				exec(reset)
				b.StartTimer()
			}
			start := time.Now()
			exec(q)
			*spent += time.Since(start)
		}
		op++
	}
	rows := float64(benchRows) * float64(b.N)
	b.ReportMetric(rows/tx.Seconds(), "snowflake_id-rows/s")
	b.ReportMetric(rows/ty.Seconds(), "nextval-rows/s")
	b.ReportMetric(tx.Seconds()/ty.Seconds(), "snowflake_id/nextval")
}

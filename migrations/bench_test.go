package migrations_test

import (
	"context"
	"database/sql"
	"testing"
)

// benchRows is how many IDs each op makes inside PostgreSQL.
const benchRows = 100_000

// BenchmarkInPostgres compares snowflake_id() with nextval(), PostgreSQL's
// own key source, for 100,000 rows per op in one statement: generating
// the values alone, and inserting rows whose key defaults to each.
func BenchmarkInPostgres(b *testing.B) {
	db, _ := migrated(b)
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
	gen := func(expr string) func(b *testing.B) {
		return func(b *testing.B) {
			run(b, db, "SELECT count("+expr+") FROM generate_series(1, 100000)", "")
		}
	}
	insert := func(table string) func(b *testing.B) {
		return func(b *testing.B) {
			run(b, db, "INSERT INTO "+table+" (n) SELECT g FROM generate_series(1, 100000) g", "TRUNCATE "+table)
		}
	}
	b.Run("generate/nextval", gen("nextval('bench_seq')"))
	b.Run("generate/snowflake_id", gen("snowflake_id()"))
	b.Run("insert/nextval", insert("bench_serial"))
	b.Run("insert/snowflake_id", insert("bench_snowflake"))
}

// run times query, running reset (if any) untimed before each op.
func run(b *testing.B, db *sql.DB, query, reset string) {
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	for i := 0; i < b.N; i++ {
		if reset != "" {
			b.StopTimer()
			if _, err := conn.ExecContext(ctx, reset); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		if _, err := conn.ExecContext(ctx, query); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchRows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

package sqltype_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/benchpair"
	"github.com/snowkeyhq/snowkey/internal/testenv"
	"github.com/snowkeyhq/snowkey/sqltype"
)

// benchKeys is how many keys the scan benchmarks read per op.
const benchKeys = 100_000

// keysConn returns a pgx connection to a fresh database holding benchKeys
// snowflake keys in table keys(id bigint).
func keysConn(b *testing.B) *pgx.Conn {
	b.Helper()
	url := testenv.Postgres(b)
	ctx := b.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(ctx) })
	gen, err := idtype.NewGenerator(idtype.Config{Worker: 1})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]idtype.ID, benchKeys)
	if err := gen.NextN(ids); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE keys (id bigint PRIMARY KEY)"); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"keys"}, []string{"id"}, pgx.CopyFromSlice(len(ids), func(i int) ([]any, error) {
		return []any{ids[i]}, nil
	})); err != nil {
		b.Fatal(err)
	}
	return conn
}

// BenchmarkPgxScanRows reads benchKeys rows of one bigint key with pgx's
// native binary protocol, into []idtype.ID (through ID.ScanInt64) and into
// []int64, the baseline. Time and allocations are per op, that is per
// 100,000 rows.
//
// "paired" runs both in each op, in alternating order, and reports the
// ratio of their times over the same seconds ("ID/int64"): the machine's
// load drifts too much for two separate runs to compare within 5%.
func BenchmarkPgxScanRows(b *testing.B) {
	conn := keysConn(b)
	ids := make([]idtype.ID, 0, benchKeys)
	ints := make([]int64, 0, benchKeys)
	b.Run("ID", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			scanRows(b, conn, &ids)
		}
	})
	b.Run("int64", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			scanRows(b, conn, &ints)
		}
	})
	b.Run("paired", func(b *testing.B) {
		paired(b, func() { scanRows(b, conn, &ids) }, func() { scanRows(b, conn, &ints) }, "ID/int64")
	})
}

// paired reports the ratio of the time spent in x to the time spent in y,
// both run in every op.
func paired(b *testing.B, x, y func(), unit string) {
	tx, ty := benchpair.Times(b, x, y)
	b.ReportMetric(tx.Seconds()/ty.Seconds(), unit)
}

// scanRows reads every key into dst, one row at a time.
func scanRows[T idtype.ID | int64](b *testing.B, conn *pgx.Conn, dst *[]T) {
	*dst = (*dst)[:0]
	// A context that is never cancelled: pgx then starts no goroutine to
	// watch it, which would add allocations that come and go with the
	// runtime's pool of goroutines.
	rows, err := conn.Query(context.Background(), "SELECT id FROM keys")
	if err != nil {
		b.Fatal(err)
	}
	var v T
	for rows.Next() {
		if err := rows.Scan(&v); err != nil {
			b.Fatal(err)
		}
		*dst = append(*dst, v)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	if len(*dst) != benchKeys {
		b.Fatalf("read %d keys", len(*dst))
	}
}

// BenchmarkPgxScanArray reads the same keys as one bigint[] (array_agg)
// into sqltype.IDs and into []int64, both through pgx's binary array
// codec.
//
// "paired" compares their times as BenchmarkPgxScanRows does.
func BenchmarkPgxScanArray(b *testing.B) {
	conn := keysConn(b)
	var (
		ids  sqltype.IDs
		ints []int64
	)
	b.Run("IDs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			scanArray(b, conn, &ids)
		}
	})
	b.Run("int64", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			scanArray(b, conn, &ints)
		}
	})
	b.Run("paired", func(b *testing.B) {
		paired(b, func() { scanArray(b, conn, &ids) }, func() { scanArray(b, conn, &ints) }, "IDs/int64")
	})
}

func scanArray[T any](b *testing.B, conn *pgx.Conn, dst *T) {
	if err := conn.QueryRow(context.Background(), "SELECT array_agg(id) FROM keys").Scan(dst); err != nil {
		b.Fatal(err)
	}
}

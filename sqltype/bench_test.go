package sqltype_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/idtype"
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
func BenchmarkPgxScanRows(b *testing.B) {
	conn := keysConn(b)
	b.Run("ID", func(b *testing.B) {
		dst := make([]idtype.ID, 0, benchKeys)
		scanRows(b, conn, &dst)
	})
	b.Run("int64", func(b *testing.B) {
		dst := make([]int64, 0, benchKeys)
		scanRows(b, conn, &dst)
	})
}

func scanRows[T idtype.ID | int64](b *testing.B, conn *pgx.Conn, dst *[]T) {
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		*dst = (*dst)[:0]
		rows, err := conn.Query(ctx, "SELECT id FROM keys")
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
	b.ReportMetric(float64(benchKeys)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkPgxScanArray reads the same keys as one bigint[] (array_agg)
// into sqltype.IDs and into []int64, both through pgx's binary array
// codec.
func BenchmarkPgxScanArray(b *testing.B) {
	conn := keysConn(b)
	b.Run("IDs", func(b *testing.B) {
		var dst sqltype.IDs
		scanArray(b, conn, &dst)
	})
	b.Run("int64", func(b *testing.B) {
		var dst []int64
		scanArray(b, conn, &dst)
	})
}

func scanArray[T any](b *testing.B, conn *pgx.Conn, dst *T) {
	ctx := b.Context()
	const q = "SELECT array_agg(id) FROM keys"
	b.ReportAllocs()
	for b.Loop() {
		if err := conn.QueryRow(ctx, q).Scan(dst); err != nil {
			b.Fatal(err)
		}
	}
}

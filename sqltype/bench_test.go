package sqltype_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/bench/benchpair"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/sqltype"
)

// benchKeys is how many keys the scan benchmarks read per op.
const benchKeys = 100_000

// keysConn returns a pgx connection to a fresh database holding benchKeys
// snowflake keys in table keys(id bigint), and a second connection to it
// with sqltype.RegisterPgx.
func keysConn(b *testing.B) (plain, registered *pgx.Conn) {
	b.Helper()
	url := testenv.Postgres(b)
	ctx := b.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(ctx) })
	reg, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { reg.Close(ctx) })
	sqltype.RegisterPgx(reg.TypeMap())
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1})
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
	return conn, reg
}

// BenchmarkPgxScanRows reads benchKeys rows of one bigint key with pgx's
// native binary protocol into []idtype.ID, []sqltype.NullID and []int64,
// the baseline. Time and allocations are per op, that is per 100,000 rows.
//
// "ID" and "NullID" scan through Scan, as pgx does on a plain connection;
// "registered" on a connection with sqltype.RegisterPgx.
//
// The "paired" runs time both sides in each op, in alternating order, and
// report the ratio of their times over the same seconds: the machine's
// load drifts too much for two separate runs to compare within 5%.
func BenchmarkPgxScanRows(b *testing.B) {
	conn, reg := keysConn(b)
	ids := make([]idtype.ID, 0, benchKeys)
	nulls := make([]sqltype.NullID, 0, benchKeys)
	ints := make([]int64, 0, benchKeys)
	for _, c := range []struct {
		name string
		conn *pgx.Conn
	}{{"", conn}, {" registered", reg}} {
		b.Run("ID"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				scanRows(b, c.conn, &ids)
			}
		})
		b.Run("NullID"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				scanRows(b, c.conn, &nulls)
			}
		})
	}
	b.Run("int64", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			scanRows(b, conn, &ints)
		}
	})
	b.Run("paired", func(b *testing.B) {
		paired(b, func() { scanRows(b, conn, &ids) }, func() { scanRows(b, conn, &ints) }, "ID/int64")
	})
	b.Run("paired registered", func(b *testing.B) {
		paired(b, func() { scanRows(b, reg, &ids) }, func() { scanRows(b, reg, &ints) }, "ID/int64")
	})
	b.Run("paired NullID", func(b *testing.B) {
		paired(b, func() { scanRows(b, conn, &nulls) }, func() { scanRows(b, conn, &ints) }, "NullID/int64")
	})
	b.Run("paired NullID registered", func(b *testing.B) {
		paired(b, func() { scanRows(b, reg, &nulls) }, func() { scanRows(b, reg, &ints) }, "NullID/int64")
	})
}

// paired reports the ratio of the time spent in x to the time spent in y,
// both run in every op.
func paired(b *testing.B, x, y func(), unit string) {
	tx, ty := benchpair.Times(b, x, y)
	b.ReportMetric(tx.Seconds()/ty.Seconds(), unit)
}

// scanRows reads every key into dst, one row at a time.
func scanRows[T idtype.ID | sqltype.NullID | int64](b *testing.B, conn *pgx.Conn, dst *[]T) {
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
// into sqltype.IDs, which reads pgx's binary array in its Scan, and into
// []int64 through pgx's own array codec.
//
// "paired" compares their times as BenchmarkPgxScanRows does.
func BenchmarkPgxScanArray(b *testing.B) {
	conn, _ := keysConn(b)
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

// jsonNulls and jsonNullInt64s are one record with NullID fields and with
// the *int64 ",string" fields a hand-written model would use; jsonLists
// holds a list of 100 keys as sqltype.IDs and as a plain []idtype.ID,
// which encoding/json writes through each ID's MarshalText.
type (
	jsonNulls struct {
		ID       sqltype.NullID `json:"id"`
		AuthorID sqltype.NullID `json:"author_id"`
		ParentID sqltype.NullID `json:"parent_id"`
	}
	jsonNullInt64s struct {
		ID       *int64 `json:"id,string"`
		AuthorID *int64 `json:"author_id,string"`
		ParentID *int64 `json:"parent_id,string"`
	}
	jsonIDs   struct{ Tags sqltype.IDs }
	jsonSlice struct{ Tags []idtype.ID }
)

// BenchmarkJSON measures encoding/json (v1) writing NullID and IDs, each
// beside what a model without sqltype would hold; the "paired" runs time
// both sides in every op. NullID must write null, which a MarshalText
// cannot, so it keeps a MarshalJSON, whose output encoding/json re-scans.
func BenchmarkJSON(b *testing.B) {
	a, c, d := int64(2116681624581046272), int64(2116681624581046273), int64(2116681624581046274)
	nulls := jsonNulls{sqltype.NewNullID(idtype.ID(a)), sqltype.NewNullID(idtype.ID(c)), sqltype.NewNullID(idtype.ID(d))}
	ptrs := jsonNullInt64s{&a, &c, &d}
	ids := jsonIDs{Tags: make(sqltype.IDs, 100)}
	for i := range ids.Tags {
		ids.Tags[i] = idtype.ID(a + int64(i))
	}
	slice := jsonSlice{Tags: ids.Tags}
	marshal := func(v any) func() {
		return func() {
			if _, err := json.Marshal(v); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name string
		v    any
	}{{"NullID", &nulls}, {"int64-string-ptr", &ptrs}, {"IDs", &ids}, {"ID-slice", &slice}} {
		b.Run("marshal/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			f := marshal(c.v)
			for b.Loop() {
				f()
			}
		})
	}
	b.Run("marshal/paired NullID", func(b *testing.B) {
		paired(b, marshal(&nulls), marshal(&ptrs), "NullID/int64-string")
	})
	b.Run("marshal/paired IDs", func(b *testing.B) {
		paired(b, marshal(&ids), marshal(&slice), "IDs/ID-slice")
	})
}

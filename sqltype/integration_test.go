package sqltype_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/sqltype"
)

// paths are the three ways a backend reaches PostgreSQL, all on one fresh
// database.
type paths struct {
	pgx  *pgx.Conn
	reg  *pgx.Conn // with sqltype.RegisterPgx
	sql  *sql.DB
	gorm *gorm.DB
}

func openPaths(t *testing.T) paths {
	t.Helper()
	url := testenv.Postgres(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	reg, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close(context.Background()) })
	sqltype.RegisterPgx(reg.TypeMap())
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	gdb, err := gorm.Open(postgres.Open(url), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := gdb.DB(); err == nil {
			s.Close()
		}
	})
	return paths{pgx: conn, reg: reg, sql: db, gorm: gdb}
}

// row is the table every round trip goes through; GORM makes it, which
// also proves the column types GormDataType asks for.
type row struct {
	K      int            `gorm:"primaryKey;autoIncrement:false"`
	Parent sqltype.NullID // bigint, nullable
	Tags   sqltype.IDs    // bigint[]
}

var nullIDs = []sqltype.NullID{
	{},
	sqltype.NewNullID(0),
	sqltype.NewNullID(1),
	sqltype.NewNullID(1<<53 + 1),
	sqltype.NewNullID(1541815603606036480),
	sqltype.NewNullID(idtype.MaxID),
}

var idLists = []sqltype.IDs{
	nil,
	{},
	{0},
	{1541815603606036480, 1<<53 + 1, idtype.MaxID, 1},
	bigList(10000),
}

func bigList(n int) sqltype.IDs {
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 3})
	if err != nil {
		panic(err)
	}
	ids := make(sqltype.IDs, n)
	if err := gen.NextN(ids); err != nil {
		panic(err)
	}
	return ids
}

// writers and readers, one per access path.
type (
	writer func(t *testing.T, p paths, k int, parent sqltype.NullID, tags sqltype.IDs)
	reader func(t *testing.T, p paths, k int) (sqltype.NullID, sqltype.IDs)
)

var writers = map[string]writer{
	"pgx": func(t *testing.T, p paths, k int, parent sqltype.NullID, tags sqltype.IDs) {
		if _, err := p.pgx.Exec(t.Context(), "INSERT INTO rows (k, parent, tags) VALUES ($1, $2, $3)", k, parent, tags); err != nil {
			t.Fatal(err)
		}
	},
	"pgx registered": func(t *testing.T, p paths, k int, parent sqltype.NullID, tags sqltype.IDs) {
		if _, err := p.reg.Exec(t.Context(), "INSERT INTO rows (k, parent, tags) VALUES ($1, $2, $3)", k, parent, tags); err != nil {
			t.Fatal(err)
		}
	},
	"stdlib": func(t *testing.T, p paths, k int, parent sqltype.NullID, tags sqltype.IDs) {
		if _, err := p.sql.ExecContext(t.Context(), "INSERT INTO rows (k, parent, tags) VALUES ($1, $2, $3)", k, parent, tags); err != nil {
			t.Fatal(err)
		}
	},
	"gorm": func(t *testing.T, p paths, k int, parent sqltype.NullID, tags sqltype.IDs) {
		if err := p.gorm.Create(&row{K: k, Parent: parent, Tags: tags}).Error; err != nil {
			t.Fatal(err)
		}
	},
}

var readers = map[string]reader{
	"pgx": func(t *testing.T, p paths, k int) (n sqltype.NullID, ids sqltype.IDs) {
		if err := p.pgx.QueryRow(t.Context(), "SELECT parent, tags FROM rows WHERE k = $1", k).Scan(&n, &ids); err != nil {
			t.Fatal(err)
		}
		return n, ids
	},
	"pgx registered": func(t *testing.T, p paths, k int) (n sqltype.NullID, ids sqltype.IDs) {
		if err := p.reg.QueryRow(t.Context(), "SELECT parent, tags FROM rows WHERE k = $1", k).Scan(&n, &ids); err != nil {
			t.Fatal(err)
		}
		return n, ids
	},
	"stdlib": func(t *testing.T, p paths, k int) (n sqltype.NullID, ids sqltype.IDs) {
		if err := p.sql.QueryRowContext(t.Context(), "SELECT parent, tags FROM rows WHERE k = $1", k).Scan(&n, &ids); err != nil {
			t.Fatal(err)
		}
		return n, ids
	},
	"gorm": func(t *testing.T, p paths, k int) (sqltype.NullID, sqltype.IDs) {
		var r row
		if err := p.gorm.Take(&r, "k = ?", k).Error; err != nil {
			t.Fatal(err)
		}
		return r.Parent, r.Tags
	},
}

var pathNames = []string{"pgx", "pgx registered", "stdlib", "gorm"}

func TestRoundTrip(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	p := openPaths(t)
	if err := p.gorm.AutoMigrate(&row{}); err != nil {
		t.Fatal(err)
	}
	k := 0
	for _, w := range pathNames {
		for _, r := range pathNames {
			t.Run(w+"->"+r, func(t *testing.T) {
				for i, parent := range nullIDs {
					tags := idLists[i%len(idLists)]
					k++
					writers[w](t, p, k, parent, tags)
					gotParent, gotTags := readers[r](t, p, k)
					if gotParent != parent {
						t.Errorf("parent %+v came back as %+v", parent, gotParent)
					}
					if !reflect.DeepEqual(gotTags, tags) {
						t.Errorf("tags %s came back as %s", short(tags), short(gotTags))
					}
				}
			})
		}
	}

	// NULL and the empty array are different things in the database too.
	var nulls, empties int
	if err := p.sql.QueryRow("SELECT count(*) FILTER (WHERE tags IS NULL), count(*) FILTER (WHERE tags = '{}') FROM rows").
		Scan(&nulls, &empties); err != nil {
		t.Fatal(err)
	}
	if nulls == 0 || empties == 0 {
		t.Errorf("%d NULL and %d empty arrays stored; want some of each", nulls, empties)
	}
}

func short(ids sqltype.IDs) string {
	if ids == nil {
		return "nil"
	}
	if len(ids) > 5 {
		return fmt.Sprintf("%v... (%d)", ids[:5], len(ids))
	}
	return fmt.Sprintf("%v (len %d)", ids, len(ids))
}

// TestColumnTypes reads back what AutoMigrate made of GormDataType.
func TestColumnTypes(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	p := openPaths(t)
	if err := p.gorm.AutoMigrate(&row{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"k": "bigint", "parent": "bigint", "tags": "ARRAY"}
	rows, err := p.sql.Query(`SELECT column_name, data_type, coalesce(udt_name, '') FROM information_schema.columns WHERE table_name = 'rows'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, typ, udt string
		if err := rows.Scan(&name, &typ, &udt); err != nil {
			t.Fatal(err)
		}
		if typ != want[name] {
			t.Errorf("column %s is %s, want %s", name, typ, want[name])
		}
		if name == "tags" && udt != "_int8" {
			t.Errorf("column tags is an array of %s, want _int8 (bigint[])", udt)
		}
		delete(want, name)
	}
	if len(want) > 0 {
		t.Errorf("columns missing: %v", want)
	}
}

// TestAny uses IDs as the one argument of "= ANY(?)" on every path.
func TestAny(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	p := openPaths(t)
	if err := p.gorm.AutoMigrate(&row{}); err != nil {
		t.Fatal(err)
	}
	ids := bigList(20)
	for i, id := range ids {
		writers["pgx"](t, p, i, sqltype.NewNullID(id), nil)
	}
	want := []int{3, 7, 19}
	arg := sqltype.IDs{ids[3], ids[7], ids[19], 12345} // 12345 matches nothing

	check := func(path string, got []int) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: = ANY matched %v, want %v", path, got, want)
		}
	}
	const q = "SELECT k FROM rows WHERE parent = ANY($1) ORDER BY k"

	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		rows, err := p.pgx.Query(t.Context(), q, mode, arg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("pgx %v", mode), got)
	}

	rows, err := p.sql.QueryContext(t.Context(), q, arg)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for rows.Next() {
		var k int
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		got = append(got, k)
	}
	rows.Close()
	check("stdlib", got)

	var found []row
	if err := p.gorm.Where("parent = ANY(?)", arg).Order("k").Find(&found).Error; err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, r := range found {
		got = append(got, r.K)
	}
	check("gorm", got)

	// A nil IDs is NULL: ANY(NULL) matches nothing, on every path.
	var n int
	if err := p.pgx.QueryRow(t.Context(), "SELECT count(*) FROM rows WHERE parent = ANY($1)", sqltype.IDs(nil)).Scan(&n); err != nil || n != 0 {
		t.Errorf("pgx ANY(nil) matched %d, %v", n, err)
	}
	if err := p.sql.QueryRow("SELECT count(*) FROM rows WHERE parent = ANY($1)", sqltype.IDs(nil)).Scan(&n); err != nil || n != 0 {
		t.Errorf("stdlib ANY(nil) matched %d, %v", n, err)
	}
}

// TestBinaryFormat checks that pgx writes and reads IDs as a binary int8[]
// (the format code it chose), not through the text form.
func TestBinaryFormat(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	p := openPaths(t)
	m := p.pgx.TypeMap()
	oid := uint32(1016) // _int8
	if plan := m.PlanEncode(oid, pgx.BinaryFormatCode, sqltype.IDs{1}); plan == nil {
		t.Fatal("pgx has no binary encode plan for IDs")
	}
	if plan := m.PlanScan(oid, pgx.BinaryFormatCode, new(sqltype.IDs)); plan == nil {
		t.Fatal("pgx has no binary scan plan for IDs")
	}
	if got := m.FormatCodeForOID(oid); got != pgx.BinaryFormatCode {
		t.Fatalf("pgx reads int8[] in format %d, want binary", got)
	}
	buf, err := m.Encode(oid, pgx.BinaryFormatCode, sqltype.IDs{1, 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var back sqltype.IDs
	if err := m.Scan(oid, pgx.BinaryFormatCode, buf, &back); err != nil || !reflect.DeepEqual(back, sqltype.IDs{1, 2}) {
		t.Fatalf("binary round trip: %v, %v", back, err)
	}
	var asInt64 []int64
	if err := m.Scan(oid, pgx.BinaryFormatCode, buf, &asInt64); err != nil || !reflect.DeepEqual(asInt64, []int64{1, 2}) {
		t.Fatalf("IDs' binary encoding is not pgx's int8[]: %v, %v", asInt64, err)
	}
}

// TestJunk stores what an ID column must never hold, and what a careless
// schema might, and reads it on every path: each read is an error, never a
// panic, and where snowkey's types find the fault the error says which
// value and which kind of fault.
func TestJunk(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	p := openPaths(t)
	if _, err := p.sql.Exec(`CREATE TABLE junk (
		k int PRIMARY KEY, txt text, num numeric, neg bigint, f float8, arr bigint[], arr2 bigint[], tarr text[], i4 int4)`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.sql.Exec(`INSERT INTO junk VALUES
		(1, 'abc', 1.5, -7, 2.5, '{1,NULL,3}', '{{1,2},{3,4}}', '{1,x}', 5),
		(2, '99999999999999999999', 99999999999999999999, -1, 1e30, '{-4}', '{{5}}', '{"1 2"}', -5)`); err != nil {
		t.Fatal(err)
	}

	// Each case: a column of one row, scanned into a NullID or an IDs, and
	// the sentinel every path's error must wrap: on every path it is
	// snowkey's own code that refuses (pgx hands floats and numerics to
	// Scan, which refuses them, instead of converting them itself).
	all := func(err error) map[string]error {
		m := map[string]error{}
		for _, path := range pathNames {
			m[path] = err
		}
		return m
	}
	cases := []struct {
		k    int
		col  string
		into string // "null" or "ids"
		want map[string]error
	}{
		{1, "txt", "null", all(idtype.ErrSyntax)},
		{2, "txt", "null", all(idtype.ErrRange)},
		{1, "num", "null", all(idtype.ErrSyntax)},
		{2, "num", "null", all(idtype.ErrRange)},
		{1, "neg", "null", all(idtype.ErrNegative)},
		{1, "f", "null", all(idtype.ErrUnsupportedType)},
		{2, "f", "null", all(idtype.ErrUnsupportedType)},
		{1, "arr", "ids", all(idtype.ErrNull)},
		{2, "arr", "ids", all(idtype.ErrNegative)},
		{1, "arr2", "ids", all(sqltype.ErrDimensions)},
		{2, "arr2", "ids", all(sqltype.ErrDimensions)},
		{1, "tarr", "ids", all(idtype.ErrSyntax)},
		{2, "tarr", "ids", all(idtype.ErrSyntax)},
		{1, "txt", "ids", all(sqltype.ErrArraySyntax)},
		{1, "i4", "ids", all(idtype.ErrUnsupportedType)},
	}
	for _, tc := range cases {
		for _, path := range pathNames {
			t.Run(fmt.Sprintf("%s/row%d/%s/%s", tc.col, tc.k, tc.into, path), func(t *testing.T) {
				err := scanJunk(t, p, path, tc.col, tc.into, tc.k)
				if err == nil {
					t.Fatalf("reading %s (row %d) into %s succeeded", tc.col, tc.k, tc.into)
				}
				if want := tc.want[path]; !errors.Is(err, want) {
					t.Errorf("error %q does not wrap %q", err, want)
				}
			})
		}
	}
}

func scanJunk(t *testing.T, p paths, path, col, into string, k int) error {
	var dest any = new(sqltype.NullID)
	if into == "ids" {
		dest = new(sqltype.IDs)
	}
	q := fmt.Sprintf("SELECT %s FROM junk WHERE k = $1", col)
	switch path {
	case "pgx":
		return p.pgx.QueryRow(t.Context(), q, k).Scan(dest)
	case "pgx registered":
		return p.reg.QueryRow(t.Context(), q, k).Scan(dest)
	case "stdlib":
		return p.sql.QueryRowContext(t.Context(), q, k).Scan(dest)
	default:
		return p.gorm.Raw(fmt.Sprintf("SELECT %s FROM junk WHERE k = ?", col), k).Row().Scan(dest)
	}
}

func init() {
	// The stdlib driver registers itself as "pgx"; keep the import used.
	_ = stdlib.GetDefaultDriver
}

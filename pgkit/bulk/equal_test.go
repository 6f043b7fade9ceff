package bulk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/sqltype"
)

// The rows both databases hold before the loads: associations that refer
// to them are taken as existing, by Create (ON CONFLICT DO NOTHING) and by
// a bulk load alike.
const (
	existingPublisher idtype.ID = 1000001
	existingTag       idtype.ID = 1000002
)

// buildGraph builds n authors with every kind of association and column,
// the same each call: new publishers, tags and readers shared by several
// authors (through pointers, across batches), existing ones referred to by
// key, zero and set values of columns with defaults, nested has-many rows,
// polymorphic comments on two tables, and many2many associations through
// join models of their own (SetupJoinTable) with keys and snowflake
// fields, one with the pair unique and one without, some pairs given
// twice.
func buildGraph(n int) []BulkAuthor {
	oldPub := &BulkPublisher{ID: existingPublisher, Name: "ignored: the row exists"}
	oldTag := &BulkTag{ID: existingTag, Name: "ignored too"}
	pubs := []*BulkPublisher{{Name: "Penguin"}, {Name: "Faber"}, oldPub}
	tags := []*BulkTag{{Name: "go"}, {Name: "sql"}, {Name: "poetry"}, oldTag}
	readers := []*BulkReader{{Name: "Rae"}, {Name: "Sam"}, {Name: "Tom"}}
	zip := "75001"
	authors := make([]BulkAuthor, n)
	for i := range authors {
		a := &authors[i]
		a.Name = fmt.Sprintf("author %d", i)
		a.Email = fmt.Sprintf("a%d@example.com", i)
		a.Meta = BulkMeta{Langs: []string{"en", "fr"}[:i%3%2+1], Stars: i % 5}
		a.Address = BulkAddress{City: "Paris"}
		if i%4 == 0 {
			a.Address.Zip = &zip
		}
		if i%3 == 0 {
			a.Score = i // zero for i == 0: the parsed default, 7
		}
		if i%5 == 1 {
			a.Note = "set by the app" // else the database default
		}
		a.Skipped = "never written"
		a.ReadOnly = "never written either"
		if i%2 == 0 {
			a.Favorites = sqltype.IDs{existingTag, idtype.ID(i)}
		}
		if i%6 == 0 {
			a.Mentor = sqltype.NewNullID(existingPublisher)
		}
		if i%7 != 3 {
			a.Publisher = pubs[i%len(pubs)]
		}
		if i%2 == 1 {
			a.Profile = &BulkProfile{Bio: fmt.Sprintf("bio %d", i)}
		}
		for k := range i % 4 {
			b := BulkBook{Title: fmt.Sprintf("book %d.%d", i, k), Pages: int32(100 + k)}
			for c := range (i + k) % 3 {
				b.Chapters = append(b.Chapters, BulkChapter{N: c + 1})
			}
			if k == 1 {
				b.Comments = []BulkComment{{Body: fmt.Sprintf("on book %d.%d", i, k)}}
			}
			a.Books = append(a.Books, b)
		}
		for k := range i % 3 {
			a.Tags = append(a.Tags, tags[(i+k)%len(tags)])
		}
		if i%5 == 2 {
			a.Comments = []BulkComment{{Body: "first"}, {Body: "second"}}
		}
		// Custom join models; every seventh author names a reader twice.
		for k := range i % 3 {
			a.Readers = append(a.Readers, readers[(i+k)%len(readers)])
			a.Followers = append(a.Followers, readers[(i+2*k)%len(readers)])
		}
		if i%7 == 0 {
			a.Readers = append(a.Readers, readers[i%len(readers)], readers[i%len(readers)])
			a.Followers = append(a.Followers, readers[(i+1)%len(readers)], readers[(i+1)%len(readers)])
		}
	}
	return authors
}

// TestBulkEqualsCreate loads the same graph with db.Create (and the
// plugin) into one database and with Create, in batches, into another,
// and compares the two databases table by table: the same rows, with the
// keys of one mapped to those of the other through the structs, which
// both loads fill.
func TestBulkEqualsCreate(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	created := openDB(t, newGen(t, 1), testModels...)
	bulked := openDB(t, nil, testModels...)
	for _, db := range []*gorm.DB{created, bulked} {
		if err := db.Create(&BulkPublisher{ID: existingPublisher, Name: "Old House"}).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Create(&BulkTag{ID: existingTag, Name: "classic"}).Error; err != nil {
			t.Fatal(err)
		}
	}

	const n = 300
	viaCreate, viaBulk := buildGraph(n), buildGraph(n)
	if err := created.WithContext(ctx).Create(&viaCreate).Error; err != nil {
		t.Fatalf("Create: %v", err)
	}
	res, err := Create(ctx, bulked, newGen(t, 2), viaBulk, Options{BatchSize: 64})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Logf("bulk load: %+v", res)

	keys := map[int64]int64{}
	mapKeys(t, reflect.ValueOf(viaCreate), reflect.ValueOf(viaBulk), keys, map[uintptr]bool{})
	if len(keys) < n {
		t.Fatalf("only %d keys mapped for %d authors", len(keys), n)
	}

	tables := listTables(t, ctx, created)
	if got := listTables(t, ctx, bulked); !slices.Equal(got, tables) {
		t.Fatalf("tables: Create made %v, the bulk load %v", tables, got)
	}
	images := map[int64]int64{}
	for _, y := range keys {
		images[y] = y
	}
	for _, table := range tables {
		want := dumpTable(t, ctx, created, table, keys)
		got := dumpTable(t, ctx, bulked, table, images)
		if len(want) < 2 {
			t.Errorf("%s: %d rows after Create; the graph should reach every table", table, len(want))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: the bulk load wrote %d rows, Create %d; first difference:\n%s", table, len(got), len(want), firstDiff(got, want))
			continue
		}
		if written := res.Tables[table]; table != "bulk_publishers" && table != "bulk_tags" && written != int64(len(want)) {
			t.Errorf("%s: Result says %d rows, the table holds %d", table, written, len(want))
		}
		t.Logf("%s: %d rows, equal", table, len(want))
	}
	// The keys and snowflake fields of join rows are in no struct, so the
	// dumps name them "new": each must be a key of its own, in both.
	for _, c := range []struct{ table, field string }{{"bulk_author_readers", "ticket"}, {"bulk_author_followers", "since"}} {
		for name, db := range map[string]*gorm.DB{"Create": created, "the bulk load": bulked} {
			var rows, ids, fields, zero int64
			if err := db.WithContext(ctx).Raw(fmt.Sprintf(`SELECT count(*), count(DISTINCT id), count(DISTINCT %[2]s),
				count(*) FILTER (WHERE id = 0 OR %[2]s = 0) FROM %[1]s`, c.table, c.field)).Row().Scan(&rows, &ids, &fields, &zero); err != nil {
				t.Fatal(err)
			}
			if rows < 2 || ids != rows || fields != rows || zero != 0 {
				t.Errorf("%s: %s wrote %d join rows with %d distinct keys and %d distinct %s, %d zero", c.table, name, rows, ids,
					fields, c.field, zero)
			}
		}
	}

	// The structs hold what Create leaves in them, database defaults
	// aside (Create reads those back with RETURNING; COPY cannot).
	for i := range viaBulk {
		c, b := viaCreate[i], viaBulk[i]
		if c.Score != b.Score || !c.CreatedAt.Equal(b.CreatedAt) || !c.UpdatedAt.Equal(b.UpdatedAt) {
			t.Fatalf("author %d: Create left Score %d, CreatedAt %v; the bulk load %d, %v", i, c.Score, c.CreatedAt, b.Score, b.CreatedAt)
		}
	}
}

// mapKeys walks two graphs of the same shape and maps every ID the
// first holds to the ID at the same place in the second.
func mapKeys(t *testing.T, a, b reflect.Value, keys map[int64]int64, seen map[uintptr]bool) {
	t.Helper()
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() {
			return
		}
		if seen[a.Pointer()] {
			return
		}
		seen[a.Pointer()] = true
		mapKeys(t, a.Elem(), b.Elem(), keys, seen)
	case reflect.Slice:
		for i := 0; i < a.Len(); i++ {
			mapKeys(t, a.Index(i), b.Index(i), keys, seen)
		}
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if a.Type().Field(i).IsExported() {
				mapKeys(t, a.Field(i), b.Field(i), keys, seen)
			}
		}
	case reflect.Int64:
		if a.Type() != reflect.TypeFor[idtype.ID]() && a.Type().Name() != "int64" {
			return
		}
		x, y := a.Int(), b.Int()
		if x == 0 {
			return
		}
		if old, ok := keys[x]; ok && old != y {
			t.Fatalf("key %d maps to %d and to %d", x, old, y)
		}
		keys[x] = y
	}
}

// listTables lists the tables of the public schema.
func listTables(t *testing.T, ctx context.Context, db *gorm.DB) []string {
	t.Helper()
	var tables []string
	if err := db.WithContext(ctx).Raw(`SELECT table_name FROM information_schema.tables
		WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1`).Scan(&tables).Error; err != nil {
		t.Fatal(err)
	}
	return tables
}

// dumpTable returns every row of table as canonical JSON, sorted, with
// every number that keys maps replaced by its image, and every other
// number of snowflake size (at least 2^32) by "new": a key that no struct
// holds, such as a join row's.
func dumpTable(t *testing.T, ctx context.Context, db *gorm.DB, table string, keys map[int64]int64) []string {
	t.Helper()
	var raw []string
	if err := db.WithContext(ctx).Raw(fmt.Sprintf("SELECT to_jsonb(t)::text FROM %q t", table)).Scan(&raw).Error; err != nil {
		t.Fatal(err)
	}
	rows := make([]string, len(raw))
	for i, r := range raw {
		dec := json.NewDecoder(bytes.NewReader([]byte(r)))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(mapJSON(v, keys))
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = string(out)
	}
	slices.Sort(rows)
	return rows
}

func mapJSON(v any, keys map[int64]int64) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = mapJSON(x, keys)
		}
	case []any:
		for i, x := range v {
			v[i] = mapJSON(x, keys)
		}
	case json.Number:
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			if m, ok := keys[n]; ok {
				return json.Number(strconv.FormatInt(m, 10))
			}
			if n >= 1<<32 {
				return "new"
			}
		}
	}
	return v
}

func firstDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("  bulk:   %s\n  Create: %s", g, w)
		}
	}
	return ""
}

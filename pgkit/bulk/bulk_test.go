package bulk

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// simpleAuthors makes n authors with two books each and no other
// association.
func simpleAuthors(n int) []BulkAuthor {
	authors := make([]BulkAuthor, n)
	for i := range authors {
		authors[i] = BulkAuthor{Name: fmt.Sprintf("author %d", i), Email: fmt.Sprintf("a%d@example.com", i),
			Books: []BulkBook{{Title: "one"}, {Title: "two"}}}
	}
	return authors
}

// TestBulkFailureLeavesNothing fails a load in its eighth batch, on a
// duplicate e-mail address: no table keeps a row of the earlier batches.
// The control, each COPY on its own, keeps seven batches of authors and
// their books.
func TestBulkFailureLeavesNothing(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	gen := newGen(t, 1)
	for _, control := range []bool{false, true} {
		db := openDB(t, gen, testModels...)
		authors := simpleAuthors(1000)
		authors[750].Email = authors[10].Email
		_, err := createWithout(ctx, db, gen, authors, Options{BatchSize: 100}, defences{noTx: control})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" || !strings.Contains(err.Error(), "bulk_authors") {
			t.Fatalf("control=%v: err = %v; want the unique violation (23505) on bulk_authors", control, err)
		}
		authorsLeft, booksLeft := countRows(t, ctx, db, "bulk_authors"), countRows(t, ctx, db, "bulk_books")
		switch {
		case !control && (authorsLeft != 0 || booksLeft != 0):
			t.Errorf("after the failed load: %d authors and %d books remain; want none", authorsLeft, booksLeft)
		case control && (authorsLeft != 700 || booksLeft != 1400):
			t.Errorf("control: %d authors and %d books remain; want 700 and 1400, the seven batches before the failure: "+
				"the test does not reach the fault", authorsLeft, booksLeft)
		}
	}
}

// BulkSmall has columns narrower than the Go fields that fill them.
type (
	BulkSmall struct {
		ID       idtype.ID `gorm:"primaryKey"`
		Small    int64     `gorm:"type:smallint"`
		Code     string    `gorm:"type:integer"`
		Children []BulkSmallChild
	}
	BulkSmallChild struct {
		ID          idtype.ID `gorm:"primaryKey"`
		BulkSmallID idtype.ID
		Tiny        int64 `gorm:"type:smallint"`
	}
)

// TestBulkBadInput: a value pgx cannot encode for its column fails the
// load with ErrEncode naming the model, the field, the column and the
// row, in the input or in an association, and nothing is written. Text
// that PostgreSQL reads as the column's type ("42" for an integer) is
// sent as pgx sends it, through its text form.
func TestBulkBadInput(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	gen := newGen(t, 1)
	db := openDB(t, gen, &BulkSmall{}, &BulkSmallChild{})
	rows := func() []BulkSmall {
		rows := make([]BulkSmall, 10)
		for i := range rows {
			rows[i] = BulkSmall{Small: int64(i), Code: "42", Children: []BulkSmallChild{{Tiny: 1}, {Tiny: 2}}}
		}
		return rows
	}
	cases := []struct {
		name  string
		spoil func([]BulkSmall)
		want  []string
	}{
		{"out of range", func(r []BulkSmall) { r[7].Small = 1 << 20 },
			[]string{"BulkSmall.Small", "column small", "int2", "row 7", "int64"}},
		{"text that is no integer", func(r []BulkSmall) { r[4].Code = "12x" },
			[]string{"BulkSmall.Code", "column code", "int4", "row 4", "string"}},
		{"in an association", func(r []BulkSmall) { r[3].Children[1].Tiny = -1 << 40 },
			[]string{"BulkSmallChild.Tiny", "column tiny", "row 3, Children[1]"}},
	}
	for _, c := range cases {
		in := rows()
		c.spoil(in)
		_, err := Create(ctx, db, gen, in, Options{BatchSize: 4})
		if !errors.Is(err, ErrEncode) {
			t.Errorf("%s: err = %v; want ErrEncode", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
		if n := countRows(t, ctx, db, "bulk_smalls"); n != 0 {
			t.Errorf("%s: %d rows written", c.name, n)
		}
	}
	// Create refuses the same input too.
	in := rows()
	in[7].Small = 1 << 20
	if err := db.Create(&in).Error; err == nil {
		t.Error("Create took a smallint of 2^20")
	}
	if res, err := Create(ctx, db, gen, rows(), Options{}); err != nil || res.Rows != 30 {
		t.Errorf("good input: %+v, %v", res, err)
	}

	// Input that is no model at all.
	if _, err := Create(ctx, db, gen, []int{1, 2}, Options{}); !errors.Is(err, ErrModel) {
		t.Errorf("[]int: err = %v; want ErrModel", err)
	}
	if _, err := Create(ctx, db, gen, []*BulkSmall{{}, nil}, Options{}); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), "row 1") {
		t.Errorf("a nil row: err = %v; want ErrModel naming row 1", err)
	}
	if _, err := Create(ctx, db.Omit("code"), gen, rows(), Options{}); !errors.Is(err, ErrModel) {
		t.Errorf("Omit: err = %v; want ErrModel", err)
	}
}

// TestBulkOptions: bad options are refused with idtype.ErrInvalidOptions
// before anything is written.
func TestBulkOptions(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	gen := newGen(t, 1)
	db := openDB(t, gen, testModels...)
	if _, err := Create(ctx, db, gen, simpleAuthors(3), Options{BatchSize: -1}); !errors.Is(err, idtype.ErrInvalidOptions) ||
		!strings.Contains(err.Error(), "BatchSize -1") {
		t.Errorf("BatchSize -1: err = %v; want ErrInvalidOptions naming the field", err)
	}
	if _, err := Create(ctx, db, nil, simpleAuthors(3), Options{}); !errors.Is(err, ErrGenerate) {
		t.Errorf("nil Source: err = %v", err)
	}
	if n := countRows(t, ctx, db, "bulk_authors"); n != 0 {
		t.Errorf("%d rows written", n)
	}
}

// BulkHooked changes its row in a hook.
type BulkHooked struct {
	ID   idtype.ID `gorm:"primaryKey"`
	Name string
}

func (h *BulkHooked) BeforeCreate(*gorm.DB) error {
	h.Name = strings.ToUpper(h.Name)
	return nil
}

// TestBulkHooks: a model with a create hook is refused unless SkipHooks
// says to load it without; the control, without the check, loads it
// silently, and the row differs from the one Create writes.
func TestBulkHooks(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	gen := newGen(t, 1)
	db := openDB(t, gen, &BulkHooked{})
	_, err := Create(ctx, db, gen, []BulkHooked{{Name: "quiet"}}, Options{})
	if !errors.Is(err, ErrHooks) || !strings.Contains(err.Error(), "BulkHooked has BeforeCreate") {
		t.Fatalf("err = %v; want ErrHooks naming the model and its hook", err)
	}
	if n := countRows(t, ctx, db, "bulk_hookeds"); n != 0 {
		t.Fatalf("%d rows written", n)
	}
	in := []BulkHooked{{Name: "skipped"}}
	if _, err := Create(ctx, db, gen, in, Options{SkipHooks: true}); err != nil || in[0].Name != "skipped" {
		t.Fatalf("SkipHooks: %v, %q", err, in[0].Name)
	}

	if _, err := createWithout(ctx, db, gen, []BulkHooked{{Name: "silent"}}, Options{}, defences{noHookCheck: true}); err != nil {
		t.Fatalf("control: %v", err)
	}
	if err := db.Create(&BulkHooked{Name: "silent"}).Error; err != nil {
		t.Fatal(err)
	}
	var names []string
	if err := db.Model(&BulkHooked{}).Where("lower(name) = 'silent'").Order("name").Pluck("name", &names).Error; err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || names[0] == names[1] {
		t.Errorf("control: Create wrote %v; the load without the check should differ from it silently", names)
	}
}

// TestBulkDuplicateKey: COPY has no ON CONFLICT; a row whose key exists
// fails the whole load with PostgreSQL's unique violation.
func TestBulkDuplicateKey(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	gen := newGen(t, 1)
	db := openDB(t, gen, testModels...)
	old := BulkPublisher{Name: "old"}
	if err := db.Create(&old).Error; err != nil {
		t.Fatal(err)
	}
	_, err := Create(ctx, db, gen, []BulkPublisher{{Name: "new"}, {ID: old.ID, Name: "again"}}, Options{})
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Fatalf("err = %v; want a unique violation", err)
	}
	if n := countRows(t, ctx, db, "bulk_publishers"); n != 1 {
		t.Errorf("%d publishers; want the old one alone", n)
	}
}

// TestBulkConnections: inside a GORM transaction the load cannot reach
// the connection and says so; in a pgx transaction passed as
// Options.Tx it runs in a savepoint: its rows are the caller's to
// commit or roll back, and a failed load leaves the transaction usable.
func TestBulkConnections(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	gen := newGen(t, 1)
	url := testenv.Postgres(t)
	db := openURL(t, url, gen, testModels...)
	err := db.Transaction(func(tx *gorm.DB) error {
		_, err := Create(ctx, tx, gen, simpleAuthors(2), Options{})
		return err
	})
	if !errors.Is(err, ErrConn) {
		t.Fatalf("in db.Transaction: err = %v; want ErrConn", err)
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, commit := range []bool{false, true} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Create(ctx, db, gen, simpleAuthors(5), Options{Tx: tx}); err != nil {
			t.Fatal(err)
		}
		bad := simpleAuthors(1)
		bad[0].Email = "a0@example.com" // taken by the first load
		if _, err := Create(ctx, db, gen, bad, Options{Tx: tx}); err == nil {
			t.Fatal("a duplicate e-mail was loaded")
		}
		if n := countRows(t, ctx, db, "bulk_authors"); n != 0 {
			t.Errorf("%d authors visible before the caller committed", n)
		}
		var inTx int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM bulk_authors").Scan(&inTx); err != nil || inTx != 5 {
			t.Fatalf("in the caller's transaction after a failed load: %d authors, %v; want 5 and a usable transaction", inTx, err)
		}
		want := int64(0)
		if commit {
			err, want = tx.Commit(ctx), 5
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		if n := countRows(t, ctx, db, "bulk_authors"); n != want {
			t.Errorf("commit=%v: %d authors; want %d", commit, n, want)
		}
	}
}

// Models whose keys the database makes (bigserial).
type (
	BulkSerial struct {
		ID       uint `gorm:"primaryKey"`
		Name     string
		Children []BulkSerialChild
	}
	BulkSerialChild struct {
		ID           idtype.ID `gorm:"primaryKey"`
		BulkSerialID uint
	}
)

// TestBulkKeyLeftToDatabase: rows whose keys the database makes load as
// long as nothing refers to them; a child that needs one fails the load
// with ErrKey.
func TestBulkKeyLeftToDatabase(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	gen := newGen(t, 1)
	db := openDB(t, gen, &BulkSerial{}, &BulkSerialChild{})
	if _, err := Create(ctx, db, gen, []BulkSerial{{Name: "a"}, {Name: "b"}}, Options{}); err != nil {
		t.Fatalf("no children: %v", err)
	}
	var ids []int64
	if err := db.Model(&BulkSerial{}).Order("id").Pluck("id", &ids).Error; err != nil || len(ids) != 2 || ids[0] == 0 {
		t.Fatalf("serial keys: %v, %v", ids, err)
	}
	_, err := Create(ctx, db, gen, []BulkSerial{{Name: "c"}, {Name: "d", Children: []BulkSerialChild{{}}}}, Options{})
	if !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), "BulkSerial.ID of row 1") {
		t.Fatalf("err = %v; want ErrKey naming BulkSerial.ID of row 1", err)
	}
	if n := countRows(t, ctx, db, "bulk_serials"); n != 2 {
		t.Errorf("%d rows; want the first load's 2", n)
	}
}

// TestBulkSeq loads a stream of pointers in batches: every row is written,
// and the keys are set in the values the stream yielded, increasing along
// the stream, each child's after its parent's.
func TestBulkSeq(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	gen := newGen(t, 1)
	db := openDB(t, gen, testModels...)
	var yielded []*BulkAuthor
	seq := func(yield func(*BulkAuthor) bool) {
		for i := range 250 {
			a := &BulkAuthor{Name: "a", Email: fmt.Sprint(i), Books: []BulkBook{{Title: "x"}}}
			yielded = append(yielded, a)
			if !yield(a) {
				return
			}
		}
	}
	res, err := CreateSeq(ctx, db, gen, iter.Seq[*BulkAuthor](seq), Options{BatchSize: 32})
	if err != nil || res.Tables["bulk_authors"] != 250 || res.Tables["bulk_books"] != 250 {
		t.Fatalf("%+v, %v", res, err)
	}
	var last idtype.ID
	for i, a := range yielded {
		if a.ID <= last || a.Books[0].ID <= a.ID || a.Books[0].BulkAuthorID != a.ID {
			t.Fatalf("author %d: key %d after %d, book %+v", i, a.ID, last, a.Books[0])
		}
		last = a.ID
	}
	if n := countRows(t, ctx, db, "bulk_books"); n != 250 {
		t.Errorf("%d books", n)
	}
}

// failingSource fails its calls from the after-th on.
type failingSource struct {
	idtype.Source
	calls, after int
}

var errTestSource = errors.New("test source: out of IDs")

func (s *failingSource) NextN(dst []idtype.ID) error {
	s.calls++
	if s.calls >= s.after {
		return errTestSource
	}
	return s.Source.NextN(dst)
}

// TestBulkSourceFails: when the Source fails in a later batch, the load
// fails with ErrGenerate and the Source's error, and nothing is
// written.
func TestBulkSourceFails(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	gen := newGen(t, 1)
	db := openDB(t, gen, testModels...)
	src := &failingSource{Source: gen, after: 3}
	_, err := Create(ctx, db, src, simpleAuthors(100), Options{BatchSize: 10})
	if !errors.Is(err, ErrGenerate) || !errors.Is(err, errTestSource) {
		t.Fatalf("err = %v; want ErrGenerate wrapping the Source's error", err)
	}
	if src.calls != 3 {
		t.Errorf("%d NextN calls for three batches; want one a batch", src.calls)
	}
	if n := countRows(t, ctx, db, "bulk_authors"); n != 0 {
		t.Errorf("%d authors written", n)
	}
}

// TestBulkContext: a load whose context ends stops and writes nothing.
func TestBulkContext(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	gen := newGen(t, 1)
	db := openDB(t, gen, testModels...)
	cctx, cancel := context.WithCancel(ctx)
	n := 0
	seq := func(yield func(BulkAuthor) bool) {
		for i := 0; ; i++ {
			if i == 500 {
				cancel()
			}
			if !yield(BulkAuthor{Name: "a", Email: fmt.Sprint(i)}) {
				return
			}
			n++
		}
	}
	_, err := CreateSeq(cctx, db, gen, iter.Seq[BulkAuthor](seq), Options{BatchSize: 100})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v after %d rows; want context.Canceled", err, n)
	}
	if c := countRows(t, ctx, db, "bulk_authors"); c != 0 {
		t.Errorf("%d authors written", c)
	}
}

// TestBulkStagingTable follows the package documentation's recipe for
// merging into existing rows: a load into a staging table named with
// db.Table, then INSERT ... ON CONFLICT.
func TestBulkStagingTable(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	gen := newGen(t, 1)
	db := openDB(t, gen, &BulkTag{})
	old := BulkTag{Name: "kept"}
	if err := db.Create(&old).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("CREATE UNLOGGED TABLE staging (LIKE bulk_tags INCLUDING DEFAULTS)").Error; err != nil {
		t.Fatal(err)
	}
	res, err := Create(ctx, db.Table("staging"), gen, []BulkTag{{ID: old.ID, Name: "dropped"}, {Name: "new"}}, Options{})
	if err != nil || res.Tables["staging"] != 2 {
		t.Fatalf("%+v, %v", res, err)
	}
	if err := db.Exec("INSERT INTO bulk_tags SELECT * FROM staging ON CONFLICT (id) DO NOTHING").Error; err != nil {
		t.Fatal(err)
	}
	var names []string
	if err := db.Model(&BulkTag{}).Order("name").Pluck("name", &names).Error; err != nil || strings.Join(names, ",") != "kept,new" {
		t.Errorf("after the merge: %v, %v", names, err)
	}
}

// BulkTagged has an untagged key and a tagged public number.
type BulkTagged struct {
	ID     idtype.ID `gorm:"primaryKey"`
	Public int64     `gorm:"snowflake;uniqueIndex"`
}

// TestBulkOnlyTagged: with OnlyTagged the load fills tagged fields alone,
// as the plugin with OnlyTagged does; by default it fills the key too.
func TestBulkOnlyTagged(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	gen := newGen(t, 1)
	db := openDB(t, gen, &BulkTagged{})
	rows := []BulkTagged{{ID: 1}, {ID: 2}}
	if _, err := Create(ctx, db, gen, rows, Options{OnlyTagged: true}); err != nil {
		t.Fatal(err)
	}
	if rows[0].ID != 1 || rows[0].Public == 0 || rows[1].Public <= rows[0].Public {
		t.Errorf("OnlyTagged: %+v", rows)
	}
	rows = []BulkTagged{{}, {}}
	if _, err := Create(ctx, db, gen, rows, Options{}); err != nil {
		t.Fatal(err)
	}
	if rows[0].ID == 0 || rows[0].Public == 0 {
		t.Errorf("default: %+v", rows)
	}
}

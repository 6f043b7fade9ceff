package bulk

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/faultproxy"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// The models of the retry tests: an author with an association of every
// shape a load writes, each holding fields the load writes into.
type (
	RetryAuthor struct {
		ID    idtype.ID `gorm:"primaryKey"`
		Email string    `gorm:"uniqueIndex"`
		Score int       `gorm:"default:7"`
		// Origin is embedded, with a belongs-to inside; Trace is embedded
		// through a pointer that the load allocates for its snowflake
		// field.
		Origin      RetryOrigin `gorm:"embedded;embeddedPrefix:origin_"`
		Trace       *RetryTrace `gorm:"embedded;embeddedPrefix:trace_"`
		PublisherID *idtype.ID
		Publisher   *RetryPublisher // shared between authors
		MentorID    *idtype.ID
		Mentor      *RetryAuthor // self-reference, shared
		Profile     *RetryProfile
		Books       []RetryBook
		Tags        []*RetryTag `gorm:"many2many:retry_author_tags"` // shared
		Notes       []RetryNote `gorm:"polymorphic:Owner"`
		CreatedAt   time.Time
	}
	RetryOrigin struct {
		City      string
		ImprintID *idtype.ID
		Imprint   *RetryImprint // shared
	}
	RetryTrace struct {
		Ticket int64 `gorm:"snowflake;autoIncrement:false"`
	}
	RetryPublisher struct {
		ID        idtype.ID `gorm:"primaryKey"`
		Name      string
		CreatedAt time.Time
	}
	RetryImprint struct {
		ID   idtype.ID `gorm:"primaryKey"`
		Name string
	}
	RetryTag struct {
		ID   idtype.ID `gorm:"primaryKey"`
		Name string
	}
	RetryProfile struct {
		ID            idtype.ID `gorm:"primaryKey"`
		RetryAuthorID idtype.ID `gorm:"uniqueIndex"`
		Bio           string
	}
	RetryBook struct {
		ID            idtype.ID `gorm:"primaryKey"`
		RetryAuthorID idtype.ID `gorm:"index"`
		Title         string
		Fault         retryFault
		Chapters      []RetryChapter
		Notes         []RetryNote `gorm:"polymorphic:Owner"`
	}
	RetryChapter struct {
		ID          idtype.ID `gorm:"primaryKey"`
		RetryBookID idtype.ID `gorm:"index"`
		N           int
	}
	RetryNote struct {
		ID        idtype.ID `gorm:"primaryKey"`
		OwnerID   idtype.ID `gorm:"index"`
		OwnerType string
		Body      string
	}
)

var retryModels = []any{&RetryPublisher{}, &RetryImprint{}, &RetryTag{}, &RetryAuthor{}, &RetryProfile{}, &RetryBook{},
	&RetryChapter{}, &RetryNote{}}

// retryFault is a text column whose value fails the load that encodes it,
// when its hook is set: the hook's error, or its cancel of the load's
// context, whichever it holds.
type retryFault struct {
	Text string
	hook *faultHook
}

type faultHook struct {
	err    error
	cancel context.CancelFunc
}

var errFaultValue = errors.New("retry test: this value refuses to be encoded")

func (f retryFault) Value() (driver.Value, error) {
	if h := f.hook; h != nil {
		if h.cancel != nil {
			h.cancel()
		} else {
			return nil, h.err
		}
	}
	return f.Text, nil
}

func (f *retryFault) Scan(src any) error {
	s, _ := src.(string)
	*f = retryFault{Text: s}
	return nil
}

func (retryFault) GormDataType() string { return "text" }

// The triggers of the retry tests' databases: a book titled "refused" is
// refused as it is written, a chapter numbered -1 at COMMIT.
const retryTriggers = `
CREATE FUNCTION retry_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.title = 'refused' THEN RAISE EXCEPTION 'book % refused by a trigger', NEW.id; END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER retry_refuse BEFORE INSERT ON retry_books FOR EACH ROW EXECUTE FUNCTION retry_refuse();
CREATE FUNCTION retry_refuse_late() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.n = -1 THEN RAISE EXCEPTION 'chapter % refused at COMMIT', NEW.id; END IF;
	RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER retry_refuse_late AFTER INSERT ON retry_chapters
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION retry_refuse_late();`

// switchSource is the plugin's Source for db.Create: it fails every call
// while failing is set.
type switchSource struct {
	idtype.Source
	failing atomic.Bool
}

func (s *switchSource) Next() (idtype.ID, error) {
	if s.failing.Load() {
		return 0, errTestSource
	}
	return s.Source.Next()
}

func (s *switchSource) NextN(dst []idtype.ID) error {
	if s.failing.Load() {
		return errTestSource
	}
	return s.Source.NextN(dst)
}

// openRetryDB opens a fresh database with the retry models, with their
// foreign-key constraints or without (GORM's
// DisableForeignKeyConstraintWhenMigrating), and the triggers.
func openRetryDB(t *testing.T, url string, fks bool, src idtype.Source) *gorm.DB {
	t.Helper()
	sqlDB, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqlDB.Close() })
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{
		Logger:                                   logger.Discard,
		NowFunc:                                  func() time.Time { return testNow },
		DisableForeignKeyConstraintWhenMigrating: !fks,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Use(gormplugin.New(src, gormplugin.Options{})); err != nil {
		t.Fatal(err)
	}
	if err := db.AutoMigrate(retryModels...); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec(retryTriggers).Error; err != nil {
		t.Fatal(err)
	}
	return db
}

// The rows every run finds in the database: associations that refer to
// them are taken as existing, by db.Create and by a bulk load alike.
const (
	retryOldPublisher idtype.ID = 1000001
	retryOldTag       idtype.ID = 1000002
)

// retryFaultKind is where a run's first attempt fails.
type retryFaultKind int

const (
	faultUnique    retryFaultKind = iota // a duplicate e-mail in batch 3: 23505
	faultCancel                          // a value that cancels the context as batch 2's books are copied
	faultValuer                          // a value whose Value fails, in batch 3
	faultTrigger                         // a trigger refuses a book of batch 2
	faultSource                          // the Source fails as batch 3 is keyed
	faultCommit                          // a deferred trigger refuses a chapter at COMMIT
	faultSavepoint                       // a duplicate in batch 3, in the caller's transaction
	faultKinds
)

func (k retryFaultKind) String() string {
	return [...]string{"23505 in batch 3", "context cancelled mid-COPY (batch 2)", "Valuer error (batch 3)",
		"trigger refuses a row (batch 2)", "Source fails (batch 3)", "deferred trigger at COMMIT",
		"23505 in batch 3 in Options.Tx"}[k]
}

// retryRoots, retryBatch: three batches of four authors.
const retryRoots, retryBatch = 12, 4

// retryGraph builds the authors of a run, the same each call: new
// publishers, imprints, mentors (authors outside the input) and tags
// shared by several authors through pointers, an existing publisher and
// tag referred to by key, has-one, nested has-many and polymorphic rows,
// zero fields GORM fills (a `default:`, autoCreateTime, a snowflake field
// in a nil embedded struct), a book whose foreign key the caller set to a
// stale value, and an author whose publisher's key field is a pointer the
// caller set. fault arms the row that fails the first attempt; the hook is
// the fault value's, for faultCancel and faultValuer.
func retryGraph(fault retryFaultKind, hook *faultHook) []RetryAuthor {
	pubs := []*RetryPublisher{{Name: "Penguin"}, {Name: "Faber"}, {ID: retryOldPublisher, Name: "ignored: it exists"}}
	imprints := []*RetryImprint{{Name: "Pelican"}, {Name: "Puffin"}}
	mentors := []*RetryAuthor{{Email: "m0@example.com"}, {Email: "m1@example.com", Score: 3}}
	tags := []*RetryTag{{Name: "go"}, {Name: "sql"}, {Name: "poetry"}, {ID: retryOldTag, Name: "ignored too"}}
	stale := idtype.ID(555)
	authors := make([]RetryAuthor, retryRoots)
	for i := range authors {
		a := &authors[i]
		a.Email = fmt.Sprintf("a%d@example.com", i)
		if i%3 != 0 {
			a.Score = i
		}
		a.Origin.City = "Paris"
		if i%3 != 2 {
			a.Origin.Imprint = imprints[i%2]
		}
		a.Publisher = pubs[i%3]
		if i == 4 {
			a.PublisherID = &stale
		}
		if i%4 != 3 {
			a.Mentor = mentors[i%2]
		}
		if i%2 == 1 {
			a.Profile = &RetryProfile{Bio: fmt.Sprintf("bio %d", i)}
		}
		for k := range i % 3 {
			b := RetryBook{Title: fmt.Sprintf("book %d.%d", i, k), Fault: retryFault{Text: "fine"}}
			if i == 1 && k == 0 {
				b.RetryAuthorID = 777
			}
			for c := range (i + k) % 3 {
				b.Chapters = append(b.Chapters, RetryChapter{N: c + 1})
			}
			if k == 1 {
				b.Notes = []RetryNote{{Body: "on a book"}}
			}
			a.Books = append(a.Books, b)
		}
		for k := range i%3 + 1 {
			a.Tags = append(a.Tags, tags[(i+k)%len(tags)])
		}
		if i%4 == 1 {
			a.Notes = []RetryNote{{Body: "first"}, {Body: "second"}}
		}
	}
	switch fault {
	case faultUnique, faultSavepoint:
		authors[10].Email = authors[0].Email
	case faultCancel:
		authors[5].Books[1].Fault.hook = hook
	case faultValuer:
		authors[10].Books[0].Fault.hook = hook
	case faultTrigger:
		authors[5].Books[0].Title = "refused"
	case faultCommit:
		authors[10].Books[0].Chapters[0].N = -1
	}
	return authors
}

// repair undoes what retryGraph armed, as the caller fixes the input
// before retrying.
func repair(fault retryFaultKind, authors []RetryAuthor) {
	switch fault {
	case faultUnique, faultSavepoint:
		authors[10].Email = "a10@example.com"
	case faultCancel:
		authors[5].Books[1].Fault.hook = nil
	case faultValuer:
		authors[10].Books[0].Fault.hook = nil
	case faultTrigger:
		authors[5].Books[0].Title = "book 5.0"
	case faultCommit:
		authors[10].Books[0].Chapters[0].N = 1
	}
}

// checkFailure says whether err is the failure that fault should cause.
func checkFailure(fault retryFaultKind, err error) error {
	var pgErr *pgconn.PgError
	ok := false
	switch fault {
	case faultUnique, faultSavepoint:
		ok = errors.As(err, &pgErr) && pgErr.Code == "23505"
	case faultCancel:
		ok = errors.Is(err, context.Canceled)
	case faultValuer:
		ok = errors.Is(err, errFaultValue)
	case faultTrigger:
		ok = errors.As(err, &pgErr) && pgErr.Code == "P0001" && strings.Contains(pgErr.Message, "refused by a trigger")
	case faultSource:
		ok = errors.Is(err, errTestSource)
	case faultCommit:
		ok = errors.As(err, &pgErr) && pgErr.Code == "P0001" && strings.Contains(pgErr.Message, "at COMMIT")
	}
	if !ok {
		return fmt.Errorf("the first attempt returned %v; want the failure of %s", err, fault)
	}
	return nil
}

// retryRun is one way of loading a graph, failing once and retrying.
type retryRun struct {
	t      *testing.T
	ctx    context.Context
	url    string
	db     *gorm.DB
	plugin *switchSource
	gen    idtype.Source
}

// reset empties the database and writes the rows every run finds there.
func (r *retryRun) reset() {
	r.t.Helper()
	if err := r.db.Exec(`TRUNCATE retry_publishers, retry_imprints, retry_tags, retry_authors, retry_profiles,
		retry_books, retry_chapters, retry_notes, retry_author_tags`).Error; err != nil {
		r.t.Fatal(err)
	}
	if err := r.db.Create(&RetryPublisher{ID: retryOldPublisher, Name: "Old House"}).Error; err != nil {
		r.t.Fatal(err)
	}
	if err := r.db.Create(&RetryTag{ID: retryOldTag, Name: "classic"}).Error; err != nil {
		r.t.Fatal(err)
	}
}

// viaCreate fails db.Create on the graph with fault, repairs the graph,
// and retries it: the reference every bulk load's retry is compared with.
func (r *retryRun) viaCreate(fault retryFaultKind) []RetryAuthor {
	r.t.Helper()
	r.reset()
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	hook := &faultHook{err: errFaultValue}
	if fault == faultCancel {
		hook = &faultHook{cancel: cancel}
	}
	authors := retryGraph(fault, hook)
	if fault == faultSource {
		r.plugin.failing.Store(true)
	}
	err := r.db.WithContext(ctx).Create(&authors).Error
	r.plugin.failing.Store(false)
	if fault == faultCancel && err != nil && ctx.Err() != nil {
		// database/sql reports a statement whose context ended as it
		// ran as a bad connection, or as context.Canceled.
		err = context.Canceled
	}
	if err := checkFailure(fault, err); err != nil {
		r.t.Fatalf("db.Create: %v", err)
	}
	repair(fault, authors)
	if err := r.db.WithContext(r.ctx).Create(&authors).Error; err != nil {
		r.t.Fatalf("db.Create's retry: %v", err)
	}
	return authors
}

// loadMode is how a run hands the graph to a bulk load.
type loadMode int

const (
	asSlice    loadMode = iota // Create of []RetryAuthor
	asPointers                 // Create of []*RetryAuthor
	asSeq                      // CreateSeq of *RetryAuthor
)

func (m loadMode) String() string { return [...]string{"Create", "Create of pointers", "CreateSeq"}[m] }

// viaBulk fails a bulk load (as mode says) of the
// graph with fault, with the defences in off switched off, repairs the
// graph and retries it with every defence on. It returns the graph, a
// difference between the structs after the failure and as they were
// built ("" for none), and the retry's error.
func (r *retryRun) viaBulk(fault retryFaultKind, mode loadMode, off defences) (authors []RetryAuthor, changed string, retryErr error) {
	r.t.Helper()
	r.reset()
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	hook := &faultHook{err: errFaultValue}
	if fault == faultCancel {
		hook = &faultHook{cancel: cancel}
	}
	authors = retryGraph(fault, hook)
	load := func(ctx context.Context, src idtype.Source, opts Options, off defences) error {
		opts.BatchSize = retryBatch
		switch mode {
		case asPointers:
			_, err := createWithout(ctx, r.db, src, ptrs(authors), opts, off)
			return err
		case asSeq:
			seq := func(yield func(*RetryAuthor) bool) {
				for i := range authors {
					if !yield(&authors[i]) {
						return
					}
				}
			}
			_, err := createSeqWithout(ctx, r.db, src, iter.Seq[*RetryAuthor](seq), opts, off)
			return err
		}
		_, err := createWithout(ctx, r.db, src, authors, opts, off)
		return err
	}
	var src idtype.Source = r.gen
	if fault == faultSource {
		src = &failingSource{Source: r.gen, after: 3}
	}
	var err error
	if fault == faultSavepoint {
		err = r.inCallerTx(func(tx pgx.Tx) error { return load(ctx, src, Options{Tx: tx}, off) })
	} else {
		err = load(ctx, src, Options{}, off)
	}
	if err := checkFailure(fault, err); err != nil {
		r.t.Fatalf("bulk (%s): %v", mode, err)
	}
	changed = diffGraph(reflect.ValueOf(retryGraph(fault, hook)), reflect.ValueOf(authors), mode == asSeq, fault.batch())

	repair(fault, authors)
	if fault == faultSavepoint {
		retryErr = r.inCallerTx(func(tx pgx.Tx) error { return load(r.ctx, r.gen, Options{Tx: tx}, defences{}) })
	} else {
		retryErr = load(r.ctx, r.gen, Options{}, defences{})
	}
	return authors, changed, retryErr
}

// inCallerTx runs fn in a pgx transaction of the test's, which it
// commits: the first attempt fails inside it, and the caller goes on.
func (r *retryRun) inCallerTx(fn func(pgx.Tx) error) error {
	conn, err := pgx.Connect(r.ctx, r.url)
	if err != nil {
		r.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	loadErr := fn(tx)
	if err := tx.Commit(r.ctx); err != nil {
		r.t.Fatalf("commit the caller's transaction: %v", err)
	}
	return loadErr
}

// batch returns the batch, counted from 0, in which fault fails a load.
func (k retryFaultKind) batch() int {
	switch k {
	case faultCancel, faultTrigger:
		return 1
	case faultCommit:
		return 0
	}
	return 2
}

// diffGraph returns the first difference between two graphs in an
// exported field, "" for none. streamed compares only what CreateSeq puts
// back: every row from batch failed on, and every belongs-to and
// many2many row.
func diffGraph(want, got reflect.Value, streamed bool, failed int) string {
	if !streamed {
		return diffValue(want, got, "authors", map[uintptr]bool{})
	}
	seen := map[uintptr]bool{}
	for i := failed * retryBatch; i < retryRoots; i++ {
		if d := diffValue(want.Index(i), got.Index(i), fmt.Sprintf("authors[%d]", i), seen); d != "" {
			return d
		}
	}
	for i := range retryRoots {
		w, g := want.Index(i), got.Index(i)
		for _, name := range []string{"Publisher", "Mentor", "Tags"} {
			if d := diffValue(w.FieldByName(name), g.FieldByName(name), fmt.Sprintf("authors[%d].%s", i, name), seen); d != "" {
				return d
			}
		}
		if d := diffValue(w.FieldByName("Origin").FieldByName("Imprint"), g.FieldByName("Origin").FieldByName("Imprint"),
			fmt.Sprintf("authors[%d].Origin.Imprint", i), seen); d != "" {
			return d
		}
	}
	return ""
}

func diffValue(want, got reflect.Value, path string, seen map[uintptr]bool) string {
	switch want.Kind() {
	case reflect.Pointer:
		if want.IsNil() != got.IsNil() {
			return fmt.Sprintf("%s: nil is %v, was %v", path, got.IsNil(), want.IsNil())
		}
		if want.IsNil() || seen[got.Pointer()] {
			return ""
		}
		seen[got.Pointer()] = true
		return diffValue(want.Elem(), got.Elem(), path, seen)
	case reflect.Slice:
		if want.Len() != got.Len() {
			return fmt.Sprintf("%s: %d elements, was %d", path, got.Len(), want.Len())
		}
		for i := range want.Len() {
			if d := diffValue(want.Index(i), got.Index(i), fmt.Sprintf("%s[%d]", path, i), seen); d != "" {
				return d
			}
		}
	case reflect.Struct:
		if want.Type() == reflect.TypeFor[time.Time]() {
			if !want.Interface().(time.Time).Equal(got.Interface().(time.Time)) {
				return fmt.Sprintf("%s: %v, was %v", path, got, want)
			}
			return ""
		}
		for i := range want.NumField() {
			if f := want.Type().Field(i); f.IsExported() {
				if d := diffValue(want.Field(i), got.Field(i), path+"."+f.Name, seen); d != "" {
					return d
				}
			}
		}
	default:
		if want.Interface() != got.Interface() {
			return fmt.Sprintf("%s: %v, was %v", path, got, want)
		}
	}
	return ""
}

// dangling counts the references of the database that point at no row:
// the belongs-to and many2many rows a retry took as existing and never
// wrote.
func dangling(t *testing.T, ctx context.Context, db *gorm.DB) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for name, q := range map[string]string{
		"publishers": `SELECT count(*) FROM retry_authors a WHERE publisher_id IS NOT NULL
			AND NOT EXISTS (SELECT FROM retry_publishers p WHERE p.id = a.publisher_id)`,
		"imprints (embedded)": `SELECT count(*) FROM retry_authors a WHERE origin_imprint_id IS NOT NULL
			AND NOT EXISTS (SELECT FROM retry_imprints p WHERE p.id = a.origin_imprint_id)`,
		"mentors (self-reference)": `SELECT count(*) FROM retry_authors a WHERE mentor_id IS NOT NULL
			AND NOT EXISTS (SELECT FROM retry_authors m WHERE m.id = a.mentor_id)`,
		"tags (many2many)": `SELECT count(*) FROM retry_author_tags j
			WHERE NOT EXISTS (SELECT FROM retry_tags g WHERE g.id = j.retry_tag_id)`,
	} {
		var n int64
		if err := db.WithContext(ctx).Raw(q).Row().Scan(&n); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n > 0 {
			out[name] = n
		}
	}
	return out
}

// compareTables compares the database with the dumps of db.Create's retry,
// the keys of one mapped to the other's through the two graphs, and
// returns, for each table that differs, how.
func compareTables(t *testing.T, ctx context.Context, db *gorm.DB, want map[string][]string, created, bulked []RetryAuthor) map[string]string {
	t.Helper()
	keys := map[int64]int64{}
	mapKeys(t, reflect.ValueOf(created), reflect.ValueOf(bulked), keys, map[uintptr]bool{})
	images := map[int64]int64{}
	for _, y := range keys {
		images[y] = y
	}
	out := map[string]string{}
	for table, rows := range want {
		mapped := make([]string, len(rows))
		for i, row := range rows {
			mapped[i] = remapRow(t, row, keys)
		}
		slices.Sort(mapped)
		got := dumpTable(t, ctx, db, table, images)
		if !slices.Equal(got, mapped) {
			out[table] = fmt.Sprintf("%d rows, db.Create's retry %d; first difference:\n%s", len(got), len(mapped), firstDiff(got, mapped))
		}
	}
	return out
}

// TestBulkRetry fails a load of a graph with every shape of association
// at each point a load can fail, repairs the input, and retries the same
// structs; db.Create does the same with the same graph. After the failure
// the structs are as they were built (every key, foreign key, polymorphic
// type, GORM-filled field and embedded struct the load wrote is put
// back), and after the retry the database holds what db.Create's retry
// writes, table by table, with foreign-key constraints and without. The
// control, with the structs left as the failed load left them, takes the
// shared publishers, imprints, mentors and tags as existing: with
// foreign keys every retry fails with 23503, the second as the first;
// without, the retry succeeds and leaves references to rows that were
// never written.
func TestBulkRetry(t *testing.T) {
	ctx := testenv.Deadline(t, 4*time.Minute)
	for _, fks := range []bool{true, false} {
		url := testenv.Postgres(t)
		gen := newGen(t, 1)
		plugin := &switchSource{Source: newGen(t, 2)}
		r := &retryRun{t: t, ctx: ctx, url: url, db: openRetryDB(t, url, fks, plugin), plugin: plugin, gen: gen}
		for fault := range faultKinds {
			for _, mode := range []loadMode{asSlice, asPointers, asSeq} {
				if mode == asSeq && fault != faultUnique && fault != faultCancel && fault != faultSource ||
					mode == asPointers && fault != faultUnique {
					continue
				}
				name := fmt.Sprintf("fks=%v %s, %s", fks, fault, mode)
				created := r.viaCreate(fault)
				want := map[string][]string{}
				for _, table := range listTables(t, ctx, r.db) {
					want[table] = rawRows(t, ctx, r.db, table)
				}

				bulked, changed, err := r.viaBulk(fault, mode, defences{})
				if changed != "" {
					t.Errorf("%s: after the failed load, %s", name, changed)
				}
				if err != nil {
					t.Errorf("%s: the retry: %v", name, err)
				} else if diff := compareTables(t, ctx, r.db, want, created, bulked); len(diff) > 0 {
					for table, d := range diff {
						t.Errorf("%s: %s: the retry wrote %s", name, table, d)
					}
				} else {
					t.Logf("%s: the retry wrote what db.Create's retry writes (%d tables)", name, len(want))
				}

				// The control: the structs left as the failed load left
				// them.
				bulked, changed, err = r.viaBulk(fault, mode, defences{keepStructs: true})
				if changed == "" {
					t.Errorf("%s: control: the failed load left the structs as they were; the test does not reach the fault", name)
				}
				var pgErr *pgconn.PgError
				switch {
				case fks:
					if !errors.As(err, &pgErr) || pgErr.Code != "23503" {
						t.Errorf("%s: control: the retry: %v; want a foreign-key violation (23503)", name, err)
						continue
					}
					again := retryAgain(r, bulked, mode == asSeq)
					if !errors.As(again, &pgErr) || pgErr.Code != "23503" {
						t.Errorf("%s: control: the second retry: %v; want 23503 again", name, again)
						continue
					}
					t.Logf("%s: control: every retry fails: %s", name, pgErr.Message)
				case err != nil:
					t.Errorf("%s: control: the retry without foreign keys: %v", name, err)
				default:
					lost := dangling(t, ctx, r.db)
					diff := compareTables(t, ctx, r.db, want, created, bulked)
					if len(lost) == 0 || len(diff) == 0 {
						t.Errorf("%s: control: references to no row %v, tables that differ %d; the test does not reach the fault",
							name, lost, len(diff))
						continue
					}
					tables := make([]string, 0, len(diff))
					for table, d := range diff {
						tables = append(tables, table+": "+strings.SplitN(d, ";", 2)[0])
					}
					slices.Sort(tables)
					t.Logf("%s: control: the retry succeeded, with references to rows never written: %v; tables that differ: %s",
						name, lost, strings.Join(tables, ", "))
				}
			}
		}
	}
}

// retryAgain loads authors once more, with every defence on.
func retryAgain(r *retryRun, authors []RetryAuthor, streamed bool) error {
	var err error
	if streamed {
		_, err = CreateSeq(r.ctx, r.db, r.gen, slices.Values(ptrs(authors)), Options{BatchSize: retryBatch})
	} else {
		_, err = Create(r.ctx, r.db, r.gen, authors, Options{BatchSize: retryBatch})
	}
	return err
}

// rawRows returns every row of table as JSON, keys as they are.
func rawRows(t *testing.T, ctx context.Context, db *gorm.DB, table string) []string {
	t.Helper()
	var rows []string
	if err := db.WithContext(ctx).Raw(fmt.Sprintf("SELECT to_jsonb(t)::text FROM %q t", table)).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	return rows
}

// remapRow is a row of rawRows as dumpTable would return it with keys.
func remapRow(t *testing.T, row string, keys map[int64]int64) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(row))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(mapJSON(v, keys))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func ptrs[T any](s []T) []*T {
	out := make([]*T, len(s))
	for i := range s {
		out[i] = &s[i]
	}
	return out
}

// TestBulkCommitUnknown loses the answer to a load's COMMIT, which the
// server ran: the load fails with ErrCommitUnknown, the rows are written,
// and the structs keep their keys, so that a retry of the same structs
// fails on them (23505) and writes nothing twice. The control, which puts
// the structs back after such a COMMIT too, retries with new keys and
// writes every row a second time.
func TestBulkCommitUnknown(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	gen := newGen(t, 1)
	for _, control := range []bool{false, true} {
		direct := testenv.Postgres(t)
		u, err := url.Parse(direct)
		if err != nil {
			t.Fatal(err)
		}
		proxy := faultproxy.Start(t, u.Host)
		u.Host = proxy.Addr()
		// Parents with children, and nothing unique but their keys.
		db := openURL(t, u.String(), gen, &BulkBenchParent{}, &BulkBenchChild{})
		check := openURL(t, direct, nil)

		parents := benchInput(30, 2)
		proxy.DropReplies(faultproxy.MatchPGQuery("commit"), 1)
		_, err = createWithout(ctx, db, gen, parents, Options{BatchSize: 8}, defences{restoreUnknownCommit: control})
		if !errors.Is(err, ErrCommitUnknown) {
			t.Fatalf("control=%v: err = %v; want ErrCommitUnknown", control, err)
		}
		if proxy.Stats().RepliesDropped != 1 {
			t.Fatalf("control=%v: %d replies dropped; want the COMMIT's", control, proxy.Stats().RepliesDropped)
		}
		if n := countRows(t, ctx, check, "bulk_bench_parents"); n != 30 {
			t.Fatalf("control=%v: %d parents after the lost COMMIT; want 30: the server committed", control, n)
		}
		kept := parents[0].ID != 0 && parents[29].Children[1].ID != 0 && parents[29].Children[1].ParentID == parents[29].ID

		_, retryErr := Create(ctx, db, gen, parents, Options{BatchSize: 8})
		parentsNow, childrenNow := countRows(t, ctx, check, "bulk_bench_parents"), countRows(t, ctx, check, "bulk_bench_children")
		var pgErr *pgconn.PgError
		switch {
		case !control && (!kept || !errors.As(retryErr, &pgErr) || pgErr.Code != "23505" || parentsNow != 30 || childrenNow != 60):
			t.Errorf("keys kept %v; the retry: %v; %d parents and %d children; want the keys kept, 23505, and 30 and 60",
				kept, retryErr, parentsNow, childrenNow)
		case control && (kept || retryErr != nil || parentsNow != 60 || childrenNow != 120):
			t.Errorf("control: keys kept %v; the retry: %v; %d parents and %d children; want the keys put back, and the "+
				"graph written twice (60 and 120): the test does not reach the fault", kept, retryErr, parentsNow, childrenNow)
		default:
			t.Logf("control=%v: keys kept %v; the retry: %v; %d parents, %d children", control, kept, retryErr, parentsNow, childrenNow)
		}
	}
}

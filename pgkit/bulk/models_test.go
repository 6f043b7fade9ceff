package bulk

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/sqltype"
)

// The models of the bulk tests: an author with an association of every
// kind, two levels deep, and columns of every kind GORM maps.
type (
	BulkAuthor struct {
		ID          idtype.ID `gorm:"primaryKey"`
		Name        string
		Email       string         `gorm:"uniqueIndex"`
		Meta        BulkMeta       `gorm:"serializer:json"`
		Address     BulkAddress    `gorm:"embedded;embeddedPrefix:addr_"`
		Score       int            `gorm:"default:7"`
		Note        string         `gorm:"default:upper('db default')"`
		Skipped     string         `gorm:"-"`
		ReadOnly    string         `gorm:"->"`
		Favorites   sqltype.IDs    // bigint[]
		Mentor      sqltype.NullID // a nullable ID
		PublisherID *idtype.ID
		Publisher   *BulkPublisher
		Profile     *BulkProfile
		Books       []BulkBook
		Tags        []*BulkTag    `gorm:"many2many:bulk_author_tags"`
		Readers     []*BulkReader `gorm:"many2many:bulk_author_readers"`
		Followers   []*BulkReader `gorm:"many2many:bulk_author_followers"`
		Comments    []BulkComment `gorm:"polymorphic:Owner"`
		CreatedAt   time.Time
		UpdatedAt   time.Time
	}
	BulkMeta struct {
		Langs []string `json:"langs"`
		Stars int      `json:"stars"`
	}
	BulkAddress struct {
		City string
		Zip  *string
	}
	BulkPublisher struct {
		ID   idtype.ID `gorm:"primaryKey"`
		Name string
	}
	BulkProfile struct {
		ID           idtype.ID `gorm:"primaryKey"`
		BulkAuthorID idtype.ID `gorm:"uniqueIndex"`
		Bio          string
	}
	BulkBook struct {
		ID           idtype.ID `gorm:"primaryKey"`
		BulkAuthorID idtype.ID `gorm:"index"`
		Title        string
		Pages        int32
		Chapters     []BulkChapter
		Comments     []BulkComment `gorm:"polymorphic:Owner"`
	}
	BulkChapter struct {
		ID         idtype.ID `gorm:"primaryKey"`
		BulkBookID idtype.ID `gorm:"index"`
		N          int
		Words      int64 `gorm:"snowflake;autoIncrement:false"` // a tagged non-key field
	}
	BulkTag struct {
		ID   idtype.ID `gorm:"primaryKey"`
		Name string
	}
	BulkReader struct {
		ID   idtype.ID `gorm:"primaryKey"`
		Name string
	}
	// BulkAuthorReader is the join model of BulkAuthor.Readers
	// (SetupJoinTable): a key of its own, a snowflake field and a
	// creation time, all filled as its rows are made, and the pair
	// unique, so that a pair given twice is one row.
	BulkAuthorReader struct {
		ID           idtype.ID `gorm:"primaryKey"`
		BulkAuthorID idtype.ID `gorm:"uniqueIndex:bulk_author_reader_pair"`
		BulkReaderID idtype.ID `gorm:"uniqueIndex:bulk_author_reader_pair"`
		Ticket       int64     `gorm:"snowflake;autoIncrement:false"`
		CreatedAt    time.Time
	}
	// BulkAuthorFollower is the join model of BulkAuthor.Followers: a key
	// of its own and nothing unique about the pair, so that a pair given
	// twice is two rows.
	BulkAuthorFollower struct {
		ID           idtype.ID `gorm:"primaryKey"`
		BulkAuthorID idtype.ID `gorm:"index"`
		BulkReaderID idtype.ID
		Since        int64 `gorm:"snowflake;autoIncrement:false"`
	}
	BulkComment struct {
		ID        idtype.ID `gorm:"primaryKey"`
		OwnerID   idtype.ID `gorm:"index"`
		OwnerType string
		Body      string
	}
)

// testModels are every model of the bulk tests, for AutoMigrate.
var testModels = []any{&BulkPublisher{}, &BulkTag{}, &BulkReader{}, &BulkAuthor{}, &BulkProfile{}, &BulkBook{}, &BulkChapter{},
	&BulkComment{}}

// testNow is the NowFunc of the tests' *gorm.DB: autoCreateTime columns
// then hold the same value after Create and after a bulk load.
var testNow = time.Date(2026, 3, 14, 15, 9, 26, 535000000, time.UTC)

// openDB opens a fresh database with GORM, the plugin on src, and the
// tables of models.
func openDB(t testing.TB, src idtype.Source, models ...any) *gorm.DB {
	t.Helper()
	return openURL(t, testenv.Postgres(t), src, models...)
}

func openURL(t testing.TB, url string, src idtype.Source, models ...any) *gorm.DB {
	t.Helper()
	sqlDB, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqlDB.Close() })
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{
		Logger:  logger.Discard,
		NowFunc: func() time.Time { return testNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	if src != nil {
		if err := db.Use(gormplugin.New(src, gormplugin.Options{})); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range []struct {
		field string
		model any
	}{{"Readers", &BulkAuthorReader{}}, {"Followers", &BulkAuthorFollower{}}} {
		if err := db.SetupJoinTable(&BulkAuthor{}, j.field, j.model); err != nil {
			t.Fatal(err)
		}
	}
	if len(models) > 0 {
		if err := db.AutoMigrate(models...); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// newGen returns a generator with a worker of its own.
func newGen(t testing.TB, worker int64) *idtype.Generator {
	t.Helper()
	g, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: worker})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// countRows returns the number of rows of table.
func countRows(t testing.TB, ctx context.Context, db *gorm.DB, table string) int64 {
	t.Helper()
	var n int64
	if err := db.WithContext(ctx).Table(table).Count(&n).Error; err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

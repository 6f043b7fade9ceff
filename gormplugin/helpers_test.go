package gormplugin_test

import (
	"context"
	"database/sql"

	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/migrations"
)

// The models of the tests: a user with one association of each kind.
type (
	Company struct {
		ID   idtype.ID `gorm:"primaryKey"`
		Name string
	}
	Profile struct {
		ID     idtype.ID `gorm:"primaryKey"`
		UserID idtype.ID
		Bio    string
	}
	Post struct {
		ID     idtype.ID `gorm:"primaryKey"`
		UserID idtype.ID
		Title  string
	}
	Language struct {
		ID   idtype.ID `gorm:"primaryKey"`
		Code string    `gorm:"uniqueIndex"`
	}
	User struct {
		ID        idtype.ID `gorm:"primaryKey"`
		Name      string
		Email     *string `gorm:"uniqueIndex"`
		CompanyID *idtype.ID
		Company   *Company
		Profile   *Profile
		Posts     []Post
		Languages []Language `gorm:"many2many:user_languages"`
	}
)

// Hooked records the key its BeforeCreate hook saw.
type Hooked struct {
	ID     idtype.ID `gorm:"primaryKey"`
	SeenID idtype.ID `gorm:"-"`
}

func (h *Hooked) BeforeCreate(*gorm.DB) error {
	h.SeenID = h.ID
	return nil
}

// Order has a snowflake that is not its key.
type Order struct {
	ID     idtype.ID `gorm:"primaryKey"`
	Number int64     `gorm:"snowflake;uniqueIndex"`
	Note   string
}

// Legacy has an int64 key, tagged; autoIncrement:false keeps GORM from
// making it a bigserial.
type Legacy struct {
	ID   int64 `gorm:"primaryKey;snowflake;autoIncrement:false"`
	Name string
}

// Audit leaves its key to the database.
type Audit struct {
	ID   idtype.ID `gorm:"primaryKey;default:snowflake_id()"`
	What string
}

// Membership has a composite key, left alone.
type Membership struct {
	GroupID idtype.ID `gorm:"primaryKey"`
	UserID  idtype.ID `gorm:"primaryKey"`
}

// Line has a composite key with a tagged half, which is filled.
type Line struct {
	ID  idtype.ID `gorm:"primaryKey;snowflake"`
	Pos int       `gorm:"primaryKey;autoIncrement:false"`
}

// PtrKey has a pointer key, allocated when nil.
type PtrKey struct {
	ID   *idtype.ID `gorm:"primaryKey"`
	Name string
}

// Base is embedded with its key.
type Base struct {
	ID idtype.ID `gorm:"primaryKey"`
}

type Embedded struct {
	Base
	Name string
}

// OptedOut says `snowflake:false`: its key is the app's business.
type OptedOut struct {
	ID   idtype.ID `gorm:"primaryKey;snowflake:false"`
	Name string
}

// Account is the upsert model: unique by email, with a column the
// database fills.
type Account struct {
	ID        idtype.ID `gorm:"primaryKey"`
	Email     string    `gorm:"uniqueIndex"`
	Name      string
	CreatedAt time.Time `gorm:"default:now()"`
}

// Serial is GORM's usual model, for contrast: a bigserial key.
type Serial struct {
	ID   int64 `gorm:"primaryKey"`
	Name string
}

var allModels = []any{&Company{}, &User{}, &Profile{}, &Post{}, &Language{}, &Hooked{}, &Order{}, &Legacy{},
	&Audit{}, &Membership{}, &Line{}, &PtrKey{}, &Embedded{}, &OptedOut{}, &Account{}, &Serial{}}

// countingSource passes NextN to a real generator and counts the calls.
type countingSource struct {
	gen   *idtype.Generator
	calls atomic.Int64
	ids   atomic.Int64
}

func (c *countingSource) NextN(dst []idtype.ID) error {
	c.calls.Add(1)
	c.ids.Add(int64(len(dst)))
	return c.gen.NextN(dst)
}

func (c *countingSource) Next() (idtype.ID, error) {
	var one [1]idtype.ID
	err := c.NextN(one[:])
	return one[0], err
}

func (c *countingSource) Layout() idtype.Layout { return c.gen.Layout() }

// env is one test's database with the plugin registered.
type env struct {
	db  *gorm.DB
	sql *sql.DB
	src *countingSource
}

// newEnv migrates a fresh database (so that snowflake_id() exists),
// registers the plugin on worker 1, and creates every model's table.
func newEnv(t testing.TB, opts gormplugin.Options) *env {
	t.Helper()
	url := testenv.Postgres(t)
	sqlDB, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqlDB.Close() })
	if err := migrations.Up(context.Background(), sqlDB, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	db, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1})
	if err != nil {
		t.Fatal(err)
	}
	src := &countingSource{gen: gen}
	if err := db.Use(gormplugin.New(src, opts)); err != nil {
		t.Fatal(err)
	}
	if err := db.AutoMigrate(allModels...); err != nil {
		t.Fatal(err)
	}
	return &env{db: db, sql: sqlDB, src: src}
}

// keys reads a table's key column.
func (e *env) keys(t testing.TB, table, col string) map[idtype.ID]bool {
	t.Helper()
	rows, err := e.sql.Query("SELECT " + col + " FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[idtype.ID]bool{}
	for rows.Next() {
		var id idtype.ID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		if out[id] {
			t.Fatalf("%s.%s holds %d twice", table, col, id)
		}
		out[id] = true
	}
	return out
}

// checkKeys checks that the table holds exactly the given keys, each
// non-zero, from worker 1.
func (e *env) checkKeys(t testing.TB, table string, want ...idtype.ID) {
	t.Helper()
	got := e.keys(t, table, "id")
	seen := map[idtype.ID]bool{}
	for _, id := range want {
		if id == 0 {
			t.Errorf("%s: a struct kept a zero key", table)
			continue
		}
		if seen[id] {
			t.Errorf("%s: key %d given twice", table, id)
		}
		seen[id] = true
		if !got[id] {
			t.Errorf("%s: key %d of the struct is not in the table", table, id)
		}
		if w := idtype.DefaultLayout.Decode(id).Worker; w != 1 {
			t.Errorf("%s: key %d is from worker %d, not the plugin's 1", table, id, w)
		}
	}
	if len(got) != len(seen) {
		t.Errorf("%s holds %d rows, the structs %d keys", table, len(got), len(seen))
	}
}

func nowPlus(seconds int) time.Time { return time.Now().Add(time.Duration(seconds) * time.Second) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
func hasPrefix(s, p string) bool  { return strings.HasPrefix(s, p) }

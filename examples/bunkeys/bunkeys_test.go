package bunkeys_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"github.com/snowkeyhq/snowkey/examples/bunkeys"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/sqltype"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 3*time.Minute))
}

// Post is a model whose key bunkeys fills: docs/bun.md's (TestGuideModel).
type Post struct {
	bun.BaseModel `bun:"table:posts"`

	ID       idtype.ID      `bun:",pk"`
	Parent   sqltype.NullID `bun:"parent"`
	Mentions sqltype.IDs    `bun:"mentions"`
	Body     string
}

// BeforeAppendModel fills the key on insert.
func (p *Post) BeforeAppendModel(ctx context.Context, q bun.Query) error {
	return bunkeys.Fill(ctx, q, &p.ID)
}

// bare is the same table's model without the hook: what bunkeys defends
// against.
type bare struct {
	bun.BaseModel `bun:"table:posts"`

	ID       idtype.ID      `bun:",pk"`
	Parent   sqltype.NullID `bun:"parent"`
	Mentions sqltype.IDs    `bun:"mentions"`
	Body     string
}

func openDB(t *testing.T, ctx context.Context) *bun.DB {
	t.Helper()
	sqldb, err := sql.Open("pgx", testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	db := bun.NewDB(sqldb, pgdialect.New())
	t.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(ctx, "CREATE TABLE posts (id bigint PRIMARY KEY, parent bigint, mentions bigint[], body text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestFill inserts one post and a slice of posts through bun on real
// PostgreSQL and reads back the keys the hook gave them.
func TestFill(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	db := openDB(t, ctx)
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx = bunkeys.WithSource(ctx, gen)

	root := &Post{Body: "root"}
	if _, err := db.NewInsert().Model(root).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if root.ID == 0 || idtype.DefaultLayout.Decode(root.ID).Worker != 3 {
		t.Fatalf("root's key %d is not from worker 3's generator", root.ID)
	}
	replies := []Post{{Parent: sqltype.NewNullID(root.ID), Body: "a"}, {Parent: sqltype.NewNullID(root.ID), Body: "b"}, {ID: 42, Body: "kept"}}
	if _, err := db.NewInsert().Model(&replies).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if !(root.ID < replies[0].ID && replies[0].ID < replies[1].ID) || replies[2].ID != 42 {
		t.Fatalf("slice keys %d, %d, %d after root %d; want two new increasing keys and 42 kept",
			replies[0].ID, replies[1].ID, replies[2].ID, root.ID)
	}
	var got []Post
	if err := db.NewSelect().Model(&got).Order("id").Scan(ctx); err != nil {
		t.Fatal(err)
	}
	want := []idtype.ID{42, root.ID, replies[0].ID, replies[1].ID}
	ids := make([]idtype.ID, len(got))
	for i, p := range got {
		ids[i] = p.ID
	}
	if !slices.Equal(ids, want) || got[2].Parent != sqltype.NewNullID(root.ID) {
		t.Fatalf("rows %+v; want keys %v, the replies under the root", got, want)
	}

	// An update keeps the key, hook or not.
	root.Body = "edited"
	if _, err := db.NewUpdate().Model(root).WherePK().Exec(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.NewSelect().Model((*Post)(nil)).ColumnExpr("count(*)").Where("id = ? AND body = 'edited'", root.ID).Scan(ctx, &n); err != nil || n != 1 {
		t.Fatalf("the edited root: %d rows, %v", n, err)
	}
}

// TestNoSource: an insert whose context holds no Source fails before bun
// sends it, where the same insert without the hook (the control) writes
// the key 0.
func TestNoSource(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	db := openDB(t, ctx)
	if _, err := db.NewInsert().Model(&Post{Body: "lost"}).Exec(ctx); !errors.Is(err, bunkeys.ErrNoSource) {
		t.Fatalf("insert without a Source: %v; want ErrNoSource", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM posts").Scan(&n); err != nil || n != 0 {
		t.Fatalf("after the refused insert: %d rows, %v; want none", n, err)
	}
	if _, err := db.NewInsert().Model(&bare{Body: "zero"}).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM posts WHERE id = 0").Scan(&n); err != nil || n != 1 {
		t.Fatalf("control: %d rows keyed 0, %v; want the hookless insert to have written one", n, err)
	}
}

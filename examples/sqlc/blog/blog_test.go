package blog_test

import (
	"context"
	"os"
	"reflect"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/snowkeyhq/snowkey/examples/sqlc/blog"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/migrations"
	"github.com/snowkeyhq/snowkey/sqltype"
	"github.com/snowkeyhq/snowkey/workerid"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 3*time.Minute))
}

// TestQueries runs every generated query on real PostgreSQL, on a pool
// with sqltype.RegisterPgx and on one without (both must give the same
// rows), after migrations.Up and ../schema.sql.
func TestQueries(t *testing.T) {
	for _, registered := range []bool{true, false} {
		name := "plain pgx"
		if registered {
			name = "RegisterPgx"
		}
		t.Run(name, func(t *testing.T) {
			ctx := testenv.Deadline(t, time.Minute)
			pool := openPool(t, ctx, registered)
			testQueries(t, ctx, blog.New(pool))
		})
	}
}

func openPool(t *testing.T, ctx context.Context, registered bool) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	if registered {
		cfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
			sqltype.RegisterPgx(conn.TypeMap())
			return nil
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := migrations.Up(ctx, db, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	schema, err := os.ReadFile("../schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, string(schema)); err != nil {
		t.Fatalf("schema.sql: %v", err)
	}
	return pool
}

func testQueries(t *testing.T, ctx context.Context, q *blog.Queries) {
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1})
	if err != nil {
		t.Fatal(err)
	}
	next := func() idtype.ID {
		id, err := gen.Next()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	ann, err := q.CreateAuthor(ctx, blog.CreateAuthorParams{ID: next(), Name: "Ann"})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := q.CreateAuthor(ctx, blog.CreateAuthorParams{ID: next(), Name: "Bob"})
	if err != nil {
		t.Fatal(err)
	}
	root, err := q.CreatePost(ctx, blog.CreatePostParams{ID: next(), AuthorID: ann.ID, Mentions: sqltype.IDs{bob.ID}, Body: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := q.CreatePost(ctx, blog.CreatePostParams{
		ID: next(), AuthorID: bob.ID, ReplyTo: sqltype.NewNullID(root.ID), Mentions: sqltype.IDs{}, Body: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	// A key past 2^53, which a float64 would round, comes back exact.
	big := idtype.ID(1<<53 + 1)
	if _, err := q.CreateAuthor(ctx, blog.CreateAuthorParams{ID: big, Name: "Big"}); err != nil {
		t.Fatal(err)
	}
	far, err := q.CreatePost(ctx, blog.CreatePostParams{ID: next(), AuthorID: big, Mentions: sqltype.IDs{big, ann.ID}, Body: "far"})
	if err != nil {
		t.Fatal(err)
	}

	got, err := q.GetPost(ctx, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ReplyTo.Valid || !reflect.DeepEqual(got, root) {
		t.Errorf("GetPost(root) = %+v, want %+v with a NULL reply_to", got, root)
	}
	if got, err := q.GetPost(ctx, reply.ID); err != nil || got.ReplyTo != sqltype.NewNullID(root.ID) {
		t.Errorf("GetPost(reply) = %+v, %v; want reply_to %d", got, err, root.ID)
	}
	posts, err := q.PostsByID(ctx, sqltype.IDs{far.ID, root.ID, next()})
	if err != nil {
		t.Fatal(err)
	}
	if ids := postIDs(posts); !slices.Equal(ids, []idtype.ID{root.ID, far.ID}) {
		t.Errorf("PostsByID = %v, want %v", ids, []idtype.ID{root.ID, far.ID})
	}
	if posts, err := q.Replies(ctx, root.ID); err != nil || !slices.Equal(postIDs(posts), []idtype.ID{reply.ID}) {
		t.Errorf("Replies(root) = %v, %v; want [%d]", postIDs(posts), err, reply.ID)
	}
	if posts, err := q.Mentioning(ctx, big); err != nil || len(posts) != 1 || !reflect.DeepEqual(posts[0].Mentions, sqltype.IDs{big, ann.ID}) {
		t.Errorf("Mentioning(big) = %+v, %v; want the post that mentions %d", posts, err, big)
	}

	// A row keyed by the database's snowflake_id() carries its reserved
	// worker number, so it never meets an ID of the app's generators.
	before := time.Now().Add(-time.Second)
	ev, err := q.LogEvent(ctx, blog.LogEventParams{PostID: root.ID, Kind: "created"})
	if err != nil {
		t.Fatal(err)
	}
	if d := idtype.DefaultLayout.Decode(ev); d.Worker != workerid.SQLWorker || d.Time.Before(before) {
		t.Errorf("LogEvent's key %d decodes to %+v; want worker %d and a time after %v", ev, d, workerid.SQLWorker, before)
	}
}

func postIDs(posts []blog.Post) []idtype.ID {
	ids := make([]idtype.ID, len(posts))
	for i, p := range posts {
		ids[i] = p.ID
	}
	return ids
}

// TestGeneratedMatchesQueries checks, without sqlc, that the checked-in
// code was generated from the query.sql beside it: each query it names
// is a method of Queries, and each method a query.
func TestGeneratedMatchesQueries(t *testing.T) {
	src, err := os.ReadFile("../query.sql")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range regexp.MustCompile(`(?m)^-- name: (\w+) :\w+$`).FindAllStringSubmatch(string(src), -1) {
		want = append(want, m[1])
	}
	var got []string
	typ := reflect.TypeFor[*blog.Queries]()
	for i := range typ.NumMethod() {
		if name := typ.Method(i).Name; name != "WithTx" {
			got = append(got, name)
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Queries has methods %v; query.sql names %v: regenerate (see doc.go)", got, want)
	}
}

// TestDocShowsConfig checks that docs/sqlc.md shows the whole
// configuration the checked-in code is generated from: its yaml block is
// ../sqlc.yaml, byte for byte.
func TestDocShowsConfig(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/sqlc.md")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("../sqlc.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var shown []string
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		shown = append(shown, m[1])
	}
	if len(shown) != 1 {
		t.Fatalf("docs/sqlc.md has %d yaml blocks; want one, the configuration", len(shown))
	}
	if shown[0] != string(cfg) {
		t.Errorf("docs/sqlc.md shows\n%s\nexamples/sqlc/sqlc.yaml is\n%s", shown[0], cfg)
	}
}

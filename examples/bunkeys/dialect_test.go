package bunkeys_test

import (
	"bytes"
	"database/sql"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/schema"

	"github.com/snowkeyhq/snowkey/examples/bunkeys"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/sqltype"
)

// TestCreateTable creates docs/bun.md's table from its model with bun,
// on real PostgreSQL, inserts a thread whose replies hold a parent and
// mentions, and reads it back: with bunkeys.NewDialect the columns are
// bigint, bigint and bigint[]. The control, bun's own pgdialect.New,
// makes parent and mentions jsonb, and the insert fails.
func TestCreateTable(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx = bunkeys.WithSource(ctx, gen)
	for _, control := range []bool{false, true} {
		sqldb, err := sql.Open("pgx", testenv.Postgres(t))
		if err != nil {
			t.Fatal(err)
		}
		var dialect schema.Dialect = bunkeys.NewDialect()
		if control {
			dialect = pgdialect.New()
		}
		db := bun.NewDB(sqldb, dialect)
		defer db.Close()
		if _, err := db.NewCreateTable().Model((*Post)(nil)).Exec(ctx); err != nil {
			t.Fatalf("control=%v: create the table: %v", control, err)
		}
		var types []string
		if err := db.NewRaw(`SELECT column_name || ' ' || udt_name FROM information_schema.columns
			WHERE table_name = 'posts' ORDER BY ordinal_position`).Scan(ctx, &types); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(types, ", ")

		root := &Post{Body: "root"}
		_, rootErr := db.NewInsert().Model(root).Exec(ctx)
		replies := []Post{{Parent: sqltype.NewNullID(root.ID), Mentions: sqltype.IDs{root.ID, 42}, Body: "a"},
			{Parent: sqltype.NewNullID(root.ID), Mentions: sqltype.IDs{}, Body: "b"}}
		_, repliesErr := db.NewInsert().Model(&replies).Exec(ctx)
		if control {
			if !strings.Contains(got, "parent jsonb") || !strings.Contains(got, "mentions jsonb") || repliesErr == nil {
				t.Errorf("control: columns %s, the insert: %v; want parent and mentions jsonb and the insert refused: "+
					"the test does not reach the fault", got, repliesErr)
			} else {
				t.Logf("control: columns %s; the insert: %v", got, repliesErr)
			}
			continue
		}
		if want := "id int8, parent int8, mentions _int8, body varchar"; got != want {
			t.Errorf("columns %s; want %s", got, want)
		}
		if rootErr != nil || repliesErr != nil {
			t.Fatalf("insert: %v, %v", rootErr, repliesErr)
		}
		var back []Post
		if err := db.NewSelect().Model(&back).Order("id").Scan(ctx); err != nil {
			t.Fatal(err)
		}
		if len(back) != 3 || back[0].ID != root.ID || back[0].Parent.Valid || back[1].Parent != sqltype.NewNullID(root.ID) ||
			!slices.Equal(back[1].Mentions, sqltype.IDs{root.ID, 42}) || len(back[2].Mentions) != 0 || back[2].Body != "b" {
			t.Errorf("read back %+v; want the root, then replies a and b under it, a mentioning the root and 42", back)
		}
	}
}

// TestGuideModel checks that docs/bun.md shows the model the tests run
// (Post, in bunkeys_test.go), field for field and tag for tag.
func TestGuideModel(t *testing.T) {
	doc, err := os.ReadFile("../../docs/bun.md")
	if err != nil {
		t.Fatal(err)
	}
	var guide string
	for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		if strings.Contains(m[1], "type Post struct") {
			guide = m[1]
		}
	}
	if guide == "" {
		t.Fatal("docs/bun.md has no go block declaring Post")
	}
	test, err := os.ReadFile("bunkeys_test.go")
	if err != nil {
		t.Fatal(err)
	}
	want, got := typeDecl(t, string(test), "Post"), typeDecl(t, guide, "Post")
	if got != want {
		t.Errorf("docs/bun.md declares\n%s\nthe tests run\n%s", got, want)
	}
}

// typeDecl returns the declaration of type name in src, printed without
// comments.
func typeDecl(t *testing.T, src, name string) string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == name {
			if err := printer.Fprint(&out, token.NewFileSet(), ts); err != nil {
				t.Fatal(err)
			}
			return false
		}
		return true
	})
	if out.Len() == 0 {
		t.Fatalf("no type %s", name)
	}
	return out.String()
}

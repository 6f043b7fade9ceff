package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/pgkit/partition"
)

// monthPartition is the partition that package partition names for the month (UTC)
// of id's time, written out here rather than asked of it, so that the
// test checks the naming too.
func monthPartition(id idtype.ID) string {
	return "posts_p" + idtype.DefaultLayout.Decode(id).Time.UTC().Format("200601")
}

// postRow is a post as the table holds it, and the partition holding it.
type postRow struct {
	ID                idtype.ID
	AuthorID          idtype.ID
	Title, Body, Part string
}

func readPosts(ctx context.Context, t *testing.T, db *sql.DB) []postRow {
	t.Helper()
	rows, err := db.QueryContext(ctx, "SELECT id, author_id, title, body, tableoid::regclass::text FROM posts ORDER BY id")
	if err != nil {
		t.Fatalf("read posts: %v", err)
	}
	defer rows.Close()
	var out []postRow
	for rows.Next() {
		var r postRow
		if err := rows.Scan(&r.ID, &r.AuthorID, &r.Title, &r.Body, &r.Part); err != nil {
			t.Fatalf("read posts: %v", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read posts: %v", err)
	}
	return out
}

// On PostgreSQL a post created through the API lands in the partition of
// its ID's month, which the server made at start-up. The control run
// shows the check can fail: it drops the partitions the server made and
// holds the maintenance's lock meanwhile (see withoutPartitions), and
// every post then sits in the default partition.
func TestPostsPartitionedByMonth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		noPartitions bool
	}{{"partitions", false}, {"control no partitions", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testenv.Deadline(t, 2*time.Minute)
			cfg := realServers().config(t)
			cfg.Throttle = generous()
			app, srv := startAppConfig(t, cfg)
			if tc.noPartitions {
				withoutPartitions(ctx, t, app.sqlDB)
			}
			_, tok := signupLogin(t, srv, "alice@example.com", goodPassword)
			for i := range 5 {
				if r := call(t, srv, "POST", "/api/posts", tok, fmt.Sprintf(`{"title":"post %d","body":"b"}`, i)); r.status != http.StatusCreated {
					t.Fatalf("create post: status %d, body %s", r.status, r.body)
				}
			}
			var kind string
			if err := app.sqlDB.QueryRowContext(ctx, "SELECT relkind::text FROM pg_class WHERE oid = 'posts'::regclass").Scan(&kind); err != nil {
				t.Fatal(err)
			}
			if kind != "p" {
				t.Fatalf("posts has relkind %q, want p (partitioned table)", kind)
			}
			posts := readPosts(ctx, t, app.sqlDB)
			if len(posts) != 5 {
				t.Fatalf("%d posts in the table, want 5", len(posts))
			}
			misplaced := 0
			for _, p := range posts {
				if p.Part != monthPartition(p.ID) {
					misplaced++
					if !tc.noPartitions {
						t.Errorf("post %d (%s) is in %s, want %s", p.ID, idtype.DefaultLayout.Decode(p.ID).Time, p.Part, monthPartition(p.ID))
					}
				}
			}
			if tc.noPartitions && misplaced != len(posts) {
				t.Errorf("control: %d of %d posts in their month's partition with none made; want none", len(posts)-misplaced, len(posts))
			}
		})
	}
}

// withoutPartitions leaves posts with its default partition alone, as
// on a server that made none, until the test ends: it takes the lock that
// the server's partition maintenance takes for each step, on a
// connection of its own, so that no maintenance makes a partition again,
// and then drops every partition but the default one.
func withoutPartitions(ctx context.Context, t *testing.T, db *sql.DB) {
	t.Helper()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var oid uint32
	if err := conn.QueryRowContext(ctx, "SELECT 'posts'::regclass::oid").Scan(&oid); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1, $2)", partition.LockClass, int32(oid)); err != nil {
		t.Fatalf("the maintenance's lock: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1, $2)", partition.LockClass, int32(oid)); err != nil {
			t.Errorf("release the maintenance's lock: %v", err)
		}
		_ = conn.Close()
	})
	rows, err := conn.QueryContext(ctx, `SELECT c.oid::regclass::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'posts'::regclass AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'`)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(parts) == 0 {
		t.Fatal("control: the server made no partition to drop; the control proves nothing")
	}
	for _, p := range parts {
		if _, err := conn.ExecContext(ctx, "DROP TABLE "+p); err != nil {
			t.Fatalf("control: drop %s: %v", p, err)
		}
	}
}

// A database migrated by the migrations before posts were partitioned,
// with posts of past months, this month and boundary IDs in it, keeps
// every post, unchanged, when the server upgrades it; and every post ends
// in its month's partition, none left in the default one.
func TestPostsUpgradeToPartitions(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 2*time.Minute)
	cfg := realServers().config(t)
	cfg.Throttle = generous()
	db, err := sql.Open("pgx", cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := migrateLibrary(ctx, db); err != nil {
		t.Fatal(err)
	}
	p, err := appMigrationProvider(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 2); err != nil {
		t.Fatalf("migrate to version 2: %v", err)
	}

	var author idtype.ID
	if err := db.QueryRowContext(ctx,
		"INSERT INTO users (email, password_hash, name) VALUES ('old@example.com', 'x', 'Old') RETURNING id").Scan(&author); err != nil {
		t.Fatal(err)
	}
	l := idtype.DefaultLayout
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	ids := []idtype.ID{
		l.FirstID(now.AddDate(-1, -2, 0)) + 5,   // over a year ago
		l.FirstID(month.AddDate(0, -3, 0)) - 1,  // the last ID of a month
		l.FirstID(month.AddDate(0, -3, 0)),      // the first ID of the next
		l.FirstID(month.AddDate(0, -1, 10)) + 7, // last month
		l.FirstID(month),                        // this month's first ID
	}
	for i, id := range ids {
		if _, err := db.ExecContext(ctx, "INSERT INTO posts (id, author_id, title, body) VALUES ($1, $2, $3, 'old')",
			id, author, fmt.Sprintf("old %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// And some from snowflake_id(), as plain SQL would make them.
	if _, err := db.ExecContext(ctx, "INSERT INTO posts (author_id, title, body) SELECT $1, 'sql ' || g, 'sql' FROM generate_series(1, 20) g", author); err != nil {
		t.Fatal(err)
	}
	before := readPosts(ctx, t, db)
	if len(before) != 25 {
		t.Fatalf("%d posts before the upgrade, want 25", len(before))
	}

	app, srv := startAppConfig(t, cfg)
	after := readPosts(ctx, t, app.sqlDB)
	strip := func(rows []postRow) []postRow {
		out := make([]postRow, len(rows))
		for i, r := range rows {
			r.Part = ""
			out[i] = r
		}
		return out
	}
	if !reflect.DeepEqual(strip(after), strip(before)) {
		t.Fatalf("posts changed by the upgrade:\nbefore %v\nafter  %v", before, after)
	}
	for _, p := range after {
		if p.Part != monthPartition(p.ID) {
			t.Errorf("post %d (%s) is in %s, want %s", p.ID, l.Decode(p.ID).Time, p.Part, monthPartition(p.ID))
		}
	}
	// The upgraded table takes posts through the API, in their month too.
	_, tok := signupLogin(t, srv, "new@example.com", goodPassword)
	if r := call(t, srv, "POST", "/api/posts", tok, `{"title":"new","body":"b"}`); r.status != http.StatusCreated {
		t.Fatalf("create post: status %d, body %s", r.status, r.body)
	}
	last := readPosts(ctx, t, app.sqlDB)
	if len(last) != 26 || last[25].Part != monthPartition(last[25].ID) {
		t.Fatalf("after a post through the API: %d posts, newest %+v; want 26, in its month's partition", len(last), last[len(last)-1])
	}
}

package main

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/migrations"
)

// adoptTestDB returns the URL of a fresh database with snowkey's
// migrations, a serial table and a table that refers to it.
func adoptTestDB(t *testing.T, ctx context.Context) (string, *sql.DB) {
	t.Helper()
	url := testenv.Postgres(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := migrations.Up(ctx, db, migrations.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE users (id serial PRIMARY KEY, name text);
		CREATE TABLE posts (id bigserial PRIMARY KEY, user_id int REFERENCES users (id));
		CREATE TABLE pairs (a int, b int, PRIMARY KEY (a, b));
		INSERT INTO users (name) VALUES ('a'), ('b');
		INSERT INTO posts (user_id) VALUES (1), (2);`); err != nil {
		t.Fatal(err)
	}
	return url, db
}

func adoptKeyType(t *testing.T, ctx context.Context, db *sql.DB) string {
	t.Helper()
	var typ string
	if err := db.QueryRowContext(ctx, `SELECT data_type || ' ' || coalesce(column_default, '-') FROM information_schema.columns
		WHERE table_name = 'users' AND column_name = 'id'`).Scan(&typ); err != nil {
		t.Fatal(err)
	}
	return typ
}

// runAdopt runs the adopt command with stdin, as run would (the exit
// status from the error), for the prompt that run reads from os.Stdin.
func runAdopt(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errb strings.Builder
	err := adoptCmd(args, strings.NewReader(stdin), &out, &errb)
	switch {
	case err == nil:
	case errors.Is(err, errUsage):
		code = 2
	default:
		code = 1
	}
	if err != nil {
		errb.WriteString(err.Error())
	}
	return code, out.String(), errb.String()
}

// TestAdoptCommand: --dry-run prints the SQL and its locks and changes
// nothing; without --yes the plan waits for "yes" on stdin; --yes applies;
// a second run has nothing to do.
func TestAdoptCommand(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	url, db := adoptTestDB(t, ctx)
	before := adoptKeyType(t, ctx, db)

	code, out, errOut := runCLI("adopt", "--dry-run", "--database", url, "users", "posts")
	if code != 0 || !strings.Contains(out, "ALTER TABLE public.users ALTER COLUMN id TYPE bigint;") ||
		!strings.Contains(out, "-- public.users: id integer to bigint; rewrites the table") ||
		!strings.Contains(out, "LOCK TABLE public.posts, public.users IN ACCESS EXCLUSIVE MODE;") {
		t.Fatalf("--dry-run = %d, %q, %q", code, out, errOut)
	}
	if got := adoptKeyType(t, ctx, db); got != before {
		t.Fatalf("--dry-run changed users.id: %s -> %s", before, got)
	}

	code, _, errOut = runAdopt("no\n", "--database", url, "users", "posts")
	if code != 1 || !strings.Contains(errOut, "Apply?") || !strings.Contains(errOut, "not applied") {
		t.Errorf("answered no: exit %d, %q", code, errOut)
	}
	if got := adoptKeyType(t, ctx, db); got != before {
		t.Fatalf("a plan answered no changed users.id: %s -> %s", before, got)
	}
	code, _, errOut = runAdopt("yes\n", "--database", url, "users", "posts")
	if code != 0 || !strings.Contains(errOut, "applied") {
		t.Fatalf("answered yes: exit %d, %q", code, errOut)
	}
	if got := adoptKeyType(t, ctx, db); got != "bigint snowflake_id()" {
		t.Errorf("after adopt, users.id is %s", got)
	}
	code, out, _ = runCLI("adopt", "--yes", "--database", url, "users", "posts")
	if code != 0 || !strings.Contains(out, "nothing to do") {
		t.Errorf("a second adopt = %d, %q", code, out)
	}
}

// TestAdoptCommandErrors: usage errors exit 2, refusals 1, each with a
// message.
func TestAdoptCommandErrors(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	url, _ := adoptTestDB(t, ctx)
	t.Setenv("DATABASE_URL", "")
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"adopt", "--database", url}, 2, "name the tables"},
		{[]string{"adopt", "users"}, 2, "DATABASE_URL"},
		{[]string{"adopt", "--lock-timeout", "0s", "--database", url, "users"}, 2, "lock-timeout"},
		{[]string{"adopt", "--frobnicate", "--database", url, "users"}, 2, "frobnicate"},
		{[]string{"adopt", "--worker-bits", "60", "--database", url, "users"}, 2, "WorkerBits"},
		{[]string{"adopt", "--yes", "--database", url, "pairs"}, 1, "composite"},
		{[]string{"adopt", "--yes", "--database", url, "nosuch"}, 1, "no such table"},
	} {
		code, _, errOut := runCLI(c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("%q = exit %d, %q; want %d and %q", c.args, code, errOut, c.code, c.says)
		}
	}
	t.Setenv("DATABASE_URL", url)
	if code, out, errOut := runCLI("adopt", "--dry-run", "users"); code != 0 || !strings.Contains(out, "public.users") {
		t.Errorf("DATABASE_URL: exit %d, %q, %q", code, out, errOut)
	}
}

// TestAdoptCommandAllowTrigger: a BEFORE INSERT trigger that adopt cannot
// prove leaves the key alone is refused, and passes once named with
// --allow-trigger (which may be given more than once).
func TestAdoptCommandAllowTrigger(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	url, db := adoptTestDB(t, ctx)
	if _, err := db.ExecContext(ctx, `CREATE FUNCTION note_key() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN RAISE NOTICE 'key %', NEW.id; RETURN NEW; END $$;
		CREATE TRIGGER note_key BEFORE INSERT ON users FOR EACH ROW EXECUTE FUNCTION note_key();
		CREATE TRIGGER note_key BEFORE INSERT ON posts FOR EACH ROW EXECUTE FUNCTION note_key();`); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runCLI("adopt", "--dry-run", "--database", url, "users", "posts"); code != 1 ||
		!strings.Contains(errOut, "trigger note_key") || !strings.Contains(errOut, "--allow-trigger") {
		t.Errorf("with the triggers: exit %d, %q; want 1 naming them and --allow-trigger", code, errOut)
	}
	if code, out, errOut := runCLI("adopt", "--dry-run", "--database", url, "--allow-trigger", "users.note_key",
		"--allow-trigger", "public.posts.note_key", "users", "posts"); code != 0 || !strings.Contains(out, "public.users") {
		t.Errorf("with the triggers allowed: exit %d, %q, %q", code, out, errOut)
	}
}

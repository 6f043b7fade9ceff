package migrations

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// withParams returns the URL with query parameters added (pgx passes
// unknown ones to the server as run-time parameters, search_path among
// them) and, when user is not "", another user.
func withParams(t *testing.T, raw, user string, params map[string]string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	if user != "" {
		u.User = url.UserPassword(user, "pw")
	}
	return u.String()
}

// randomName returns prefix and 8 random hex digits: a name no other test
// run uses on the shared server.
func randomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// twoStreams calls both functions in one query, n times, and fails if any
// ID comes out of both, or from the wrong worker.
func twoStreams(t *testing.T, db *sql.DB, f1, f2 string, w1, w2 int64) {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT "+f1+", "+f2+" FROM generate_series(1, 50)")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[idtype.ID]string{}
	for rows.Next() {
		var a, b idtype.ID
		if err := rows.Scan(&a, &b); err != nil {
			t.Fatal(err)
		}
		for _, x := range []struct {
			id   idtype.ID
			from string
			w    int64
		}{{a, f1, w1}, {b, f2, w2}} {
			if prev, dup := seen[x.id]; dup {
				t.Fatalf("%s and %s both issued %d", prev, x.from, x.id)
			}
			seen[x.id] = x.from
			if w := idtype.DefaultLayout.Decode(x.id).Worker; w != x.w {
				t.Fatalf("%s issued %d with worker %d, want %d", x.from, x.id, w, x.w)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// exists reports whether a function or table is there.
func exists(t *testing.T, db *sql.DB, regclass string) bool {
	t.Helper()
	var ok bool
	q := "SELECT to_regprocedure($1) IS NOT NULL"
	if !strings.HasSuffix(regclass, ")") {
		q = "SELECT to_regclass($1) IS NOT NULL"
	}
	if err := db.QueryRowContext(t.Context(), q, regclass).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// wantConflict checks that err is ErrWorkerConflict naming every string
// of mention.
func wantConflict(t *testing.T, err error, mention ...string) {
	t.Helper()
	if !errors.Is(err, ErrWorkerConflict) {
		t.Fatalf("Up: %v; want ErrWorkerConflict", err)
	}
	for _, m := range mention {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q does not name %q", err, m)
		}
	}
}

// TestUpTwoSchemas: Up in a second schema of a database that has
// snowflake_id() in public refuses to give it the same reserved worker,
// creates nothing, and works with another worker; the two streams then
// never issue one ID.
func TestUpTwoSchemas(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	ctx := t.Context()
	base := testenv.Postgres(t)
	db := openDB(t, base)
	if err := Up(ctx, db, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA tenant"); err != nil {
		t.Fatal(err)
	}
	tenant := openDB(t, withParams(t, base, "", map[string]string{"search_path": "tenant"}))

	err := Up(ctx, tenant, Options{})
	if err == nil {
		// What the refusal prevents: two streams of one worker.
		twoStreams(t, db, "public.snowflake_id()", "tenant.snowflake_id()", 1023, 1023)
	}
	wantConflict(t, err, "public", "1023", "Options{ReservedWorker: ", "search_path")
	if exists(t, db, "tenant.snowflake_id()") || exists(t, db, "tenant."+VersionTable) {
		t.Fatal("the refused Up created objects in schema tenant")
	}

	if err := Up(ctx, tenant, Options{ReservedWorker: 1000}); err != nil {
		t.Fatal(err)
	}
	twoStreams(t, db, "public.snowflake_id()", "tenant.snowflake_id()", 1023, 1000)
	// Both keep working without options, at every start.
	if err := Up(ctx, tenant, Options{}); err != nil {
		t.Errorf("Up again in tenant: %v", err)
	}
	if err := Up(ctx, db, Options{}); err != nil {
		t.Errorf("Up again in public: %v", err)
	}
	// Moving public onto tenant's number is refused too.
	wantConflict(t, Up(ctx, db, Options{ReservedWorker: 1000}), "tenant", "1000")
	if w, _ := ReservedWorkerOf(ctx, db); w != 1023 {
		t.Errorf("the refused Up changed public's worker to %d", w)
	}
}

// TestUpUserSchema is the way two schemas happen by accident: a role's
// default search_path is "$user", public, so once a schema named after the
// role exists, Up as that role migrates there instead of in public.
func TestUpUserSchema(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	ctx := t.Context()
	base := testenv.Postgres(t)
	admin := openDB(t, base)
	if err := Up(ctx, admin, Options{}); err != nil {
		t.Fatal(err)
	}
	role := randomName("app_")
	ident := pgx.Identifier{role}.Sanitize()
	dbName := strings.TrimPrefix(mustParse(t, base).Path, "/")
	for _, q := range []string{
		"CREATE ROLE " + ident + " LOGIN PASSWORD 'pw'",
		"GRANT ALL ON SCHEMA public TO " + ident,
		"GRANT ALL ON ALL TABLES IN SCHEMA public TO " + ident,
		"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO " + ident,
		"GRANT CREATE ON DATABASE " + pgx.Identifier{dbName}.Sanitize() + " TO " + ident,
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		cctx := context.WithoutCancel(ctx)
		_, _ = admin.ExecContext(cctx, "DROP OWNED BY "+ident+" CASCADE")
		if _, err := admin.ExecContext(cctx, "DROP ROLE "+ident); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	app := openDB(t, withParams(t, base, role, nil))
	// Before the role has a schema of its own, Up finds public.
	if err := Up(ctx, app, Options{}); err != nil {
		t.Fatalf("Up as %s with public migrated: %v", role, err)
	}
	// The role gets its schema, as CREATE SCHEMA AUTHORIZATION makes it.
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA AUTHORIZATION "+ident); err != nil {
		t.Fatal(err)
	}
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
	app = openDB(t, withParams(t, base, role, nil))
	wantConflict(t, Up(ctx, app, Options{}), "public", role)
	if exists(t, admin, role+".snowflake_id()") {
		t.Fatal("the refused Up created snowflake_id() in the role's schema")
	}
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestUpTwoDatabases: databases of one cluster in one ID space never get
// one reserved worker; databases in different spaces, or in none, may.
func TestUpTwoDatabases(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	ctx := t.Context()
	space := randomName("orders_")
	url1, url2, url3 := testenv.Postgres(t), testenv.Postgres(t), testenv.Postgres(t)
	db1, db2, db3 := openDB(t, url1), openDB(t, url2), openDB(t, url3)
	name1 := strings.TrimPrefix(mustParse(t, url1).Path, "/")

	if err := Up(ctx, db1, Options{IDSpace: space}); err != nil {
		t.Fatal(err)
	}
	wantConflict(t, Up(ctx, db2, Options{IDSpace: space}), name1, "1023", space, "Options{ReservedWorker: ")
	if exists(t, db2, "snowflake_id()") {
		t.Fatal("the refused Up created snowflake_id()")
	}
	if err := Up(ctx, db2, Options{IDSpace: space, ReservedWorker: 1000}); err != nil {
		t.Fatal(err)
	}
	// Once recorded, a database stays in its space: Up without the option
	// still checks, and refuses what it refused before.
	if err := Up(ctx, db2, Options{}); err != nil {
		t.Errorf("Up again without Options.IDSpace: %v", err)
	}
	wantConflict(t, Up(ctx, db2, Options{ReservedWorker: 1023}), name1, space)
	// Another space, or none, is another matter.
	if err := Up(ctx, db3, Options{IDSpace: randomName("billing_")}); err != nil {
		t.Errorf("Up in another ID space with worker 1023: %v", err)
	}

	// The two streams of the space, side by side.
	w1, _ := ReservedWorkerOf(ctx, db1)
	w2, _ := ReservedWorkerOf(ctx, db2)
	if w1 == w2 {
		t.Fatalf("both databases of the space use worker %d", w1)
	}
}

// TestUpTwoDatabasesRace: two databases of one space migrated at the same
// moment never both get one worker: at least one Up refuses, and a refused
// Up leaves no record behind, so a later Up finds the database free.
func TestUpTwoDatabasesRace(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	ctx := t.Context()
	for round := range 4 {
		space := randomName("race_")
		dbs := []*sql.DB{openDB(t, testenv.Postgres(t)), openDB(t, testenv.Postgres(t))}
		errs := make([]error, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, db := range dbs {
			wg.Go(func() {
				<-start
				errs[i] = Up(ctx, db, Options{IDSpace: space})
			})
		}
		close(start)
		wg.Wait()
		if errs[0] == nil && errs[1] == nil {
			t.Fatalf("round %d: both databases of space %s migrated with worker 1023", round, space)
		}
		for i, err := range errs {
			if err == nil {
				continue
			}
			if !errors.Is(err, ErrWorkerConflict) {
				t.Fatalf("round %d: database %d: %v; want ErrWorkerConflict", round, i, err)
			}
			if exists(t, dbs[i], "snowflake_id()") {
				t.Fatalf("round %d: the refused Up created snowflake_id()", round)
			}
		}
		if errs[0] != nil && errs[1] != nil {
			// Both saw each other's record: both must have taken theirs
			// back, or neither could ever migrate.
			if err := Up(ctx, dbs[0], Options{IDSpace: space}); err != nil {
				t.Fatalf("round %d: after both were refused, Up alone: %v", round, err)
			}
		}
	}
}

// TestUpIDSpacePrivileges: a role that owns its database but may not set
// snowkey.reserved_workers is refused with ErrIDSpace, which says how to
// allow it, and nothing is created; granted the setting, it migrates. Up
// without an ID space needs no such right.
func TestUpIDSpacePrivileges(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	ctx := t.Context()
	base := testenv.Postgres(t)
	admin := openDB(t, base)
	role := randomName("owner_")
	ident := pgx.Identifier{role}.Sanitize()
	dbIdent := pgx.Identifier{strings.TrimPrefix(mustParse(t, base).Path, "/")}.Sanitize()
	for _, q := range []string{
		"CREATE ROLE " + ident + " LOGIN PASSWORD 'pw'",
		"ALTER DATABASE " + dbIdent + " OWNER TO " + ident,
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		cctx := context.WithoutCancel(ctx)
		for _, q := range []string{
			"ALTER DATABASE " + dbIdent + " OWNER TO CURRENT_USER",
			"REVOKE SET ON PARAMETER " + SpaceSetting + " FROM " + ident,
			"DROP OWNED BY " + ident + " CASCADE",
			"DROP ROLE " + ident,
		} {
			if _, err := admin.ExecContext(cctx, q); err != nil {
				t.Errorf("cleanup: %s: %v", q, err)
			}
		}
	})
	owner := openDB(t, withParams(t, base, role, nil))
	space := randomName("priv_")

	err := Up(ctx, owner, Options{IDSpace: space})
	if !errors.Is(err, ErrIDSpace) || !strings.Contains(err.Error(), "GRANT SET ON PARAMETER "+SpaceSetting) {
		t.Fatalf("Up as a database owner without the grant: %v; want ErrIDSpace saying what to grant", err)
	}
	if exists(t, admin, "snowflake_id()") {
		t.Fatal("the refused Up created snowflake_id()")
	}
	if _, err := admin.ExecContext(ctx, "GRANT SET ON PARAMETER "+SpaceSetting+" TO "+ident); err != nil {
		t.Fatal(err)
	}
	if err := Up(ctx, owner, Options{IDSpace: space}); err != nil {
		t.Fatalf("Up with the grant: %v", err)
	}
	res, err := ReservedWorkers(ctx, owner)
	if err != nil || len(res) != 1 || res[0].Worker != 1023 || res[0].Schema != "public" {
		t.Errorf("ReservedWorkers = %+v, %v", res, err)
	}
}

func TestUpWithoutIDSpaceNeedsNoGrant(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	ctx := t.Context()
	base := testenv.Postgres(t)
	admin := openDB(t, base)
	role := randomName("plain_")
	ident := pgx.Identifier{role}.Sanitize()
	dbIdent := pgx.Identifier{strings.TrimPrefix(mustParse(t, base).Path, "/")}.Sanitize()
	for _, q := range []string{
		"CREATE ROLE " + ident + " LOGIN PASSWORD 'pw'",
		"ALTER DATABASE " + dbIdent + " OWNER TO " + ident,
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		cctx := context.WithoutCancel(ctx)
		for _, q := range []string{
			"ALTER DATABASE " + dbIdent + " OWNER TO CURRENT_USER",
			"DROP OWNED BY " + ident + " CASCADE",
			"DROP ROLE " + ident,
		} {
			if _, err := admin.ExecContext(cctx, q); err != nil {
				t.Errorf("cleanup: %s: %v", q, err)
			}
		}
	})
	if err := Up(ctx, openDB(t, withParams(t, base, role, nil)), Options{}); err != nil {
		t.Fatalf("Up as the database's owner, without an ID space: %v", err)
	}
}

// TestReservedWorkers lists what an app's leases must skip: every schema
// of the database and every database of its space.
func TestReservedWorkers(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	ctx := t.Context()
	space := randomName("list_")
	url1, url2 := testenv.Postgres(t), testenv.Postgres(t)
	db1, db2 := openDB(t, url1), openDB(t, url2)
	if err := Up(ctx, db1, Options{IDSpace: space}); err != nil {
		t.Fatal(err)
	}
	if err := Up(ctx, db2, Options{IDSpace: space, ReservedWorker: 1000}); err != nil {
		t.Fatal(err)
	}
	// A name that needs quoting, in SQL and in the record's literal.
	odd := `te'n\ant`
	if _, err := db2.ExecContext(ctx, "CREATE SCHEMA "+pgx.Identifier{odd}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	tenant := openDB(t, withParams(t, url2, "", map[string]string{"search_path": pgx.Identifier{odd}.Sanitize()}))
	if err := Up(ctx, tenant, Options{ReservedWorker: 999}); err != nil {
		t.Fatal(err)
	}
	name1 := strings.TrimPrefix(mustParse(t, url1).Path, "/")
	name2 := strings.TrimPrefix(mustParse(t, url2).Path, "/")
	got, err := ReservedWorkers(ctx, db2)
	if err != nil {
		t.Fatal(err)
	}
	want := []Reservation{{name2, "public", 1000}, {name2, odd, 999}, {name1, "public", 1023}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReservedWorkers = %+v; want %+v", got, want)
	}
	// db1 sees tenant too: db2's record was rewritten by the Up in tenant.
	got, err = ReservedWorkers(ctx, db1)
	if err != nil || len(got) != 3 {
		t.Errorf("ReservedWorkers from db1 = %+v, %v; want 3", got, err)
	}
	// A third database of the space cannot take any of them.
	db3 := openDB(t, testenv.Postgres(t))
	wantConflict(t, Up(ctx, db3, Options{IDSpace: space, ReservedWorker: 999}), name2, "te'n")
	if err := Up(ctx, db3, Options{IDSpace: space, ReservedWorker: 998}); err != nil {
		t.Fatal(err)
	}
}

package partition

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/chaos"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestMain runs the tests under testenv.Main's budget (benchmarks, which
// take minutes at make bench's sizes, under go test's -timeout alone);
// make chaos adds twice CHAOS_TIME for the chaos tests, which may overrun
// it by some runs of each side.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, chaos.MainBudget(8*time.Minute)))
}

// Event is the model of the partition tests.
type Event struct {
	ID   idtype.ID `gorm:"primaryKey"`
	Kind string    `gorm:"index"`
	Body string
}

// testClock is a clock the test sets; Sleep moves it on, so a generator
// that waits for the next millisecond gets it at once.
type testClock struct{ ns atomic.Int64 }

func newClock(at time.Time) *testClock {
	c := &testClock{}
	c.Set(at)
	return c
}

func (c *testClock) UnixNano() int64       { return c.ns.Load() }
func (c *testClock) Sleep(d time.Duration) { c.ns.Add(int64(d)) }
func (c *testClock) Set(t time.Time)       { c.ns.Store(t.UnixNano()) }

func date(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// openDB returns a fresh database as database/sql and GORM see it.
func openDB(t testing.TB) (*gorm.DB, *sql.DB) {
	t.Helper()
	return openURL(t, testenv.Postgres(t))
}

func openURL(t testing.TB, u string) (*gorm.DB, *sql.DB) {
	t.Helper()
	sqlDB, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqlDB.Close() })
	gdb, err := gorm.Open(postgres.New(postgres.Config{Conn: sqlDB}), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	return gdb, sqlDB
}

// dbClock is the database's clock as a test sets it: a one-row table
// that Maintain reads instead of statement_timestamp(), in the
// transaction of each step, as it reads the real clock. The app's clock
// (Options.Clock) follows it unless a test sets that apart.
type dbClock struct {
	t   testing.TB
	db  *sql.DB
	app *testClock
}

// dbClockSQL is the expression Maintain reads the test's time from.
const dbClockSQL = "(SELECT now FROM public.snowkey_test_clock)"

// newDBClock makes db's clock table, set to at.
func newDBClock(t testing.TB, db *sql.DB, at time.Time) *dbClock {
	t.Helper()
	if _, err := db.Exec("CREATE TABLE IF NOT EXISTS public.snowkey_test_clock (now timestamptz NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	c := &dbClock{t: t, db: db, app: newClock(at)}
	if _, err := db.Exec("DELETE FROM public.snowkey_test_clock"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO public.snowkey_test_clock VALUES ($1)", at); err != nil {
		t.Fatal(err)
	}
	return c
}

// Set moves the database's clock, and the app's, to at.
func (c *dbClock) Set(at time.Time) {
	c.t.Helper()
	if _, err := c.db.Exec("UPDATE public.snowkey_test_clock SET now = $1", at); err != nil {
		c.t.Fatal(err)
	}
	c.app.Set(at)
}

// table returns a Table for name on the default layout that reads the
// time from c (and from c's app clock, unless opts has a Clock).
func (c *dbClock) table(name string, opts Options) *Table {
	c.t.Helper()
	return c.tableWithout(name, opts, defences{})
}

// tableWithout is table with the defences in off switched off.
func (c *dbClock) tableWithout(name string, opts Options, off defences) *Table {
	c.t.Helper()
	if opts.Clock == nil {
		opts.Clock = c.app
	}
	p, err := newWithout(name, idtype.DefaultLayout, opts, off)
	if err != nil {
		c.t.Fatal(err)
	}
	p.readClock(dbClockSQL)
	return p
}

// generator returns a generator on worker on a clock of the test's, and
// the clock.
func generator(t testing.TB, worker int64, at time.Time) (*idtype.Generator, *testClock) {
	t.Helper()
	clk := newClock(at)
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: worker, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return gen, clk
}

// partitions lists the table's partitions, sorted by name.
func partitions(t testing.TB, db *sql.DB, table string) []string {
	t.Helper()
	rows, err := db.Query(`SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = $1::regclass ORDER BY 1`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// where maps each row's key to the partition that holds it.
func where(t testing.TB, db *sql.DB, table string) map[idtype.ID]string {
	t.Helper()
	rows, err := db.Query("SELECT id, tableoid::regclass::text FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[idtype.ID]string{}
	for rows.Next() {
		var id idtype.ID
		var part string
		if err := rows.Scan(&id, &part); err != nil {
			t.Fatal(err)
		}
		if _, dup := out[id]; dup {
			t.Errorf("ID %d is in the table twice", id)
		}
		out[id] = part
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func same(a, b []string) bool { return slices.Equal(a, b) }

// rawTable makes a partitioned table in plain SQL, as an app without GORM
// would.
func rawTable(t testing.TB, db *sql.DB, name string) {
	t.Helper()
	if _, err := db.Exec("CREATE TABLE " + name + " (id bigint PRIMARY KEY, body text) PARTITION BY RANGE (id)"); err != nil {
		t.Fatal(err)
	}
}

// insertAt inserts n rows whose keys gen issues at time at.
func insertAt(t testing.TB, ctx context.Context, gdb *gorm.DB, clk *testClock, at time.Time, n int) []Event {
	t.Helper()
	clk.Set(at)
	batch := make([]Event, n)
	if err := gdb.WithContext(ctx).CreateInBatches(&batch, 1000).Error; err != nil {
		t.Fatal(err)
	}
	return batch
}

func slogTo(w *testenv.LogBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func waitFor(t *testing.T, ctx context.Context, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// scanned lists the tables a plan reads, from EXPLAIN (FORMAT JSON).
func scanned(t *testing.T, conn *sql.Conn, query string, args ...any) []string {
	t.Helper()
	var raw string
	if err := conn.QueryRowContext(context.Background(), "EXPLAIN (FORMAT JSON) "+query, args...).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan map[string]any }
	if err := json.Unmarshal([]byte(raw), &plans); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if r, ok := n["Relation Name"].(string); ok {
			out = append(out, r)
		}
		kids, _ := n["Plans"].([]any)
		for _, k := range kids {
			walk(k.(map[string]any))
		}
	}
	walk(plans[0].Plan)
	sort.Strings(out)
	return out
}

// maintainAtOnce runs Maintain from n goroutines, each with its own
// Table, started together, and returns their reports and errors.
func maintainAtOnce(t *testing.T, ctx context.Context, db *sql.DB, n int, mk func() *Table) ([]Report, []error) {
	t.Helper()
	reps, errs := make([]Report, n), make([]error, n)
	ps := make([]*Table, n)
	for i := range ps {
		ps[i] = mk()
	}
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			reps[i], errs[i] = ps[i].Maintain(ctx, db)
		}()
	}
	start.Done()
	done.Wait()
	return reps, errs
}

// maintainer makes a role that may log in and maintain tables it owns,
// but is no superuser and may not set session_replication_role, as an
// app's role usually is, and returns its name and db's database opened
// as it. db must have its test clock (newDBClock). The role is dropped
// when the test ends.
func maintainer(t testing.TB, db *sql.DB) (string, *sql.DB) {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	role := "maintainer_" + hex.EncodeToString(b[:])
	// The server and database db is on, as the role's URL: the tests
	// connect over TCP with trust authentication.
	var host, dbname string
	var port int
	if err := db.QueryRow("SELECT host(inet_server_addr()), inet_server_port(), current_database()").Scan(&host, &port, &dbname); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT USAGE, CREATE ON SCHEMA public TO " + role,
		"GRANT SELECT ON public.snowkey_test_clock TO " + role,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, stmt := range []string{"REASSIGN OWNED BY " + role + " TO CURRENT_USER", "DROP OWNED BY " + role, "DROP ROLE " + role} {
			if _, err := db.Exec(stmt); err != nil {
				t.Errorf("drop role %s: %s: %v", role, stmt, err)
				return
			}
		}
	})
	u := url.URL{Scheme: "postgres", User: url.User(role), Host: fmt.Sprintf("%s:%d", host, port), Path: "/" + dbname,
		RawQuery: "sslmode=disable"}
	as, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { as.Close() })
	return role, as
}

// own gives role every table of db's public schema (partitions too), so
// that it may maintain them, and lets it read them all.
func own(t testing.TB, db *sql.DB, role string) {
	t.Helper()
	rows, err := db.Query(`SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname <> 'snowkey_test_clock'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	for _, table := range tables {
		if _, err := db.Exec("ALTER TABLE " + table + " OWNER TO " + pgx.Identifier{role}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
}

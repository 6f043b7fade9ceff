package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/workerid"
)

// openDB returns a pool on a fresh database, closed when the test ends.
func openDB(t testing.TB, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// migrated returns a pool on a fresh, migrated database and its URL.
func migrated(t testing.TB, opts Options) (*sql.DB, string) {
	t.Helper()
	url := testenv.Postgres(t)
	db := openDB(t, url)
	if err := Up(context.Background(), db, opts); err != nil {
		t.Fatal(err)
	}
	return db, url
}

// TestFS checks the folder's conventions: NNNNN_name.sql, numbered from 1
// without gaps, each with an Up and a Down section.
func TestFS(t *testing.T) {
	names, err := fs.Glob(FS, "*")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("FS holds no migrations")
	}
	sort.Strings(names)
	re := regexp.MustCompile(`^(\d{5})_[a-z0-9_]+\.sql$`)
	for i, name := range names {
		m := re.FindStringSubmatch(name)
		if m == nil {
			t.Errorf("%s: want NNNNN_lower_case_name.sql", name)
			continue
		}
		if n, _ := strconv.Atoi(m[1]); n != i+1 {
			t.Errorf("%s: number %d, want %d (no gaps)", name, n, i+1)
		}
		b, err := fs.ReadFile(FS, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, mark := range []string{"-- +goose Up", "-- +goose Down"} {
			if !strings.Contains(string(b), mark) {
				t.Errorf("%s: no %q section", name, mark)
			}
		}
	}
}

func TestOptions(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	ctx := context.Background()
	db := openDB(t, "postgres://nowhere.invalid/x") // never reached: options fail first
	for _, tc := range []struct {
		opts Options
		want string // the field named
	}{
		{Options{ReservedWorker: -1}, "ReservedWorker -1"},
		{Options{ReservedWorker: 1024}, "ReservedWorker 1024"},
		{Options{LockTimeout: time.Millisecond}, "LockTimeout 1ms is under 1s"},
		{Options{LockTimeout: -time.Second}, "LockTimeout -1s is negative"},
		{Options{LockTimeout: -1}, "LockTimeout -1ns is negative"},
		{Options{IDSpace: "has space"}, "IDSpace"},
		{Options{IDSpace: "quote'"}, "IDSpace"},
		{Options{IDSpace: strings.Repeat("x", 64)}, "IDSpace"},
	} {
		err := Up(ctx, db, tc.opts)
		if !errors.Is(err, idtype.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Up with %+v: %v, want idtype.ErrInvalidOptions naming %q", tc.opts, err, tc.want)
		}
	}
	if err := Up(ctx, nil, Options{}); !errors.Is(err, idtype.ErrInvalidOptions) {
		t.Errorf("Up(nil): %v, want idtype.ErrInvalidOptions", err)
	}
	if _, err := Version(ctx, nil); !errors.Is(err, idtype.ErrInvalidOptions) {
		t.Errorf("Version(nil): %v, want idtype.ErrInvalidOptions", err)
	}
}

func TestUp(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	ctx := t.Context()
	url := testenv.Postgres(t)
	db := openDB(t, url)

	if v, err := Version(ctx, db); err != nil || v != 0 {
		t.Fatalf("Version before Up = %d, %v; want 0", v, err)
	}
	if _, err := ReservedWorkerOf(ctx, db); !errors.Is(err, ErrNotMigrated) {
		t.Fatalf("ReservedWorkerOf before Up: %v, want ErrNotMigrated", err)
	}
	for range 2 { // the second run finds nothing to do
		if err := Up(ctx, db, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	names, _ := fs.Glob(FS, "*.sql")
	if v, err := Version(ctx, db); err != nil || v != int64(len(names)) {
		t.Fatalf("Version after Up = %d, %v; want %d", v, err, len(names))
	}
	var applied int
	if err := db.QueryRow("SELECT count(*) FROM " + VersionTable + " WHERE version_id > 0").Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != len(names) {
		t.Errorf("%s records %d migrations, want %d", VersionTable, applied, len(names))
	}
	if w, err := ReservedWorkerOf(ctx, db); err != nil || w != workerid.SQLWorker {
		t.Errorf("ReservedWorkerOf = %d, %v; want %d", w, err, workerid.SQLWorker)
	}

	before := time.Now()
	var id idtype.ID
	if err := db.QueryRow("SELECT snowflake_id()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	p := idtype.DefaultLayout.Decode(id)
	if p.Worker != workerid.SQLWorker {
		t.Errorf("snowflake_id() %d has worker %d, want %d", id, p.Worker, workerid.SQLWorker)
	}
	// The database runs on this machine's clock; allow for rounding down
	// to the millisecond.
	if p.Time.Before(before.Truncate(time.Millisecond)) || p.Time.After(after) {
		t.Errorf("snowflake_id() %d is from %v, not between %v and %v", id, p.Time, before, after)
	}
}

// TestUpConcurrent starts app instances together: each has its own pool
// and calls Up at the same moment; all succeed and the migrations run
// once.
func TestUpConcurrent(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	url := testenv.Postgres(t)
	const instances = 4
	dbs := make([]*sql.DB, instances)
	for i := range dbs {
		dbs[i] = openDB(t, url)
	}
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, instances)
	)
	for i, db := range dbs {
		wg.Go(func() {
			<-start
			errs[i] = Up(context.Background(), db, Options{LockTimeout: 30 * time.Second})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("instance %d: %v", i, err)
		}
	}
	var runs, distinct int
	if err := dbs[0].QueryRow("SELECT count(*), count(DISTINCT version_id) FROM "+VersionTable).Scan(&runs, &distinct); err != nil {
		t.Fatal(err)
	}
	if runs != distinct {
		t.Errorf("%d version rows for %d versions: a migration ran twice", runs, distinct)
	}
}

func TestReservedWorker(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	ctx := t.Context()
	db, _ := migrated(t, Options{})

	// A session that has used snowflake_id() already, and so has the
	// reserved worker folded into its cached plan.
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	worker := func() int64 {
		t.Helper()
		var id idtype.ID
		if err := conn.QueryRowContext(ctx, "SELECT snowflake_id()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		return idtype.DefaultLayout.Decode(id).Worker
	}
	if w := worker(); w != 1023 {
		t.Fatalf("worker %d before the change, want 1023", w)
	}

	if err := Up(ctx, db, Options{ReservedWorker: 1000}); err != nil {
		t.Fatal(err)
	}
	if w, err := ReservedWorkerOf(ctx, db); err != nil || w != 1000 {
		t.Errorf("ReservedWorkerOf = %d, %v; want 1000", w, err)
	}
	if w := worker(); w != 1000 {
		t.Errorf("the session that used snowflake_id() before still gets worker %d, want 1000", w)
	}

	// Up without the option keeps the number; with the same number it
	// changes nothing; concurrent instances with the option do not trip
	// over each other.
	if err := Up(ctx, db, Options{}); err != nil {
		t.Fatal(err)
	}
	if w, _ := ReservedWorkerOf(ctx, db); w != 1000 {
		t.Errorf("Up without Options.ReservedWorker reset the number to %d", w)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = Up(ctx, db, Options{ReservedWorker: int64(7 + i%2)}) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Errorf("concurrent Options.ReservedWorker: %v", err)
		}
	}
	if w, _ := ReservedWorkerOf(ctx, db); w != 7 && w != 8 {
		t.Errorf("after concurrent changes the number is %d, want 7 or 8", w)
	}
}

// TestReservedWorkerSkipped: a Postgres pool of package workerid skips
// the number the database's snowflake_id() uses, also when Up moved it
// (Options.ReservedWorker): on a layout of four numbers with 2 reserved,
// the pool leases 0, 1 and 3, and then has none free.
func TestReservedWorkerSkipped(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	ctx := t.Context()
	db, _ := migrated(t, Options{ReservedWorker: 2})
	o := fleetOptions(t, "fleet")
	o.Layout = idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 2, SequenceBits: 12}
	pool, err := workerid.Postgres(db, o)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for range 3 {
		l, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		t.Cleanup(func() { _ = l.Close(context.WithoutCancel(ctx)) })
		got = append(got, l.Worker())
	}
	slices.Sort(got)
	if !slices.Equal(got, []int64{0, 1, 3}) {
		t.Fatalf("leased %v, want [0 1 3]: snowflake_id() uses 2", got)
	}
	if _, err := pool.Acquire(ctx); !errors.Is(err, workerid.ErrNoFreeWorker) {
		t.Fatalf("fourth Acquire: got %v, want workerid.ErrNoFreeWorker", err)
	}
}

// ids calls snowflake_id() n times on one connection.
func ids(ctx context.Context, conn *sql.Conn, n int) ([]idtype.ID, error) {
	rows, err := conn.QueryContext(ctx, "SELECT snowflake_id() FROM generate_series(1, $1)", n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]idtype.ID, 0, n)
	for rows.Next() {
		var id idtype.ID
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// TestSnowflakeIDConcurrent runs snowflake_id() in 8 sessions at once,
// one call per statement as inserts would: every ID is unique, each
// session's IDs increase, and an ID issued after all of them is greater
// than all of them.
func TestSnowflakeIDConcurrent(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	db, _ := migrated(t, Options{})
	ctx := t.Context()
	const sessions, calls = 8, 1500
	got := make([][]idtype.ID, sessions)
	errs := make([]error, sessions)
	var wg sync.WaitGroup
	start := time.Now()
	for s := range sessions {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		wg.Go(func() {
			for range calls / 100 {
				batch, err := ids(ctx, conn, 100)
				if err != nil {
					errs[s] = err
					return
				}
				got[s] = append(got[s], batch...)
			}
		})
	}
	wg.Wait()
	end := time.Now()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := make(map[idtype.ID]int, sessions*calls)
	var largest idtype.ID
	for s, list := range got {
		if len(list) != calls {
			t.Fatalf("session %d got %d IDs", s, len(list))
		}
		for i, id := range list {
			if other, dup := seen[id]; dup {
				t.Fatalf("ID %d issued to session %d and session %d", id, other, s)
			}
			seen[id] = s
			if i > 0 && id <= list[i-1] {
				t.Fatalf("session %d: ID %d after %d", s, id, list[i-1])
			}
			p := idtype.DefaultLayout.Decode(id)
			if p.Worker != workerid.SQLWorker {
				t.Fatalf("ID %d has worker %d", id, p.Worker)
			}
			if p.Time.Before(start.Truncate(time.Millisecond)) || p.Time.After(end) {
				t.Fatalf("ID %d is from %v, outside the run %v..%v", id, p.Time, start, end)
			}
			largest = max(largest, id)
		}
	}
	var last idtype.ID
	if err := db.QueryRow("SELECT snowflake_id()").Scan(&last); err != nil {
		t.Fatal(err)
	}
	if last <= largest {
		t.Errorf("an ID issued after all others, %d, is not greater than the largest before, %d", last, largest)
	}
}

// TestSnowflakeIDStateCheck: the fast path of snowflake_id() keeps a
// value of snowflake_id_seq only in the millisecond and worker of
// snowflake_id_state, read before it. The test stages what callers that
// ran past the end of a millisecond leave behind: snowflake_id_seq inside
// a millisecond m that the state has not started (the state is at m-1,
// the next value at sequence 6 of m). One call of the fast path follows,
// then snowflake_id_slow() starts m, then six more calls. The fast path
// runs as a copy of snowflake_id() with its clock fixed at m, so that
// the verdict does not hang on when the statements run; m is 500 ms
// ahead of the database's clock, so that the millisecond is started at m
// itself (a run where the clock got past m first is not counted; the
// first slow path waits for m, which the next may have passed). The
// defended copy drops the staged value; the control copy, without the
// state check, keeps it, and the start of m hands it out again.
func TestSnowflakeIDStateCheck(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	for _, control := range []bool{false, true} {
		name := "defended"
		if control {
			name = "control: no state check"
		}
		t.Run(name, func(t *testing.T) {
			db, _ := migrated(t, Options{})
			for try := 1; ; try++ {
				if stateCheckRun(ctx, t, db, control) {
					return
				}
				if try == 3 {
					t.Fatalf("in %d tries the clock passed the staged millisecond before it was started", try)
				}
			}
		})
	}
}

// stateCheckRun makes one run of TestSnowflakeIDStateCheck and reports
// whether it met its fault (m was started at m).
func stateCheckRun(ctx context.Context, t *testing.T, db *sql.DB, control bool) bool {
	t.Helper()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	epoch := idtype.DefaultLayout.Epoch.UnixMilli()
	var m int64
	if err := conn.QueryRowContext(ctx, `SELECT floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - $1 + 500`,
		epoch).Scan(&m); err != nil {
		t.Fatal(err)
	}
	var src string
	if err := conn.QueryRowContext(ctx, `SELECT prosrc FROM pg_proc WHERE oid = 'snowflake_id()'::regprocedure`).
		Scan(&src); err != nil {
		t.Fatal(err)
	}
	replace := func(old, new string) {
		t.Helper()
		if strings.Count(src, old) != 1 {
			t.Fatalf("snowflake_id() holds %q %d times, want once:\n%s", old, strings.Count(src, old), src)
		}
		src = strings.Replace(src, old, new, 1)
	}
	// The middle of millisecond m, in Unix seconds.
	replace("clock_timestamp()",
		fmt.Sprintf("to_timestamp((%d + 0.5) / 1000)", m+epoch))
	if control {
		replace("pg_sequence_last_value('public.snowflake_id_state'::regclass)", "nextval('public.snowflake_id_seq'::regclass)")
		replace("WHEN nextval('public.snowflake_id_seq'::regclass)", "WHEN currval('public.snowflake_id_seq'::regclass)")
	}
	if _, err := conn.ExecContext(ctx, `CREATE OR REPLACE FUNCTION snowflake_id_frozen() RETURNS bigint
		LANGUAGE sql VOLATILE AS $frozen$`+src+`$frozen$`); err != nil {
		t.Fatal(err)
	}
	w := workerid.SQLWorker
	staged := m<<22 | w<<12 | 6
	if _, err := conn.ExecContext(ctx, "SELECT setval('snowflake_id_seq', $1), setval('snowflake_id_state', $2)",
		staged-1, (m-1)<<22|w<<12); err != nil {
		t.Fatal(err)
	}
	var got []int64
	call := func(q string) {
		t.Helper()
		var id int64
		if err := conn.QueryRowContext(ctx, q).Scan(&id); err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
	}
	call("SELECT snowflake_id_frozen()")
	call("SELECT snowflake_id_slow()")
	for range 6 {
		call("SELECT snowflake_id_frozen()")
	}
	// m started at m: its first ID, sequence 0, was issued (by the first
	// call's slow path in the defended copy, by the second call in the
	// control's).
	if !slices.Contains(got, m<<22|w<<12) {
		t.Logf("millisecond %d was not started at itself (IDs %v): the clock had passed it; not counted", m, got)
		return false
	}
	seen := map[int64]int{}
	dup := int64(0)
	for i, id := range got {
		if j, ok := seen[id]; ok {
			dup = id
			t.Logf("ID %d issued by call %d and call %d", id, j, i)
		}
		seen[id] = i
	}
	if control {
		if got[0] != staged || dup == 0 {
			t.Fatalf("control: the first call kept %d (staged %d) and the IDs %v hold no duplicate: "+
				"the test would not see a value kept outside the state's millisecond", got[0], staged, got)
		}
		return true
	}
	if got[0] == staged || dup != 0 {
		t.Fatalf("the first call kept %d (staged %d); IDs %v, duplicate %d", got[0], staged, got, dup)
	}
	return true
}

// setState moves snowflake_id()'s state to (ms since the epoch, seq): the
// last ID issued and the millisecond being issued in, on worker
// workerid.SQLWorker.
func setState(t *testing.T, db *sql.DB, ms, seq int64) {
	t.Helper()
	id := ms<<22 | workerid.SQLWorker<<12 | seq
	if _, err := db.Exec("SELECT setval('snowflake_id_seq', $1), setval('snowflake_id_state', $1)", id); err != nil {
		t.Fatal(err)
	}
}

func epochMs(t time.Time) int64 {
	return t.UnixMilli() - idtype.DefaultLayout.Epoch.UnixMilli()
}

// TestSnowflakeIDWaitsForNextMillisecond spends a millisecond's sequence
// (state at sequence 4095 in a millisecond ahead of the clock): the next
// call does not wrap to sequence 0 of the same millisecond, it takes
// sequence 0 of the next one and waits until the clock gets there.
//
// The server's own clock, read in the same statement just before the
// call, says whether the call started before the spent millisecond, and
// an ID past the next millisecond says that snowflake_id() itself read
// the clock after it: only a run that did neither meets the fault. A busy
// machine can delay the statement past it, before the statement or inside
// it; that run is repeated with a longer lead, and the call's result is
// still checked against the clock. A
// snowflake_id() that issued past the next millisecond in every run would
// fail the test after 6 runs.
func TestSnowflakeIDWaitsForNextMillisecond(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	db, _ := migrated(t, Options{})
	ahead := 80 * time.Millisecond
	for try := 1; ; try++ {
		full := epochMs(time.Now().Add(ahead))
		setState(t, db, full, 4095)
		var before, after int64
		var id idtype.ID
		// OFFSET 0 keeps the subquery from being flattened into the
		// outer one, so its clock reading is taken before snowflake_id.
		err := db.QueryRowContext(ctx, `SELECT b.t, snowflake_id(),
				floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - $1
			FROM (SELECT floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - $1 AS t OFFSET 0) AS b`,
			idtype.DefaultLayout.Epoch.UnixMilli()).Scan(&before, &id, &after)
		if err != nil {
			t.Fatal(err)
		}
		p := idtype.DefaultLayout.Decode(id)
		got := epochMs(p.Time)
		if got <= full || got > after {
			t.Fatalf("after a spent millisecond %d the ID is at %d sequence %d; the clock read %d after the call", full, got, p.Sequence, after)
		}
		if p.Sequence != 0 {
			t.Errorf("the first ID after a spent millisecond has sequence %d, want 0", p.Sequence)
		}
		// An ID past full+1 (and not past the clock, checked above) is
		// in the clock's millisecond as snowflake_id() read it, so that
		// read came after the spent millisecond: the statement stalled
		// between the two readings.
		if before >= full || got > full+1 {
			t.Logf("run %d: the call read the clock at %d and then at %d (the millisecond it issued in), not both before the spent millisecond %d: the fault was not reached",
				try, before, got, full)
			if try == 6 {
				t.Fatalf("in 6 runs the call never started before the spent millisecond (last lead %v)", ahead)
			}
			ahead *= 2
			continue
		}
		if after < full+1 {
			t.Errorf("the call returned at %d, before its millisecond %d: it did not wait", after, full+1)
		}
		return
	}
}

// TestSnowflakeIDClockBehind moves the state a minute ahead of the clock,
// as a database clock set back would: the call fails with
// SQLStateClockBehind instead of waiting, and returns before the clock
// reaches the state it would have waited for.
func TestSnowflakeIDClockBehind(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	db, _ := migrated(t, Options{})
	state := time.Now().Add(time.Minute)
	setState(t, db, epochMs(state), 0)
	_, err := db.ExecContext(ctx, "SELECT snowflake_id()")
	returned := time.Now()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != SQLStateClockBehind {
		t.Fatalf("with the clock a minute behind: %v, want SQLSTATE %s", err, SQLStateClockBehind)
	}
	if !returned.Before(state) {
		t.Errorf("the refusal came at %v, after the clock reached the state at %v: it waited", returned, state)
	}
	if !strings.Contains(pgErr.Message, "ms behind the last ID") {
		t.Errorf("message %q does not say what is wrong", pgErr.Message)
	}
}

// TestSnowflakeIDNoLockHeld: the lock is held for the call, not for the
// transaction. A transaction that called snowflake_id() and stays open
// does not block another session; one that rolls back does not hand its
// IDs out again.
func TestSnowflakeIDNoLockHeld(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	db, _ := migrated(t, Options{})
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var inTx idtype.ID
	if err := tx.QueryRowContext(ctx, "SELECT snowflake_id()").Scan(&inTx); err != nil {
		t.Fatal(err)
	}
	var locks int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()").
		Scan(&locks); err != nil {
		t.Fatal(err)
	}
	if locks != 0 {
		t.Errorf("the transaction still holds %d advisory locks after snowflake_id() returned", locks)
	}

	other := issueUnblocked(ctx, t, db, "another session while a transaction that used snowflake_id() is open")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	var after idtype.ID
	if err := db.QueryRowContext(ctx, "SELECT snowflake_id()").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if !(inTx < other && other < after) {
		t.Errorf("IDs %d (rolled back), %d, %d are not increasing", inTx, other, after)
	}
}

// issueUnblocked calls snowflake_id() and returns its ID. It fails the
// test as soon as PostgreSQL shows the call waiting for a lock, as it
// would behind a lock left held, rather than after a timeout.
func issueUnblocked(ctx context.Context, t *testing.T, db *sql.DB, what string) idtype.ID {
	t.Helper()
	type result struct {
		id  idtype.ID
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = db.QueryRowContext(ctx, "SELECT snowflake_id() -- issueUnblocked").Scan(&r.id)
		done <- r
	}()
	for {
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("%s: %v", what, r.err)
			}
			return r.id
		case <-time.After(10 * time.Millisecond):
		}
		var waiting int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%-- issueUnblocked'`).
			Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			t.Fatalf("%s: snowflake_id() waits for a lock", what)
		}
	}
}

// TestSnowflakeIDCancel cancels calls while they wait for the clock and
// checks that nothing is left locked behind them.
func TestSnowflakeIDCancel(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	db, _ := migrated(t, Options{})
	// Each call waits for a state 900 ms ahead, set by the statement
	// before it on the server's own clock, and is cancelled by
	// statement_timeout after 30 ms. A call that found the clock already
	// past the state (a machine stalled for 900 ms between the two
	// statements) did not wait: it is not counted, and another is made.
	canceled, tries := 0, 0
	for ; canceled < 3 && tries < 20; tries++ {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.ExecContext(ctx, `SET statement_timeout = 30;
			SELECT setval('snowflake_id_seq', x), setval('snowflake_id_state', x) FROM (SELECT
				((floor(date_part('epoch', clock_timestamp()) * 1000)::bigint - `+
			strconv.FormatInt(idtype.DefaultLayout.Epoch.UnixMilli(), 10)+` + 900) << 22) | (1023 << 12) AS x) AS s;
			SELECT snowflake_id()`)
		if _, rerr := conn.ExecContext(ctx, "RESET statement_timeout"); rerr != nil {
			t.Fatal(rerr)
		}
		conn.Close()
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			t.Logf("a call did not wait for the state 900 ms ahead: not counted")
		case errors.As(err, &pgErr) && pgErr.Code == "57014": // query_canceled
			canceled++
		default:
			t.Fatalf("a call stopped by statement_timeout: %v", err)
		}
	}
	if canceled < 3 {
		t.Fatalf("%d of %d calls waited for the clock and were cancelled; want 3", canceled, tries)
	}
	setState(t, db, epochMs(time.Now()), 0)
	issueUnblocked(ctx, t, db, "snowflake_id() after cancelled calls")
}

// TestSnowflakeIDWithApp inserts rows into one table from the app, with
// keys from idtype generators, and from plain SQL with DEFAULT
// snowflake_id(), all at once: no key collides, and each row's key
// decodes to the worker that made it.
func TestSnowflakeIDWithApp(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	db, _ := migrated(t, Options{})
	ctx := t.Context()
	if _, err := db.Exec("CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_id(), source text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	const writers, rows = 4, 500
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for w := range writers {
		gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: int64(w + 1)})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { // the app, one insert per row
			for range rows {
				id, err := gen.Next()
				if err == nil {
					_, err = db.ExecContext(ctx, "INSERT INTO events (id, source) VALUES ($1, $2)", id, fmt.Sprintf("app%d", w+1))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() { // plain SQL, one insert per row
			for range rows {
				if _, err := db.ExecContext(ctx, "INSERT INTO events (source) VALUES ('sql')"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r, err := db.Query("SELECT id, source FROM events")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	count := map[string]int{}
	for r.Next() {
		var (
			id     idtype.ID
			source string
		)
		if err := r.Scan(&id, &source); err != nil {
			t.Fatal(err)
		}
		count[source]++
		want := "sql"
		if w := idtype.DefaultLayout.Decode(id).Worker; w != workerid.SQLWorker {
			want = fmt.Sprintf("app%d", w)
		}
		if source != want {
			t.Fatalf("row %d from %s decodes to %s", id, source, want)
		}
	}
	if count["sql"] != writers*rows {
		t.Errorf("%d rows from SQL, want %d", count["sql"], writers*rows)
	}
	for w := 1; w <= writers; w++ {
		if c := count[fmt.Sprintf("app%d", w)]; c != rows {
			t.Errorf("%d rows from app%d, want %d", c, w, rows)
		}
	}
}

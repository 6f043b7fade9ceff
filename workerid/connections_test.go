package workerid

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/helper"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// The fleet helper is one process of TestPostgresConnectionBudget: this
// test binary, run again by chaos.StartHelper. It opens one *sql.DB with
// database/sql's defaults (no bound on open connections) and one Pool,
// which all its leases share, connects and prints "connected", waits for
// the file fleetArgs.Go (so that the fleet starts at once), acquires
// fleetArgs.Leases numbers at once, and
// once every lease has renewed prints "ready", the numbers and how many
// renewals failed (and were retried) on its standard output; then it
// holds them until its standard input closes, and gives them back. Its
// arguments are a fleetArgs (see helperArgs).
const fleetHelper = "fleet-process"

// fleetArgs are the fleet helper's arguments.
type fleetArgs struct {
	DSN      string // PostgreSQL URL
	Leases   int    // how many leases
	MaxConns int    // the pool's Options.MaxConns
	Go       string // the file whose making starts the fleet
}

func fleetProcess() int {
	fail := func(err error) int {
		fmt.Printf("error: %v\n", err)
		return 1
	}
	var args fleetArgs
	if err := readHelperArgs(&args); err != nil {
		return fail(err)
	}
	n, maxConns := args.Leases, args.MaxConns
	db, err := sql.Open("pgx", args.DSN)
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	pool, err := Postgres(db, Options{
		Layout:    idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 11, SequenceBits: 12},
		Namespace: "fleet", MaxConns: maxConns,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		return fail(err)
	}
	fmt.Println("connected")
	for {
		if _, err := os.Stat(args.Go); err == nil {
			break
		}
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	leases := make([]*Lease, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { leases[i], errs[i] = pool.Acquire(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	failures := int64(0)
	for _, l := range leases {
		for l.Status().Renewals < 1 {
			s := l.Status()
			if s.State == Lost || ctx.Err() != nil {
				return fail(fmt.Errorf("worker %d: %v (%v)", l.Worker(), s.State, s.LastError))
			}
			failures = max(failures, s.Failures)
			time.Sleep(20 * time.Millisecond)
		}
	}
	var workers []string
	for _, l := range leases {
		workers = append(workers, strconv.FormatInt(l.Worker(), 10))
	}
	fmt.Printf("ready %s failures %d\n", strings.Join(workers, " "), failures)
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, l := range leases {
		if err := l.Close(context.Background()); err != nil {
			return fail(err)
		}
	}
	return 0
}

// TestPostgresConnectionBudget starts a fleet of 1,024 instances in 64
// processes at once on a PostgreSQL server whose max_connections is 100:
// each process shares one pool among its 16 leases, on a *sql.DB with
// database/sql's defaults, and the pool runs one statement at a time, so
// a process holds one connection at most. Every instance gets its lease,
// and renews it. The control run, whose pools run 16 statements at once,
// opens more connections than the server has, and some processes fail.
// (The two run one after the other: 64 processes at a time.)
func TestPostgresConnectionBudget(t *testing.T) {
	t.Parallel()
	for _, defended := range []bool{true, false} {
		name := map[bool]string{true: "one connection a process", false: "control: 16 connections a process"}[defended]
		t.Run(name, func(t *testing.T) {
			ctx := testenv.Deadline(t, 3*time.Minute)
			srv := private.StartPostgresWith(t, private.PostgresOptions{Settings: []string{"max_connections=100"}})
			migrate(t, srv.URL())
			args := fleetArgs{DSN: srv.URL(), Leases: 16, MaxConns: 1, Go: filepath.Join(t.TempDir(), "go")}
			if !defended {
				args.MaxConns = 16
			}
			procs := make([]*helper.Process, 64)
			for i := range procs {
				procs[i] = helper.Start(t, fleetHelper, helperArgs(t, args))
			}
			// The last line each process printed.
			outputs := make([]string, len(procs))
			read := func(want string) int {
				n := 0
				for i, p := range procs {
					out, _ := os.ReadFile(p.StdoutPath())
					lines := strings.Split(strings.TrimSpace(string(out)), "\n")
					outputs[i] = lines[len(lines)-1]
					if strings.HasPrefix(outputs[i], want) || strings.HasPrefix(outputs[i], "error: ") || p.Exited() {
						n++
					}
				}
				return n
			}
			waitFor(t, 2*time.Minute, "every process to connect", func() bool { return read("connected") == len(procs) })
			if err := os.WriteFile(args.Go, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			db := openDB(t, srv.URL())
			db.SetMaxOpenConns(1)
			peak := 0
			for {
				done := read("ready ")
				var conns int
				if err := db.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'").
					Scan(&conns); err == nil {
					peak = max(peak, conns)
				}
				if done == len(procs) {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("%d of %d processes done when the test's time ran out", done, len(procs))
				}
				time.Sleep(50 * time.Millisecond)
			}
			var workers []int64
			var failed []string
			for i, out := range outputs {
				if !strings.HasPrefix(out, "ready ") {
					failed = append(failed, fmt.Sprintf("process %d: %q %s", i, strings.TrimSpace(out), procs[i].Stderr()))
					continue
				}
				nums, _, _ := strings.Cut(strings.TrimPrefix(out, "ready "), " failures")
				for _, f := range strings.Fields(nums) {
					w, err := strconv.ParseInt(f, 10, 64)
					if err != nil {
						t.Fatalf("process %d printed %q", i, out)
					}
					workers = append(workers, w)
				}
			}
			for _, p := range procs {
				p.CloseStdin()
			}
			slices.Sort(workers)
			distinct := len(slices.Compact(slices.Clone(workers)))
			t.Logf("%d of %d processes got their 16 leases (%d distinct numbers); at most %d connections were open at once",
				len(procs)-len(failed), len(procs), distinct, peak)
			if !defended {
				if len(failed) == 0 {
					t.Fatal("control run: every process got its leases: the test does not reach the server's connection limit")
				}
				return
			}
			if len(failed) > 0 {
				t.Fatalf("%d processes failed; first: %s", len(failed), failed[0])
			}
			if len(workers) != 1024 || distinct != 1024 {
				t.Fatalf("%d leases on %d distinct numbers, want 1,024 on 1,024", len(workers), distinct)
			}
			for i, p := range procs {
				if err := p.Wait(time.Minute); err != nil {
					t.Errorf("process %d: %v\n%s", i, err, p.Stderr())
				}
			}
		})
	}
}

// TestPostgresAppPool: a pool on the app's own connection pool (a pgxpool
// through pgx's stdlib.OpenDBFromPool) serves 40 leases taken at once and
// renewed on at most Options.MaxConns of its connections, leaving the
// rest to the app, which queries through the same pool meanwhile.
func TestPostgresAppPool(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	dsn := testenv.Postgres(t)
	migrate(t, dsn)
	app, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	db := stdlib.OpenDBFromPool(app)
	// Every connection database/sql opens stays open: its count at the
	// end is the most the leases held at once.
	db.SetMaxIdleConns(100)
	t.Cleanup(func() { _ = db.Close() })
	const maxConns = 2
	p, err := Postgres(db, testOptions(t, Options{Layout: sixBits, MaxConns: maxConns, RenewEvery: 200 * time.Millisecond,
		TTL: 2 * time.Second, Margin: 400 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	leases := make([]*Lease, 40)
	var wg sync.WaitGroup
	for i := range leases {
		wg.Go(func() {
			l, err := p.Acquire(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			leases[i] = l
		})
	}
	// The app's own queries go on beside them.
	for range 20 {
		var one int
		if err := app.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	waitFor(t, 30*time.Second, "every lease to renew twice", func() bool {
		for _, l := range leases {
			if l.Status().Renewals < 2 {
				return false
			}
		}
		return true
	})
	if open := db.Stats().OpenConnections; open > maxConns {
		t.Errorf("the leases opened %d connections of the app's pool, want at most MaxConns %d", open, maxConns)
	}
	t.Logf("40 leases renewed on %d connections; the app's pool has %d", db.Stats().OpenConnections, app.Stat().TotalConns())
	for _, l := range leases {
		closeLease(t, l)
	}
}

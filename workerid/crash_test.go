package workerid

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/chaos"
	"github.com/snowkeyhq/snowkey/internal/testing/helper"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// The crash test runs this test binary as worker processes: with
// crashHelperEnv set, TestMain runs crashHelper instead of the tests, with
// the arguments the variable holds, a crashArgs as JSON.
const crashHelperEnv = "WORKERID_CRASH_HELPER"

// crashArgs are a crash-test worker process's arguments.
type crashArgs struct {
	Store  string // redis or postgres
	Target string // Redis address, or PostgreSQL URL
	Prefix string // Redis key prefix
	// Out and Info are the files for the IDs and the helperInfo.
	Out, Info string
	N         int           // how many IDs
	Offset    time.Duration // how far to set its clock off
}

// TestMain runs the helper processes, or the tests within the package's
// budget (several times their usual time on a loaded 2-core machine,
// under the 5 minutes make test gives a package); benchmarks, whose fleets
// take minutes, within an hour.
func TestMain(m *testing.M) {
	helper.Main(map[string]func() int{chaosHelper: chaosIssuer, fleetHelper: fleetProcess})
	if os.Getenv(crashHelperEnv) != "" {
		os.Exit(crashHelper())
	}
	// Benchmarks run as long as -timeout allows (testenv.Main steps aside
	// for them); the chaos schedule adds its time to the budget.
	os.Exit(testenv.Main(m, chaos.MainBudget(6*time.Minute)))
}

// crashLayout has 16 worker numbers, as many as the crash test runs
// processes, so that a restarted process can only get the number of a
// killed one.
var crashLayout = idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 4, SequenceBits: 12}

// crashOptions are the lease timings of the crash test's processes.
func crashOptions(logger *slog.Logger, clock idtype.Clock) Options {
	return Options{
		Layout: crashLayout, Namespace: "crash", TTL: 2 * time.Second, Margin: 400 * time.Millisecond,
		RenewEvery: 500 * time.Millisecond, Logger: logger, Clock: clock,
	}
}

// helperInfo is what a worker process tells the test about its start.
type helperInfo struct {
	Worker  int64 `json:"worker"`
	FloorMs int64 `json:"floor_ms"` // the lease's NotBefore
	AskedMs int64 `json:"asked_ms"` // the process's clock when it called Acquire
	ClockMs int64 `json:"clock_ms"` // the process's clock when Acquire returned
}

// crashHelper is a worker process: it leases a number, writes IDs to a
// file (8 bytes each, little-endian) in batches of 1,000 and, once done,
// holds its lease until its standard input closes.
func crashHelper() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	fail := func(err error) int {
		log.Error("crash helper", "error", err)
		return 1
	}
	var args crashArgs
	if err := json.Unmarshal([]byte(os.Getenv(crashHelperEnv)), &args); err != nil {
		return fail(fmt.Errorf("%s: %w", crashHelperEnv, err))
	}
	n := args.N
	opts := crashOptions(log, offsetClock{idtype.SystemClock(), args.Offset})
	opts.Holder = fmt.Sprintf("crash-helper:%d", os.Getpid())
	var pool *Pool
	var err error
	switch args.Store {
	case "redis":
		opts.KeyPrefix = args.Prefix
		rdb := redis.NewClient(&redis.Options{Addr: args.Target})
		defer rdb.Close()
		pool, err = Redis(rdb, opts)
	default:
		var db *sql.DB
		if db, err = sql.Open("pgx", args.Target); err != nil {
			return fail(err)
		}
		defer db.Close()
		pool, err = Postgres(db, opts)
	}
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// start leases a number, waiting while all are held, and builds a
	// generator on it.
	var asked int64
	start := func() (*Lease, *idtype.Generator, error) {
		for {
			asked = opts.Clock.UnixNano() / 1e6
			l, err := pool.Acquire(ctx)
			if errors.Is(err, ErrNoFreeWorker) {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			g, err := l.NewGenerator()
			return l, g, err
		}
	}
	lease, gen, err := start()
	if err != nil {
		return fail(err)
	}
	st := lease.Status()
	info, _ := json.Marshal(helperInfo{Worker: lease.Worker(), FloorMs: st.NotBefore.UnixMilli(),
		AskedMs: asked, ClockMs: opts.Clock.UnixNano() / 1e6})
	if err := os.WriteFile(args.Info, info, 0o644); err != nil {
		return fail(err)
	}

	out, err := os.OpenFile(args.Out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fail(err)
	}
	defer out.Close()
	buf := make([]byte, 0, 8*1000)
	for done := 0; done < n; {
		id, err := gen.Next()
		switch {
		case err == nil:
			buf = binary.LittleEndian.AppendUint64(buf, uint64(id))
			done++
		case errors.Is(err, idtype.ErrLeaseLost):
			log.Warn("crash helper: lease lost; leasing another number", "error", err)
			if lease, gen, err = start(); err != nil {
				return fail(err)
			}
			continue
		case errors.Is(err, idtype.ErrLeaseExpired), errors.Is(err, idtype.ErrClockBehind):
			time.Sleep(5 * time.Millisecond)
			continue
		default:
			return fail(err)
		}
		if len(buf) == cap(buf) || done == n {
			if _, err := out.Write(buf); err != nil {
				return fail(err)
			}
			buf = buf[:0]
			time.Sleep(2 * time.Millisecond) // spread the IDs over time, so a kill lands midway
		}
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := lease.Close(ctx); err != nil {
		return fail(err)
	}
	return 0
}

// worker is one crash-test process, seen from the test.
type worker struct {
	cmd              *exec.Cmd
	stdin            io.WriteCloser
	out, info        string
	stderr           bytes.Buffer
	done             chan struct{}
	restartedVictim  bool
	expectSuccessful bool
}

// TestCrash runs 16 processes that each lease a number and write 200,000
// IDs; 4 are killed with SIGKILL midway and started again with their
// clock set back 10 s. The restarted ones can only get the killed ones'
// numbers (there are 16), and start after their high-water marks, so the
// union of all files holds no duplicate.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 20 processes")
	}
	t.Parallel() // slow, and mostly waiting: overlap with the rest
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			args := crashArgs{Store: k.name, N: 200000}
			switch k.name {
			case "redis":
				args.Target, args.Prefix = testenv.Redis(t), testenv.KeyPrefix(t)
			default:
				args.Target = testenv.Postgres(t)
				migrate(t, args.Target)
			}
			runCrash(t, self, args)
		})
	}
}

// runCrash runs the crash test's processes, each with args and its own
// files and clock offset.
func runCrash(t *testing.T, self string, args crashArgs) {
	dir := t.TempDir()
	var all []*worker
	startWorker := func(name string, offset time.Duration) *worker {
		w := &worker{out: filepath.Join(dir, name+".ids"), info: filepath.Join(dir, name+".json"), done: make(chan struct{})}
		a := args
		a.Out, a.Info, a.Offset = w.out, w.info, offset
		env, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		w.cmd = exec.Command(self)
		w.cmd.Env = append(os.Environ(), crashHelperEnv+"="+string(env))
		w.cmd.Stderr = &w.stderr
		w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if w.stdin, err = w.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = w.cmd.Wait(); close(w.done) }()
		t.Cleanup(func() {
			_ = w.cmd.Process.Kill()
			<-w.done
		})
		all = append(all, w)
		return w
	}
	size := func(path string) int64 {
		fi, err := os.Stat(path)
		if err != nil {
			return 0
		}
		return fi.Size()
	}

	var first []*worker
	for i := range 16 {
		w := startWorker(fmt.Sprintf("w%02d", i), 0)
		w.expectSuccessful = i >= 4
		first = append(first, w)
	}
	// Kill the first four once each has written 40% of its IDs.
	var killedWorkers []int64
	for _, w := range first[:4] {
		waitFor(t, 60*time.Second, "a worker to write 40% of its IDs", func() bool {
			select {
			case <-w.done:
				t.Fatalf("worker exited before it was killed: %v\n%s", w.cmd.ProcessState, w.stderr.String())
			default:
			}
			return size(w.out) >= 200000*8*4/10
		})
		if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-w.done
		info := readInfo(t, w.info)
		killedWorkers = append(killedWorkers, info.Worker)
		t.Logf("killed worker %d after %d IDs", info.Worker, size(w.out)/8)
	}
	var restarted []*worker
	for i := range 4 {
		w := startWorker(fmt.Sprintf("r%02d", i), -10*time.Second)
		w.restartedVictim, w.expectSuccessful = true, true
		restarted = append(restarted, w)
	}
	// Once all four have their numbers, let every worker finish and
	// give its number back.
	for _, w := range restarted {
		waitFor(t, 60*time.Second, "a restarted worker to lease a number", func() bool { return size(w.info) > 0 })
		info := readInfo(t, w.info)
		if !slices.Contains(killedWorkers, info.Worker) {
			t.Fatalf("restarted worker got number %d, not one of the killed %v", info.Worker, killedWorkers)
		}
		if behind := time.Duration(info.FloorMs-info.ClockMs) * time.Millisecond; behind > 0 {
			t.Fatalf("restarted worker on %d ready with its clock %v behind its floor", info.Worker, behind)
		}
		t.Logf("restarted on worker %d: its clock was %v behind the number's high-water mark; Acquire waited that out",
			info.Worker, time.Duration(info.FloorMs-info.AskedMs)*time.Millisecond)
	}
	for _, w := range all {
		if w.expectSuccessful {
			_ = w.stdin.Close()
		}
	}
	for _, w := range all {
		if !w.expectSuccessful {
			continue
		}
		select {
		case <-w.done:
		case <-time.After(90 * time.Second):
			t.Fatalf("worker %s did not finish", w.out)
		}
		if !w.cmd.ProcessState.Success() {
			t.Fatalf("worker %s: %v\n%s", w.out, w.cmd.ProcessState, w.stderr.String())
		}
	}

	lists := map[string][]idtype.ID{}
	for _, w := range all {
		lists[w.out] = readIDs(t, w.out)
	}
	dups, total := duplicates(lists)
	if dups > 0 {
		t.Fatalf("%d duplicate IDs among %d", dups, total)
	}
	// Each restarted worker's first ID comes after every ID of the
	// killed worker whose number it took, though its clock read 10 s
	// earlier.
	lastOf := map[int64]idtype.ID{}
	for _, w := range first[:4] {
		ids := lists[w.out]
		lastOf[readInfo(t, w.info).Worker] = ids[len(ids)-1]
	}
	for _, w := range restarted {
		info := readInfo(t, w.info)
		last := lastOf[info.Worker]
		if firstID := lists[w.out][0]; firstID <= last {
			t.Fatalf("restarted worker %d began at %d, not after the killed one's last %d", info.Worker, firstID, last)
		}
		// The point of the test: the restarted worker's clock read earlier
		// than the killed worker's last ID, so only the high-water mark
		// kept it from reissuing.
		if lastAt := crashLayout.Decode(last).Time; !unixMsTime(info.AskedMs).Before(lastAt) {
			t.Fatalf("restarted worker %d asked at %s, after the killed one's last ID at %s: its clock was not behind",
				info.Worker, unixMsTime(info.AskedMs), lastAt)
		}
	}
	t.Logf("%d IDs from %d processes, no duplicate", total, len(all))
}

func readInfo(t *testing.T, path string) helperInfo {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var info helperInfo
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return info
}

// readIDs reads a worker's file, dropping a partial last record that a
// kill may have left.
func readIDs(t *testing.T, path string) []idtype.ID {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var ids []idtype.ID
	var rec [8]byte
	for {
		if _, err := io.ReadFull(r, rec[:]); err != nil {
			break
		}
		ids = append(ids, idtype.ID(binary.LittleEndian.Uint64(rec[:])))
	}
	return ids
}

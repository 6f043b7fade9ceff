package workerid

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testing/chaos"
	"github.com/snowkeyhq/snowkey/internal/testing/faultproxy"
	"github.com/snowkeyhq/snowkey/internal/testing/helper"
	"github.com/snowkeyhq/snowkey/internal/testing/history"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// The chaos tests run real generator processes (the chaos helper, see
// chaos_helper_test.go) against real servers, each process through a
// faultproxy.Proxy of its own, and break things the way networks, hosts and
// operators do, one fault kind per test, in a schedule drawn from the
// run's seed. Every ID any process wrote is then checked unique. Each
// fault kind runs again as a control, with the defences against it
// switched off in the processes, and the control must find duplicates:
// that proves the schedule reached the fault.
//
// Lease timings are short (TTL 1 s for most kinds, up to 4 s where a
// fault needs room), so that numbers change hands many times in a few
// seconds; the margins the package doc asks for still hold between the
// processes' clocks.

// chaosTiming is the lease timing of a run's processes.
type chaosTiming struct{ ttl, margin, renew time.Duration }

// fastTiming is the timing of most fault kinds.
var fastTiming = chaosTiming{ttl: time.Second, margin: 250 * time.Millisecond, renew: 250 * time.Millisecond}

// chaosSpec is one fault kind.
type chaosSpec struct {
	fault  string   // its row in the chaos table
	stores []string // redis, postgres, cluster: a run runs on each at once
	timing chaosTiming
	procs  int // generator processes
	bits   int // worker bits: 2^bits numbers
	// hold and pause give process i's hold and pause times (the helper's
	// chaosArgs.Hold and Pause); nil keeps a lease until it is lost.
	hold, pause func(i int) [2]time.Duration
	// offset draws process i's first clock offset.
	offset func(rng *rand.Rand, i int) time.Duration
	// off is the defences a control run switches off in the processes'
	// pools.
	off defences
	// serverDefence, when not empty, names the defence of the kind: the
	// server's setting, which server leaves off for a control run; off is
	// then none.
	serverDefence string
	// server starts the run's own server and returns its address; nil
	// uses the shared ones (a fresh key prefix or database per run).
	server func(r *chaosRun) string
	// schedule runs the faults until the run's end.
	schedule func(r *chaosRun)
	// runTime is how long the schedule runs, at least.
	runTime time.Duration
}

// chaosRun is one run of a fault kind on one store.
type chaosRun struct {
	t       *testing.T
	spec    *chaosSpec
	rng     *rand.Rand
	store   string
	control bool      // a control run: spec.off, or spec.serverDefence, is off
	end     time.Time // the schedule stops starting episodes then

	addr    string // the server the proxies forward to (cluster: the nodes)
	dsn     string // PostgreSQL only
	prefix  string // Redis key prefix
	inspect redis.UniversalClient
	db      *sql.DB
	// redisSrv, replica and cluster are the run's own servers, when the
	// fault kind needs them.
	redisSrv, replica    *private.RedisServer
	replProxy            *faultproxy.Proxy
	cluster              *private.Cluster
	pgPrimary, pgStandby *private.PostgresServer

	mu      sync.Mutex
	procs   []*chaosProc // by slot
	all     []*chaosProc // every process started, restarts too
	files   []string
	started int
	met     string // how the run met its fault, as the schedule saw it; "" if it did not
}

// meet records that the run met its fault, as the schedule observed it.
func (r *chaosRun) meet(how string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.met == "" {
		r.met = how
	}
}

// chaosProc is one generator process and its proxy.
type chaosProc struct {
	slot   int
	status string // the helper's status file (chaosArgs.Status)
	p      *helper.Process
	proxy  *faultproxy.Proxy // nil on a cluster
	offset time.Duration
	killed bool
}

// chaosTest runs spec's fault kind on each of its stores at once, each
// store a chaos.Scenario of its own with its own row: a control counts
// for the store it ran on, never for another. Every run observes whether
// it met its fault (chaosRun.meet) and Scenario judges each side on the
// runs that met it.
func chaosTest(t *testing.T, spec chaosSpec) {
	t.Parallel()
	budget := chaosShare(t)
	// A side may run past its share by Scenario.Retries runs of some
	// seconds each.
	testenv.Deadline(t, budget+10*time.Minute)
	// The stores run at once, each in a subtest of its own that takes no
	// slot of go test's -parallel: the runs mostly wait.
	var wg sync.WaitGroup
	for _, store := range spec.stores {
		wg.Go(func() {
			t.Run(store, func(t *testing.T) { chaosStore(t, &spec, store, budget) })
		})
	}
	wg.Wait()
}

// chaosStore runs spec's scenario on one store: the control side with
// spec's defence switched off, then the defended side.
func chaosStore(t *testing.T, spec *chaosSpec, store string, budget time.Duration) {
	chaos.Scenario{
		Package: "workerid", Fault: spec.fault, Store: store,
		Defence: spec.defence(), Budget: budget,
	}.Run(t, func(t *testing.T, r *chaos.Run) {
		total, dups, met := runChaos(t, spec, store, r.Control, r.Rand)
		r.CountIDs(total)
		if met != "" {
			r.Met("%s", met)
		}
		for _, d := range dups {
			r.Violation("duplicate: %v", d)
		}
	})
}

// chaosShare is one chaos test's share of the package's chaos budget. The
// tests run -parallel at a time, so in the long schedule (CHAOS_TIME) each
// gets that many shares and together they fill the budget; the short one
// keeps to its share, which is one run a side.
func chaosShare(t *testing.T) time.Duration {
	share := chaos.Budget(t) / time.Duration(len(chaosSpecs))
	if chaos.Long() {
		n, err := strconv.Atoi(flag.Lookup("test.parallel").Value.String())
		if err != nil || n < 1 {
			n = 1
		}
		share *= time.Duration(min(n, len(chaosSpecs)))
	}
	return share
}

// runChaos runs one run and returns how many IDs the processes wrote,
// which repeated, and how the run met its fault ("" if it did not).
func runChaos(t *testing.T, spec *chaosSpec, store string, control bool, rng *rand.Rand) (int, []history.Dup, string) {
	r := &chaosRun{t: t, spec: spec, rng: rng, store: store, control: control}
	r.setup()
	for i := range spec.procs {
		var off time.Duration
		if spec.offset != nil {
			off = spec.offset(rng, i)
		}
		r.start(i, off)
	}
	r.end = time.Now().Add(spec.runTime)
	spec.schedule(r)
	return r.finish()
}

// setup gives the run a place in its store and a direct connection to it.
func (r *chaosRun) setup() {
	t := r.t
	switch r.store {
	case "redis":
		if r.spec.server != nil {
			r.addr = r.spec.server(r)
		} else {
			r.addr = testenv.Redis(t)
		}
		r.prefix = testenv.KeyPrefix(t)
		c := redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		r.inspect = c
	case "cluster":
		r.addr = r.spec.server(r)
		r.prefix = "chaos:"
		r.inspect = r.cluster.Client()
	case "postgres":
		if r.spec.server != nil {
			r.dsn = r.spec.server(r)
		} else {
			r.dsn = testenv.Postgres(t)
		}
		migrate(t, r.dsn)
		u, err := url.Parse(r.dsn)
		if err != nil {
			t.Fatal(err)
		}
		r.addr = u.Host
		r.db = openDB(t, r.dsn)
	default:
		t.Fatalf("store %q", r.store)
	}
	if r.inspect != nil {
		// The namespace has lived on this server for longer than a TTL:
		// the processes' first takes wait for no loss window. The fault
		// kinds that lose Redis's data open one.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := redis.NewScript(trustScript).Run(ctx, r.inspect, []string{r.prefix + "{chaos}:meta"}).Err(); err != nil {
			t.Fatalf("trust the namespace's record: %v", err)
		}
	}
}

// start starts the process of slot i with its clock offset off, through
// the slot's proxy.
func (r *chaosRun) start(i int, off time.Duration) {
	t := r.t
	r.mu.Lock()
	for len(r.procs) <= i {
		r.procs = append(r.procs, nil)
	}
	var px *faultproxy.Proxy
	if old := r.procs[i]; old != nil {
		px = old.proxy
	}
	r.started++
	n := r.started
	r.mu.Unlock()
	if px == nil && r.store != "cluster" {
		px = faultproxy.Start(t, r.addr)
	}
	target := r.addr
	switch r.store {
	case "redis":
		target = px.Addr()
	case "postgres":
		// Every execution carries its SQL text, so that a proxy can match
		// statements.
		target = withHost(r.dsn, px.Addr()) + "&default_query_exec_mode=exec"
	}
	hold, pause := [2]time.Duration{}, [2]time.Duration{}
	if r.spec.hold != nil {
		hold = r.spec.hold(i)
	}
	if r.spec.pause != nil {
		pause = r.spec.pause(i)
	}
	tm := r.spec.timing
	dir := t.TempDir()
	out := filepath.Join(dir, fmt.Sprintf("p%d-%d.ids", i, n))
	// The file exists from the start (the process appends to it): a
	// process killed before it opened the file issued nothing, and the
	// check reads an empty file instead of failing on a missing one.
	if err := os.WriteFile(out, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	status := filepath.Join(dir, "status")
	var poolOff []string
	if r.control {
		poolOff = r.spec.off.names()
	}
	p := helper.Start(t, chaosHelper, helperArgs(t, chaosArgs{
		Store: r.store, Target: target, Prefix: r.prefix, Out: out, Offset: off, Bits: r.spec.bits,
		TTL: tm.ttl, Margin: tm.margin, RenewEvery: tm.renew, Hold: hold, Pause: pause,
		Seed: r.rng.Int64(), Off: poolOff, Status: status,
	}))
	c := &chaosProc{slot: i, status: status, p: p, proxy: px, offset: off}
	r.mu.Lock()
	r.procs[i] = c
	r.all = append(r.all, c)
	r.files = append(r.files, out)
	r.mu.Unlock()
}

// defence names the kind's defence, which a control run switches off.
func (s *chaosSpec) defence() string {
	if s.serverDefence != "" {
		return s.serverDefence
	}
	return strings.Join(s.off.names(), " + ")
}

// proc returns the process of slot i.
func (r *chaosRun) proc(i int) *chaosProc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.procs[i]
}

// holders returns, by slot, the number each process holds a live lease
// on, read from the store directly.
func (r *chaosRun) holders() map[int]int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	byHolder := map[string]int64{}
	switch r.store {
	case "postgres":
		rows, err := r.db.QueryContext(ctx, `SELECT worker, holder FROM snowkey_worker_leases
			WHERE namespace = 'chaos' AND owner IS NOT NULL AND expires_at > statement_timestamp()`)
		if err != nil {
			return nil
		}
		defer rows.Close()
		for rows.Next() {
			var w int64
			var h string
			if rows.Scan(&w, &h) == nil {
				byHolder[h] = w
			}
		}
	default:
		live, err := redisLeases(ctx, r.inspect, r.prefix+"{chaos}:leases")
		if err != nil {
			return nil
		}
		for w, tok := range live {
			if h, _, ok := strings.Cut(tok, "/"); ok {
				byHolder[h] = w
			}
		}
	}
	out := map[int]int64{}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, c := range r.procs {
		if w, ok := byHolder["chaos-"+strconv.Itoa(c.p.Pid())]; ok {
			out[i] = w
		}
	}
	return out
}

// renewals returns how many renewals the process has seen confirmed on
// its current lease, by its status file, or -1.
func (c *chaosProc) renewals() int64 {
	b, err := os.ReadFile(c.status)
	if err != nil {
		return -1
	}
	var w, n int64
	if _, err := fmt.Sscan(string(b), &w, &n); err != nil || w < 0 {
		return -1
	}
	return n
}

// holder waits up to timeout for a process to hold a lease and returns
// its slot, one at random when several do, or -1.
func (r *chaosRun) holder(timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for {
		h := r.holders()
		if len(h) > 0 {
			slots := make([]int, 0, len(h))
			for i := range r.spec.procs {
				if _, ok := h[i]; ok {
					slots = append(slots, i)
				}
			}
			return slots[r.rng.IntN(len(slots))]
		}
		if time.Now().After(deadline) {
			return -1
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitUntil polls cond every 20 ms until it holds (true) or timeout
// passes (false).
func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// observe polls cond every 20 ms for d, whatever it finds, and reports
// whether it held at some poll: a fault's window of time stays as the
// schedule drew it while the run watches for the fault to happen.
func observe(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	seen := false
	for time.Now().Before(end) {
		seen = seen || cond()
		time.Sleep(min(20*time.Millisecond, time.Until(end)))
	}
	return seen
}

// takenFrom reports whether a process other than slot holds worker now.
func (r *chaosRun) takenFrom(slot int, worker int64) bool {
	for i, w := range r.holders() {
		if i != slot && w == worker {
			return true
		}
	}
	return false
}

// tookOver reports whether a process that held no number in held holds
// one of held's numbers now.
func (r *chaosRun) tookOver(held map[int]int64) bool {
	numbers := map[int64]bool{}
	for _, w := range held {
		numbers[w] = true
	}
	for i, w := range r.holders() {
		if _, had := held[i]; !had && numbers[w] {
			return true
		}
	}
	return false
}

// startMark returns the high-water mark the current ownership of worker
// started after (Unix ms), or 0.
func (r *chaosRun) startMark(worker int64) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r.store == "postgres" {
		var start sql.NullInt64
		_ = r.db.QueryRowContext(ctx, `SELECT start_after FROM snowkey_worker_leases WHERE namespace = 'chaos' AND worker = $1`,
			worker).Scan(&start)
		return start.Int64
	}
	v, err := r.inspect.HGet(ctx, r.prefix+"{chaos}:leases", strconv.FormatInt(worker, 10)).Result()
	if err != nil {
		return 0
	}
	parts := strings.SplitN(v, "|", 3)
	if len(parts) < 3 {
		return 0
	}
	start, _ := strconv.ParseInt(parts[1], 10, 64)
	return start
}

// renewMore waits until every process in held has seen n more renewals
// confirmed, and returns how far the replica's marks of their numbers are
// behind the master's then (Redis only).
func (r *chaosRun) renewMore(held map[int]int64, n int) time.Duration {
	base := map[int]int64{}
	for i := range held {
		base[i] = r.proc(i).renewals()
	}
	waitUntil(10*r.spec.timing.ttl, func() bool {
		for i := range held {
			if r.proc(i).renewals() < base[i]+int64(n) {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var lag time.Duration
	for _, w := range held {
		key, member := r.prefix+"{chaos}:hw", strconv.FormatInt(w, 10)
		m, err1 := r.inspect.ZScore(ctx, key, member).Result()
		rm, err2 := r.replica.Client().ZScore(ctx, key, member).Result()
		if err1 == nil && err2 == nil {
			lag = max(lag, time.Duration(m-rm)*time.Millisecond)
		}
	}
	return lag
}

// running reports whether the schedule may start another episode.
func (r *chaosRun) running() bool { return time.Now().Before(r.end) }

// sleep sleeps for a duration drawn from [lo, hi).
func (r *chaosRun) sleep(lo, hi time.Duration) { time.Sleep(randDur(r.rng, lo, hi)) }

// finish lifts every fault, lets every process give its number back and
// exit, and checks the IDs.
func (r *chaosRun) finish() (int, []history.Dup, string) {
	t := r.t
	r.mu.Lock()
	procs, all, files := r.procs, r.all, r.files
	r.mu.Unlock()
	for _, c := range procs {
		if c.proxy != nil {
			c.proxy.Thaw()
			c.proxy.SetDelay(0)
			c.proxy.DropReplies(nil, 0)
			c.proxy.SetDropRate(0, nil, nil)
			c.proxy.Restore()
		}
		c.p.Cont()
		c.p.CloseStdin()
	}
	for _, c := range all {
		if c.killed {
			continue
		}
		if err := c.p.Wait(30 * time.Second); err != nil {
			if !r.control {
				t.Errorf("generator process: %v", err)
			} else {
				t.Logf("control run's generator process: %v", err)
			}
			c.p.Kill()
		}
	}
	total, dups, err := history.CheckUniqueFiles(files...)
	if err != nil {
		t.Fatal(err)
	}
	if total == 0 {
		// A busy machine may start the processes, or let them take a
		// lease, too slowly for the schedule: a run without IDs cannot
		// have met its fault, whatever the schedule saw, and is judged to
		// have missed it. A defence that kept every run from issuing
		// would leave its side without the runs that met the fault it
		// needs, which fails the row.
		t.Logf("%s on %s (control %v): %d processes issued no ID: the run missed its fault",
			r.spec.fault, r.store, r.control, len(all))
		return 0, nil, ""
	}
	if len(dups) == 0 && r.control {
		// What the processes did, for a control that missed its fault.
		for _, c := range all {
			t.Logf("process %d (pid %d):\n%s", c.slot, c.p.Pid(), c.p.Stderr())
		}
	}
	r.mu.Lock()
	met := r.met
	r.mu.Unlock()
	t.Logf("%s on %s (control %v): %d processes, %d IDs, %d duplicates; met: %q",
		r.spec.fault, r.store, r.control, len(all), total, len(dups), met)
	return total, dups, met
}

// chaosSpecs are the fault kinds of the package, one TestChaos… each.
var chaosSpecs = map[string]*chaosSpec{
	"delay": {
		// A renewal's reply comes late, and right after it the holder is
		// cut off. Its generator may go on for TTL - Margin from when the
		// renewal was sent; the store keeps the lease for TTL from when it
		// ran, later. Met when another process takes the number while the
		// holder is cut off. Control: time counted from the reply, which is
		// later still, past the mark the next owner starts after.
		fault:  "proxy delay",
		stores: []string{"redis", "postgres"},
		// A renewal's timeout is (TTL - Margin) / 2 = 1.85 s.
		timing: chaosTiming{ttl: 4 * time.Second, margin: 300 * time.Millisecond, renew: 500 * time.Millisecond},
		procs:  3, bits: 0,
		offset:  skew(100 * time.Millisecond),
		off:     defences{noSendTime: true},
		runTime: 4 * time.Second,
		schedule: func(r *chaosRun) {
			tm := r.spec.timing
			for r.running() {
				h := r.holder(5 * time.Second)
				if h < 0 {
					continue
				}
				c := r.proc(h)
				px := c.proxy
				w := r.holders()[h]
				// Each way, more than Margin; a round trip of one delay for
				// the request and up to three for the reply (the proxy
				// delays each chunk, and PostgreSQL's reply may come in
				// several) within the renewal's timeout.
				d := randDur(r.rng, tm.margin+70*time.Millisecond, 450*time.Millisecond)
				px.SetDelay(d)
				time.Sleep(4 * d)
				// Cut the holder off as soon as a delayed renewal's reply
				// has reached it: the store ran that renewal a delay before;
				// the next one, sent on the reply, is still in the proxy.
				prev := c.renewals()
				if !waitUntil(3*tm.ttl, func() bool { n := c.renewals(); return n > prev && prev >= 0 }) {
					px.SetDelay(0)
					continue
				}
				px.Cut()
				px.SetDelay(0)
				if observe(randDur(r.rng, tm.ttl+500*time.Millisecond, tm.ttl+1500*time.Millisecond),
					func() bool { return r.takenFrom(h, w) }) {
					r.meet("another process took the number of a holder cut off on a delayed renewal's reply")
				}
				px.Restore()
				r.sleep(200*time.Millisecond, 600*time.Millisecond)
			}
		},
	},
	"lost reply": {
		// The take-back scenario of TestTakeBackReplyLost, drawn at
		// random: A (slot 0) keeps the only number and is cut off until
		// its lease lapses; B, whose clock is ahead within Margin, takes
		// it, issues and gives it back; A's take-back runs but its reply,
		// and go-redis's resends, are lost (some renewals' replies too).
		// Met when B held the number while A was cut off, and the proxy
		// dropped the reply to A's take-back.
		// Control: renewals do not raise the floor to the ownership's
		// start, and release may lower the mark.
		fault:  "reply dropped after delivery (take-back)",
		stores: []string{"redis", "postgres"},
		timing: chaosTiming{ttl: 2 * time.Second, margin: 700 * time.Millisecond, renew: 400 * time.Millisecond},
		procs:  2, bits: 0,
		hold: func(i int) [2]time.Duration {
			if i == 0 {
				return [2]time.Duration{}
			}
			return [2]time.Duration{400 * time.Millisecond, 800 * time.Millisecond}
		},
		pause: func(i int) [2]time.Duration { return [2]time.Duration{2 * time.Second, 3 * time.Second} },
		offset: func(rng *rand.Rand, i int) time.Duration {
			if i == 0 {
				return 0
			}
			return randDur(rng, 400*time.Millisecond, 650*time.Millisecond)
		},
		off:     defences{noStartFloor: true, noReleaseClamp: true},
		runTime: 4 * time.Second,
		schedule: func(r *chaosRun) {
			tm := r.spec.timing
			a := r.proc(0)
			take := faultproxy.MatchRedisScript(takeScript)
			if r.store == "postgres" {
				take = faultproxy.MatchPGQuery("INSERT INTO snowkey_worker_leases AS l")
			}
			renew := faultproxy.MatchRedisScript(renewScript)
			if r.store == "postgres" {
				renew = faultproxy.MatchPGQuery("RETURNING high_water, start_after")
			}
			for first := true; first || r.running(); first = false {
				if !waitUntil(10*time.Second, func() bool { _, ok := r.holders()[0]; return ok }) {
					r.t.Logf("A did not get the number back")
					return
				}
				a.proxy.SetDropRate(0, nil, nil)
				a.proxy.Cut()
				// B takes the number once A's lease lapses, and gives it back.
				// In the first round A's clock stands still from then until
				// A has the number back (SIGUSR1, see the chaos helper): A
				// then goes on from B's take, behind B's first IDs by B's
				// clock lead (inside Margin) and through the milliseconds B
				// used, however long the machine took to let A back in, so
				// that a control whose floor stays low meets B's IDs. Later
				// rounds keep A's clock as it is (behind by that pause).
				tookIt := waitUntil(3*tm.ttl, func() bool { _, ok := r.holders()[1]; return ok })
				if tookIt && first {
					a.p.Signal(syscall.SIGUSR1)
				}
				waitUntil(3*tm.ttl, func() bool { return len(r.holders()) == 0 })
				a.proxy.DropReplies(take, 4) // the take-back and go-redis's resends
				a.proxy.SetDropRate(0.1, r.rng, renew)
				a.proxy.Restore()
				if err := a.proxy.AwaitDrops(1, 5*time.Second); err != nil {
					r.t.Logf("A's take-back reply was not dropped: %v", err)
				} else if tookIt {
					r.meet("B held A's number while A was cut off, and the reply to A's take-back was dropped")
				}
				time.Sleep(time.Second)
			}
		},
	},
	"cut": {
		// The holder's connections are cut for longer than its TTL;
		// another process takes the number (met when it is seen to).
		// Control: the generator is not stopped when renewals fail.
		fault:  "connection cut",
		stores: []string{"redis", "postgres"},
		timing: fastTiming,
		procs:  3, bits: 0,
		offset:  skew(fastTiming.margin / 2),
		off:     defences{noUntil: true},
		runTime: 4 * time.Second,
		schedule: func(r *chaosRun) {
			tm := r.spec.timing
			for r.running() {
				h := r.holder(5 * time.Second)
				if h < 0 {
					continue
				}
				px, w := r.proc(h).proxy, r.holders()[h]
				px.Cut()
				if observe(randDur(r.rng, 2*tm.ttl+200*time.Millisecond, 3*tm.ttl), func() bool { return r.takenFrom(h, w) }) {
					r.meet("another process took the number of a holder cut off")
				}
				px.Restore()
				r.sleep(100*time.Millisecond, 400*time.Millisecond)
			}
		},
	},
	"kill": {
		// A process is killed with SIGKILL and started again with its
		// clock set back by more than a TTL (a host restored from a
		// snapshot); with as many numbers as processes it can only get
		// the killed one's (met when it is seen to). Control: a new owner
		// does not start after the number's high-water mark.
		fault:  "SIGKILL, restart with the clock set back",
		stores: []string{"redis", "postgres"},
		timing: fastTiming,
		procs:  4, bits: 2,
		offset:  skew(fastTiming.margin / 2),
		off:     defences{noFloor: true},
		runTime: 4 * time.Second,
		schedule: func(r *chaosRun) {
			tm := r.spec.timing
			time.Sleep(tm.ttl) // every process holds a number
			for r.running() {
				i := r.rng.IntN(r.spec.procs)
				c := r.proc(i)
				w, held := r.holders()[i]
				c.p.Kill()
				c.killed = true
				r.start(i, c.offset-randDur(r.rng, 3*tm.ttl/2, 3*tm.ttl))
				if observe(randDur(r.rng, tm.ttl+500*time.Millisecond, 2*tm.ttl), func() bool {
					got, ok := r.holders()[i]
					return held && ok && got == w
				}) {
					r.meet("a process killed and started again with its clock set back took its old number")
				}
			}
		},
	},
	"stop": {
		// The holder is frozen with SIGSTOP for longer than its TTL (a
		// long pause), another process takes the number (met when it is
		// seen to), then it goes on (SIGCONT), its network slow for a
		// moment. Control: the generator is not stopped when renewals fail.
		fault:  "SIGSTOP of a holder",
		stores: []string{"redis", "postgres"},
		timing: fastTiming,
		procs:  3, bits: 0,
		offset:  skew(fastTiming.margin / 2),
		off:     defences{noUntil: true},
		runTime: 5 * time.Second,
		schedule: func(r *chaosRun) {
			tm := r.spec.timing
			for r.running() {
				h := r.holder(5 * time.Second)
				if h < 0 {
					continue
				}
				c, w := r.proc(h), r.holders()[h]
				c.p.Stop()
				// Another process must take the number (and wait out the
				// mark) before this one goes on. It goes on over a slow
				// network, so that its first renewal, which tells it the
				// number is gone, takes a while.
				if observe(randDur(r.rng, 2*tm.ttl+200*time.Millisecond, 2*tm.ttl+600*time.Millisecond),
					func() bool { return r.takenFrom(h, w) }) {
					r.meet("another process took the number of a holder frozen with SIGSTOP")
				}
				c.proxy.SetDelay(randDur(r.rng, 20*time.Millisecond, 60*time.Millisecond))
				c.p.Cont()
				r.sleep(300*time.Millisecond, 800*time.Millisecond)
				c.proxy.SetDelay(0)
			}
		},
	},
	"clock": {
		// Processes whose clocks disagree within Margin give their numbers
		// back and take them again all the time, and are restarted with
		// their clocks set back by up to 2 s; met when a restarted process
		// holds a number whose ownership started after a mark ahead of its
		// clock. Control: a new owner does not start after the number's
		// high-water mark.
		fault:  "clocks set back and skewed within Margin",
		stores: []string{"redis", "postgres"},
		timing: fastTiming,
		procs:  3, bits: 1,
		hold:    func(int) [2]time.Duration { return [2]time.Duration{300 * time.Millisecond, 800 * time.Millisecond} },
		pause:   func(int) [2]time.Duration { return [2]time.Duration{0, 200 * time.Millisecond} },
		offset:  skew(fastTiming.margin / 2),
		off:     defences{noFloor: true},
		runTime: 4 * time.Second,
		schedule: func(r *chaosRun) {
			for r.running() {
				r.sleep(500*time.Millisecond, time.Second)
				i := r.rng.IntN(r.spec.procs)
				c := r.proc(i)
				c.p.CloseStdin() // gives its number back and exits
				if err := c.p.Wait(10 * time.Second); err != nil {
					r.t.Errorf("restart: %v", err)
				}
				off := c.offset - randDur(r.rng, 500*time.Millisecond, 2*time.Second)
				r.start(i, off)
				// Look as soon as the restarted process holds a number, however
				// long a busy machine takes to start it: whether its ownership
				// started after a mark ahead of its clock.
				if waitUntil(10*time.Second, func() bool { _, ok := r.holders()[i]; return ok }) {
					if w, ok := r.holders()[i]; ok && r.startMark(w) > time.Now().Add(off).UnixMilli() {
						r.meet("a process restarted with its clock set back took a number whose mark was ahead of its clock")
					}
				}
			}
		},
	},
	"redis restart": {
		// Redis is killed and restarted without persistence while two
		// processes hold the two numbers and are cut off from it; the two
		// others take the numbers from the empty Redis (met when one is
		// seen to). Control: new owners do not wait out the loss window.
		fault:  "Redis restarted without persistence",
		stores: []string{"redis"},
		timing: fastTiming,
		procs:  4, bits: 1,
		offset: skew(fastTiming.margin / 2),
		off:    defences{noLossWait: true},
		server: func(r *chaosRun) string {
			r.redisSrv = private.StartRedis(r.t)
			return r.redisSrv.Addr()
		},
		runTime: 3 * time.Second,
		schedule: func(r *chaosRun) {
			tm := r.spec.timing
			for first := true; first || r.running(); first = false {
				waitUntil(5*tm.ttl, func() bool { return len(r.holders()) == 2 })
				held := r.holders()
				for i := range r.spec.procs {
					r.proc(i).proxy.Cut()
				}
				r.redisSrv.Kill()
				r.redisSrv.Restart()
				for i := range r.spec.procs {
					if _, ok := held[i]; !ok {
						r.proc(i).proxy.Restore()
					}
				}
				if observe(randDur(r.rng, tm.ttl/2, tm.ttl), func() bool { return r.tookOver(held) }) {
					r.meet("a process took a number of a holder that Redis forgot in a restart")
				}
				for i := range held {
					r.proc(i).proxy.Restore()
				}
				time.Sleep(tm.ttl)
			}
		},
	},
	"failover": {
		// Replication to the replica stops (frozen) while the holders renew
		// two or three times more; then the processes are cut off, the
		// replica is promoted and their proxies retargeted to it: first
		// those that held no number, later the old holders. Met when the
		// replica's marks lagged the master's by more than Margin and a
		// process took a number from it. Control: new owners do not wait
		// out the loss window.
		fault:  "failover to a lagging replica",
		stores: []string{"redis"},
		timing: fastTiming,
		procs:  4, bits: 1,
		offset: skew(fastTiming.margin / 2),
		off:    defences{noLossWait: true},
		server: func(r *chaosRun) string {
			r.redisSrv = private.StartRedis(r.t)
			r.replProxy = faultproxy.Start(r.t, r.redisSrv.Addr())
			r.replica = private.StartRedisReplica(r.t, r.replProxy.Addr())
			return r.redisSrv.Addr()
		},
		runTime: 0, // one failover per run
		schedule: func(r *chaosRun) {
			tm := r.spec.timing
			waitUntil(5*tm.ttl, func() bool { return len(r.holders()) == 2 })
			held := r.holders()
			r.replica.WaitSynced(r.redisSrv.Addr(), 10*time.Second)
			r.replProxy.Freeze()
			lag := r.renewMore(held, 2+r.rng.IntN(2))
			held = r.holders()
			for i := range r.spec.procs {
				r.proc(i).proxy.Cut()
			}
			r.replica.Promote()
			r.replProxy.Cut()
			r.inspect = r.replica.Client()
			for i := range r.spec.procs {
				px := r.proc(i).proxy
				px.Retarget(r.replica.Addr())
				if _, ok := held[i]; !ok {
					px.Restore()
				}
			}
			if observe(randDur(r.rng, tm.ttl/2, tm.ttl), func() bool { return r.tookOver(held) }) && lag > tm.margin {
				r.meet(fmt.Sprintf("a process took a number from a replica whose marks lagged the master's by %v", lag))
			}
			for i := range held {
				r.proc(i).proxy.Restore()
			}
			time.Sleep(2 * tm.ttl)
		},
	},
	"pg failover": {
		// Replication from the primary to its streaming standby stalls
		// (frozen) while the holders renew and the others try to take
		// numbers; then the processes are cut off, the standby is promoted
		// and their proxies retargeted to it: first those that held no
		// number, later the old holders. Met when the stall met a lease
		// statement (committed on the primary alone, or waiting for the
		// standby) and the standby lagged the primary. The defence is the
		// server's: a synchronous standby, so that no take or renewal
		// counts as done before the standby has it. Control: an
		// asynchronous standby.
		fault:         "failover to a lagging PostgreSQL standby",
		stores:        []string{"postgres"},
		timing:        fastTiming,
		procs:         4,
		bits:          1,
		offset:        skew(fastTiming.margin / 2),
		serverDefence: "synchronous standby",
		server:        startPostgresPair,
		runTime:       0, // one failover per run
		schedule: func(r *chaosRun) {
			tm := r.spec.timing
			waitUntil(5*tm.ttl, func() bool { return len(r.holders()) == 2 })
			held := r.holders()
			r.replProxy.Freeze()
			how, lag := r.pgStall(held)
			for i := range r.spec.procs {
				r.proc(i).proxy.Cut()
			}
			r.pgStandby.Promote()
			r.replProxy.Cut()
			if how != "" && lag > 0 {
				r.meet(fmt.Sprintf("%s; the standby was %d bytes of WAL behind when promoted", how, lag))
			}
			for i := range r.spec.procs {
				px := r.proc(i).proxy
				px.Retarget(r.pgStandby.Addr())
				if _, ok := held[i]; !ok {
					px.Restore()
				}
			}
			r.sleep(tm.ttl/2, tm.ttl)
			for i := range held {
				r.proc(i).proxy.Restore()
			}
			time.Sleep(2 * tm.ttl)
		},
	},
	"migration": {
		// The namespace's slot moves between the nodes of a private Redis
		// Cluster, one key at a time with pauses, again and again, while
		// processes give numbers back and take them; met when the slot
		// moved with the namespace's keys. Control: the take script builds
		// the names of the keys it touches itself (undeclared), and, since
		// the high-water mark alone keeps the IDs of two owners apart, a
		// new owner does not start after it either.
		fault:  "Cluster slot migration",
		stores: []string{"cluster"},
		// Renewals slow enough that an owner learns late that another
		// took its number: the control's duplicates need that window.
		timing: chaosTiming{ttl: 2 * time.Second, margin: 400 * time.Millisecond, renew: 600 * time.Millisecond},
		// Two processes keep their numbers; three share the other two,
		// giving them back and taking them all the time, so that takes
		// meet the slot half moved while the keepers issue.
		procs: 5, bits: 2,
		hold: func(i int) [2]time.Duration {
			if i < 2 {
				return [2]time.Duration{}
			}
			return [2]time.Duration{300 * time.Millisecond, 800 * time.Millisecond}
		},
		pause: func(int) [2]time.Duration { return [2]time.Duration{0, 100 * time.Millisecond} },
		off:   defences{noDeclaredKeys: true, noFloor: true},
		server: func(r *chaosRun) string {
			r.cluster = private.StartRedisCluster(r.t, 3)
			return strings.Join(r.cluster.Addrs(), ",")
		},
		runTime: 4 * time.Second,
		schedule: func(r *chaosRun) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			slot, err := r.cluster.KeySlot(ctx, r.prefix+"{chaos}:hw")
			if err != nil {
				r.t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond)
			for r.running() {
				from, err := r.cluster.SlotOwner(ctx, slot)
				if err != nil {
					r.t.Fatal(err)
				}
				to := (from + 1 + r.rng.IntN(2)) % 3
				moved, err := r.cluster.MigrateSlot(ctx, slot, to, private.MigrateOptions{Batch: 1,
					Step: func(int) error {
						r.sleep(150*time.Millisecond, 400*time.Millisecond)
						return nil
					}})
				if moved > 0 {
					r.meet("the namespace's slot moved with its keys while processes took and renewed leases")
				}
				if err != nil {
					if !r.control {
						r.t.Errorf("migrate slot %d: %v", slot, err)
					} else {
						// Two owners of one number leave a lease key on each
						// node, and MIGRATE refuses to overwrite one.
						r.t.Logf("control run: migrate slot %d: %v", slot, err)
					}
					time.Sleep(time.Second)
					return
				}
				r.t.Logf("slot %d moved from node %d to %d with %d keys", slot, from, to, moved)
				r.sleep(100*time.Millisecond, 500*time.Millisecond)
			}
		},
	},
}

// startPostgresPair starts a primary and a streaming standby of it behind
// r.replProxy, for the PostgreSQL failover kind, and returns the
// primary's URL. The standby is synchronous (synchronous_standby_names
// '*', synchronous_commit on) unless the run is a control.
func startPostgresPair(r *chaosRun) string {
	t := r.t
	settings := private.PostgresOptions{Settings: []string{"synchronous_commit=on"}}
	r.pgPrimary = private.StartPostgresWith(t, settings)
	r.replProxy = faultproxy.Start(t, r.pgPrimary.Addr())
	r.pgStandby = private.StartPostgresStandby(t, r.replProxy.Addr(), settings)
	if r.control {
		return r.pgPrimary.URL()
	}
	db := openDB(t, r.pgPrimary.URL())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, q := range []string{"ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if !waitUntil(30*time.Second, func() bool {
		var state string
		err := db.QueryRowContext(ctx, "SELECT sync_state FROM pg_stat_replication").Scan(&state)
		return err == nil && state == "sync"
	}) {
		t.Fatal("the standby did not become synchronous")
	}
	return r.pgPrimary.URL()
}

// pgStall waits until the stall of replication has met the leases:
// renewals that the primary confirmed and the standby never got (two more
// for every holder: an asynchronous standby), or a lease statement waiting
// for the standby (a synchronous one), and returns which, with the
// standby's lag in bytes of WAL.
func (r *chaosRun) pgStall(held map[int]int64) (string, int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*r.spec.timing.ttl)
	defer cancel()
	base := map[int]int64{}
	for i := range held {
		base[i] = r.proc(i).renewals()
	}
	var how string
	waitUntil(10*r.spec.timing.ttl, func() bool {
		renewed := true
		for i := range held {
			renewed = renewed && r.proc(i).renewals() >= base[i]+2
		}
		var waiting int
		if err := r.db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event = 'SyncRep'`).Scan(&waiting); err != nil {
			return false
		}
		switch {
		case renewed:
			how = "every holder had two more renewals confirmed by the primary after replication stalled"
		case waiting > 0:
			how = fmt.Sprintf("%d lease statements waited for the synchronous standby", waiting)
		}
		return how != ""
	})
	var sent, received string
	_ = r.db.QueryRowContext(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&sent)
	sdb := openDB(r.t, r.pgStandby.URL())
	_ = sdb.QueryRowContext(ctx, "SELECT pg_last_wal_receive_lsn()::text").Scan(&received)
	var lag int64
	_ = r.db.QueryRowContext(ctx, "SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::bigint", sent, received).Scan(&lag)
	_ = sdb.Close()
	return how, lag
}

// skew draws clock offsets within ±d.
func skew(d time.Duration) func(rng *rand.Rand, i int) time.Duration {
	return func(rng *rand.Rand, _ int) time.Duration { return randDur(rng, -d, d) }
}

func TestChaosDelay(t *testing.T)        { chaosTest(t, *chaosSpecs["delay"]) }
func TestChaosLostReply(t *testing.T)    { chaosTest(t, *chaosSpecs["lost reply"]) }
func TestChaosCut(t *testing.T)          { chaosTest(t, *chaosSpecs["cut"]) }
func TestChaosKill(t *testing.T)         { chaosTest(t, *chaosSpecs["kill"]) }
func TestChaosStop(t *testing.T)         { chaosTest(t, *chaosSpecs["stop"]) }
func TestChaosClock(t *testing.T)        { chaosTest(t, *chaosSpecs["clock"]) }
func TestChaosRedisRestart(t *testing.T) { chaosTest(t, *chaosSpecs["redis restart"]) }
func TestChaosFailover(t *testing.T)     { chaosTest(t, *chaosSpecs["failover"]) }
func TestChaosSlotMigration(t *testing.T) {
	chaosTest(t, *chaosSpecs["migration"])
}
func TestChaosPostgresFailover(t *testing.T) { chaosTest(t, *chaosSpecs["pg failover"]) }

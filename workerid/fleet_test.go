package workerid

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
)

// The fleet benchmarks start whole fleets of instances on a private
// server, as goroutines, each instance with its own Pool; instances share
// clients and connection pools in groups of fleetGroup, the way the
// instances of one process would. They report what a fleet costs the
// store: time until the last instance holds its lease, failed Acquires and
// renewals, the server's CPU, the longest single script or statement, and
// the renewal load once the fleet runs.

// fleetGroup is how many instances share a client (a process).
const fleetGroup = 1024

// fleetConns is how many connections each process's *sql.DB may open: 64
// processes of a 65,535-instance fleet hold 256 of PostgreSQL's 300.
const fleetConns = 4

// fleetServer is a private server a fleet runs on, and what it tells of
// itself.
type fleetServer struct {
	kind string
	// pool makes an instance's pool on its group's client.
	pool func(b *testing.B, group int, o Options) *Pool
	// cpu returns the server's CPU time so far.
	cpu func(b *testing.B) time.Duration
	// scripts returns, since reset, the longest script or statement, the
	// 99th percentile of their times (Redis; PostgreSQL gives 0), and
	// their mean.
	scripts func(b *testing.B) scriptTimes
	reset   func(b *testing.B)
	// trust gives a namespace an old record (Redis).
	trust func(b *testing.B, p *Pool)
	// baseline, on Redis, runs one GET of a missing key, an O(1) command
	// whose times since reset (baselineTimes) show what the machine adds
	// to any command: the longest script is judged beside the longest GET.
	baseline      func(ctx context.Context) error
	baselineTimes func(b *testing.B) scriptTimes
	// url is PostgreSQL's connection URL ("" on Redis).
	url string
}

func startFleetServer(b *testing.B, kind string) *fleetServer {
	ctx := context.Background()
	switch kind {
	case "redis":
		srv := private.StartRedis(b, "--latency-tracking", "yes", "--latency-tracking-info-percentiles", "50 99 100",
			"--maxclients", "20000")
		var mu sync.Mutex
		clients := map[int]*redis.Client{}
		admin := srv.Client()
		return &fleetServer{
			kind: kind,
			pool: func(b *testing.B, group int, o Options) *Pool {
				mu.Lock()
				c := clients[group]
				if c == nil {
					c = redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 16, PoolTimeout: time.Minute, Protocol: 2})
					clients[group] = c
					b.Cleanup(func() { _ = c.Close() })
				}
				mu.Unlock()
				p, err := Redis(c, o)
				if err != nil {
					b.Fatal(err)
				}
				return p
			},
			cpu: func(b *testing.B) time.Duration {
				info := srv.Info("cpu")
				user, _ := strconv.ParseFloat(info["used_cpu_user"], 64)
				sys, _ := strconv.ParseFloat(info["used_cpu_sys"], 64)
				return time.Duration((user + sys) * float64(time.Second))
			},
			scripts: func(b *testing.B) scriptTimes {
				return redisTimes(srv.Info("latencystats"), srv.Info("commandstats"), "evalsha", "eval")
			},
			baseline: func(ctx context.Context) error {
				if err := admin.Get(ctx, "snowkey-bench-baseline").Err(); err != nil && !errors.Is(err, redis.Nil) {
					return err
				}
				return nil
			},
			baselineTimes: func(b *testing.B) scriptTimes {
				return redisTimes(srv.Info("latencystats"), srv.Info("commandstats"), "get")
			},
			reset: func(b *testing.B) {
				if err := admin.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
			},
			trust: func(b *testing.B, p *Pool) { trustRecord(b, p) },
		}
	case "postgres":
		srv := private.StartPostgresWith(b, private.PostgresOptions{Settings: []string{
			"max_connections=300", "shared_preload_libraries=pg_stat_statements",
		}})
		migrate(b, srv.URL())
		admin := openDB(b, srv.URL())
		admin.SetMaxOpenConns(1)
		if _, err := admin.ExecContext(ctx, "CREATE EXTENSION pg_stat_statements"); err != nil {
			b.Fatal(err)
		}
		var mu sync.Mutex
		dbs := map[int]*sql.DB{}
		return &fleetServer{
			kind: kind,
			url:  srv.URL(),
			pool: func(b *testing.B, group int, o Options) *Pool {
				mu.Lock()
				db := dbs[group]
				if db == nil {
					db = openDB(b, srv.URL())
					db.SetMaxOpenConns(fleetConns)
					db.SetMaxIdleConns(fleetConns)
					dbs[group] = db
				}
				mu.Unlock()
				p, err := Postgres(db, o)
				if err != nil {
					b.Fatal(err)
				}
				return p
			},
			cpu: func(b *testing.B) time.Duration { return treeCPU(b, srv.Pid()) },
			scripts: func(b *testing.B) scriptTimes {
				var longest, mean sql.NullFloat64
				err := admin.QueryRowContext(ctx, `SELECT max(max_exec_time), sum(total_exec_time) / sum(calls)
					FROM pg_stat_statements WHERE query LIKE '%snowkey_worker_leases%'`).Scan(&longest, &mean)
				if err != nil {
					b.Fatal(err)
				}
				ms := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
				rows, err := admin.QueryContext(ctx, `SELECT calls, mean_exec_time, max_exec_time, left(regexp_replace(query, '\s+', ' ', 'g'), 60)
					FROM pg_stat_statements WHERE query LIKE '%snowkey_worker_leases%' ORDER BY total_exec_time DESC`)
				if err == nil {
					for rows.Next() {
						var calls int64
						var mean, mx float64
						var q string
						_ = rows.Scan(&calls, &mean, &mx, &q)
						b.Logf("%8d calls, mean %.3f ms, max %.1f ms: %s", calls, mean, mx, q)
					}
					rows.Close()
				}
				return scriptTimes{longest: ms(longest.Float64), mean: ms(mean.Float64)}
			},
			reset: func(b *testing.B) {
				if _, err := admin.ExecContext(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
					b.Fatal(err)
				}
			},
			trust: func(*testing.B, *Pool) {},
		}
	}
	b.Fatalf("store %q", kind)
	return nil
}

// scriptTimes are the times of a server's scripts or statements.
type scriptTimes struct{ longest, p99, mean time.Duration }

// redisTimes reads the longest, 99th percentile and mean time of the
// commands cmds from Redis's INFO latencystats and commandstats.
func redisTimes(latency, commands map[string]string, cmds ...string) scriptTimes {
	var st scriptTimes
	us := func(x float64) time.Duration { return time.Duration(x * float64(time.Microsecond)) }
	fields := func(v string, f func(name string, x float64)) {
		for _, kv := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(kv, "=")
			x, _ := strconv.ParseFloat(val, 64)
			f(name, x)
		}
	}
	var calls, usec float64
	for _, cmd := range cmds {
		fields(latency["latency_percentiles_usec_"+cmd], func(name string, x float64) {
			switch name {
			case "p100":
				st.longest = max(st.longest, us(x))
			case "p99":
				st.p99 = max(st.p99, us(x))
			}
		})
		fields(commands["cmdstat_"+cmd], func(name string, x float64) {
			switch name {
			case "calls":
				calls += x
			case "usec":
				usec += x
			}
		})
	}
	if calls > 0 {
		st.mean = us(usec / calls)
	}
	return st
}

// report reports the times: on a machine that runs other work the
// longest includes the time the server waited for a core.
func (st scriptTimes) report(b *testing.B) {
	b.ReportMetric(float64(st.longest)/float64(time.Millisecond), "longest-ms")
	if st.p99 > 0 {
		b.ReportMetric(float64(st.p99)/float64(time.Millisecond), "p99-ms")
	}
	b.ReportMetric(float64(st.mean)/float64(time.Microsecond), "mean-us")
}

// selfCPU returns the CPU time of this process: the fleet's instances.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTicks is the unit of /proc/PID/stat's times (USER_HZ).
const clockTicks = 100

// treeCPU returns the CPU time of process pid and of every process it
// started: its own, that of its children it has reaped (PostgreSQL's
// backends that ended), and that of its children still running.
func treeCPU(b *testing.B, pid int) time.Duration {
	stat := func(pid int) []string {
		raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return nil
		}
		// The fields after the command name, which is in parentheses.
		s := string(raw)
		return strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	}
	ticks := func(f []string, from, to int) int64 {
		var n int64
		for i := from; i <= to && i < len(f); i++ {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			n += v
		}
		return n
	}
	// Fields (from 3, the state, at index 0): ppid 1, utime 11, stime 12,
	// cutime 13, cstime 14.
	total := ticks(stat(pid), 11, 14)
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		child, _ := strconv.Atoi(filepath.Base(d))
		f := stat(child)
		if len(f) > 14 && f[1] == strconv.Itoa(pid) {
			total += ticks(f, 11, 12)
		}
	}
	return time.Duration(total) * time.Second / clockTicks
}

// fleetMeter counts what a fleet's stores do, from the instances' side.
type fleetMeter struct {
	start                    time.Time
	renewals, failedRenewals atomic.Int64
	ticks                    []atomic.Int64 // renewals sent in each 100 ms since start
	failedAcquires           atomic.Int64
	mu                       sync.Mutex
	errs                     map[string]int // failures by their message, for the log
}

// failed counts a failure by its message, without the parts that vary.
func (m *fleetMeter) failed(err error) {
	msg := err.Error()
	if i := strings.IndexAny(msg, "0123456789"); i > 0 {
		msg = msg[:i]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.errs == nil {
		m.errs = map[string]int{}
	}
	m.errs[msg]++
}

func newFleetMeter() *fleetMeter {
	return &fleetMeter{start: time.Now(), ticks: make([]atomic.Int64, 36000)}
}

// metered is an instance's store, counted by a fleetMeter.
type metered struct {
	store
	m *fleetMeter
}

func (s metered) renew(ctx context.Context, worker int64, token string, ttl, reserve int64) (renewal, error) {
	if i := int(time.Since(s.m.start) / (100 * time.Millisecond)); i < len(s.m.ticks) {
		s.m.ticks[i].Add(1)
	}
	r, err := s.store.renew(ctx, worker, token, ttl, reserve)
	s.m.renewals.Add(1)
	if err != nil || !r.held {
		s.m.failedRenewals.Add(1)
		if err != nil {
			s.m.failed(err)
		}
	}
	return r, err
}

// fleet is a fleet of instances on one server, one lease each.
type fleet struct {
	srv    *fleetServer
	m      *fleetMeter
	layout idtype.Layout
	pools  []*Pool
	leases []*Lease
	ready  []time.Duration // when each instance's lease was ready, since the meter's start
}

// fleetLayout has bits worker bits, and the sequence bits that leave 41
// bits of time.
func fleetLayout(bits uint) idtype.Layout {
	return idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: bits, SequenceBits: 22 - bits}
}

// newFleet makes n instances' pools on srv (none has a lease yet), counted
// by m.
func newFleet(b *testing.B, srv *fleetServer, layout idtype.Layout, n int, o Options, m *fleetMeter) *fleet {
	f := &fleet{srv: srv, m: m, layout: layout}
	o.Layout, o.Namespace = layout, "fleet"
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	f.pools = make([]*Pool, n)
	for i := range n {
		oi := o
		oi.Holder = "fleet-" + strconv.Itoa(i)
		p := srv.pool(b, i/fleetGroup, oi)
		if i == 0 {
			srv.trust(b, p)
		}
		p.store = metered{p.store, m}
		f.pools[i] = p
	}
	f.leases = make([]*Lease, n)
	f.ready = make([]time.Duration, n)
	return f
}

// acquire has every instance in idx acquire its lease at once, and returns
// when all are ready or have failed.
func (f *fleet) acquire(ctx context.Context, idx []int) {
	var wg sync.WaitGroup
	for _, i := range idx {
		wg.Go(func() {
			l, err := f.pools[i].Acquire(ctx)
			if err != nil {
				f.m.failedAcquires.Add(1)
				f.m.failed(err)
				return
			}
			f.leases[i] = l
			f.ready[i] = time.Since(f.m.start)
		})
	}
	wg.Wait()
}

// close closes the leases of the instances in idx, 256 at a time.
func (f *fleet) close(idx []int) {
	sem := make(chan struct{}, 256)
	var wg sync.WaitGroup
	for _, i := range idx {
		if f.leases[i] == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = f.leases[i].Close(ctx)
		})
	}
	wg.Wait()
}

// lost counts the leases of the fleet that ended other than by Close.
func (f *fleet) lost() int {
	n := 0
	for _, l := range f.leases {
		if l != nil && l.Status().State == Lost {
			n++
		}
	}
	return n
}

func all(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// steady watches a running fleet for d and reports its renewal load:
// renewals a second, the most renewals sent in one 100 ms, the share of
// 100 ms ticks that sent any, and the server's CPU a second.
func (f *fleet) steady(b *testing.B, d time.Duration) {
	cpu0 := f.srv.cpu(b)
	from := int(time.Since(f.m.start) / (100 * time.Millisecond))
	n0 := f.m.renewals.Load()
	time.Sleep(d)
	to := min(int(time.Since(f.m.start)/(100*time.Millisecond)), len(f.m.ticks))
	var most int64
	busy := 0
	for i := from; i < to; i++ {
		c := f.m.ticks[i].Load()
		most = max(most, c)
		if c > 0 {
			busy++
		}
	}
	b.ReportMetric(float64(f.m.renewals.Load()-n0)/d.Seconds(), "renewals/s")
	b.ReportMetric(float64(most), "max-renewals/100ms")
	b.ReportMetric(100*float64(busy)/float64(max(to-from, 1)), "busy-ticks-%")
	b.ReportMetric((f.srv.cpu(b)-cpu0).Seconds()/d.Seconds(), "steady-store-cpu-s/s")
}

// renewedOnce waits until every lease of the fleet has had a renewal
// confirmed, or failed one, or ctx ends.
func (f *fleet) renewedOnce(ctx context.Context) {
	for _, l := range f.leases {
		for l != nil && ctx.Err() == nil {
			if s := l.Status(); s.Renewals > 0 || s.Failures > 0 || s.State == Lost {
				break
			}
			_ = sleepCtx(ctx, 20*time.Millisecond)
		}
	}
}

// coldTiming is the lease timing of the cold-start fleets: renewals every
// 20 s, so that the simulated instances, which share the machine's
// cores with the server, are not what runs out of time. (A fleet of 65,535
// at the default 3.3 s sends 20,000 renewals a second; the steady
// benchmark measures that load at 1,023 and 8,191 instances.)
var coldTiming = Options{TTL: time.Minute, Margin: 12 * time.Second, RenewEvery: 20 * time.Second}

// BenchmarkFleetColdStart starts a fleet of 2^bits - 1 instances at once,
// on a namespace that exists (a fleet that restarts whole; a namespace's
// very first start on Redis adds one TTL, its loss window), and reports
// the time until the last instance holds its lease, the failed Acquires,
// the renewals that failed until every lease had renewed once, the
// server's CPU and its longest script or statement during the start.
func BenchmarkFleetColdStart(b *testing.B) {
	for _, kind := range []string{"redis", "postgres"} {
		for _, bits := range []uint{10, 13, 16} {
			b.Run(fmt.Sprintf("%s/%dbits", kind, bits), func(b *testing.B) {
				srv := startFleetServer(b, kind)
				for b.Loop() {
					n := 1<<bits - 1
					f := newFleet(b, srv, fleetLayout(bits), n, coldTiming, newFleetMeter())
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
					srv.reset(b)
					cpu0, self0 := srv.cpu(b), selfCPU(b)
					f.m.start = time.Now()
					f.acquire(ctx, all(n))
					ready := slices.Sorted(slices.Values(f.ready))
					last := ready[len(ready)-1]
					cpu, self := srv.cpu(b)-cpu0, selfCPU(b)-self0
					b.ReportMetric(ready[len(ready)/2].Seconds(), "s-to-half")
					b.ReportMetric(self.Seconds(), "fleet-cpu-s")
					srv.scripts(b).report(b)
					f.renewedOnce(ctx)
					f.report(b)
					b.ReportMetric(last.Seconds(), "s-to-last-lease")
					b.ReportMetric(cpu.Seconds(), "store-cpu-s")
					f.close(all(n))
					cancel()
				}
			})
		}
	}
}

// report reports the fleet's failed Acquires and renewals (leases lost
// count as failed renewals), and logs the failures by kind.
func (f *fleet) report(b *testing.B) {
	f.m.mu.Lock()
	if len(f.m.errs) > 0 {
		b.Logf("failures: %v", f.m.errs)
	}
	f.m.mu.Unlock()
	b.ReportMetric(float64(f.m.failedAcquires.Load()), "failed-acquires")
	b.ReportMetric(float64(f.m.failedRenewals.Load()+int64(f.lost())), "failed-renewals")
}

// BenchmarkFleetSteady runs a fleet of 2^bits - 1 instances at the
// default timings (TTL 10 s, renewals every 3.3 s, jittered), started at
// once, and reports its renewal load over two renewal periods once every
// lease has renewed: renewals a second, the most sent in one 100 ms, the
// share of 100 ms ticks that sent any, the server's CPU a second and its
// longest script or statement, and failed renewals.
func BenchmarkFleetSteady(b *testing.B) {
	for _, kind := range []string{"redis", "postgres"} {
		for _, bits := range []uint{10, 13} {
			b.Run(fmt.Sprintf("%s/%dbits", kind, bits), func(b *testing.B) {
				srv := startFleetServer(b, kind)
				for b.Loop() {
					n := 1<<bits - 1
					f := newFleet(b, srv, fleetLayout(bits), n, Options{}, newFleetMeter())
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
					f.acquire(ctx, all(n))
					f.renewedOnce(ctx)
					srv.reset(b)
					f.steady(b, 2*DefaultTTL/3)
					srv.scripts(b).report(b)
					f.report(b)
					f.close(all(n))
					cancel()
				}
			})
		}
	}
}

// BenchmarkFleetRestart runs a fleet of 1,023 instances on 10 worker bits
// (every number held) and restarts it: rolling, a tenth of the fleet at a
// time, each instance closing its lease and acquiring anew; and after a
// crash, every instance gone without a word and a new fleet waiting for
// the numbers (Options.WaitForFree) until their leases lapse. It reports
// the time until the last instance of the new fleet holds its lease, the
// longest time an instance went without one, and failures.
func BenchmarkFleetRestart(b *testing.B) {
	for _, kind := range []string{"redis", "postgres"} {
		for _, how := range []string{"rolling", "crash"} {
			b.Run(kind+"/"+how, func(b *testing.B) {
				srv := startFleetServer(b, kind)
				for b.Loop() {
					const n = 1023
					warm, m := newFleetMeter(), newFleetMeter()
					f := newFleet(b, srv, fleetLayout(10), n, Options{WaitForFree: true}, warm)
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
					f.acquire(ctx, all(n))
					// From here on the fleet is counted by m.
					for _, p := range f.pools {
						p.store = metered{p.store.(metered).store, m}
					}
					m.start = time.Now()
					f.m = m
					var gap time.Duration
					start := time.Now()
					switch how {
					case "rolling":
						for from := 0; from < n; from += n / 10 {
							batch := all(n)[from:min(from+n/10, n)]
							t0 := time.Since(f.m.start)
							f.close(batch)
							f.acquire(ctx, batch)
							for _, i := range batch {
								gap = max(gap, f.ready[i]-t0)
							}
						}
					case "crash":
						// The old fleet's stores fail from now on: its leases
						// lapse, unreleased.
						for _, p := range f.pools {
							p.store = crashed{p.store}
						}
						g := newFleet(b, srv, fleetLayout(10), n, Options{WaitForFree: true}, m)
						g.acquire(ctx, all(n))
						gap = slices.Max(g.ready)
						f.close(all(n))
						f = g
					}
					b.ReportMetric(time.Since(start).Seconds(), "s-to-last-lease")
					b.ReportMetric(gap.Seconds(), "longest-gap-s")
					f.report(b)
					f.close(all(n))
					cancel()
				}
			})
		}
	}
}

// crashed is the store of an instance that crashed: nothing it sends
// arrives.
type crashed struct{ store }

var errCrashed = fmt.Errorf("test: the instance crashed")

func (crashed) take(context.Context, takeRequest) (taken, error) { return taken{}, errCrashed }
func (crashed) renew(context.Context, int64, string, int64, int64) (renewal, error) {
	return renewal{}, errCrashed
}
func (crashed) release(context.Context, int64, string, int64) error { return errCrashed }

// BenchmarkLeaseOps takes, renews and gives back one lease at a time on
// one connection, with nothing else on the server, in a namespace of
// 2^bits numbers whose every number but 16 is held by another owner with
// a mark in the past: each take meets held numbers before a free one,
// the most a take's bounded search reads. It reports the longest, 99th
// percentile and mean script or statement: the store's own time, which
// BenchmarkFleetColdStart's longest mixes with the time the server waited
// for a core among the fleet's goroutines. On Redis each cycle also runs
// one GET, whose longest and 99th percentile (get-longest-ms, get-p99-ms)
// are what the machine alone made of an O(1) command in the same run.
func BenchmarkLeaseOps(b *testing.B) {
	for _, kind := range []string{"redis", "postgres"} {
		for _, bits := range []uint{10, 16} {
			b.Run(fmt.Sprintf("%s/%dbits", kind, bits), func(b *testing.B) {
				srv := startFleetServer(b, kind)
				o := coldTiming
				o.Layout, o.Namespace = fleetLayout(bits), "ops"
				o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
				p := srv.pool(b, 0, o)
				srv.trust(b, p)
				holdNumbers(b, p, p.Size()-16)
				if s, ok := p.store.(*redisStore); ok {
					// Marks in the past: the takes' first range reads them.
					ctx := context.Background()
					pipe := s.c.Pipeline()
					for w := range int64(p.Size() - 16) {
						pipe.ZAdd(ctx, s.hw, redis.Z{Score: 1, Member: w})
					}
					if _, err := pipe.Exec(ctx); err != nil {
						b.Fatal(err)
					}
				}
				ctx := context.Background()
				cycle := func() {
					l, err := p.Acquire(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if err := l.renew(ctx, p.nowMs()); err != nil {
						b.Fatal(err)
					}
					if err := l.Close(ctx); err != nil {
						b.Fatal(err)
					}
				}
				cycle() // a PostgreSQL namespace's rows are made at its first take
				srv.reset(b)
				for b.Loop() {
					cycle()
					if srv.baseline != nil {
						if err := srv.baseline(ctx); err != nil {
							b.Fatal(err)
						}
					}
				}
				srv.scripts(b).report(b)
				if srv.baselineTimes != nil {
					bt := srv.baselineTimes(b)
					b.ReportMetric(float64(bt.longest)/float64(time.Millisecond), "get-longest-ms")
					b.ReportMetric(float64(bt.p99)/float64(time.Millisecond), "get-p99-ms")
				}
			})
		}
	}
}

// pgTakeScript is pgbench's take for BenchmarkPostgresTakeFloor: the
// statement of pgTakeFree on a namespace of 2^16 numbers, with the look
// from number 0 that a pool sends as a second statement when the first
// finds nothing from its random start folded into it, so that every run
// of the script takes a number while one is free.
const pgTakeScript = `\set start random(0, 65535)
\set tok random(1, 2000000000)
WITH up AS (
	UPDATE snowkey_worker_leases AS l SET
		owner = 'floor/' || :tok, holder = 'pgbench', expires_at = statement_timestamp() + interval '1 minute',
		start_after = l.high_water, high_water = GREATEST(l.high_water, 0::bigint),
		acquired_at = statement_timestamp(), renewed_at = statement_timestamp()
	WHERE l.namespace = 'floor' AND l.worker = COALESCE((
		SELECT worker FROM snowkey_worker_leases
		WHERE namespace = 'floor' AND (expires_at, worker) >= ('-infinity', :start) AND (expires_at, worker) <= ('-infinity', 65535)
			AND worker <> snowflake_reserved_worker() AND worker <> ALL ('{}'::text::int[])
		ORDER BY expires_at, worker LIMIT 1 FOR UPDATE SKIP LOCKED), (
		SELECT worker FROM snowkey_worker_leases
		WHERE namespace = 'floor' AND (expires_at, worker) >= ('-infinity', 0) AND (expires_at, worker) <= ('-infinity', 65535)
			AND worker <> snowflake_reserved_worker() AND worker <> ALL ('{}'::text::int[])
		ORDER BY expires_at, worker LIMIT 1 FOR UPDATE SKIP LOCKED))
	RETURNING l.worker, l.start_after
)
SELECT (SELECT worker FROM up), (SELECT start_after FROM up),
	(SELECT max(worker) FROM snowkey_worker_leases WHERE namespace = 'floor');
`

// BenchmarkPostgresTakeFloor runs the 65,535 takes of a 16-bit fleet's
// cold start from pgbench (prepared statements, 256 and 16 clients on
// two threads) on a private server made as BenchmarkFleetColdStart's,
// with the namespace's rows made and vacuumed beforehand: what PostgreSQL
// on this machine needs for those takes alone, driven by a client in C,
// before any instance, renewal or row making runs. It reports the takes
// a second and the seconds 65,535 of them took, from pgbench's own count
// (connections made beforehand), and how many numbers ended held.
func BenchmarkPostgresTakeFloor(b *testing.B) {
	pgbench, err := exec.LookPath("pgbench")
	if err != nil {
		found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
		if len(found) == 0 {
			b.Skip("pgbench not found (Debian's postgresql-client has it)")
		}
		pgbench = found[len(found)-1]
	}
	srv := startFleetServer(b, "postgres")
	db := openDB(b, srv.url)
	script := filepath.Join(b.TempDir(), "take.sql")
	if err := os.WriteFile(script, []byte(pgTakeScript), 0o644); err != nil {
		b.Fatal(err)
	}
	const n = 1<<16 - 1
	ctx := context.Background()
	for _, clients := range []int{256, 16} {
		b.Run(fmt.Sprintf("%dclients", clients), func(b *testing.B) {
			for b.Loop() {
				for _, q := range []string{
					"DELETE FROM snowkey_worker_leases WHERE namespace = 'floor'",
					`INSERT INTO snowkey_worker_leases (namespace, worker, expires_at, high_water)
						SELECT 'floor', g, '-infinity', 0 FROM generate_series(0, 65535) AS g`,
					"VACUUM ANALYZE snowkey_worker_leases",
				} {
					if _, err := db.ExecContext(ctx, q); err != nil {
						b.Fatal(err)
					}
				}
				out, err := exec.Command(pgbench, "-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", "2",
					"-t", strconv.Itoa((n+clients-1)/clients), "-f", script, srv.url).CombinedOutput()
				if err != nil {
					b.Fatalf("pgbench: %v\n%s", err, out)
				}
				m := regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`).FindSubmatch(out)
				if m == nil {
					b.Fatalf("pgbench printed no tps:\n%s", out)
				}
				tps, _ := strconv.ParseFloat(string(m[1]), 64)
				var held int
				err = db.QueryRowContext(ctx, "SELECT count(*) FROM snowkey_worker_leases WHERE namespace = 'floor' AND owner IS NOT NULL").Scan(&held)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(tps, "takes/s")
				b.ReportMetric(n/tps, "s-for-65535")
				b.ReportMetric(float64(held), "held")
			}
		})
	}
}

package workerid

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/pressly/goose/v3"
	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// testOptions are short timings for tests: a lease lasts 1s, its
// generator stops 200ms before that, renewals go every 250ms.
func testOptions(t testing.TB, o Options) Options {
	if o.TTL == 0 {
		o.TTL = time.Second
		o.Margin = 200 * time.Millisecond
		o.RenewEvery = 250 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Holder == "" {
		o.Holder = t.Name()
	}
	return o
}

// kind is a store the tests run against.
type kind struct {
	name string
	// open returns a fresh, empty place for leases (a key prefix, a
	// database) and how to reach it.
	open func(t *testing.T) backend
}

// backend is one test's place for leases, reachable directly or through
// a proxy at addr.
type backend struct {
	name string // of the kind
	addr string // host:port of the server
	// open returns a pool on the backend, through the server at addr,
	// with the defences in off switched off.
	open func(t *testing.T, addr string, o Options, off defences) *Pool
}

// pool returns a pool on the backend, through the server at addr.
func (b backend) pool(t *testing.T, addr string, o Options) *Pool {
	return b.open(t, addr, o, defences{})
}

// poolWithout is pool with the defences in off switched off.
func (b backend) poolWithout(t *testing.T, addr string, o Options, off defences) *Pool {
	return b.open(t, addr, o, off)
}

var kinds = []kind{
	{"redis", func(t *testing.T) backend {
		addr := testenv.Redis(t)
		prefix := testenv.KeyPrefix(t)
		return backend{name: "redis", addr: addr, open: func(t *testing.T, addr string, o Options, off defences) *Pool {
			return redisPoolWithout(t, addr, prefix, o, off)
		}}
	}},
	{"postgres", func(t *testing.T) backend {
		dsn := testenv.Postgres(t)
		migrate(t, dsn)
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		return backend{name: "postgres", addr: u.Host, open: func(t *testing.T, addr string, o Options, off defences) *Pool {
			return postgresPoolWithout(t, withHost(dsn, addr), o, off)
		}}
	}},
}

func redisClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func redisPool(t testing.TB, addr, prefix string, o Options) *Pool {
	t.Helper()
	return redisPoolWithout(t, addr, prefix, o, defences{})
}

// redisPoolWithout is redisPool with the defences in off switched off.
func redisPoolWithout(t testing.TB, addr, prefix string, o Options, off defences) *Pool {
	t.Helper()
	o = testOptions(t, o)
	o.KeyPrefix = prefix
	p, err := redisWithout(redisClient(t, addr), o, off)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func postgresPool(t testing.TB, dsn string, o Options) *Pool {
	t.Helper()
	return postgresPoolWithout(t, dsn, o, defences{})
}

// postgresPoolWithout is postgresPool with the defences in off switched
// off.
func postgresPoolWithout(t testing.TB, dsn string, o Options, off defences) *Pool {
	t.Helper()
	db := openDB(t, dsn)
	p, err := postgresWithout(db, testOptions(t, o), off)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func openDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func withHost(dsn, host string) string {
	u, _ := url.Parse(dsn)
	u.Host = host
	return u.String()
}

// helperArgsEnv is the environment variable that hands a helper process
// of this test binary its arguments, as one JSON value.
const helperArgsEnv = "WORKERID_HELPER_ARGS"

// helperArgs returns the environment entry that hands args to a helper
// process, which reads them with readHelperArgs.
func helperArgs(t testing.TB, args any) string {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return helperArgsEnv + "=" + string(b)
}

// readHelperArgs reads into args what helperArgs handed this process.
func readHelperArgs(args any) error {
	if err := json.Unmarshal([]byte(os.Getenv(helperArgsEnv)), args); err != nil {
		return fmt.Errorf("%s: %w", helperArgsEnv, err)
	}
	return nil
}

// migrate applies snowkey's migrations, the SQL files of package
// migrations, to the database at dsn, with goose as migrations.Up does and
// recorded in its table (migrations.VersionTable). Package migrations
// imports this one, so these tests cannot call Up; they read its files.
func migrate(t testing.TB, dsn string) {
	t.Helper()
	db := openDB(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("../migrations"),
		goose.WithTableName("snowkey_db_version"), goose.WithDisableGlobalRegistry(true),
		goose.WithLogger(goose.NopLogger()))
	if err == nil {
		_, err = p.Up(ctx)
	}
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	_ = db.Close()
}

// forKinds runs f as a parallel subtest for each store, or for those
// named in only.
func forKinds(t *testing.T, f func(t *testing.T, b backend), only ...string) {
	for _, k := range kinds {
		if len(only) > 0 && !slices.Contains(only, k.name) {
			continue
		}
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			f(t, k.open(t))
		})
	}
}

func acquire(t testing.TB, p *Pool) *Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := p.Acquire(ctx)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	t.Cleanup(func() { closeLease(t, l) })
	return l
}

// acquireN acquires n leases at once.
func acquireN(t testing.TB, p *Pool, n int) []*Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leases := make([]*Lease, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { leases[i], errs[i] = p.Acquire(ctx) })
	}
	wg.Wait()
	for i, l := range leases {
		if errs[i] != nil {
			t.Fatalf("Acquire %d of %d: %v", i+1, n, errs[i])
		}
		t.Cleanup(func() { closeLease(t, l) })
	}
	return leases
}

// acquireWhenFree is acquire, retrying while every number is held.
func acquireWhenFree(t testing.TB, p *Pool, timeout time.Duration) *Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		l, err := p.Acquire(ctx)
		if err == nil {
			t.Cleanup(func() { closeLease(t, l) })
			return l
		}
		if !errors.Is(err, ErrNoFreeWorker) || ctx.Err() != nil {
			t.Fatalf("Acquire: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func closeLease(t testing.TB, l *Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Logf("close lease on worker %d: %v", l.Worker(), err)
	}
}

func generator(t testing.TB, l *Lease) *idtype.Generator {
	t.Helper()
	g, err := l.NewGenerator()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// proxy forwards TCP connections to a server until Cut, which drops them
// all and refuses new ones until Restore: a server gone from the view of
// one client only.
type proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	drop  []byte // a request holding it has its reply dropped (DropReplies)
	drops int    // how many more replies to drop
	seen  int    // requests holding drop since DropReplies, dropped or not
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		_ = ln.Close()
		p.Cut()
	})
	go p.serve()
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		go p.forward(c)
	}
}

func (p *proxy) forward(c net.Conn) {
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	s, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = c.Close()
		_ = s.Close()
		return
	}
	p.conns[s] = struct{}{}
	p.mu.Unlock()
	// dropping is set when a request whose reply is to be dropped has
	// gone to the server.
	var dropping atomic.Bool
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				p.mu.Lock()
				if p.drop != nil && bytes.Contains(buf[:n], p.drop) {
					p.seen++
					if p.drops > 0 {
						p.drops--
						dropping.Store(true)
					}
				}
				p.mu.Unlock()
				if _, werr := s.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = s.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if dropping.Load() {
				// The server ran the request; its reply never arrives.
				break
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = c.Close()
	_ = s.Close()
}

// DropReplies lets the next n requests that contain match through to the
// server, then drops each one's reply and closes its connection: the
// request ran, and the client never hears of it.
func (p *proxy) DropReplies(match []byte, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop, p.drops, p.seen = match, n, 0
}

// Seen returns how many requests that contain the match of the last
// DropReplies have gone to the server since, their replies dropped or
// not.
func (p *proxy) Seen() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen
}

// Dropping returns how many replies DropReplies still has to drop.
func (p *proxy) Dropping() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.drops
}

// Cut drops every connection and refuses new ones.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

// Retarget sends new connections to another server.
func (p *proxy) Retarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

// Restore lets connections through again.
func (p *proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// logRecorder is a slog handler that keeps the messages it gets.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := rec.Level.String() + " " + rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "error" {
			m += " error=" + a.Value.String()
		}
		return true
	})
	r.msgs = append(r.msgs, m)
	return nil
}

// all returns the messages logged so far.
func (r *logRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

// has reports whether a message containing s was logged.
func (r *logRecorder) has(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// matching returns the messages for which keep is true.
func (r *logRecorder) matching(keep func(msg string) bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.msgs {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

func (r *logRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}

// controlTries is how often a control scenario runs before its test
// concludes that it cannot reach its fault: on a loaded machine one run
// may miss the window of time the fault needs.
const controlTries = 5

// tryControl runs the control scenario found in subtests "try 1", "try 2",
// … until one finds the violation it looks for, and fails t if none of
// controlTries does.
func tryControl(t *testing.T, found func(t *testing.T) bool) {
	t.Helper()
	tryRuns(t, found, "control runs found no violation: the test does not reach its fault")
}

// tryRuns runs f in subtests "try 1", "try 2", … until one returns true,
// and fails t, saying how many runs failed to, if none of controlTries
// does.
func tryRuns(t *testing.T, f func(t *testing.T) bool, failure string) {
	t.Helper()
	for i := 1; i <= controlTries; i++ {
		ok := false
		t.Run(fmt.Sprintf("try %d", i), func(t *testing.T) { ok = f(t) })
		if ok {
			return
		}
	}
	t.Fatalf("%d %s", controlTries, failure)
}

// notMet ends a run of a scenario that did not meet its fault, which a
// busy machine can keep it short of: the run is skipped, and tryControl
// or tryReach, which every scenario that calls it runs under, runs
// another.
func notMet(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Skipf("the run did not meet its fault: "+format, args...)
}

// sharedMillis returns how many milliseconds both x and y have IDs in:
// where two owners of one number could have issued the same ID.
func sharedMillis(l idtype.Layout, x, y []idtype.ID) int {
	ms := map[int64]bool{}
	for _, id := range x {
		ms[l.Decode(id).Time.UnixMilli()] = true
	}
	n := 0
	for _, id := range y {
		m := l.Decode(id).Time.UnixMilli()
		if ms[m] {
			n++
			delete(ms, m)
		}
	}
	return n
}

// tryReach runs a defended scenario until a run reaches its fault, up to
// controlTries runs: a busy machine may keep a run short of it (notMet),
// and a defended run that did not meet its fault proves nothing.
func tryReach(t *testing.T, reached func(t *testing.T) bool) {
	t.Helper()
	tryRuns(t, reached, "defended runs did not reach their fault")
}

// waitFor polls cond until it holds or the timeout, stretched by the
// machine's load, passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	timeout = testenv.Stretched(timeout)
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// isLeaseErr reports whether err is one a generator on a lease may
// return when it cannot issue.
func isLeaseErr(err error) bool {
	return errors.Is(err, idtype.ErrLeaseExpired) || errors.Is(err, idtype.ErrLeaseLost) ||
		errors.Is(err, idtype.ErrClockBehind)
}

// trustScript writes a namespace's record as a namespace that has lived on
// this server for longer than a TTL has it: the server's identity, and no
// loss window.
const trustScript = luaCommon + `
redis.call('HSET', KEYS[1], 'id', identity(), 'trust', 0)
return 1
`

// trustRecord gives a Redis pool's namespace an old record, so that its
// takes wait for no loss window: most tests are about other things than
// a Redis that lost data. It does nothing to a PostgreSQL pool.
func trustRecord(t testing.TB, p *Pool) {
	t.Helper()
	s, ok := p.store.(*redisStore)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := redis.NewScript(trustScript).Run(ctx, s.c, []string{s.meta}).Err(); err != nil {
		t.Fatalf("trust the namespace's record: %v", err)
	}
}

// redisLeases returns the live leases of a Redis pool's namespace: number
// to token, as the server's clock judges them.
func redisLeases(ctx context.Context, c redis.Cmdable, leasesKey string) (map[int64]string, error) {
	now, err := c.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	all, err := c.HGetAll(ctx, leasesKey).Result()
	if err != nil {
		return nil, err
	}
	out := map[int64]string{}
	for k, v := range all {
		w, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("lease field %q: %w", k, err)
		}
		exp, rest, ok := strings.Cut(v, "|")
		_, tok, ok2 := strings.Cut(rest, "|")
		e, err := strconv.ParseInt(exp, 10, 64)
		if !ok || !ok2 || err != nil {
			return nil, fmt.Errorf("lease of %d: %q", w, v)
		}
		if e > now.UnixMilli() {
			out[w] = tok
		}
	}
	return out, nil
}

// collector runs generators on leases and keeps every ID they issue.
type collector struct {
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	ids    map[string][]idtype.ID // by who issued them, once each run ends
	issued map[string]*atomic.Int64
	last   map[string]*atomic.Int64 // the last ID of each run
}

func newCollector() *collector {
	return &collector{stop: make(chan struct{}), ids: map[string][]idtype.ID{}, issued: map[string]*atomic.Int64{},
		last: map[string]*atomic.Int64{}}
}

// run issues IDs on g, about one every 50µs, until stop or the lease is
// lost; it waits out refusals while the lease is unconfirmed.
func (c *collector) run(name string, g *idtype.Generator) {
	n, last := &atomic.Int64{}, &atomic.Int64{}
	c.mu.Lock()
	c.issued[name], c.last[name] = n, last
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		var mine []idtype.ID
		defer func() {
			c.mu.Lock()
			c.ids[name] = append(c.ids[name], mine...)
			c.mu.Unlock()
		}()
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			id, err := g.Next()
			switch {
			case err == nil:
				mine = append(mine, id)
				last.Store(int64(id))
				n.Add(1)
				time.Sleep(50 * time.Microsecond)
			case errors.Is(err, idtype.ErrLeaseLost):
				return
			default:
				time.Sleep(time.Millisecond)
			}
		}
	}()
}

// waitWhileIssuing polls cond until it holds, for as long as the run
// called name keeps issuing: it fails t once name has issued nothing for
// stall.
func (c *collector) waitWhileIssuing(t testing.TB, name string, stall time.Duration, what string, cond func() bool) {
	t.Helper()
	n, since := c.count(name), time.Now()
	for !cond() {
		if m := c.count(name); m != n {
			n, since = m, time.Now()
		} else if time.Since(since) > stall {
			t.Fatalf("waiting for %s: %s issued nothing for %v (%d IDs in all)", what, name, stall, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// count returns how many IDs the run called name has issued so far.
func (c *collector) count(name string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.issued[name]; n != nil {
		return n.Load()
	}
	return 0
}

// lastID returns the last ID the run called name has issued, or 0.
func (c *collector) lastID(name string) idtype.ID {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.last[name]; l != nil {
		return idtype.ID(l.Load())
	}
	return 0
}

// waitIssued waits until every run named in names has issued n more IDs
// than it had when called, or fails t once timeout has passed.
func (c *collector) waitIssued(t testing.TB, timeout time.Duration, n int64, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c.waitIssuedUntil(ctx, t, n, names...)
}

// waitIssuedUntil waits until every run named in names has issued n more
// IDs than it had when called, or fails t once ctx ends: given the test's
// testenv.Deadline, the wait stretches with the machine's load, as the
// generators' pace does.
func (c *collector) waitIssuedUntil(ctx context.Context, t testing.TB, n int64, names ...string) {
	t.Helper()
	base := map[string]int64{}
	for _, name := range names {
		base[name] = c.count(name)
	}
	done := func() bool {
		for _, name := range names {
			if c.count(name) < base[name]+n {
				return false
			}
		}
		return true
	}
	for !done() {
		if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
			got := map[string]int64{}
			for _, name := range names {
				got[name] = c.count(name) - base[name]
			}
			t.Fatalf("waiting for %d more IDs from each of %v: %v; issued since the wait began: %v", n, names, err, got)
		}
	}
}

func (c *collector) finish() map[string][]idtype.ID {
	close(c.stop)
	c.wg.Wait()
	return c.ids
}

// duplicates counts the IDs that occur more than once across all lists.
func duplicates(lists map[string][]idtype.ID) (dups, total int) {
	for _, l := range lists {
		total += len(l)
	}
	return len(duplicateIDs(lists)), total
}

// duplicateIDs returns each repeat of an ID across all lists.
func duplicateIDs(lists map[string][]idtype.ID) []idtype.ID {
	var all []idtype.ID
	for _, l := range lists {
		all = append(all, l...)
	}
	slices.Sort(all)
	var dups []idtype.ID
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			dups = append(dups, all[i])
		}
	}
	return dups
}

// waitLapsed waits until the store of p's namespace holds no live lease on
// worker: its owner, cut off, could not renew it. p must reach the store.
func waitLapsed(t testing.TB, p *Pool, worker int64) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("the lease on %d to lapse in the store", worker), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		switch s := p.store.(type) {
		case *redisStore:
			live, err := redisLeases(ctx, s.c, s.leases)
			_, held := live[worker]
			return err == nil && !held
		case *pgStore:
			var live bool
			err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT FROM snowkey_worker_leases
				WHERE namespace = $1 AND worker = $2 AND expires_at > statement_timestamp())`, s.ns, worker).Scan(&live)
			return err == nil && !live
		}
		t.Fatalf("store %T", p.store)
		return false
	})
}

package tokens

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/faults"
	"github.com/snowkeyhq/snowkey/internal/testenv"
)

// The chaos suite: several Managers (some with a cache) send random
// Issue, Validate, Revoke, RevokeSession, RevokeAll and Rotate calls to
// real Redis deployments while a fault is injected; every call is recorded
// in a faults.History and faults.CheckTokens judges the history against
// the promise (see the package doc). Each fault kind runs with its
// defence on, which must give no violation, and with the defence off (the
// control), which must find violations, so a green run proves the fault
// was reached. The five kinds share faults.Budget: about 45 s in
// `make test`, CHAOS_TIME in `make chaos`.

// chaosKinds is the number of TestChaos tests that share the budget.
const chaosKinds = 5

// chaosTTLs are the CacheTTLs of a run's Managers, by Manager number:
// one without a cache, two with.
var chaosTTLs = []time.Duration{0, 100 * time.Millisecond, 400 * time.Millisecond}

// chaosScenario runs one fault kind once, with the defence on or off, and
// returns the recorded history.
type chaosScenario func(t *testing.T, rng *rand.Rand, control bool) *faults.History

// controlRetries bounds how often a control that found no violation runs
// again before the row is judged. The allkeys-lru control, the least
// sure, found violations in about half of its runs on a loaded 2-core
// machine: nine runs all missing is about one in 500.
const controlRetries = 8

// runChaos runs a fault kind's scenario with the defence on and off for
// its share of the budget, checks every history, and reports the row.
//
// In `make test` the kinds run in parallel, each for a fifth of the short
// budget, so that they add little to the package's time; in the long
// schedule (CHAOS_TIME) one after another, so that together they fill it.
func runChaos(t *testing.T, fault string, scenario chaosScenario) {
	if !faults.Long() {
		t.Parallel()
	}
	budget := faults.Budget(t) / chaosKinds
	row := faults.Row{Package: "tokens", Fault: fault, Seed: faults.Seed(t)}
	start := time.Now()
	side := func(control bool) func(t *testing.T, rng *rand.Rand) {
		return func(t *testing.T, rng *rand.Rand) {
			h := scenario(t, rng, control)
			vs := faults.CheckTokens(h, func(m int) time.Duration { return chaosTTLs[m] })
			row.Tokens += int64(h.Sessions())
			other := 0
			for _, op := range h.Ops() {
				if op.Outcome == faults.OtherError {
					other++
					if other <= 5 {
						t.Errorf("unexpected error: m%d %v: %s", op.Manager, op.Kind, op.Err)
					}
				}
			}
			t.Logf("%d calls, %d sessions, %d violations; %s", h.Len(), h.Sessions(), len(vs), outcomes(h))
			if control {
				row.ControlViolations += len(vs)
				return
			}
			row.Violations += len(vs)
			for _, v := range vs[:min(len(vs), 10)] {
				t.Error(v)
			}
			if len(vs) > 0 {
				path := filepath.Join(os.TempDir(), fmt.Sprintf("tokens-chaos-%d.history", time.Now().UnixNano()))
				if err := h.Dump(path); err == nil {
					t.Logf("history in %s", path)
				}
			}
		}
	}
	row.Runs = faults.Repeat(t, "on", budget/2, 1, side(false))
	row.ControlRuns = faults.Repeat(t, "off", budget/2, 1, side(true))
	// Under load a short control can miss its fault's window (seen: a
	// control budget that fit only two calls in the race). A control that
	// found nothing runs again, a bounded number of times, before
	// faults.Report judges it: the defence is proven only by a control
	// that finds violations.
	for try := 0; try < controlRetries && row.ControlViolations == 0 && !t.Failed(); try++ {
		row.ControlRuns += faults.Repeat(t, "offagain", 0, 1, side(true))
	}
	row.Seconds = time.Since(start).Seconds()
	faults.Report(t, row)
}

// outcomes summarizes a history: per kind of call, its outcomes.
func outcomes(h *faults.History) string {
	counts := map[faults.OpKind]map[faults.Outcome]int{}
	for _, op := range h.Ops() {
		if counts[op.Kind] == nil {
			counts[op.Kind] = map[faults.Outcome]int{}
		}
		counts[op.Kind][op.Outcome]++
	}
	var parts []string
	for k := faults.Issue; k <= faults.Rotate; k++ {
		var o []string
		for out := faults.Pending; out <= faults.OtherError; out++ {
			if n := counts[k][out]; n > 0 {
				o = append(o, fmt.Sprintf("%v %d", out, n))
			}
		}
		parts = append(parts, fmt.Sprintf("%v: %s", k, strings.Join(o, ", ")))
	}
	return strings.Join(parts, "; ")
}

// chaosManagers makes a run's Managers over client, one per chaosTTLs,
// sharing their keys, with the defence turned off when control.
func chaosManagers(t *testing.T, client redis.UniversalClient, opts Options, off defences, control bool) []*Manager {
	t.Helper()
	gen := newGen(t)
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = testenv.KeyPrefix(t)
	}
	ms := make([]*Manager, len(chaosTTLs))
	for i, ttl := range chaosTTLs {
		o := opts
		o.CacheTTL = ttl
		ms[i] = newManager(t, client, gen, o)
		if control {
			ms[i].setDefences(off)
		}
	}
	return ms
}

// chaosToken is a token the traffic knows.
type chaosToken struct {
	tok       string
	sid, user idtype.ID
}

// traffic sends random calls to managers and records them in h.
type traffic struct {
	h        *faults.History
	managers []*Manager
	users    []idtype.ID
	// hot is the chance that a call picks one of the 3 newest tokens,
	// whose first Validates miss the caches.
	hot float64
	// mix weighs the calls: Issue, Validate, Revoke, RevokeSession,
	// RevokeAll, Rotate. Mostly Validates, and few RevokeAlls, so that
	// sessions live long enough to meet the fault.
	mix [6]int
	// weights weighs the Managers; nil picks them evenly.
	weights []int

	mu   sync.Mutex
	toks []chaosToken
}

func newTraffic(managers []*Manager, users []idtype.ID) *traffic {
	return &traffic{h: faults.NewHistory(classifyTokenError), managers: managers, users: users,
		mix: [6]int{14, 66, 6, 5, 3, 6}}
}

// weighted picks an index by weight.
func weighted(r *rand.Rand, weights []int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	x := r.IntN(total)
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}

func classifyTokenError(err error) faults.Outcome {
	switch {
	case errors.Is(err, ErrInvalidToken):
		return faults.Invalid
	case errors.Is(err, ErrUnavailable):
		return faults.Unavailable
	}
	return faults.OtherError
}

// run starts workers goroutines, each with its own random source drawn
// from rng, that send calls until stop is closed; the returned function
// waits for them.
func (tr *traffic) run(rng *rand.Rand, workers int, stop <-chan struct{}) (wait func()) {
	var wg sync.WaitGroup
	for range workers {
		r := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				tr.call(r)
			}
		})
	}
	return wg.Wait
}

// pick returns a known token: half the time one of the 16 newest, else
// any, so that old (often revoked) tokens are tried again too.
func (tr *traffic) pick(r *rand.Rand) (chaosToken, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := len(tr.toks)
	if n == 0 {
		return chaosToken{}, false
	}
	if r.Float64() < tr.hot {
		return tr.toks[n-1-r.IntN(min(n, 3))], true
	}
	if r.IntN(2) == 0 {
		return tr.toks[n-1-r.IntN(min(n, 16))], true
	}
	return tr.toks[r.IntN(n)], true
}

func (tr *traffic) add(tok string, s Session) {
	tr.mu.Lock()
	tr.toks = append(tr.toks, chaosToken{tok, s.ID, s.UserID})
	tr.mu.Unlock()
}

// seed issues perUser sessions for every user through the first Manager,
// recorded like any Issue, so that the run starts with sessions to meet
// the fault.
func (tr *traffic) seed(t *testing.T, perUser int) {
	t.Helper()
	for range perUser {
		for _, user := range tr.users {
			c := tr.h.Begin(faults.Op{Kind: faults.Issue, User: int64(user)})
			tok, s, err := tr.managers[0].Issue(t.Context(), user, Metadata{})
			if err != nil {
				t.Fatalf("seed: %v", err)
			}
			c.SetSession(int64(s.ID))
			c.End(nil)
			tr.add(tok, s)
		}
	}
}

// call makes one random call, bounded by a timeout.
func (tr *traffic) call(r *rand.Rand) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mi := r.IntN(len(tr.managers))
	if tr.weights != nil {
		mi = weighted(r, tr.weights)
	}
	m := tr.managers[mi]
	x, ok := tr.pick(r)
	kind := weighted(r, tr.mix[:])
	if !ok {
		kind = 0
	}
	switch kind {
	case 0:
		user := tr.users[r.IntN(len(tr.users))]
		c := tr.h.Begin(faults.Op{Kind: faults.Issue, Manager: mi, User: int64(user)})
		tok, s, err := m.Issue(ctx, user, Metadata{})
		if err == nil {
			c.SetSession(int64(s.ID))
			tr.add(tok, s)
		}
		c.End(err)
	case 1:
		c := tr.h.Begin(faults.Op{Kind: faults.Validate, Manager: mi, Session: int64(x.sid)})
		s, err := m.Validate(ctx, x.tok)
		if err == nil {
			c.SetUser(int64(s.UserID))
		}
		c.End(err)
	case 2:
		c := tr.h.Begin(faults.Op{Kind: faults.Revoke, Manager: mi, Session: int64(x.sid)})
		c.End(m.Revoke(ctx, x.tok))
	case 3:
		c := tr.h.Begin(faults.Op{Kind: faults.RevokeSession, Manager: mi, Session: int64(x.sid), User: int64(x.user)})
		_, err := m.RevokeSession(ctx, x.user, x.sid)
		c.End(err)
	case 4:
		var keep []idtype.ID
		if r.IntN(3) == 0 {
			keep = append(keep, x.sid)
		}
		c := tr.h.Begin(faults.Op{Kind: faults.RevokeAll, Manager: mi, User: int64(x.user), Keep: toInt64s(keep)})
		_, err := m.RevokeAll(ctx, x.user, keep...)
		c.End(err)
	default:
		c := tr.h.Begin(faults.Op{Kind: faults.Rotate, Manager: mi, Session: int64(x.sid)})
		tok, s, err := m.Rotate(ctx, x.tok)
		if err == nil {
			c.SetNewSession(int64(s.ID))
			c.SetUser(int64(s.UserID))
			tr.add(tok, s)
		}
		c.End(err)
	}
}

func toInt64s(ids []idtype.ID) []int64 {
	out := make([]int64, len(ids))
	for i, id := range ids {
		out[i] = int64(id)
	}
	return out
}

// chaosUsers returns n new user IDs.
func chaosUsers(t *testing.T, n int) []idtype.ID {
	gen := newGen(t)
	users := make([]idtype.ID, n)
	for i := range users {
		users[i] = userID(t, gen)
	}
	return users
}

// sleep waits for a random time in [lo, hi).
func sleep(rng *rand.Rand, lo, hi time.Duration) {
	time.Sleep(lo + time.Duration(rng.Int64N(int64(hi-lo))))
}

// TestChaosProxyDelay: the Managers reach Redis through a proxy whose
// delay the run changes at random, so reads are in flight while
// revocations run. Defence: the cache's revocation count (item 4).
func TestChaosProxyDelay(t *testing.T) {
	runChaos(t, "proxy delay (cache race)", func(t *testing.T, rng *rand.Rand, control bool) *faults.History {
		proxy := faults.StartProxy(t, testenv.Redis(t))
		client := redis.NewClient(&redis.Options{Addr: proxy.Addr(), PoolSize: 32})
		t.Cleanup(func() { _ = client.Close() })
		tr := newTraffic(chaosManagers(t, client, Options{}, defences{noCacheGuard: true}, control), chaosUsers(t, 12))
		// Calls on fresh tokens, mostly through the caching Managers,
		// with more revocations: a Validate's first read of a token and
		// a revocation of it on the same Manager overlap often.
		tr.hot, tr.weights, tr.mix = 0.9, []int{1, 5, 2}, [6]int{20, 55, 10, 6, 3, 6}
		stop := make(chan struct{})
		wait := tr.run(rng, 16, stop)
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
			proxy.SetDelay(time.Duration(rng.IntN(4000)) * time.Microsecond)
			sleep(rng, 50*time.Millisecond, 300*time.Millisecond)
		}
		close(stop)
		wait()
		return tr.h
	})
}

// TestChaosFailover: the Managers reach a primary through a proxy; its
// replica replicates through another, which the run freezes for a while
// before the replica is promoted and the Managers' proxy is pointed at it.
// Defence: Options.WaitReplicas (item 2).
func TestChaosFailover(t *testing.T) {
	runChaos(t, "failover to a lagging replica", func(t *testing.T, rng *rand.Rand, control bool) *faults.History {
		primary := testenv.StartRedis(t)
		repl := faults.StartProxy(t, primary.Addr())
		replica := testenv.StartRedisReplica(t, repl.Addr())
		front := faults.StartProxy(t, primary.Addr())
		client := redis.NewClient(&redis.Options{Addr: front.Addr(), PoolSize: 32, MaxRetries: 1})
		t.Cleanup(func() { _ = client.Close() })
		opts := Options{WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond}
		if control {
			opts.WaitReplicas = 0
		}
		tr := newTraffic(chaosManagers(t, client, opts, defences{}, control), chaosUsers(t, 12))
		stop := make(chan struct{})
		wait := tr.run(rng, 12, stop)
		sleep(rng, 300*time.Millisecond, 800*time.Millisecond)
		repl.Freeze()
		sleep(rng, 200*time.Millisecond, 600*time.Millisecond)
		repl.Cut()
		replica.Promote()
		front.Retarget(replica.Addr())
		front.Cut()
		front.Restore()
		sleep(rng, 500*time.Millisecond, 1000*time.Millisecond)
		close(stop)
		wait()
		return tr.h
	})
}

// TestChaosNoEviction: Redis under maxmemory-policy noeviction is filled
// to its limit and kept there for a while, during which reads of live
// sessions must keep working (faults.History.ReadsMustWork). Defence: a
// refresh that fails does not fail Validate (item 6).
func TestChaosNoEviction(t *testing.T) {
	runChaos(t, "maxmemory, noeviction", func(t *testing.T, rng *rand.Rand, control bool) *faults.History {
		srv, junk := startMaxmemoryRedis(t, "4mb", "noeviction")
		opts := Options{IdleTimeout: time.Minute, RefreshInterval: 20 * time.Millisecond}
		tr := newTraffic(chaosManagers(t, clientFor(t, srv.Addr()), opts, defences{noRefreshTolerance: true}, control),
			chaosUsers(t, 12))
		stop := make(chan struct{})
		wait := tr.run(rng, 8, stop)
		sleep(rng, 200*time.Millisecond, 500*time.Millisecond)
		fillMemory(t, junk, 0)
		tr.h.ReadsMustWork(true)
		// Keep it full: revocations free memory, which the next junk
		// write takes back.
		full := make(chan struct{})
		var filler sync.WaitGroup
		filler.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-full:
					return
				default:
				}
				_ = junk.Set(context.Background(), fmt.Sprintf("refill:%d", i), strings.Repeat("y", 512), 0).Err()
				time.Sleep(time.Millisecond)
			}
		})
		sleep(rng, 800*time.Millisecond, 1500*time.Millisecond)
		tr.h.ReadsMustWork(false)
		close(full)
		filler.Wait()
		if err := junk.Eval(context.Background(),
			`for _, k in ipairs(redis.call('KEYS', '*junk*')) do redis.call('DEL', k) end
			 for _, k in ipairs(redis.call('KEYS', 'refill:*')) do redis.call('DEL', k) end`, nil).Err(); err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		sleep(rng, 200*time.Millisecond, 400*time.Millisecond)
		close(stop)
		wait()
		return tr.h
	})
}

// TestChaosAllKeysLRU: Redis under maxmemory-policy allkeys-lru evicts
// sessions and indexes while junk is written beside the traffic.
// Defence: the index check, which logs out a session whose index was
// evicted instead of letting it escape RevokeAll (item 3).
func TestChaosAllKeysLRU(t *testing.T) {
	runChaos(t, "maxmemory, allkeys-lru", func(t *testing.T, rng *rand.Rand, control bool) *faults.History {
		// Room for a thousand sessions (100 kB more than the server
		// uses once the traffic is connected), which the traffic fills in
		// about a second, helped by small junk values, so that what LRU
		// evicts is mostly sessions and indexes. Many users and few
		// Issues: an index is touched only when its user's sessions are
		// written, a session by every Validate too, so that indexes age
		// faster than the sessions in them, and LRU evicts some of them
		// first.
		srv, junk := startMaxmemoryRedis(t, "0", "allkeys-lru")
		tr := newTraffic(chaosManagers(t, clientFor(t, srv.Addr()), Options{}, defences{noIndexCheck: true}, control),
			chaosUsers(t, 1000))
		tr.mix = [6]int{6, 80, 4, 3, 4, 3}
		stop := make(chan struct{})
		wait := tr.run(rng, 8, stop)
		time.Sleep(100 * time.Millisecond) // the traffic's connections are open
		srv.ConfigSet("maxmemory", strconv.FormatInt(usedMemory(t, junk)+100_000, 10))
		value := strings.Repeat("z", 100+rng.IntN(300))
		var filler sync.WaitGroup
		filler.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_ = junk.Set(context.Background(), fmt.Sprintf("junk:%d", i), value, 0).Err()
				time.Sleep(time.Millisecond)
			}
		})
		sleep(rng, 1500*time.Millisecond, 2500*time.Millisecond)
		// Eviction is the fault: go on until LRU has evicted a few
		// hundred keys, however slowly a loaded machine (or a server
		// that packs keys tighter, as Valkey does) fills the room.
		for until := time.Now().Add(20 * time.Second); evictedKeys(t, junk) < 300 && time.Now().Before(until); {
			time.Sleep(50 * time.Millisecond)
		}
		close(stop)
		wait()
		filler.Wait()
		t.Logf("%d keys evicted, used_memory %d, maxmemory %s", evictedKeys(t, junk), usedMemory(t, junk),
			junk.ConfigGet(context.Background(), "maxmemory").Val()["maxmemory"])
		return tr.h
	})
}

// TestChaosSlotMigration: the users' keys live in two slots of a private
// Cluster, which the run keeps moving between nodes, one key per MIGRATE
// with random pauses, while the traffic runs. Defence: the index as the
// authority, which RevokeAll changes atomically while its clean-up cannot
// reach keys on the other node (item 10).
func TestChaosSlotMigration(t *testing.T) {
	runChaos(t, "Cluster slot migration", func(t *testing.T, rng *rand.Rand, control bool) *faults.History {
		cl := testenv.StartRedisCluster(t, 3)
		gen := newGen(t)
		var users []idtype.ID
		for range 2 {
			tag := slotTag(userID(t, gen))
			for range 8 {
				users = append(users, sameTagUser(t, gen, tag))
			}
		}
		ms := chaosManagers(t, cl.Client(), Options{}, defences{noIndexCheck: true}, control)
		tr := newTraffic(ms, users)
		// Slots full of sessions, so that a migration takes a while and
		// splits users' keys between two nodes, where RevokeAll meets
		// them.
		tr.mix = [6]int{10, 70, 3, 3, 6, 3}
		tr.seed(t, 8)
		stop := make(chan struct{})
		wait := tr.run(rng, 8, stop)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sleep(rng, 200*time.Millisecond, 400*time.Millisecond)
		migrations, keysMoved, migrating := 0, 0, time.Duration(0)
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
			u := users[rng.IntN(len(users))]
			slot, err := cl.KeySlot(ctx, ms[0].keys.index(slotTag(u)))
			if err != nil {
				t.Fatal(err)
			}
			owner, err := cl.SlotOwner(ctx, slot)
			if err != nil {
				t.Fatal(err)
			}
			to := (owner + 1 + rng.IntN(2)) % 3
			t0 := time.Now()
			n, err := cl.MigrateSlot(ctx, slot, to, testenv.MigrateOptions{Batch: 1, Step: func(int) error {
				sleep(rng, 2*time.Millisecond, 20*time.Millisecond)
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			migrations++
			keysMoved += n
			migrating += time.Since(t0)
			sleep(rng, 50*time.Millisecond, 200*time.Millisecond)
		}
		close(stop)
		wait()
		t.Logf("%d migrations moved %d keys in %v", migrations, keysMoved, migrating)
		return tr.h
	})
}

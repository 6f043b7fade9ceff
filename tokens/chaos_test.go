package tokens

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/chaos"
	"github.com/snowkeyhq/snowkey/internal/testing/faultproxy"
	"github.com/snowkeyhq/snowkey/internal/testing/history"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// The chaos suite: several Managers (some with a cache) send random
// Issue, Validate, Revoke, RevokeSession, RevokeAll and Rotate calls to
// real Redis deployments while a fault is injected; every call is recorded
// in a history.History and history.CheckTokens judges the history against
// the promise (see the package doc). Each fault kind is a chaos.Scenario
// against one defence: it runs with the defence switched off (the
// control), which must find violations, and on, which must find none.
// Every run records whether it met its fault, from what it observed;
// where the traffic makes the fault only now and then, the run ends by
// driving the calls that the fault breaks (validating the sessions that
// outlived their index, say), recorded like the rest, so that a run that
// met the fault also puts the defence to work. The five kinds share
// chaos.Budget: about 45 s in `make test`, CHAOS_TIME in `make chaos`.

// chaosKinds is the number of TestChaos tests that share the budget.
const chaosKinds = 5

// chaosTTLs are the CacheTTLs of a run's Managers, by Manager number:
// one without a cache, two with.
var chaosTTLs = []time.Duration{0, 100 * time.Millisecond, 400 * time.Millisecond}

// chaosScenario runs one fault kind once, with the defence off when
// r.Control, records in r whether the run met its fault, and returns the
// traffic, whose history holds every call. ctx ends at the test's
// Deadline: a run that waits to observe its fault waits on ctx, so that
// only the test's own bound, which stretches with the machine's load,
// ends the wait.
type chaosScenario func(ctx context.Context, t *testing.T, r *chaos.Run) *traffic

// runChaos runs a fault kind's scenario, on store against defence, for
// its share of the budget: every run's history is checked, and Scenario
// judges the sides and reports the row.
//
// In `make test` the kinds run in parallel, each for a fifth of the short
// budget, so that they add little to the package's time; in the long
// schedule (CHAOS_TIME) one after another, so that together they fill it.
func runChaos(t *testing.T, fault, store, defence string, scenario chaosScenario) {
	if !chaos.Long() {
		t.Parallel()
	}
	// A side may run past its share by Scenario.Retries runs of a few
	// seconds each.
	budget := chaos.Budget(t) / chaosKinds
	ctx := testenv.Deadline(t, budget+5*time.Minute)
	chaos.Scenario{Package: "tokens", Fault: fault, Store: store, Defence: defence,
		Budget: budget}.Run(t, func(t *testing.T, r *chaos.Run) {
		tr := scenario(ctx, t, r)
		h := tr.h
		vs := history.CheckTokens(h, tr.cacheTTL)
		r.CountTokens(h.Sessions())
		other := 0
		for _, op := range h.Ops() {
			if op.Outcome == history.OtherError {
				other++
				if other <= 5 {
					t.Errorf("unexpected error: m%d %v: %s", op.Manager, op.Kind, op.Err)
				}
			}
		}
		t.Logf("%d calls, %d sessions, %d violations; %s", h.Len(), h.Sessions(), len(vs), outcomes(h))
		for _, v := range vs {
			r.Violation("%v", v)
		}
		if !r.Control && len(vs) > 0 {
			path := filepath.Join(os.TempDir(), fmt.Sprintf("tokens-chaos-%d.history", time.Now().UnixNano()))
			if err := h.Dump(path); err == nil {
				t.Logf("history in %s", path)
			}
		}
	})
}

// outcomes summarizes a history: per kind of call, its outcomes.
func outcomes(h *history.History) string {
	counts := map[history.OpKind]map[history.Outcome]int{}
	for _, op := range h.Ops() {
		if counts[op.Kind] == nil {
			counts[op.Kind] = map[history.Outcome]int{}
		}
		counts[op.Kind][op.Outcome]++
	}
	var parts []string
	for k := history.Issue; k <= history.Rotate; k++ {
		var o []string
		for out := history.Pending; out <= history.OtherError; out++ {
			if n := counts[k][out]; n > 0 {
				o = append(o, fmt.Sprintf("%v %d", out, n))
			}
		}
		parts = append(parts, fmt.Sprintf("%v: %s", k, strings.Join(o, ", ")))
	}
	return strings.Join(parts, "; ")
}

// chaosManagers makes a run's Managers over client, one per CacheTTL of
// ttls (chaosTTLs unless a scenario needs others), sharing their keys,
// with the defence turned off when control.
func chaosManagers(t *testing.T, client redis.UniversalClient, opts Options, ttls []time.Duration, off defences, control bool) []*Manager {
	t.Helper()
	gen := newGen(t)
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = testenv.KeyPrefix(t)
	}
	if !control {
		off = defences{}
	}
	ms := make([]*Manager, len(ttls))
	for i, ttl := range ttls {
		o := opts
		o.CacheTTL = ttl
		ms[i] = openManagerWithout(t, client, gen, o, off)
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
	h        *history.History
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

// cacheTTL returns the CacheTTL of the traffic's Manager m.
func (tr *traffic) cacheTTL(m int) time.Duration {
	return tr.managers[m].opts.CacheTTL
}

func newTraffic(managers []*Manager, users []idtype.ID) *traffic {
	return &traffic{h: history.New(classifyTokenError), managers: managers, users: users,
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

func classifyTokenError(err error) history.Outcome {
	switch {
	case errors.Is(err, ErrInvalidToken):
		return history.Invalid
	case errors.Is(err, ErrUnavailable):
		return history.Unavailable
	}
	return history.OtherError
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
			c := tr.h.Begin(history.Op{Kind: history.Issue, User: int64(user)})
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
		c := tr.h.Begin(history.Op{Kind: history.Issue, Manager: mi, User: int64(user)})
		tok, s, err := m.Issue(ctx, user, Metadata{})
		if err == nil {
			c.SetSession(int64(s.ID))
			tr.add(tok, s)
		}
		c.End(err)
	case 1:
		tr.validate(ctx, mi, x)
	case 2:
		c := tr.h.Begin(history.Op{Kind: history.Revoke, Manager: mi, Session: int64(x.sid)})
		c.End(m.Revoke(ctx, x.tok))
	case 3:
		c := tr.h.Begin(history.Op{Kind: history.RevokeSession, Manager: mi, Session: int64(x.sid), User: int64(x.user)})
		_, err := m.RevokeSession(ctx, x.user, x.sid)
		c.End(err)
	case 4:
		var keep []idtype.ID
		if r.IntN(3) == 0 {
			keep = append(keep, x.sid)
		}
		tr.revokeAll(ctx, mi, x.user, keep...)
	default:
		c := tr.h.Begin(history.Op{Kind: history.Rotate, Manager: mi, Session: int64(x.sid)})
		tok, s, err := m.Rotate(ctx, x.tok)
		if err == nil {
			c.SetNewSession(int64(s.ID))
			c.SetUser(int64(s.UserID))
			tr.add(tok, s)
		}
		c.End(err)
	}
}

// validate validates x through Manager mi, recorded, and returns
// Validate's error.
func (tr *traffic) validate(ctx context.Context, mi int, x chaosToken) error {
	c := tr.h.Begin(history.Op{Kind: history.Validate, Manager: mi, Session: int64(x.sid)})
	s, err := tr.managers[mi].Validate(ctx, x.tok)
	if err == nil {
		c.SetUser(int64(s.UserID))
		if s.ID != x.sid { // a rotated-out token, within its grace window
			c.SetServed(int64(s.ID))
		}
	}
	c.End(err)
	return err
}

// revokeAll revokes the user's sessions but keep through Manager mi,
// recorded.
func (tr *traffic) revokeAll(ctx context.Context, mi int, user idtype.ID, keep ...idtype.ID) error {
	c := tr.h.Begin(history.Op{Kind: history.RevokeAll, Manager: mi, User: int64(user), Keep: toInt64s(keep)})
	_, err := tr.managers[mi].RevokeAll(ctx, user, keep...)
	c.End(err)
	return err
}

// tokens returns every token the traffic made, by session.
func (tr *traffic) tokens() map[int64]chaosToken {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make(map[int64]chaosToken, len(tr.toks))
	for _, x := range tr.toks {
		out[int64(x.sid)] = x
	}
	return out
}

// waitCalls waits until the traffic has begun n calls, so that its
// connections are open, or fails the test when ctx ends first.
func (tr *traffic) waitCalls(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	for tr.h.Len() < n {
		select {
		case <-ctx.Done():
			t.Fatalf("the traffic began %d calls, not %d: %v", tr.h.Len(), n, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// isRevocation reports whether op may end sessions.
func isRevocation(op history.Op) bool {
	switch op.Kind {
	case history.Revoke, history.RevokeSession, history.RevokeAll, history.Rotate:
		return true
	}
	return false
}

// covered returns the sessions a revocation op may end: its session, or,
// for a RevokeAll, every session of its user made before it began except
// those it kept. made gives when each session's Issue or Rotate ended,
// byUser the sessions of each user.
func covered(op history.Op, made map[int64]time.Time, byUser map[int64][]int64) []int64 {
	if op.Kind != history.RevokeAll {
		return []int64{op.Session}
	}
	var out []int64
	for _, s := range byUser[op.User] {
		if made[s].Before(op.Start) && !slices.Contains(op.Keep, s) {
			out = append(out, s)
		}
	}
	return out
}

// sessionsOf indexes the sessions that ops made: when each was made, and
// the sessions of each user.
func sessionsOf(ops []history.Op) (made map[int64]time.Time, byUser map[int64][]int64) {
	made, byUser = map[int64]time.Time{}, map[int64][]int64{}
	users := map[int64]int64{}
	for _, op := range ops {
		if op.Outcome != history.OK {
			continue
		}
		switch {
		case op.Kind == history.Issue && op.Session != 0:
			made[op.Session], users[op.Session] = op.End, op.User
			byUser[op.User] = append(byUser[op.User], op.Session)
		case op.Kind == history.Rotate && op.NewSession != 0:
			if _, again := made[op.NewSession]; again {
				continue // a Rotate within the grace window returns the first one's session
			}
			u := users[op.Session]
			made[op.NewSession], users[op.NewSession] = op.End, u
			byUser[u] = append(byUser[u], op.NewSession)
		}
	}
	return made, byUser
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

// cacheRaces counts the races that the cache's revocation count guards
// against, as the history shows them: a Validate v on a caching Manager
// that succeeded although a successful revocation of its session, on the
// same Manager, began after it and returned before it (v's read of Redis
// may have come before the revocation's delete, and its answer, without
// the guard, goes into the cache after the revocation cleared it), and a
// later Validate w of the session on that Manager that began after v
// returned and before v's answer, if cached, could have expired. Only
// then has the run met its fault: w is where a stale cached answer would
// be served, and what the history check judges. ttl gives each
// Manager's CacheTTL.
//
// ops begin in the order of their index, as a History records them, so
// that each list below is sorted by start: for each v, a binary search
// finds the revocations that began after it and the first Validate after
// it, and it looks at the revocations of its session (or user) on its
// Manager that began while it ran, not at every one.
func cacheRaces(ops []history.Op, ttl func(manager int) time.Duration) int {
	made, byUser := sessionsOf(ops)
	usersOf := map[int64][]int64{}
	for u, sessions := range byUser {
		for _, s := range sessions {
			if !slices.Contains(usersOf[s], u) {
				usersOf[s] = append(usersOf[s], u)
			}
		}
	}
	type key struct {
		m  int
		id int64 // a session, or for revokeAlls a user
	}
	// On each caching Manager: the successful revocations of each
	// session by its ID or token, the successful RevokeAlls of each
	// user, and the Validates of each session.
	revs, revokeAlls, validates := map[key][]history.Op{}, map[key][]history.Op{}, map[key][]history.Op{}
	for _, op := range ops {
		if ttl(op.Manager) == 0 {
			continue
		}
		switch {
		case op.Kind == history.Validate:
			validates[key{op.Manager, op.Session}] = append(validates[key{op.Manager, op.Session}], op)
		case op.Outcome != history.OK || !isRevocation(op):
		case op.Kind == history.RevokeAll:
			revokeAlls[key{op.Manager, op.User}] = append(revokeAlls[key{op.Manager, op.User}], op)
		default:
			revs[key{op.Manager, op.Session}] = append(revs[key{op.Manager, op.Session}], op)
		}
	}
	n := 0
	for _, v := range ops {
		// A Validate that served a rotated-out token as its successor
		// cached the successor, not the session it began with.
		if v.Kind != history.Validate || v.Outcome != history.OK || v.Served != 0 || ttl(v.Manager) == 0 {
			continue
		}
		spanned := spannedBy(revs[key{v.Manager, v.Session}], v, v.Start)
		for _, u := range usersOf[v.Session] {
			// A RevokeAll covers the sessions made before it began.
			spanned = spanned || spannedBy(revokeAlls[key{v.Manager, u}], v, later(v.Start, made[v.Session]))
		}
		if !spanned {
			continue
		}
		// An answer cached during v lives at least until v began plus
		// the cache's TTL.
		ws := validates[key{v.Manager, v.Session}]
		i := sort.Search(len(ws), func(i int) bool { return ws[i].Start.After(v.End) })
		if i < len(ws) && ws[i].Start.Before(v.Start.Add(ttl(v.Manager))) {
			n++
		}
	}
	return n
}

// spannedBy reports whether one of rs, revocations sorted by start, began
// after from and returned before v did without keeping v's session.
func spannedBy(rs []history.Op, v history.Op, from time.Time) bool {
	// A revocation ends no earlier than it began: one that began once v
	// had returned, and every later one, returned after v.
	for i := sort.Search(len(rs), func(i int) bool { return rs[i].Start.After(from) }); i < len(rs) && rs[i].Start.Before(v.End); i++ {
		if rs[i].End.Before(v.End) && !slices.Contains(rs[i].Keep, v.Session) {
			return true
		}
	}
	return false
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// TestChaosProxyDelay: the Managers reach Redis through a proxy whose
// delay the run changes at random, so reads are in flight while
// revocations run. Defence: the cache's revocation count. The run met
// its fault when the history shows a Validate on a caching Manager that
// read a session before a revocation of it on the same Manager and
// returned after it, and a later Validate there while that answer could
// still be cached (cacheRaces); it keeps its delays changing until then.
func TestChaosProxyDelay(t *testing.T) {
	runChaos(t, "proxy delay (cache race)", "redis", "cache revocation count", func(ctx context.Context, t *testing.T, r *chaos.Run) *traffic {
		proxy := faultproxy.Start(t, testenv.Redis(t))
		client := redis.NewClient(&redis.Options{Addr: proxy.Addr(), PoolSize: 32})
		t.Cleanup(func() { _ = client.Close() })
		tr := newTraffic(chaosManagers(t, client, Options{}, proxyDelayTTLs, defences{noCacheGuard: true}, r.Control), chaosUsers(t, 12))
		// Calls on fresh tokens, mostly through the caching Managers,
		// the long-lived cache first, with more revocations: a Validate's
		// first read of a token and a revocation of it on the same
		// Manager overlap often.
		tr.hot, tr.weights, tr.mix = 0.9, []int{1, 2, 5}, [6]int{20, 55, 10, 6, 3, 6}
		stop := make(chan struct{})
		wait := tr.run(r.Rand, 16, stop)
		// Two seconds of changing delays, then on until the history
		// shows the race, however slow the machine: only the test's
		// deadline ends the wait.
		start := time.Now()
		races := 0
		for time.Since(start) < 2*time.Second || races == 0 {
			if ctx.Err() != nil {
				t.Fatalf("no cache race in %d calls before the test's deadline: %v", tr.h.Len(), context.Cause(ctx))
			}
			proxy.SetDelay(time.Duration(r.Rand.IntN(4000)) * time.Microsecond)
			sleep(r.Rand, 50*time.Millisecond, 300*time.Millisecond)
			races = cacheRaces(tr.h.Ops(), tr.cacheTTL)
		}
		close(stop)
		wait()
		r.Met("%d Validates on a caching Manager spanned a revocation of their session there, each followed there by a Validate of the session while its answer could still be cached",
			cacheRaces(tr.h.Ops(), tr.cacheTTL))
		return tr
	})
}

// proxyDelayTTLs are the CacheTTLs of TestChaosProxyDelay's Managers. A
// race is met only if a later Validate comes while the answer it left
// could still be cached, and a busy machine stretches a call past a
// short TTL: the third Manager keeps answers longer than any run lasts,
// so that a race on it is met however slow the machine; the second
// keeps them for less than a call may take, so that its entries also
// expire during the run.
var proxyDelayTTLs = []time.Duration{0, 100 * time.Millisecond, time.Hour}

// TestChaosFailover: the Managers reach a primary through a proxy; its
// replica replicates through another, which the run freezes for a while
// before the replica is promoted and the Managers' proxy is pointed at it.
// Defence: Options.WaitReplicas. The run met its fault when revocations
// that began while the replication was frozen were answered, and the
// sessions they covered are gone from the primary's index and still in
// the promoted replica's: the revocations that the failover lost. It then
// validates each of those sessions through the new primary.
//
// The traffic's revocations during the freeze meet the fault only now
// and then (most touch sessions made since the freeze, or already
// ended), and on a busy machine they may still be in flight at the cut,
// where they fail and break no promise. So each freeze also drives the
// call the fault breaks: the run issues a few sessions of its own, waits
// until the replica holds them, freezes, and revokes them. Every wait
// ends on what the run sees, answered calls and replication offsets,
// never on a timer; a freeze whose revocations were all answered and
// lost none is tried again, a bounded number of times, and then the run
// has missed its fault.
func TestChaosFailover(t *testing.T) {
	runChaos(t, "failover to a lagging replica", "redis with a replica", "WaitReplicas", func(ctx context.Context, t *testing.T, r *chaos.Run) *traffic {
		primary := private.StartRedis(t)
		repl := faultproxy.Start(t, primary.Addr())
		replica := private.StartRedisReplica(t, repl.Addr())
		front := faultproxy.Start(t, primary.Addr())
		client := redis.NewClient(&redis.Options{Addr: front.Addr(), PoolSize: 32, MaxRetries: 1})
		t.Cleanup(func() { _ = client.Close() })
		opts := Options{WaitReplicas: 1, WaitTimeout: 100 * time.Millisecond}
		if r.Control {
			opts.WaitReplicas = 0
		}
		ms := chaosManagers(t, client, opts, chaosTTLs, defences{}, r.Control)
		tr := newTraffic(ms, chaosUsers(t, 12))
		stop := make(chan struct{})
		wait := tr.run(r.Rand, 12, stop)
		sleep(r.Rand, 300*time.Millisecond, 800*time.Millisecond)
		var (
			lost   []chaosToken
			frozen time.Time
		)
		for attempt := 1; len(lost) == 0; attempt++ {
			if attempt > failoverFreezes {
				// Every freeze's revocations were answered and the
				// replica lost none: the run missed its fault.
				repl.Thaw()
				close(stop)
				wait()
				return tr
			}
			if attempt > 1 {
				repl.Thaw()
			}
			probe := failoverProbe(ctx, t, tr)
			// Freeze once the replica holds what was written so far,
			// the probe's sessions included: on a busy machine
			// replication through the proxy lags, and a replica frozen
			// before the sessions reached it holds none that a
			// revocation could lose.
			waitReplica(ctx, t, primary, replica)
			repl.Freeze()
			frozen = time.Now()
			sleep(r.Rand, 200*time.Millisecond, 600*time.Millisecond)
			// The probe's revocations are answered before the run looks:
			// OK, or, with WaitReplicas, Unavailable once WAIT has timed
			// out without the frozen replica's acknowledgement.
			for _, x := range probe {
				mi := r.Rand.IntN(len(ms))
				c := tr.h.Begin(history.Op{Kind: history.Revoke, Manager: mi, Session: int64(x.sid)})
				err := ms[mi].Revoke(ctx, x.tok)
				c.End(err)
				if ctx.Err() != nil {
					t.Fatalf("revoke the probe's sessions with replication frozen: the test's deadline passed: %v", context.Cause(ctx))
				}
			}
			lost = lostRevocations(ctx, t, tr, ms[0], primary.Client(), replica.Client(), frozen)
			if ctx.Err() != nil {
				t.Fatalf("look for revocations the frozen replica lost: the test's deadline passed: %v", context.Cause(ctx))
			}
			if len(lost) == 0 {
				t.Logf("freeze %d: %d revocations answered since it began (the probe's %d among them), none lost by the replica",
					attempt, answeredSince(tr.h.Ops(), frozen), len(probe))
			}
		}
		repl.Cut()
		lag := primary.ReplicationOffset() - replica.ReplicationOffset()
		replica.Promote()
		// Nothing writes to the promoted replica until the Managers'
		// proxy points at it, and a session gone from the old primary
		// never comes back: what is lost now stays lost.
		lost = lostRevocations(ctx, t, tr, ms[0], primary.Client(), replica.Client(), frozen)
		if ctx.Err() != nil {
			t.Fatalf("look for revocations the promoted replica lost: the test's deadline passed: %v", context.Cause(ctx))
		}
		front.Retarget(replica.Addr())
		front.Cut()
		front.Restore()
		sleep(r.Rand, 500*time.Millisecond, 1000*time.Millisecond)
		close(stop)
		wait()

		if len(lost) > 0 {
			r.Met("replica promoted %d bytes behind its primary, still holding %d sessions that answered revocations ended", lag, len(lost))
		}
		for _, x := range lost {
			tr.validate(ctx, 0, x)
		}
		return tr
	})
}

// failoverFreezes bounds the freezes of one TestChaosFailover run. The
// probe's revocations meet the fault in the first unless the freeze went
// wrong; a run whose freezes all lost nothing missed its fault.
const failoverFreezes = 3

// failoverProbe issues, through the first Manager and recorded, one
// session each for a few users of its own, which the traffic never
// picks: the sessions a freeze's revocations are sure to find live.
func failoverProbe(ctx context.Context, t *testing.T, tr *traffic) []chaosToken {
	t.Helper()
	var probe []chaosToken
	for _, user := range chaosUsers(t, 4) {
		c := tr.h.Begin(history.Op{Kind: history.Issue, User: int64(user)})
		tok, s, err := tr.managers[0].Issue(ctx, user, Metadata{})
		if err != nil {
			t.Fatalf("issue a probe session: %v", err)
		}
		c.SetSession(int64(s.ID))
		c.End(nil)
		probe = append(probe, chaosToken{tok, s.ID, user})
	}
	return probe
}

// waitReplica waits until replica has processed its primary's
// replication stream as far as it went at the call, or fails the test at
// ctx's end.
func waitReplica(ctx context.Context, t *testing.T, primary, replica *private.RedisServer) {
	t.Helper()
	for target := primary.ReplicationOffset(); replica.ReplicationOffset() < target; {
		select {
		case <-ctx.Done():
			t.Fatalf("the replica did not reach its primary's offset %d (it is at %d) before the test's deadline: %v",
				target, replica.ReplicationOffset(), context.Cause(ctx))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// answeredSince counts the revocations that began after from and have
// been answered, whatever the answer.
func answeredSince(ops []history.Op, from time.Time) int {
	n := 0
	for _, op := range ops {
		if isRevocation(op) && op.Start.After(from) && op.Outcome != history.Pending {
			n++
		}
	}
	return n
}

// lostRevocations returns the sessions that a revocation begun after from,
// and answered (OK, or Unavailable: WaitReplicas found no replica to
// acknowledge it), covered, which are gone from the primary's index and
// still in the replica's, session key and index entry.
func lostRevocations(ctx context.Context, t *testing.T, tr *traffic, m *Manager, primary, replica *redis.Client, from time.Time) []chaosToken {
	t.Helper()
	ops := tr.h.Ops()
	made, byUser := sessionsOf(ops)
	toks := tr.tokens()
	seen := map[int64]bool{}
	var candidates []chaosToken
	for _, op := range ops {
		if !isRevocation(op) || !op.Start.After(from) || (op.Outcome != history.OK && op.Outcome != history.Unavailable) {
			continue
		}
		for _, s := range covered(op, made, byUser) {
			if x, ok := toks[s]; ok && !seen[s] {
				seen[s] = true
				candidates = append(candidates, x)
			}
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	type probe struct {
		onPrimary, onReplica *redis.StringCmd
		key                  *redis.IntCmd
	}
	probes := make([]probe, len(candidates))
	pp, rp := primary.Pipeline(), replica.Pipeline()
	for i, x := range candidates {
		tag := slotTag(x.user)
		probes[i] = probe{pp.HGet(ctx, m.keys.index(tag), userField(x.user)),
			rp.HGet(ctx, m.keys.index(tag), userField(x.user)), rp.Exists(ctx, m.keys.session(tag, x.sid))}
	}
	for _, p := range []redis.Pipeliner{pp, rp} {
		if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			if ctx.Err() != nil {
				return nil // the caller reports the test's deadline
			}
			t.Fatalf("look for revocations the failover lost: %v", err)
		}
	}
	var lost []chaosToken
	for i, x := range candidates {
		p := probes[i]
		if !slices.Contains(parseEntries(p.onPrimary.Val()), x.sid) &&
			slices.Contains(parseEntries(p.onReplica.Val()), x.sid) && p.key.Val() == 1 {
			lost = append(lost, x)
		}
	}
	return lost
}

// TestChaosNoEviction: Redis under maxmemory-policy noeviction is filled
// to its limit and kept there for a while, during which reads of live
// sessions must keep working (history.History.ReadsMustWork). Defence: a
// refresh that fails does not fail Validate. Sessions issued before the
// traffic and never given to it are validated, due for a refresh, at the
// end of the full span, until the run meets its fault: a refresh that
// failed with Redis full.
func TestChaosNoEviction(t *testing.T) {
	runChaos(t, "maxmemory, noeviction", "redis", "refresh tolerance", func(ctx context.Context, t *testing.T, r *chaos.Run) *traffic {
		srv, junk := startMaxmemoryRedis(t, "4mb", "noeviction")
		opts := Options{IdleTimeout: time.Minute, RefreshInterval: 20 * time.Millisecond}
		ms := chaosManagers(t, clientFor(t, srv.Addr()), opts, chaosTTLs, defences{noRefreshTolerance: true}, r.Control)
		tr := newTraffic(ms, chaosUsers(t, 12))
		// The probe's sessions, which the traffic never revokes.
		var probe []chaosToken
		for _, user := range chaosUsers(t, 16) {
			c := tr.h.Begin(history.Op{Kind: history.Issue, User: int64(user)})
			tok, s, err := ms[0].Issue(ctx, user, Metadata{})
			if err != nil {
				t.Fatalf("issue a probe session: %v", err)
			}
			c.SetSession(int64(s.ID))
			c.End(nil)
			probe = append(probe, chaosToken{tok, s.ID, user})
		}
		stop := make(chan struct{})
		wait := tr.run(r.Rand, 8, stop)
		sleep(r.Rand, 200*time.Millisecond, 500*time.Millisecond)
		fillMemory(ctx, t, junk, 0)
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
		sleep(r.Rand, 800*time.Millisecond, 1500*time.Millisecond)
		// The probe validates its sessions, each due for a refresh, until
		// a refresh has failed with Redis full. Revocations free memory
		// that the filler may not have taken back yet, the more so on a
		// busy machine, so a round may find room: the next one fills the
		// server first, once the refreshes just made are due again.
		for {
			failed := ms[0].Stats().RefreshFailures
			for _, x := range probe {
				tr.validate(ctx, 0, x)
			}
			if n := ms[0].Stats().RefreshFailures - failed; n > 0 {
				r.Met("%d refreshes failed while Manager 0 validated the probe's %d sessions with Redis kept full", n, len(probe))
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("no refresh failed with Redis full before the test's deadline: %v", context.Cause(ctx))
			}
			time.Sleep(opts.RefreshInterval)
			fillMemory(ctx, t, junk, 0)
		}
		tr.h.ReadsMustWork(false)
		close(full)
		filler.Wait()
		if err := junk.Eval(context.Background(),
			`for _, k in ipairs(redis.call('KEYS', '*junk*')) do redis.call('DEL', k) end
			 for _, k in ipairs(redis.call('KEYS', 'refill:*')) do redis.call('DEL', k) end`, nil).Err(); err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		sleep(r.Rand, 200*time.Millisecond, 400*time.Millisecond)
		close(stop)
		wait()
		return tr
	})
}

// TestChaosAllKeysLRU: Redis under maxmemory-policy allkeys-lru evicts
// sessions and indexes while junk is written beside the traffic.
// Defence: the index check, which logs out a session whose index was
// evicted instead of letting it escape RevokeAll. The run met its fault
// when, after the traffic, session keys outlived their place in their
// user's index (it evicts on, a few junk keys at a time, until one has);
// it then revokes those users' sessions and validates the sessions.
func TestChaosAllKeysLRU(t *testing.T) {
	runChaos(t, "maxmemory, allkeys-lru", "redis", "index check", func(ctx context.Context, t *testing.T, r *chaos.Run) *traffic {
		// Room for a thousand sessions (100 kB more than the server
		// uses once the traffic is connected), which the traffic fills in
		// about a second, helped by small junk values, so that what LRU
		// evicts is mostly sessions and indexes. Many users and few
		// Issues: an index is touched only when its user's sessions are
		// written, a session by every Validate too, so that indexes age
		// faster than the sessions in them, and LRU evicts some of them
		// first.
		//
		// The traffic's connections are all open before the room is
		// measured, and no more open later: each costs the server tens of
		// kB, and on a busy machine, whose slower calls overlap more, the
		// connections opened later could take the whole room, leaving
		// Redis no key to evict, so that it refuses writes with OOM.
		srv, junk := startMaxmemoryRedis(t, "0", "allkeys-lru")
		const workers, conns = 8, 16
		client := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: 1, DialTimeout: time.Second,
			PoolSize: conns, MinIdleConns: conns})
		t.Cleanup(func() { _ = client.Close() })
		ms := chaosManagers(t, client, Options{}, chaosTTLs, defences{noIndexCheck: true}, r.Control)
		tr := newTraffic(ms, chaosUsers(t, 1000))
		tr.mix = [6]int{6, 80, 4, 3, 4, 3}
		stop := make(chan struct{})
		wait := tr.run(r.Rand, workers, stop)
		tr.waitCalls(ctx, t, 4*workers)
		for connectedClients(t, junk) < conns+1 {
			if ctx.Err() != nil {
				t.Fatalf("the traffic's %d connections did not open", conns)
			}
			time.Sleep(10 * time.Millisecond)
		}
		srv.ConfigSet("maxmemory", strconv.FormatInt(usedMemory(t, junk)+100_000, 10))
		value := strings.Repeat("z", 100+r.Rand.IntN(300))
		fill := make(chan struct{})
		var filler sync.WaitGroup
		filler.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-fill:
					return
				default:
				}
				// A few writes a round trip: a busy machine makes round
				// trips slow, and the limit must still fill.
				pipe := junk.Pipeline()
				for j := range 8 {
					pipe.Set(context.Background(), fmt.Sprintf("junk:%d:%d", i, j), value, 0)
				}
				_, _ = pipe.Exec(context.Background())
				time.Sleep(time.Millisecond)
			}
		})
		sleep(r.Rand, 1500*time.Millisecond, 2500*time.Millisecond)
		// Eviction is the fault: past its schedule, the run goes on until
		// LRU has evicted a few hundred keys, however slowly a loaded
		// machine, or a server that packs keys tighter as Valkey does,
		// fills the room: only the test's deadline ends the wait.
		for evictedKeys(t, junk) < 300 {
			if ctx.Err() != nil {
				t.Fatalf("LRU evicted %d keys, not 300, before the test's deadline: %v", evictedKeys(t, junk), context.Cause(ctx))
			}
			time.Sleep(50 * time.Millisecond)
		}
		close(stop)
		wait()
		close(fill)
		filler.Wait()
		t.Logf("%d keys evicted, used_memory %d, maxmemory %s", evictedKeys(t, junk), usedMemory(t, junk),
			junk.ConfigGet(ctx, "maxmemory").Val()["maxmemory"])

		// With the index check on, the traffic's Validates log out the
		// sessions an evicted index left behind, so a defended run may end
		// its traffic without one, and the slower the machine, the likelier.
		// Now that nothing validates them, the run evicts on, a few junk
		// keys at a time, until one is left.
		toks := tr.tokens()
		orphans := orphanSessions(t, junk, ms[0], toks)
		for i := 0; len(orphans) == 0; i++ {
			if ctx.Err() != nil {
				t.Fatalf("no session key outlived its index before the test's deadline: %v", context.Cause(ctx))
			}
			pipe := junk.Pipeline()
			for j := range 8 {
				pipe.Set(ctx, fmt.Sprintf("junk:after:%d:%d", i, j), value, 0)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				if strings.HasPrefix(err.Error(), "OOM") {
					// Redis has no key left to evict.
					t.Logf("write junk: %v", err)
					break
				}
				t.Fatalf("write junk: %v", err)
			}
			live, orphaned := unindexedSessions(t, junk, ms[0], toks)
			if orphaned {
				orphans = orphanSessions(t, junk, ms[0], toks)
			} else if live == 0 {
				break
			}
		}
		if len(orphans) == 0 {
			return tr
		}
		r.Met("%d session keys outlived their place in their user's index", len(orphans))
		for _, x := range orphans[:min(len(orphans), 20)] {
			if err := tr.revokeAll(ctx, 0, x.user); err != nil {
				t.Fatalf("RevokeAll of an orphan's user: %v", err)
			}
			tr.validate(ctx, 0, x)
		}
		return tr
	})
}

// connectedClients returns the number of clients connected to c's server.
func connectedClients(t *testing.T, c *redis.Client) int {
	t.Helper()
	return int(infoInt(t, c, "clients", "connected_clients"))
}

// unindexedSessions looks, without touching a key's LRU clock (EXISTS
// does not), for session keys among toks whose user's index key is gone:
// it returns how many session keys exist, and whether one of them has no
// index.
func unindexedSessions(t *testing.T, c redis.Cmdable, m *Manager, toks map[int64]chaosToken) (live int, orphaned bool) {
	t.Helper()
	ctx := t.Context()
	type probe struct{ session, index *redis.IntCmd }
	var probes []probe
	pipe := c.Pipeline()
	for _, x := range toks {
		tag := slotTag(x.user)
		probes = append(probes, probe{pipe.Exists(ctx, m.keys.session(tag, x.sid)), pipe.Exists(ctx, m.keys.index(tag))})
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("look for unindexed sessions: %v", err)
	}
	for _, p := range probes {
		if p.session.Val() == 1 {
			live++
			orphaned = orphaned || p.index.Val() == 0
		}
	}
	return live, orphaned
}

// orphanSessions returns the tokens whose session key exists while their
// user's index does not hold them.
func orphanSessions(t *testing.T, c redis.Cmdable, m *Manager, toks map[int64]chaosToken) []chaosToken {
	t.Helper()
	ctx := t.Context()
	type probe struct {
		x      chaosToken
		exists *redis.IntCmd
		field  *redis.StringCmd
	}
	var probes []probe
	pipe := c.Pipeline()
	for _, x := range toks {
		tag := slotTag(x.user)
		probes = append(probes, probe{x, pipe.Exists(ctx, m.keys.session(tag, x.sid)), pipe.HGet(ctx, m.keys.index(tag), userField(x.user))})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("look for orphaned sessions: %v", err)
	}
	var out []chaosToken
	for _, p := range probes {
		if p.exists.Val() == 1 && !slices.Contains(parseEntries(p.field.Val()), p.x.sid) {
			out = append(out, p.x)
		}
	}
	slices.SortFunc(out, func(a, b chaosToken) int { return cmp.Compare(a.sid, b.sid) })
	return out
}

// TestChaosSlotMigration: the users' keys live in two slots of a private
// Cluster, which the run keeps moving between nodes, one key per MIGRATE
// with random pauses, while the traffic runs. Defence: the index as the
// authority, which RevokeAll changes atomically while its clean-up cannot
// reach keys on the other node. The run met its fault when session keys
// outlived a RevokeAll that returned; it then validates those sessions.
func TestChaosSlotMigration(t *testing.T) {
	runChaos(t, "Cluster slot migration", "cluster", "index check", func(ctx context.Context, t *testing.T, r *chaos.Run) *traffic {
		cl := private.StartRedisCluster(t, 3)
		gen := newGen(t)
		var users []idtype.ID
		for range 2 {
			tag := slotTag(userID(t, gen))
			for range 8 {
				users = append(users, sameTagUser(t, gen, tag))
			}
		}
		ms := chaosManagers(t, cl.Client(), Options{}, chaosTTLs, defences{noIndexCheck: true}, r.Control)
		tr := newTraffic(ms, users)
		// Slots full of sessions, so that a migration takes a while and
		// splits users' keys between two nodes, where RevokeAll meets
		// them.
		tr.mix = [6]int{10, 70, 3, 3, 6, 3}
		tr.seed(t, 8)
		stop := make(chan struct{})
		wait := tr.run(r.Rand, 8, stop)
		sleep(r.Rand, 200*time.Millisecond, 400*time.Millisecond)
		migrations, keysMoved, migrating := 0, 0, time.Duration(0)
		// Two seconds of migrations, then on until a session key has
		// outlived a RevokeAll, bounded by the test's deadline. Sessions
		// found gone are not looked up again, and the look runs at most
		// once a second: it reads the whole history, which grows by tens
		// of thousands of calls a second, and migrations, not looks, are
		// what meet the fault.
		gone := map[int64]bool{}
		var looked time.Time
		met := func() bool {
			if time.Since(looked) < time.Second {
				return false
			}
			defer func() { looked = time.Now() }()
			return len(survivorsOfRevokeAll(t, cl.Client(), ms[0], tr, gone)) > 0
		}
		for start := time.Now(); time.Since(start) < 2*time.Second || !met(); {
			if ctx.Err() != nil {
				t.Fatalf("no session key outlived a RevokeAll in %d migrations before the test's deadline: %v", migrations, context.Cause(ctx))
			}
			u := users[r.Rand.IntN(len(users))]
			slot, err := cl.KeySlot(ctx, ms[0].keys.index(slotTag(u)))
			if err != nil {
				t.Fatal(err)
			}
			owner, err := cl.SlotOwner(ctx, slot)
			if err != nil {
				t.Fatal(err)
			}
			to := (owner + 1 + r.Rand.IntN(2)) % 3
			t0 := time.Now()
			n, err := cl.MigrateSlot(ctx, slot, to, private.MigrateOptions{Batch: 1, Step: func(int) error {
				sleep(r.Rand, 2*time.Millisecond, 20*time.Millisecond)
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			migrations++
			keysMoved += n
			migrating += time.Since(t0)
			sleep(r.Rand, 50*time.Millisecond, 200*time.Millisecond)
		}
		close(stop)
		wait()
		t.Logf("%d migrations moved %d keys in %v", migrations, keysMoved, migrating)

		survivors := survivorsOfRevokeAll(t, cl.Client(), ms[0], tr, gone)
		if len(survivors) == 0 {
			return tr
		}
		r.Met("%d session keys outlived a RevokeAll that returned (%d migrations)", len(survivors), migrations)
		for _, x := range survivors {
			tr.validate(ctx, 0, x)
		}
		return tr
	})
}

// survivorsOfRevokeAll returns the tokens whose session key still exists
// although a RevokeAll that covered them returned successfully. It skips
// the sessions in gone, and adds those it finds gone (a session's key,
// once deleted, never comes back: its ID is never issued again).
func survivorsOfRevokeAll(t *testing.T, c redis.Cmdable, m *Manager, tr *traffic, gone map[int64]bool) []chaosToken {
	t.Helper()
	toks := tr.tokens()
	var out []chaosToken
	for _, s := range revokedByRevokeAll(tr.h.Ops()) {
		x, ok := toks[s]
		if !ok || gone[s] {
			continue
		}
		n, err := c.Exists(t.Context(), m.keys.session(slotTag(x.user), x.sid)).Result()
		if err != nil {
			t.Fatalf("look for sessions that outlived RevokeAll: %v", err)
		}
		if n == 1 {
			out = append(out, x)
		} else {
			gone[s] = true
		}
	}
	return out
}

// revokedByRevokeAll returns the sessions that a successful RevokeAll
// covered (see covered), each once, in the order of the first RevokeAll
// that covered each and, for one RevokeAll, in the order they were made.
// ops begin in the order of their index, as a History records them, so
// that for each session a binary search finds the first RevokeAll of its
// user that began after it was made, past those that kept it, instead of
// each RevokeAll looking at every session of its user.
func revokedByRevokeAll(ops []history.Op) []int64 {
	made, byUser := sessionsOf(ops)
	revokeAlls := map[int64][]history.Op{} // the successful ones of each user
	for _, op := range ops {
		if op.Kind == history.RevokeAll && op.Outcome == history.OK {
			revokeAlls[op.User] = append(revokeAlls[op.User], op)
		}
	}
	type first struct {
		s        int64
		op, made int // the first RevokeAll that covered s; s's place among its user's sessions
	}
	var firsts []first
	for u, sessions := range byUser {
		ras := revokeAlls[u]
		for i, s := range sessions {
			j := sort.Search(len(ras), func(j int) bool { return made[s].Before(ras[j].Start) })
			for j < len(ras) && slices.Contains(ras[j].Keep, s) {
				j++
			}
			if j < len(ras) {
				firsts = append(firsts, first{s: s, op: ras[j].Index, made: i})
			}
		}
	}
	slices.SortFunc(firsts, func(a, b first) int { return cmp.Or(cmp.Compare(a.op, b.op), cmp.Compare(a.made, b.made)) })
	seen := map[int64]bool{}
	var out []int64
	for _, f := range firsts {
		if !seen[f.s] {
			seen[f.s] = true
			out = append(out, f.s)
		}
	}
	return out
}

package tokens

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// reprefix rewrites a token under another prefix with a correct checksum,
// as an attacker who knows the format can.
func reprefix(t testing.TB, tok, from, to string) string {
	t.Helper()
	p, ok := parseToken(from, tok)
	if !ok {
		t.Fatalf("token %q does not parse under %q", tok, from)
	}
	return p.format(to)
}

// TestPrefixBound: a token validates only under the prefix it was issued
// with, even when the two Managers share their keys.
func TestPrefixBound(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		c := b.client(t)
		snk := openManager(t, c, gen, Options{})
		// With a cache, which knows tokens by their secret alone: a token
		// it holds, moved to another prefix, must not hit another cache.
		abc := openManager(t, c, gen, Options{KeyPrefix: snk.opts.KeyPrefix, TokenPrefix: "abc", CacheTTL: time.Minute})
		snkCached := openManager(t, c, gen, Options{KeyPrefix: snk.opts.KeyPrefix, CacheTTL: time.Minute})
		abcTok, _ := issue(t, abc, userID(t, gen), Metadata{})
		if _, err := abc.Validate(ctx, abcTok); err != nil {
			t.Fatal(err)
		}
		if _, err := snkCached.Validate(ctx, reprefix(t, abcTok, "abc", "snk")); err != ErrInvalidToken {
			t.Errorf("an abc_ token cached by its Manager, re-prefixed to snk_: Validate = %v, want ErrInvalidToken", err)
		}
		tok, _ := issue(t, snk, userID(t, gen), Metadata{})
		moved := reprefix(t, tok, "snk", "abc")
		if _, err := abc.Validate(ctx, moved); err != ErrInvalidToken {
			t.Errorf("a snk_ token re-prefixed to abc_: Validate on the abc Manager = %v, want ErrInvalidToken", err)
		}
		if _, _, err := abc.Rotate(ctx, moved); err != ErrInvalidToken {
			t.Errorf("Rotate of the re-prefixed token = %v, want ErrInvalidToken", err)
		}
		if err := abc.Revoke(ctx, moved); err != ErrInvalidToken {
			t.Errorf("Revoke of the re-prefixed token = %v, want ErrInvalidToken", err)
		}
		if _, err := snk.Validate(ctx, tok); err != nil {
			t.Errorf("the original token: %v", err)
		}

		// Control: with the digest over the secret alone, the
		// re-prefixed token is accepted.
		snk = openManagerWithout(t, c, gen, snk.Options(), defences{noPrefixBinding: true})
		abc = openManagerWithout(t, c, gen, abc.Options(), defences{noPrefixBinding: true})
		tok, _ = issue(t, snk, userID(t, gen), Metadata{})
		if _, err := abc.Validate(ctx, reprefix(t, tok, "snk", "abc")); err != nil {
			t.Errorf("control: without the prefix in the digest the re-prefixed token was refused (%v): the test does not reach the fault", err)
		}
	})
}

// TestCacheRevokeRace: with CacheTTL, a Validate whose read was in flight
// while a revocation ran on the same Manager must not put the session
// back in the cache: no Validate that begins after the revocation
// returned may succeed. Each kind of revocation races 16 goroutines that
// validate the token from the moment it is issued, and each kind has its
// own control, without the revocation count, which must serve a revoked
// session. A round met the race when the cache saw an answer overtaken
// by the revocation; the defended rounds of a kind must meet it at least
// as often as its control needed to.
func TestCacheRevokeRace(t *testing.T) {
	forEach(t, []backend{singleBackend, clusterBackend}, func(t *testing.T, b backend) {
		ctx := testenv.Deadline(t, 3*time.Minute)
		c := b.client(t)
		gen := newGen(t)
		for _, kind := range revocationKinds {
			t.Run(kind, func(t *testing.T) {
				// The control first: rounds until one serves a revoked
				// session.
				m := openManagerWithout(t, c, gen, Options{CacheTTL: time.Minute, MaxSessions: 2}, defences{noCacheGuard: true})
				needed, found := 0, false
				for round := 0; round < maxRaceRounds && !found; round++ {
					met, bad := raceRevocation(ctx, t, m, gen, kind, round)
					if met {
						needed++
					}
					found = bad
				}
				if !found {
					t.Fatalf("control: without the guard, %d rounds (%d met the race) served no revoked session: the test does not reach the race",
						maxRaceRounds, needed)
				}
				t.Logf("control: a revoked session served from the cache after %d rounds that met the race", needed)

				m = openManager(t, c, gen, Options{CacheTTL: time.Minute, MaxSessions: 2})
				met, bad, rounds := 0, 0, 0
				for ; rounds < maxRaceRounds && (rounds < minRaceRounds || met < needed); rounds++ {
					ok, violated := raceRevocation(ctx, t, m, gen, kind, rounds)
					if ok {
						met++
					}
					if violated {
						bad++
					}
				}
				t.Logf("%d rounds, %d met the race", rounds, met)
				if bad > 0 {
					t.Errorf("in %d of %d rounds a Validate begun after the revocation returned succeeded", bad, rounds)
				}
				if met < needed {
					t.Errorf("%d of %d rounds met the race; the control needed %d to find the violation", met, rounds, needed)
				}
			})
		}
	})
}

// revocationKinds are the ways a Manager revokes a session.
var revocationKinds = []string{"Revoke", "RevokeSession", "RevokeAll", "Rotate", "MaxSessions"}

// The rounds of one revocation kind in TestCacheRevokeRace: at least
// minRaceRounds with the guard, at most maxRaceRounds on either side.
const (
	minRaceRounds = 40
	maxRaceRounds = 200
)

// raceRevocation runs one round of a revocation kind against 16
// goroutines that validate the new token at once. It reports whether the round met the race (the
// cache saw an answer that the revocation overtook) and whether a
// Validate that began after the revocation returned served the revoked
// session.
//
// Once the revocation has returned, every goroutine validates again, which
// shows that its Validates from before the revocation have all ended, so
// that any answer they cached is in the cache; then every goroutine
// validates once more. Each of those Validates must fail.
func raceRevocation(ctx context.Context, t *testing.T, m *Manager, gen *idtype.Generator, kind string, round int) (met, violated bool) {
	t.Helper()
	const validators = 16
	user := userID(t, gen)
	tok, s := issue(t, m, user, Metadata{})
	raced := m.cache.raced.Load()
	var (
		revoked  = make(chan struct{}) // closed once the revocation returned
		checking = make(chan struct{}) // closed once every goroutine validated after that
		bad      atomic.Bool
		started  sync.WaitGroup
		drained  sync.WaitGroup
		wg       sync.WaitGroup
		failures = make(chan error, validators)
	)
	// validate reports whether the token was served as the session s:
	// after a Rotate, within the grace window, it is served as the new
	// session, which is no violation.
	validate := func() bool {
		got, err := m.Validate(ctx, tok)
		if err != nil && !errors.Is(err, ErrInvalidToken) {
			failures <- err
			return false
		}
		return err == nil && got.ID == s.ID
	}
	started.Add(validators)
	drained.Add(validators)
	for range validators {
		wg.Go(func() {
			started.Done()
			// Race the revocation. Only a Validate that asks Redis can
			// race it, and only until an answer is cached, so one each.
			validate()
			// Then one Validate after the revocation returned, which
			// shows that this goroutine's racing one has ended, and one
			// once every goroutine has shown that: both must fail.
			drain := sync.OnceFunc(drained.Done)
			defer drain()
			for _, after := range []chan struct{}{revoked, checking} {
				select {
				case <-after:
				case <-ctx.Done():
					return
				}
				if validate() {
					bad.Store(true)
				}
				drain()
			}
		})
	}
	started.Wait()
	var err error
	switch kind {
	case "Revoke":
		err = m.Revoke(ctx, tok)
	case "RevokeSession":
		var ok bool
		if ok, err = m.RevokeSession(ctx, user, s.ID); err == nil && !ok {
			err = fmt.Errorf("RevokeSession found nothing")
		}
	case "RevokeAll":
		_, err = m.RevokeAll(ctx, user)
	case "Rotate":
		_, _, err = m.Rotate(ctx, tok)
	case "MaxSessions": // MaxSessions is 2: the third Issue evicts the first
		if _, _, err = m.Issue(ctx, user, Metadata{}); err == nil {
			_, _, err = m.Issue(ctx, user, Metadata{})
		}
	}
	close(revoked)
	drained.Wait()
	close(checking)
	wg.Wait()
	if err == nil {
		select {
		case err = <-failures:
		default:
		}
	}
	if err != nil {
		t.Fatalf("%s round %d: %v", kind, round, err)
	}
	return m.cache.raced.Load() != raced, bad.Load()
}

// TestLostIndex: a user's index that is gone (as allkeys-* eviction of
// the tag's index or a lost write leaves it) must not let a session
// survive RevokeAll, nor hide it from List and RevokeSession: the index
// is the authority, and a session missing from it is logged out.
func TestLostIndex(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		c := b.client(t)
		m := openManager(t, c, gen, Options{})

		// Control: with membership unchecked, a session whose index was
		// lost survives RevokeAll.
		unchecked := openManagerWithout(t, c, gen, Options{}, defences{noIndexCheck: true})
		user := userID(t, gen)
		tok, _ := issue(t, unchecked, user, Metadata{})
		loseIndex(t, c, unchecked, user)
		if _, err := unchecked.RevokeAll(ctx, user); err != nil {
			t.Fatal(err)
		}
		if _, err := unchecked.Validate(ctx, tok); err != nil {
			t.Errorf("control: without the index check a session survived nothing (%v): the test does not reach the fault", err)
		}

		user = userID(t, gen)
		tok1, s1 := issue(t, m, user, Metadata{})
		tok2, _ := issue(t, m, user, Metadata{})
		loseIndex(t, c, m, user)
		if _, err := m.RevokeAll(ctx, user); err != nil {
			t.Fatal(err)
		}
		for i, tok := range []string{tok1, tok2} {
			if _, err := m.Validate(ctx, tok); err != ErrInvalidToken {
				t.Errorf("session %d after its index was lost and RevokeAll returned: Validate = %v, want ErrInvalidToken", i+1, err)
			}
		}
		if list, err := m.List(ctx, user); err != nil || len(list) != 0 {
			t.Errorf("List = %d sessions, %v; want none", len(list), err)
		}
		if ok, err := m.RevokeSession(ctx, user, s1.ID); ok || err != nil {
			t.Errorf("RevokeSession = %v, %v; want false, nil", ok, err)
		}

		// A lost index logs the user out at once, before any RevokeAll:
		// the index is the authority, so its loss cannot be told apart
		// from a RevokeAll whose clean-up did not reach the sessions.
		user = userID(t, gen)
		tok, _ = issue(t, m, user, Metadata{})
		if _, err := m.Validate(ctx, tok); err != nil {
			t.Fatal(err)
		}
		loseIndex(t, c, m, user)
		if _, err := m.Validate(ctx, tok); err != ErrInvalidToken {
			t.Errorf("a session whose index is gone: Validate = %v, want ErrInvalidToken", err)
		}
		if _, _, err := m.Rotate(ctx, tok); err != ErrInvalidToken {
			t.Errorf("a session whose index is gone: Rotate = %v, want ErrInvalidToken", err)
		}
		// Nothing heals the index: a new login does not bring the old
		// session back.
		issue(t, m, user, Metadata{})
		if _, err := m.Validate(ctx, tok); err != ErrInvalidToken {
			t.Errorf("the old session after a new login re-created the index: Validate = %v", err)
		}

		// The index of a slot tag is one key: evicted, it logs out every
		// user of the tag.
		tag := slotTag(user)
		other := sameTagUser(t, gen, tag)
		tok, _ = issue(t, m, user, Metadata{})
		otherTok, _ := issue(t, m, other, Metadata{})
		if err := c.Del(ctx, m.keys.index(tag)).Err(); err != nil {
			t.Fatal(err)
		}
		for _, x := range []string{tok, otherTok} {
			if _, err := m.Validate(ctx, x); err != ErrInvalidToken {
				t.Errorf("a session of a tag whose index is gone: Validate = %v, want ErrInvalidToken", err)
			}
		}
	})
}

// TestEvictionFailsClosed fills a Redis under maxmemory-policy
// allkeys-lru until it evicts sessions and indexes, then revokes every
// user's sessions: none may validate afterwards. The sessions whose
// tag's index was evicted and whose key was not are the fault; without
// the index check (the control) they survive RevokeAll.
func TestEvictionFailsClosed(t *testing.T) {
	deadline := testenv.Deadline(t, 2*time.Minute)
	for _, control := range []bool{false, true} {
		t.Run(fmt.Sprintf("control=%v", control), func(t *testing.T) {
			t.Parallel()
			_, c := startMaxmemoryRedis(t, "4mb", "allkeys-lru")
			ctx := t.Context()
			gen := newGen(t)
			m := openManagerWithout(t, c, gen, Options{}, defences{noIndexCheck: control})
			type sess struct {
				tok  string
				user idtype.ID
				s    Session
			}
			var all []sess
			users := make([]idtype.ID, 300)
			for i := range users {
				users[i] = userID(t, gen)
				for range 3 {
					tok, s := issue(t, m, users[i], Metadata{Device: "phone"})
					all = append(all, sess{tok, users[i], s})
				}
			}
			fillMemory(deadline, t, c, 600)
			orphans := 0
			for _, x := range all {
				if !inIndex(t, c, m, x.user, x.s.ID) && c.Exists(ctx, m.keys.session(slotTag(x.user), x.s.ID)).Val() == 1 {
					orphans++
				}
			}
			t.Logf("%d evicted keys; %d of %d sessions kept their key but lost their index entry",
				evictedKeys(t, c), orphans, len(all))
			if orphans == 0 {
				t.Fatal("no session lost its index to eviction: the test does not reach the fault")
			}
			for _, u := range users {
				if _, err := m.RevokeAll(ctx, u); err != nil {
					t.Fatalf("RevokeAll under allkeys-lru: %v", err)
				}
			}
			survivors := 0
			for _, x := range all {
				_, err := m.Validate(ctx, x.tok)
				if err == nil {
					survivors++
				} else if err != ErrInvalidToken {
					t.Errorf("Validate: %v", err)
				}
			}
			switch {
			case !control && survivors > 0:
				t.Errorf("%d sessions validated after RevokeAll of their user returned", survivors)
			case control && survivors == 0:
				t.Error("control: without the index check no session survived RevokeAll: the test does not reach the fault")
			case control:
				t.Logf("control: %d sessions survived RevokeAll", survivors)
			}
		})
	}
}

// startMaxmemoryRedis starts a private server with a memory limit (such as
// "4mb"; an empty server uses about 900 kB) and a maxmemory-policy.
func startMaxmemoryRedis(t testing.TB, maxmemory, policy string) (*private.RedisServer, *redis.Client) {
	t.Helper()
	srv := private.StartRedis(t, "--maxmemory", maxmemory, "--maxmemory-policy", policy)
	return srv, clientFor(t, srv.Addr())
}

// fillMemory writes junk until the server refuses a write with OOM
// (noeviction) or has evicted at least minEvicted keys (allkeys-*), and
// keeps writing until ctx ends: the test's Deadline, not a time of
// fillMemory's own, bounds how long a loaded machine may take. It writes
// one key a round trip: a pipeline's bytes count against maxmemory while
// the server holds them, and a server refusing one would have room once
// they are freed.
func fillMemory(ctx context.Context, t testing.TB, c *redis.Client, minEvicted int64) {
	t.Helper()
	junk := strings.Repeat("x", 4096)
	for i := 0; ; i++ {
		err := c.Set(ctx, fmt.Sprintf("junk:%d", i), junk, 0).Err()
		if err != nil && strings.HasPrefix(err.Error(), "OOM") {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("memory did not fill before the test's deadline (used_memory %d, %d keys evicted, want %d): %v",
				usedMemory(t, c), evictedKeys(t, c), minEvicted, context.Cause(ctx))
		}
		if err != nil {
			t.Fatalf("fill: %v", err)
		}
		if minEvicted > 0 && i%64 == 0 && evictedKeys(t, c) >= minEvicted {
			return
		}
	}
}

// infoInt returns the integer field of the INFO section on c's server,
// failing t when the section has no such field or its value is not an
// integer.
func infoInt(t testing.TB, c *redis.Client, section, field string) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatalf("INFO %s: %v", section, err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO %s: %q: %v", section, line, err)
			}
			return n
		}
	}
	t.Fatalf("INFO %s has no %s:\n%s", section, field, info)
	return 0
}

// evictedKeys returns how many keys c's server has evicted.
func evictedKeys(t testing.TB, c *redis.Client) int64 {
	t.Helper()
	return infoInt(t, c, "stats", "evicted_keys")
}

// TestRefreshUnderOOM: with Redis full under noeviction, a session that
// the read verified is served even though its refresh cannot be written,
// the failed refresh is counted and retried on a later Validate, and
// revocations still work.
func TestRefreshUnderOOM(t *testing.T) {
	ctx := testenv.Deadline(t, 2*time.Minute)
	_, c := startMaxmemoryRedis(t, "4mb", "noeviction")
	gen := newGen(t)
	m := openManager(t, c, gen, Options{IdleTimeout: time.Hour, RefreshInterval: 50 * time.Millisecond})
	user := userID(t, gen)
	var toks []string
	var sess []Session
	for range 4 {
		tok, s := issue(t, m, user, Metadata{})
		toks, sess = append(toks, tok), append(sess, s)
	}
	other, _ := issue(t, m, userID(t, gen), Metadata{})
	fillMemory(ctx, t, c, 0)
	time.Sleep(100 * time.Millisecond) // every session is due for a refresh
	for i, tok := range toks {
		if _, err := m.Validate(ctx, tok); err != nil {
			t.Errorf("session %d, due for a refresh, with Redis out of memory: Validate = %v, want the session", i, err)
		}
	}
	if err := m.Revoke(ctx, toks[0]); err != nil {
		t.Errorf("Revoke under OOM: %v", err)
	}
	if ok, err := m.RevokeSession(ctx, user, sess[1].ID); !ok || err != nil {
		t.Errorf("RevokeSession under OOM = %v, %v", ok, err)
	}
	if _, err := m.RevokeAll(ctx, user, sess[3].ID); err != nil {
		t.Errorf("RevokeAll under OOM: %v", err)
	}
	for i, tok := range toks[:3] {
		if _, err := m.Validate(ctx, tok); err != ErrInvalidToken {
			t.Errorf("session %d revoked under OOM: Validate = %v", i, err)
		}
	}
	if _, err := m.Validate(ctx, other); err != nil {
		t.Errorf("another user's session: %v", err)
	}
	if n := m.Stats().RefreshFailures; n < 5 {
		t.Errorf("Stats().RefreshFailures = %d, want at least the 5 refreshes that failed", n)
	}
	if _, _, err := m.Issue(ctx, user, Metadata{}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Issue under OOM = %v, want ErrUnavailable", err)
	}

	// Control: without the tolerance, the failed refresh fails the call.
	intolerant := openManagerWithout(t, c, gen, m.Options(), defences{noRefreshTolerance: true})
	time.Sleep(100 * time.Millisecond)
	if _, err := intolerant.Validate(ctx, other); !errors.Is(err, ErrUnavailable) {
		t.Errorf("control: a failed refresh without the tolerance gave %v, want ErrUnavailable: the test does not reach the fault", err)
	}

	// With memory back, the next Validate makes the refresh that failed.
	if err := c.Eval(ctx, `for _, k in ipairs(redis.call('KEYS', 'junk:*')) do redis.call('DEL', k) end`, nil).Err(); err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	s, err := m.Validate(ctx, toks[3])
	if err != nil || !s.LastSeenAt.After(sess[3].LastSeenAt) {
		t.Errorf("with memory back: Validate = %+v, %v; want LastSeenAt past %v", s, err, sess[3].LastSeenAt)
	}
}

// TestRevokeAllDropsStaleCache: a session revoked through one Manager may
// still be in another's cache, for up to its CacheTTL; once that other
// Manager revokes the user's sessions itself, it must stop serving it at
// once, although its RevokeAll no longer finds the session in the index.
// (Found by TestChaosProxyDelay.)
func TestRevokeAllDropsStaleCache(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		c := b.client(t)
		plain := openManager(t, c, gen, Options{})
		cached := openManager(t, c, gen, Options{KeyPrefix: plain.opts.KeyPrefix, CacheTTL: time.Minute})
		user := userID(t, gen)
		tok, s := issue(t, plain, user, Metadata{})
		kept, k := issue(t, plain, user, Metadata{})
		for _, x := range []string{tok, kept} {
			if _, err := cached.Validate(ctx, x); err != nil {
				t.Fatal(err)
			}
		}
		if ok, err := plain.RevokeSession(ctx, user, s.ID); !ok || err != nil {
			t.Fatalf("RevokeSession = %v, %v", ok, err)
		}
		if _, err := cached.Validate(ctx, tok); err != nil {
			t.Fatalf("within CacheTTL the cache may still serve it, and does: %v", err)
		}
		if _, err := cached.RevokeAll(ctx, user, k.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := cached.Validate(ctx, tok); err != ErrInvalidToken {
			t.Errorf("after RevokeAll through the caching Manager: Validate = %v, want ErrInvalidToken", err)
		}
		if _, err := cached.Validate(ctx, kept); err != nil {
			t.Errorf("the kept session: %v", err)
		}
	})
}

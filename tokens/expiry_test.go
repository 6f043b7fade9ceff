package tokens

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// The tests here run in real time against real servers, with timeouts
// short enough to keep the suite fast and margins of at least 2x around
// every deadline, because the machine is shared and noisy.

func TestIdleTimeout(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, realBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		m := openManager(t, b.client(t), gen, Options{IdleTimeout: 600 * time.Millisecond, AbsoluteLifetime: time.Minute})
		user := userID(t, gen)
		idle, _ := issue(t, m, user, Metadata{})
		time.Sleep(1500 * time.Millisecond)
		if _, err := m.Validate(ctx, idle); err != ErrInvalidToken {
			t.Errorf("after 2.5x the idle timeout: Validate = %v, want ErrInvalidToken", err)
		}
		if list, err := m.List(ctx, user); err != nil || len(list) != 0 {
			t.Errorf("List of idled-out sessions = %d, %v", len(list), err)
		}
	})
}

func TestSlidingRefresh(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, realBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		opts := Options{IdleTimeout: 1500 * time.Millisecond, RefreshInterval: 250 * time.Millisecond, AbsoluteLifetime: time.Minute}
		m := openManager(t, b.client(t), gen, opts)
		tok, first := issue(t, m, userID(t, gen), Metadata{})
		// Used every 400 ms for 2.4 s, more than the idle timeout: each use
		// comes 1.1 s before the expiry the previous one set.
		var last Session
		for i := range 6 {
			time.Sleep(400 * time.Millisecond)
			s, err := m.Validate(ctx, tok)
			if err != nil {
				t.Fatalf("use %d after %v: %v", i+1, time.Since(first.IssuedAt), err)
			}
			if !s.LastSeenAt.After(last.LastSeenAt) {
				t.Errorf("use %d: LastSeenAt %v did not move (previous %v)", i+1, s.LastSeenAt, last.LastSeenAt)
			}
			if want := s.LastSeenAt.Add(opts.IdleTimeout); !s.ExpiresAt.Equal(want) {
				t.Errorf("use %d: ExpiresAt %v, want LastSeenAt + IdleTimeout = %v", i+1, s.ExpiresAt, want)
			}
			last = s
		}
		time.Sleep(3 * time.Second)
		if _, err := m.Validate(ctx, tok); err != ErrInvalidToken {
			t.Errorf("unused for twice the idle timeout: Validate = %v", err)
		}
	})
}

func TestRefreshIsThrottled(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		c := b.client(t)
		hook := &roundTrips{}
		c.AddHook(hook)
		const interval = 3 * time.Second
		m := openManager(t, c, gen, Options{IdleTimeout: time.Hour, RefreshInterval: interval})
		tok, first := issue(t, m, userID(t, gen), Metadata{})
		if _, err := m.Validate(ctx, tok); err != nil { // loads the script
			t.Fatal(err)
		}
		hook.take()
		// Validations that begin within RefreshInterval of the last
		// refresh, however few a busy machine fits in, only read.
		judged := 0
		for range 20 {
			if time.Since(first.LastSeenAt) >= interval*9/10 {
				break
			}
			s, err := m.Validate(ctx, tok)
			if err != nil {
				t.Fatal(err)
			}
			if !s.LastSeenAt.Equal(first.LastSeenAt) {
				t.Fatalf("LastSeenAt moved from %v to %v within RefreshInterval", first.LastSeenAt, s.LastSeenAt)
			}
			judged++
		}
		if judged < 5 {
			t.Fatalf("only %d validations began within RefreshInterval (%v) of the session's issue", judged, interval)
		}
		if got := hook.take(); len(got) != judged {
			t.Errorf("%d validations within RefreshInterval sent %d commands (%v), want %d reads", judged, len(got), got, judged)
		}
		time.Sleep(interval + 100*time.Millisecond)
		s, err := m.Validate(ctx, tok)
		if err != nil || !s.LastSeenAt.After(first.LastSeenAt) {
			t.Errorf("after RefreshInterval: %+v, %v; want LastSeenAt moved", s, err)
		}
		// Concurrent validations due for a refresh write once: the others
		// find the new last-seen time in the script.
		time.Sleep(interval + 100*time.Millisecond)
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if _, err := m.Validate(ctx, tok); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		s2, _ := m.Validate(ctx, tok)
		if d := s2.LastSeenAt.Sub(s.LastSeenAt); d < interval+100*time.Millisecond {
			t.Errorf("LastSeenAt moved by %v, want at least the %v slept", d, interval+100*time.Millisecond)
		}
	})
}

func TestAbsoluteLifetime(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, realBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		opts := Options{IdleTimeout: 10 * time.Second, RefreshInterval: 100 * time.Millisecond, AbsoluteLifetime: 2 * time.Second}
		m := openManager(t, b.client(t), gen, opts)
		tok, first := issue(t, m, userID(t, gen), Metadata{})
		if want := first.IssuedAt.Add(opts.AbsoluteLifetime); !first.ExpiresAt.Equal(want) {
			t.Errorf("ExpiresAt %v, want the absolute end %v", first.ExpiresAt, want)
		}
		// Rotation keeps the absolute end.
		time.Sleep(200 * time.Millisecond)
		tok, s, err := m.Rotate(ctx, tok)
		if err != nil || !s.AbsoluteExpiresAt.Equal(first.AbsoluteExpiresAt) {
			t.Fatalf("Rotate = %+v, %v", s, err)
		}
		// In constant use, it still ends at the absolute lifetime.
		deadline := first.IssuedAt.Add(opts.AbsoluteLifetime)
		for time.Until(deadline) > 800*time.Millisecond {
			if _, err := m.Validate(ctx, tok); err != nil {
				t.Fatalf("%v before the absolute end: %v", time.Until(deadline), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(time.Until(deadline) + 1500*time.Millisecond)
		if _, err := m.Validate(ctx, tok); err != ErrInvalidToken {
			t.Errorf("past the absolute lifetime: Validate = %v", err)
		}
	})
}

// TestNoResurrection races Revoke against 100 goroutines validating the
// same token, each due for a refresh: once Revoke has returned, no
// validation may succeed and the key must stay gone.
func TestNoResurrection(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		c := b.client(t)
		m := openManager(t, c, gen, Options{IdleTimeout: time.Minute, RefreshInterval: 10 * time.Millisecond})
		for round := range 5 {
			tok, s := issue(t, m, userID(t, gen), Metadata{})
			time.Sleep(20 * time.Millisecond) // due for a refresh
			var revoked atomic.Bool
			start := make(chan struct{})
			var wg sync.WaitGroup
			for range 100 {
				wg.Go(func() {
					<-start
					for range 5 {
						after := revoked.Load()
						_, err := m.Validate(ctx, tok)
						if after && err == nil {
							t.Errorf("round %d: Validate succeeded after Revoke returned", round)
						}
						if err != nil && err != ErrInvalidToken {
							t.Errorf("round %d: %v", round, err)
						}
					}
				})
			}
			close(start)
			time.Sleep(time.Millisecond)
			if err := m.Revoke(ctx, tok); err != nil {
				t.Fatalf("round %d: Revoke: %v", round, err)
			}
			revoked.Store(true)
			wg.Wait()
			key := m.keys.session(slotTag(s.UserID), s.ID)
			if n, err := c.Exists(ctx, key).Result(); err != nil || n != 0 {
				t.Errorf("round %d: session key exists = %d, %v after the race", round, n, err)
			}
		}
	})
}

// TestRevokeAllVsIssue issues sessions for one user from several
// goroutines while RevokeAll runs: every session whose Issue returned
// before RevokeAll began must be dead when it returns.
func TestRevokeAllVsIssue(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		m := openManager(t, b.client(t), gen, Options{MaxSessions: 10000})
		user := userID(t, gen)
		type issued struct {
			tok string
			at  time.Time // when Issue returned
		}
		var (
			mu   sync.Mutex
			all  []issued
			stop atomic.Bool
			wg   sync.WaitGroup
		)
		for range 8 {
			wg.Go(func() {
				for i := 0; i < 60 && !stop.Load(); i++ {
					tok, _, err := m.Issue(ctx, user, Metadata{})
					at := time.Now()
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					all = append(all, issued{tok, at})
					mu.Unlock()
				}
			})
		}
		var begins []time.Time
		seen := 0
		for range 3 {
			// Let some sessions be issued first: wait for new ones rather
			// than a fixed time, which a loaded machine may not honour.
			deadline := time.Now().Add(20 * time.Second)
			for {
				mu.Lock()
				n := len(all)
				mu.Unlock()
				if n > seen || time.Now().After(deadline) {
					seen = n
					break
				}
				time.Sleep(time.Millisecond)
			}
			time.Sleep(5 * time.Millisecond)
			begins = append(begins, time.Now())
			if _, err := m.RevokeAll(ctx, user); err != nil {
				t.Fatal(err)
			}
			// Check right away, while issuing goes on.
			mu.Lock()
			snapshot := append([]issued(nil), all...)
			mu.Unlock()
			began := begins[len(begins)-1]
			checked := 0
			for _, is := range snapshot {
				if is.at.Before(began) {
					checked++
					if _, err := m.Validate(ctx, is.tok); err != ErrInvalidToken {
						t.Errorf("session issued %v before RevokeAll began: Validate = %v", began.Sub(is.at), err)
					}
				}
			}
			if checked == 0 {
				t.Error("no session was issued before RevokeAll")
			}
		}
		stop.Store(true)
		wg.Wait()
		// The index still lists every live session: List and Validate agree.
		listed := map[idtype.ID]bool{}
		list, err := m.List(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			listed[s.ID] = true
		}
		for _, is := range all {
			s, err := m.Validate(ctx, is.tok)
			if err == nil && !listed[s.ID] {
				t.Errorf("session %d is live but not listed", s.ID)
			}
			if err != nil && !errors.Is(err, ErrInvalidToken) {
				t.Error(err)
			}
		}
		if n, err := m.RevokeAll(ctx, user); err != nil || n != len(list) {
			t.Errorf("final RevokeAll = %d, %v; want the %d listed", n, err, len(list))
		}
	})
}

// TestCacheStaleness revokes a token through one Manager while another,
// with a cache, keeps validating it: the other must stop accepting it
// within CacheTTL, and accept it meanwhile without asking Redis.
func TestCacheStaleness(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, realBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		c := b.client(t)
		const ttl = 300 * time.Millisecond
		a := openManager(t, c, gen, Options{})
		cached := openManager(t, c, gen, Options{KeyPrefix: a.opts.KeyPrefix, CacheTTL: ttl})
		tok, _ := issue(t, a, userID(t, gen), Metadata{})
		if _, err := cached.Validate(ctx, tok); err != nil {
			t.Fatal(err)
		}
		hits := 0
		if err := a.Revoke(ctx, tok); err != nil {
			t.Fatal(err)
		}
		revoked := time.Now()
		for {
			_, err := cached.Validate(ctx, tok)
			since := time.Since(revoked)
			if err == nil {
				hits++
				if since > ttl {
					t.Fatalf("accepted %v after the revocation, past CacheTTL %v", since, ttl)
				}
			} else if err != ErrInvalidToken {
				t.Fatal(err)
			} else {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if hits == 0 {
			t.Log("the cache served no hit after the revocation (a slow machine); the bound held")
		}
		// Revocations through the caching Manager itself are immediate.
		tok2, s2 := issue(t, cached, userID(t, gen), Metadata{})
		if _, err := cached.Validate(ctx, tok2); err != nil {
			t.Fatal(err)
		}
		if _, err := cached.RevokeAll(ctx, s2.UserID); err != nil {
			t.Fatal(err)
		}
		if _, err := cached.Validate(ctx, tok2); err != ErrInvalidToken {
			t.Errorf("after RevokeAll through the same Manager: %v", err)
		}
	})
}

// TestCacheHit checks that a cached Validate sends nothing to Redis and
// still checks the secret.
func TestCacheHit(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	c := miniClient(t)
	hook := &roundTrips{}
	c.AddHook(hook)
	gen := newGen(t)
	m := openManager(t, c, gen, Options{CacheTTL: time.Minute})
	ctx := t.Context()
	tok, s := issue(t, m, userID(t, gen), Metadata{})
	if _, err := m.Validate(ctx, tok); err != nil {
		t.Fatal(err)
	}
	hook.take()
	for range 10 {
		got, err := m.Validate(ctx, tok)
		if err != nil || got != s {
			t.Fatalf("cached Validate = %+v, %v", got, err)
		}
	}
	if got := hook.take(); len(got) != 0 {
		t.Errorf("cached validations sent %v", got)
	}
	p, _ := parseToken("snk", tok)
	p.secret[5] ^= 4
	if _, err := m.Validate(ctx, p.format("snk")); err != ErrInvalidToken {
		t.Errorf("wrong secret for a cached session: %v", err)
	}
	if err := m.Revoke(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Validate(ctx, tok); err != ErrInvalidToken {
		t.Errorf("after Revoke through the caching Manager: %v", err)
	}
}

func TestCacheBound(t *testing.T) {
	c := newCache(time.Minute, 128, false)
	now := time.Now()
	var d [32]byte
	for i := range 10000 {
		c.put(&token{session: idtype.ID(i + 1)}, 7, &d, Session{ExpiresAt: now.Add(time.Hour)}, now, 0)
	}
	n := 0
	for i := range c.shards {
		n += len(c.shards[i].m)
	}
	if n > 128+cacheShards {
		t.Errorf("cache of size 128 holds %d entries", n)
	}
	newest := &token{session: 10000}
	if _, ok := c.get(newest, 7, &d); !ok {
		t.Error("the newest entry was evicted")
	}
	for _, tc := range []struct {
		name string
		t    token
		sum  uint32
		d    [32]byte
	}{
		{"other tag", token{session: 10000, tag: 1}, 7, d},
		{"other checksum", token{session: 10000}, 8, d},
		{"other digest", token{session: 10000}, 7, [32]byte{1}},
	} {
		if _, ok := c.get(&tc.t, tc.sum, &tc.d); ok {
			t.Errorf("%s: served", tc.name)
		}
	}
	// An entry is not served past the session's expiry, nor past the TTL.
	c.put(&token{session: 20000}, 7, &d, Session{ExpiresAt: now.Add(-time.Second)}, now, 0)
	if _, ok := c.get(&token{session: 20000}, 7, &d); ok {
		t.Error("an expired session was served")
	}
	c.put(&token{session: 20001}, 7, &d, Session{ExpiresAt: now.Add(time.Hour)}, now.Add(-time.Minute), 0)
	if _, ok := c.get(&token{session: 20001}, 7, &d); ok {
		t.Error("an entry older than the TTL was served")
	}
	var nilCache *cache
	nilCache.put(newest, 7, &d, Session{}, now, 0)
	nilCache.revoke(1)
	if _, ok := nilCache.get(newest, 7, &d); ok {
		t.Error("a nil cache served an entry")
	}
}

// TestServerKilled kills the Redis server under a Manager: calls fail with
// ErrUnavailable, the Middleware answers 503, and all works again when the
// server is back.
func TestServerKilled(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	srv := startPersistentRedis(t)
	c := clientFor(t, srv.Addr())
	gen := newGen(t)
	m := openManager(t, c, gen, Options{})
	ctx := t.Context()
	user := userID(t, gen)
	tok, _ := issue(t, m, user, Metadata{})

	srv.Kill()
	for _, tc := range []struct {
		name string
		call func(context.Context) error
	}{
		{"Validate", func(ctx context.Context) error { _, err := m.Validate(ctx, tok); return err }},
		{"Issue", func(ctx context.Context) error { _, _, err := m.Issue(ctx, user, Metadata{}); return err }},
		{"Revoke", func(ctx context.Context) error { return m.Revoke(ctx, tok) }},
		{"RevokeAll", func(ctx context.Context) error { _, err := m.RevokeAll(ctx, user); return err }},
		{"List", func(ctx context.Context) error { _, err := m.List(ctx, user); return err }},
	} {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := tc.call(ctx)
		cancel()
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s with the server dead = %v, want ErrUnavailable", tc.name, err)
		}
	}
	if code := serve(m, tok); code != 503 {
		t.Errorf("Middleware with the server dead: %d, want 503", code)
	}

	srv.Restart()
	if _, err := m.Validate(ctx, tok); err != nil {
		t.Errorf("Validate after the restart: %v", err)
	}
	if code := serve(m, tok); code != 200 {
		t.Errorf("Middleware after the restart: %d, want 200", code)
	}
	if _, _, err := m.Issue(ctx, user, Metadata{}); err != nil {
		t.Errorf("Issue after the restart: %v", err)
	}
}

// TestRestartKeepsRevocations kills and restarts Redis after a
// revocation. With appendfsync always the revocation survives; without
// persistence everything is gone, which logs every session out; with
// RDB snapshots alone (the control) a restart loads the snapshot taken
// before the revocation, and the revoked token validates again.
func TestRestartKeepsRevocations(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	for _, tc := range []struct {
		name      string
		args      []string
		snapshot  bool
		wantValid bool
	}{
		{"appendfsync always", []string{"--appendonly", "yes", "--appendfsync", "always"}, false, false},
		{"no persistence", nil, false, false},
		{"snapshot only (control)", []string{"--save", "3600 1"}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := private.StartRedis(t, tc.args...)
			c := clientFor(t, srv.Addr())
			ctx := t.Context()
			gen := newGen(t)
			m := openManager(t, c, gen, Options{})
			user := userID(t, gen)
			tok, _ := issue(t, m, user, Metadata{})
			if tc.snapshot {
				if err := c.Save(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := m.RevokeAll(ctx, user); err != nil {
				t.Fatal(err)
			}
			srv.Kill()
			srv.Restart()
			_, err := m.Validate(ctx, tok)
			if tc.wantValid && err != nil {
				t.Errorf("control: the revoked token is refused after a restart from the snapshot (%v): the test does not reach the fault", err)
			}
			if !tc.wantValid && err != ErrInvalidToken {
				t.Errorf("after the restart: Validate = %v, want ErrInvalidToken", err)
			}
		})
	}
}

// TestIndexSweep: fields of the index whose sessions have all ended do
// not stay. A user's field is dropped with its last session by the
// revocations; one whose sessions expired is dropped by later Issues of
// other users of its slot tag, each of which looks at a few fields picked
// at random (sweepFields). The run first sees the dead fields still there
// once their entries' expiry has passed (Redis does not expire fields),
// then issues for a live user of the same tag until they are gone. And
// an index that is no longer written expires after its sessions.
func TestIndexSweep(t *testing.T) {
	forEach(t, []backend{singleBackend, clusterBackend}, func(t *testing.T, b backend) {
		ctx := testenv.Deadline(t, time.Minute)
		gen := newGen(t)
		c := b.client(t)
		// The sessions' entries must not have expired before the last of
		// the run's Issues: each Issue looks at expired fields, and one
		// that swept a dead user's field then would leave the check below
		// nothing to see. A busy machine may take longer than the
		// IdleTimeout to issue them, and such a run does not reach the
		// fault: it is repeated with a longer one.
		var short, long *Manager
		var tag uint16
		var index string
		var dead []idtype.ID
		var liveTok string
		var live idtype.ID
		idle := 300 * time.Millisecond
		for try := 1; ; try++ {
			short = openManager(t, c, gen, Options{IdleTimeout: idle, RefreshInterval: idle / 3})
			long = openManager(t, c, gen, Options{KeyPrefix: short.opts.KeyPrefix})
			tag = slotTag(userID(t, gen))
			index = short.keys.index(tag)
			dead = dead[:0]
			began := time.Now()
			for range 5 {
				u := sameTagUser(t, gen, tag)
				dead = append(dead, u)
				issue(t, short, u, Metadata{})
				issue(t, short, u, Metadata{})
			}
			live = sameTagUser(t, gen, tag)
			liveTok, _ = issue(t, long, live, Metadata{})
			if took := time.Since(began); took < idle {
				break
			} else if try == 5 {
				t.Fatalf("in 5 runs issuing 11 sessions took longer than their IdleTimeout (last %v, took %v)", idle, took)
			} else {
				t.Logf("run %d: issuing 11 sessions took %v, longer than their IdleTimeout %v: the fault was not reached", try, took, idle)
			}
			idle *= 2
		}
		// An entry's expiry is the second after its key's.
		time.Sleep(time.Until(time.Now().Add(short.opts.IdleTimeout).Truncate(time.Second).Add(2 * time.Second)))
		for _, u := range dead {
			if ok, err := c.HExists(ctx, index, userField(u)).Result(); !ok || err != nil {
				t.Fatalf("the field of a user whose sessions expired is gone before any sweep (%v, %v)", ok, err)
			}
		}
		issues := 0
		for ; issues < 200; issues++ {
			n, err := c.HLen(ctx, index).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				break
			}
			issue(t, long, live, Metadata{})
		}
		t.Logf("%d Issues of a live user of the tag swept the fields of 5 users whose sessions expired", issues)
		if n := c.HLen(ctx, index).Val(); n != 1 {
			t.Errorf("after %d Issues the index holds %d fields, want only the live user's", issues, n)
		}
		if _, err := long.Validate(ctx, liveTok); err != nil {
			t.Errorf("the live user's first session: %v", err)
		}

		// A tag of its own (the test's keys have a prefix of their own):
		// its index lasts at most twice the session's TTL, and goes.
		other := userID(t, gen)
		for slotTag(other) == tag {
			other = userID(t, gen)
		}
		issue(t, short, other, Metadata{})
		otherIndex := short.keys.index(slotTag(other))
		if pttl := c.PTTL(ctx, otherIndex).Val(); pttl <= 0 || pttl > 2*short.opts.IdleTimeout {
			t.Errorf("the index's TTL is %v, want at most twice the session's %v", pttl, short.opts.IdleTimeout)
		}
		for {
			n, err := c.Exists(ctx, otherIndex).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// TestRotateLoweredTimeouts: Rotate checks the old session against the
// Manager's own IdleTimeout and AbsoluteLifetime, as Validate does, and
// not only against its key's TTL, which the options in force when the
// session was last written set: a Manager with lowered timeouts refuses
// to rotate a session past them, while the key still lives (the control:
// the Manager with the options that wrote it rotates it).
func TestRotateLoweredTimeouts(t *testing.T) {
	forEach(t, []backend{miniBackend, singleBackend}, func(t *testing.T, b backend) {
		ctx := testenv.Deadline(t, time.Minute)
		gen := newGen(t)
		c := b.client(t)
		wrote := openManager(t, c, gen, Options{})
		idle := openManager(t, c, gen, Options{KeyPrefix: wrote.opts.KeyPrefix, IdleTimeout: 200 * time.Millisecond, RefreshInterval: 100 * time.Millisecond})
		absolute := openManager(t, c, gen, Options{KeyPrefix: wrote.opts.KeyPrefix, AbsoluteLifetime: 400 * time.Millisecond})
		a, first := issue(t, wrote, userID(t, gen), Metadata{})
		// The rotated session's record carries LoginAt, as a rotated session's does.
		b0, firstB := issue(t, wrote, userID(t, gen), Metadata{})
		rotated, _, err := wrote.Rotate(ctx, b0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(firstB.IssuedAt.Add(450 * time.Millisecond)))
		if _, _, err := idle.Rotate(ctx, a); err != ErrInvalidToken {
			t.Errorf("Rotate past a lowered IdleTimeout = %v, want ErrInvalidToken", err)
		}
		for name, tok := range map[string]string{"an issued": a, "a rotated": rotated} {
			if _, _, err := absolute.Rotate(ctx, tok); err != ErrInvalidToken {
				t.Errorf("Rotate of %s session past a lowered AbsoluteLifetime = %v, want ErrInvalidToken", name, err)
			}
		}
		for name, x := range map[string]struct {
			tok   string
			login time.Time
		}{"an issued": {a, first.LoginAt}, "a rotated": {rotated, firstB.LoginAt}} {
			if _, s, err := wrote.Rotate(ctx, x.tok); err != nil || !s.LoginAt.Equal(x.login) {
				t.Errorf("control: the Manager whose options wrote %s session rotates it to %+v, %v (want LoginAt %v): the test does not reach the fault",
					name, s, err, x.login)
			}
		}
	})
}

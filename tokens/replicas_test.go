package tokens

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/faultproxy"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// laggingPair is a primary and a replica that replicates through a proxy,
// which a test freezes to hold replication back.
type laggingPair struct {
	primary, replica *private.RedisServer
	proxy            *faultproxy.Proxy
}

func startLaggingPair(t *testing.T) laggingPair {
	t.Helper()
	primary := private.StartRedis(t)
	proxy := faultproxy.Start(t, primary.Addr())
	replica := private.StartRedisReplica(t, proxy.Addr())
	return laggingPair{primary, replica, proxy}
}

// failover freezes replication, runs revoke on the primary, then drops
// what the replica did not get and promotes it, as a failover to a
// lagging replica does. It returns revoke's error.
func (p laggingPair) failover(t *testing.T, revoke func() error) error {
	t.Helper()
	p.replica.WaitSynced(p.primary.Addr(), 10*time.Second)
	// The primary counts the replica in WAIT only once the replica has
	// acknowledged an offset since the sync, up to a second later.
	if n, err := p.primary.Client().Do(t.Context(), "WAIT", 1, 10_000).Int(); n != 1 {
		t.Fatalf("WAIT for the replica before the failover = %d, %v", n, err)
	}
	p.proxy.Freeze()
	err := revoke()
	p.proxy.Cut()
	p.replica.Promote()
	return err
}

// TestFailoverLaggingReplica: a revocation that returned must survive a
// failover to a replica. Without WaitReplicas (the control), RevokeAll
// returns success while the replica lags, and after the replica is
// promoted the revoked token validates again. With WaitReplicas 1, the
// same RevokeAll fails with ErrUnavailable instead; retried once a
// replica is back, it succeeds, and the token stays revoked across the
// next failover.
func TestFailoverLaggingReplica(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	t.Run("control", func(t *testing.T) {
		t.Parallel()
		p := startLaggingPair(t)
		gen := newGen(t)
		m := openManager(t, clientFor(t, p.primary.Addr()), gen, Options{})
		user := userID(t, gen)
		tok, _ := issue(t, m, user, Metadata{})
		err := p.failover(t, func() error {
			_, err := m.RevokeAll(t.Context(), user)
			if err == nil {
				if _, err := m.Validate(t.Context(), tok); err != ErrInvalidToken {
					t.Errorf("on the primary after RevokeAll: Validate = %v", err)
				}
			}
			return err
		})
		if err != nil {
			t.Fatalf("RevokeAll without WaitReplicas: %v", err)
		}
		after := openManager(t, clientFor(t, p.replica.Addr()), gen, Options{KeyPrefix: m.opts.KeyPrefix})
		if _, err := after.Validate(t.Context(), tok); err != nil {
			t.Errorf("control: after the failover the revoked token is refused (%v): the test does not reach the fault", err)
		}
	})

	t.Run("WaitReplicas", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		p := startLaggingPair(t)
		gen := newGen(t)
		opts := Options{WaitReplicas: 1, WaitTimeout: 300 * time.Millisecond}
		m := openManager(t, clientFor(t, p.primary.Addr()), gen, opts)
		user := userID(t, gen)
		tok, _ := issue(t, m, user, Metadata{})
		err := p.failover(t, func() error {
			_, err := m.RevokeAll(ctx, user)
			return err
		})
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errTooFewReplicas) {
			t.Fatalf("RevokeAll with the replica frozen = %v, want ErrUnavailable for too few replicas", err)
		}
		t.Logf("RevokeAll with the replica frozen: %v", err)

		// The caller retries. The new primary has no replica yet, so the
		// retry fails the same way until the old primary comes back as
		// its replica.
		opts.KeyPrefix = m.opts.KeyPrefix
		m2 := openManager(t, clientFor(t, p.replica.Addr()), gen, opts)
		if _, err := m2.RevokeAll(ctx, user); !errors.Is(err, errTooFewReplicas) {
			t.Fatalf("RevokeAll on the new primary without replicas = %v, want too few replicas", err)
		}
		p.primary.ReplicaOf(p.replica.Addr())
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := m2.RevokeAll(ctx, user)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
				t.Fatalf("RevokeAll retried on the new primary: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, err := m2.Validate(ctx, tok); err != ErrInvalidToken {
			t.Errorf("after the retried RevokeAll: Validate = %v", err)
		}
		// The revocation is on the old primary, now a replica: a second
		// failover back to it keeps the token revoked.
		p.primary.WaitSynced(p.replica.Addr(), 10*time.Second)
		p.primary.Promote()
		back := openManager(t, clientFor(t, p.primary.Addr()), gen, Options{KeyPrefix: m.opts.KeyPrefix})
		if _, err := back.Validate(ctx, tok); err != ErrInvalidToken {
			t.Errorf("after failing back: Validate = %v, want ErrInvalidToken", err)
		}
	})

	t.Run("every revocation waits", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		p := startLaggingPair(t)
		gen := newGen(t)
		m := openManager(t, clientFor(t, p.primary.Addr()), gen,
			Options{WaitReplicas: 1, WaitTimeout: 200 * time.Millisecond, MaxSessions: 2})
		user := userID(t, gen)
		toks := make([]string, 2)
		sess := make([]Session, 2)
		for i := range toks {
			toks[i], sess[i] = issue(t, m, user, Metadata{})
		}
		// With replication healthy every call succeeds.
		p.replica.WaitSynced(p.primary.Addr(), 10*time.Second)
		rotated, _, err := m.Rotate(ctx, toks[0])
		if err != nil {
			t.Fatalf("Rotate with the replica in sync: %v", err)
		}
		toks[0] = rotated

		p.proxy.Freeze()
		defer p.proxy.Thaw()
		tooFew := func(name string, err error) {
			t.Helper()
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errTooFewReplicas) {
				t.Errorf("%s with the replica frozen = %v, want ErrUnavailable for too few replicas", name, err)
			}
		}
		_, _, err = m.Rotate(ctx, toks[0])
		tooFew("Rotate", err)
		// The rotation applied on the primary: its retry, within the
		// grace window, finds the stub, and still waits for the replica
		// to have what the stub stands for; so does a logout with the
		// old token.
		_, _, err = m.Rotate(ctx, toks[0])
		tooFew("Rotate retried within the grace window", err)
		tooFew("Revoke of the rotated-out token", m.Revoke(ctx, toks[0]))
		tooFew("Revoke", m.Revoke(ctx, toks[1]))
		_, err = m.RevokeSession(ctx, user, sess[1].ID)
		tooFew("RevokeSession", err)
		other := userID(t, gen)
		if _, _, err := m.Issue(ctx, other, Metadata{}); err != nil {
			t.Errorf("Issue that revokes nothing, with the replica frozen: %v", err)
		}
		issue(t, m, other, Metadata{})
		_, _, err = m.Issue(ctx, other, Metadata{}) // the third: MaxSessions revokes the first
		tooFew("Issue past MaxSessions", err)
	})
}

// TestFailoverRetriedRevocation: a revocation that failed with
// ErrUnavailable for too few replicas applied on the primary, and the
// caller retries it, as the error says, from another connection (another
// of the pool's, or another app instance). The retry finds the session
// already ended and has nothing to write, but the replicas still lack
// the first write: it must fail the same way, not return as done, or a
// failover brings the session back after the caller was told it ended.
// Control: without the fence each retry returns at once (nil, or
// ErrInvalidToken from Revoke and Rotate) and, after the failover, the
// session validates.
func TestFailoverRetriedRevocation(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	retries := []struct {
		name  string
		retry func(ctx context.Context, m *Manager, user idtype.ID, tok string, s Session) error
	}{
		{"Revoke", func(ctx context.Context, m *Manager, _ idtype.ID, tok string, _ Session) error {
			return m.Revoke(ctx, tok)
		}},
		{"RevokeSession", func(ctx context.Context, m *Manager, user idtype.ID, _ string, s Session) error {
			_, err := m.RevokeSession(ctx, user, s.ID)
			return err
		}},
		{"RevokeAll", func(ctx context.Context, m *Manager, user idtype.ID, _ string, _ Session) error {
			_, err := m.RevokeAll(ctx, user)
			return err
		}},
		{"Rotate", func(ctx context.Context, m *Manager, _ idtype.ID, tok string, _ Session) error {
			_, _, err := m.Rotate(ctx, tok)
			return err
		}},
	}
	for _, control := range []bool{false, true} {
		for _, r := range retries {
			name := r.name
			if control {
				name = "control/" + name
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				p := startLaggingPair(t)
				gen := newGen(t)
				opts := Options{WaitReplicas: 1, WaitTimeout: 200 * time.Millisecond}
				first := openManager(t, clientFor(t, p.primary.Addr()), gen, opts)
				opts.KeyPrefix = first.opts.KeyPrefix
				// Its own client: a connection that has written nothing
				// the replica lacks.
				second := openManagerWithout(t, clientFor(t, p.primary.Addr()), gen, opts, defences{noFence: control})
				user := userID(t, gen)
				tok, s := issue(t, first, user, Metadata{})
				var firstErr error
				conservative := false
				err := p.failover(t, func() error {
					_, firstErr = first.RevokeAll(ctx, user)
					err := r.retry(ctx, second, user, tok, s)
					if control && errors.Is(err, ErrUnavailable) {
						conservative = waitCoversOthers(t, p.primary.Addr())
					}
					return err
				})
				if !errors.Is(firstErr, errTooFewReplicas) {
					t.Fatalf("RevokeAll with the replica frozen = %v, want ErrUnavailable for too few replicas", firstErr)
				}
				after := openManager(t, clientFor(t, p.replica.Addr()), gen, Options{KeyPrefix: opts.KeyPrefix})
				_, validErr := after.Validate(ctx, tok)
				if control {
					if conservative {
						// Redis 7.0: the fault cannot happen on this server;
						// the Valkey pass of make test reaches it.
						t.Logf("control: the retried %s = %v: this server's WAIT counts from another connection's write "+
							"once this one has sent any command, so a retry that writes nothing waits as well", r.name, err)
						return
					}
					if errors.Is(err, ErrUnavailable) || validErr != nil {
						t.Fatalf("control: the retried %s = %v and, after the failover, Validate = %v: the fault was not reached",
							r.name, err, validErr)
					}
					t.Logf("control: the retried %s returned %v with the replica frozen; after the failover the session validates", r.name, err)
					return
				}
				if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errTooFewReplicas) {
					t.Errorf("retried %s with the replica frozen = %v, want ErrUnavailable for too few replicas", r.name, err)
				}
			})
		}
	}
}

// waitCoversOthers reports whether the server at addr, whose replicas are
// frozen, answers WAIT on a connection that only read since another
// connection wrote as if it had written too. WAIT's documentation covers
// only the connection's own writes, and Valkey 8 counts just those;
// Redis 7.0 counts from the offset at the connection's last command.
func waitCoversOthers(t *testing.T, addr string) bool {
	t.Helper()
	ctx := t.Context()
	writer, reader := clientFor(t, addr), clientFor(t, addr)
	if err := reader.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := writer.Set(ctx, testenv.KeyPrefix(t)+"probe", "1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := reader.Get(ctx, testenv.KeyPrefix(t)+"absent").Err(); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	n, err := reader.Do(ctx, "WAIT", 1, 50).Int()
	if err != nil {
		t.Fatal(err)
	}
	return n == 0
}

// TestWaitReplicasCluster sends revocations with WaitReplicas through a
// ClusterClient to a private cluster without replicas: each must reach
// the master of its key, also while the key's slot migrates (ASK) and
// after it moved (MOVED), apply there, and fail for too few replicas, not
// for a redirection.
func TestWaitReplicasCluster(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	cl := private.StartRedisCluster(t, 3)
	ctx := t.Context()
	gen := newGen(t)
	plain := openManager(t, cl.Client(), gen, Options{})
	waiting := openManager(t, cl.Client(), gen, Options{KeyPrefix: plain.opts.KeyPrefix, WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond})
	redirects := &redirectCounter{}
	if err := cl.Client().ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		c.AddHook(redirects)
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Eight users of one slot tag, so their keys share a slot.
	tag := slotTag(userID(t, gen))
	type user struct {
		id  idtype.ID
		tok string
		s   Session
	}
	users := make([]user, 8)
	for i := range users {
		users[i].id = sameTagUser(t, gen, tag)
		users[i].tok, users[i].s = issue(t, plain, users[i].id, Metadata{})
	}
	tooFew := func(name string, err error) {
		t.Helper()
		if !errors.Is(err, errTooFewReplicas) {
			t.Errorf("%s = %v, want ErrUnavailable for too few replicas", name, err)
		}
	}
	index := plain.keys.index(tag)
	slot, err := cl.KeySlot(ctx, index)
	if err != nil {
		t.Fatal(err)
	}
	from, err := cl.SlotOwner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	to := (from + 1) % 3
	source := cl.Nodes()[from].Client()
	// moved reports whether key has left the source: a migrating slot
	// answers ASK for a key it no longer has.
	moved := func(key string) bool {
		err := source.Exists(ctx, key).Err()
		if err != nil && !strings.HasPrefix(err.Error(), "ASK ") {
			t.Fatalf("EXISTS %s on the source: %v", key, err)
		}
		return err != nil
	}
	// The index first, with the first user's session: the revocations
	// then meet both kinds of split.
	first := []string{index, plain.keys.session(tag, users[0].s.ID)}
	order := func(keys []string) {
		slices.SortStableFunc(keys, func(x, y string) int {
			return cmp.Compare(orderOf(first, x), orderOf(first, y))
		})
	}
	next, movedOps := 0, 0
	_, err = cl.MigrateSlot(ctx, slot, to, private.MigrateOptions{Batch: 2, Order: order, Step: func(int) error {
		// Once the index has left, revoke every user, but leave the last
		// three for after the move: Revoke when its session key has left
		// too (a script that declares both), RevokeAll when it has not
		// (a script that declares the index alone).
		if !moved(index) {
			return nil
		}
		for ; next < len(users)-3; next++ {
			u := users[next]
			if moved(plain.keys.session(tag, u.s.ID)) {
				tooFew("Revoke of a moved session", waiting.Revoke(ctx, u.tok))
			} else {
				_, err := waiting.RevokeAll(ctx, u.id)
				tooFew("RevokeAll of a moved index", err)
			}
			movedOps++
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if movedOps == 0 || redirects.count("ASK") == 0 || next != len(users)-3 {
		t.Fatalf("mid-migration: %d revocations of moved keys, %d ASK redirections: the test does not reach the migration",
			movedOps, redirects.count("ASK"))
	}
	// After the move the client's slot map may still name the source,
	// which answers MOVED.
	for ; next < len(users); next++ {
		_, err := waiting.RevokeAll(ctx, users[next].id)
		tooFew("RevokeAll after the move", err)
	}
	if redirects.count("MOVED") == 0 {
		t.Error("no MOVED after the move: the test does not reach a stale slot map")
	}
	for i, u := range users {
		if _, err := plain.Validate(ctx, u.tok); err != ErrInvalidToken {
			t.Errorf("user %d after its revocation: Validate = %v", i, err)
		}
	}
	t.Logf("%d revocations of keys that had moved mid-migration; redirections followed: %d ASK, %d MOVED, %d TRYAGAIN",
		movedOps, redirects.count("ASK"), redirects.count("MOVED"), redirects.count("TRYAGAIN"))
}

// redirectCounter counts the Cluster redirections that pipelines sent to
// node clients met.
type redirectCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *redirectCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *redirectCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (r *redirectCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if e := c.Err(); e != nil {
				kind, _, _ := strings.Cut(e.Error(), " ")
				r.mu.Lock()
				if r.n == nil {
					r.n = map[string]int{}
				}
				r.n[kind]++
				r.mu.Unlock()
			}
		}
		return err
	}
}

func (r *redirectCounter) count(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[kind]
}

// sameTagUser returns a new user ID with the given slot tag.
func sameTagUser(t *testing.T, gen *idtype.Generator, tag uint16) idtype.ID {
	t.Helper()
	for range 1 << 20 {
		if u := userID(t, gen); slotTag(u) == tag {
			return u
		}
	}
	t.Fatalf("no user ID with slot tag %d in 2^20 tries", tag)
	return 0
}

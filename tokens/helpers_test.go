package tokens

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/private"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// A backend is a kind of Redis deployment the Manager must work on.
type backend struct {
	name string
	// real is true for a real redis-server, whose TTLs run in real time;
	// miniredis's stand still unless fast-forwarded.
	real   bool
	client func(t testing.TB) redis.UniversalClient
}

var (
	miniBackend     = backend{"miniredis", false, miniClient}
	singleBackend   = backend{"single", true, func(t testing.TB) redis.UniversalClient { return testenv.RedisClient(t) }}
	clusterBackend  = backend{"cluster", true, func(t testing.TB) redis.UniversalClient { return testenv.RedisClusterClient(t) }}
	sentinelBackend = backend{"sentinel", true, sentinelClient}
)

// allBackends is miniredis, for speed, and every real deployment.
func allBackends() []backend {
	return []backend{miniBackend, singleBackend, clusterBackend, sentinelBackend}
}

// realBackends are the real servers, for tests that need real time or
// real concurrency.
func realBackends() []backend {
	return []backend{singleBackend, clusterBackend, sentinelBackend}
}

// forEach runs f as a parallel subtest per backend.
func forEach(t *testing.T, backends []backend, f func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

func miniClient(t testing.TB) redis.UniversalClient {
	mr := miniredis.RunT(t)
	// No timeouts of its own, as testenv.RedisClient: miniredis runs in
	// this process, whose goroutines a busy machine may hold up for
	// seconds, and a timed-out Issue retried by go-redis finds its own
	// session already there.
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), ReadTimeout: -1, WriteTimeout: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// sentinelClient starts a private master and a Sentinel that monitors it,
// and returns a FailoverClient that finds the master through the Sentinel.
func sentinelClient(t testing.TB) redis.UniversalClient {
	t.Helper()
	master := private.StartRedis(t)
	return private.StartRedisSentinel(t, master.Addr()).FailoverClient()
}

// newGen returns a generator for tests.
func newGen(t testing.TB) *idtype.Generator {
	t.Helper()
	g, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 7})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// openManager returns a Manager over c with keys under the test's prefix,
// unless opts says otherwise.
func openManager(t testing.TB, c redis.UniversalClient, gen *idtype.Generator, opts Options) *Manager {
	t.Helper()
	return openManagerWithout(t, c, gen, opts, defences{})
}

// openManagerWithout is openManager with the defences in off switched off.
func openManagerWithout(t testing.TB, c redis.UniversalClient, gen *idtype.Generator, opts Options, off defences) *Manager {
	t.Helper()
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = testenv.KeyPrefix(t)
	}
	m, err := newWithout(c, gen, opts, off)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// issue issues a token or fails the test.
func issue(t testing.TB, m *Manager, user idtype.ID, meta Metadata) (string, Session) {
	t.Helper()
	tok, s, err := m.Issue(context.Background(), user, meta)
	if err != nil {
		t.Fatalf("Issue(%d): %v", user, err)
	}
	return tok, s
}

// userID returns a user ID unique within the test run.
func userID(t testing.TB, gen *idtype.Generator) idtype.ID {
	t.Helper()
	id, err := gen.Next()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// startPersistentRedis starts a private server that keeps every write
// across a kill (appendfsync always).
func startPersistentRedis(t testing.TB) *private.RedisServer {
	t.Helper()
	return private.StartRedis(t, "--appendonly", "yes", "--appendfsync", "always")
}

// clientFor returns a client of one server that gives up quickly when the
// server is gone.
func clientFor(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: 1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

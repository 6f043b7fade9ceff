// Package testenv gives snowkey's tests the shared servers they run
// against (PostgreSQL, a standalone Redis, a Redis Cluster), the budgets
// of their time, and the rule for a missing server. A test that needs a
// server to itself, to kill, freeze or reconfigure, starts one with
// package private.
//
// Every test that waits bounds its own time, so that a hang fails within
// seconds with every goroutine's stack instead of running to go test's
// -timeout. A test that waits on anything (a server, a clock, another
// goroutine) starts with
//
//	ctx := testenv.Deadline(t, 30*time.Second)
//
// and passes ctx to what it waits on: the context ends first and the test
// fails with its own message; if the code ignores it, the watchdog ends the
// binary at the budget with the stacks. A package's TestMain runs its tests
// under Main, a budget for the whole package that catches a hang in a test
// without a Deadline of its own:
//
//	func TestMain(m *testing.M) {
//		os.Exit(testenv.Main(m, 3*time.Minute))
//	}
//
// (A TestMain that does more, such as chaos.HelperMain or a quiet go-redis
// logger, calls Main where it called m.Run.) Budgets are several times the
// usual time under -race, counted in the machine's own time: on a machine
// loaded beyond its CPUs they stretch with the load (see Main), so a busy
// machine makes tests slower, not red. make test's go test -timeout (30m a
// package) stays the last resort.
//
// The shared servers are started by `make test`, which runs the tests under
// internal/cmd/testservers; it passes their addresses in these
// environment variables:
//
//	SNOWKEY_TEST_POSTGRES       postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable
//	SNOWKEY_TEST_REDIS          127.0.0.1:PORT
//	SNOWKEY_TEST_REDIS_CLUSTER  127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
//	SNOWKEY_TEST_REDIS_SERVER   /usr/bin/redis-server
//
// When a variable is missing, a test that needs it is skipped, so that
// `go test ./...` works on a bare checkout; but when CI=true it fails
// instead, because in CI a skipped integration test would hide a broken
// harness. Skip is that rule for any test that must leave: every skip in
// snowkey's tests goes through it.
//
// Tests share the servers, and run in parallel across packages:
//   - Postgres gives every call its own fresh database, dropped at the end.
//   - Redis keys must start with KeyPrefix(t). Never FLUSHDB, FLUSHALL or
//     CONFIG SET on the shared servers; a test that needs a server to itself
//     (to flush, kill or reconfigure it) uses private.StartRedis.
//
// A typical test:
//
//	func TestStore(t *testing.T) {
//		rdb := testenv.RedisClient(t)
//		prefix := testenv.KeyPrefix(t)
//		rdb.Set(t.Context(), prefix+"k", "v", 0)
//		…
//	}
//
// Every function here reports failures with t.Fatal, so it must be called
// from the goroutine running the test, as t.Fatal requires.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/launch"
)

// Names of the environment variables that point tests at servers.
const (
	// EnvPostgres holds a PostgreSQL URL of a superuser that may create
	// databases.
	EnvPostgres = "SNOWKEY_TEST_POSTGRES"
	// EnvRedis holds the host:port of a standalone Redis server.
	EnvRedis = "SNOWKEY_TEST_REDIS"
	// EnvRedisCluster holds the comma-separated host:port list of a Redis
	// Cluster's nodes.
	EnvRedisCluster = "SNOWKEY_TEST_REDIS_CLUSTER"
	// EnvRedisServer holds the path of a redis-server binary, or of a
	// fork's such as valkey-server, for package private's StartRedis,
	// StartRedisCluster and StartRedisSentinel (and for testservers'
	// shared servers). When
	// unset, they look for redis-server in PATH. make test sets it to
	// valkey-server for its second pass of the Redis-backed tests.
	EnvRedisServer = "SNOWKEY_TEST_REDIS_SERVER"
)

// OpTimeout bounds every single operation on a server, shared or
// private (see package private), in the machine's own time: OpContext
// stretches it by the load, as Deadline does.
const OpTimeout = 30 * time.Second

// InCI reports whether the environment variable CI says the tests run in
// continuous integration (CI=true, or any other true value of
// strconv.ParseBool). There a missing server fails a test instead of
// skipping it.
func InCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// lookup returns the value of the environment variable name, or skips the
// test (fails it in CI) when the variable is unset.
func lookup(t testing.TB, name, example string) string {
	t.Helper()
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	Skip(t, fmt.Sprintf("%s is not set: run `make test`, which starts the test servers, or set %s=%s",
		name, name, example))
	return ""
}

// Skip skips t, saying why (a server, a tool or a browser it needs is
// missing, or -short asks to leave it out), or fails t instead when
// running in CI (InCI): there a skipped test would hide a broken harness
// behind a green run. Every skip in snowkey's tests goes through it.
func Skip(t testing.TB, why string) {
	t.Helper()
	if InCI() {
		t.Fatal(why + " (CI is set, so this fails the test instead of skipping it)")
	}
	t.Skip(why)
}

// freePort returns a TCP port on 127.0.0.1 that was free when it was
// asked for. Another process may still take it before the caller binds it;
// callers that can, retry with a new port.
func freePort(t testing.TB) int {
	t.Helper()
	port, err := launch.FreePort()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return port
}

var prefixes sync.Map // testing.TB -> string

// KeyPrefix returns a Redis key prefix that belongs to t alone, such as
// "test:TestStore/sub:3f9c2a1b:". It is the same for every call within one
// test (subtests get their own) and different in every other test, this run
// or any other, so tests that share a Redis server or cluster do not see
// each other's keys. It holds no '{' or '}', so it never changes the hash
// slot that a key's own {hash tag} picks in a cluster. Keys are not
// deleted afterwards: the shared servers live for one test run only.
func KeyPrefix(t testing.TB) string {
	t.Helper()
	if p, ok := prefixes.Load(t); ok {
		return p.(string)
	}
	p := "test:" + sanitize(t.Name(), 48) + ":" + randomHex(t, 4) + ":"
	if actual, loaded := prefixes.LoadOrStore(t, p); loaded {
		return actual.(string)
	}
	t.Cleanup(func() { prefixes.Delete(t) })
	return p
}

// sanitize keeps letters, digits and "_/-" of s, replacing anything else
// with '_', and cuts the result to at most n bytes.
func sanitize(s string, n int) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '/', c == '-':
		default:
			b[i] = '_'
		}
	}
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("testenv: read random bytes: %v", err)
	}
	return hex.EncodeToString(b)
}

// cleanupContext returns a context for work in a t.Cleanup function, where
// t.Context() is already canceled.
func cleanupContext() (context.Context, context.CancelFunc) {
	return OpContext(OpTimeout)
}

// OpContext returns a context for operations on a server that ends with
// context.DeadlineExceeded once d, stretched by the machine's load (see
// Main), has passed.
func OpContext(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.Background())
	st := afterStretched(d, stretch, func() { cancel(context.DeadlineExceeded) })
	return budgetCtx{ctx}, func() {
		st.stop()
		cancel(nil)
	}
}

// Stretched returns d stretched by the machine's load now (see Main), for
// waits that poll.
func Stretched(d time.Duration) time.Duration {
	return time.Duration(float64(d) * stretch())
}

package testenv

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testenv/launch"
)

// RedisServer is a redis-server process that belongs to one test, which may
// kill, stop and restart it, for example to see how code behaves while
// Redis is down. Make one with StartRedis.
//
// Its methods report failures with t.Fatal and so must be called from the
// test's goroutine.
type RedisServer struct {
	t      testing.TB
	r      *launch.Redis
	client *redis.Client // made by Client
}

// StartRedis starts a private redis-server on a free loopback port, with its
// working directory in t.TempDir(), and returns once it answers PING. The
// server has no persistence unless extraArgs turn it on; extraArgs are
// redis-server options that override the defaults, such as
// "--appendonly", "yes" or "--maxmemory", "1mb". It is killed when the
// test ends.
//
// The binary is SNOWKEY_TEST_REDIS_SERVER, else redis-server in PATH;
// without either the test is skipped, or fails when CI=true.
func StartRedis(t testing.TB, extraArgs ...string) *RedisServer {
	t.Helper()
	bin, _ := redisBinaries(t)
	dir := t.TempDir()
	ctx, cancel := opContext(opTimeout)
	defer cancel()
	r, err := launch.StartRedis(ctx, launch.RedisConfig{Bin: bin, Dir: dir, Args: extraArgs})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return ownRedis(t, r)
}

// ownRedis makes r t's, to be killed when t ends (before t.TempDir() is
// removed: cleanups run last-registered first).
func ownRedis(t testing.TB, r *launch.Redis) *RedisServer {
	t.Cleanup(func() { _ = r.Stop(syscall.SIGKILL, 10*time.Second) })
	return &RedisServer{t: t, r: r}
}

// redisBinaries returns redis-server (SNOWKEY_TEST_REDIS_SERVER, else from
// PATH) and the redis-cli beside it or in PATH (empty if none), or skips
// the test (fails it in CI) when there is no redis-server.
func redisBinaries(t testing.TB) (server, cli string) {
	t.Helper()
	server, cli, err := launch.FindRedis(os.Getenv(EnvRedisServer))
	if err != nil {
		Skip(t, "redis-server not found: set "+EnvRedisServer+
			" or install it (Debian: apt-get install redis-server), or run `make test`")
	}
	return server, cli
}

// Addr returns the server's address, "127.0.0.1:PORT". It stays the same
// across restarts.
func (s *RedisServer) Addr() string { return s.r.Addr() }

// Dir returns the server's working directory, where it keeps its RDB and
// AOF files and its log (redis.log).
func (s *RedisServer) Dir() string { return s.r.Dir() }

// Kill ends the server at once with SIGKILL, as a crash would: nothing is
// saved. It does nothing if the server is not running.
func (s *RedisServer) Kill() {
	s.t.Helper()
	if err := s.r.Stop(syscall.SIGKILL, 10*time.Second); err != nil {
		s.t.Fatalf("testenv: kill: %v", err)
	}
}

// Stop shuts the server down with SIGTERM, which saves data if persistence
// is configured, and waits for it to exit. It does nothing if the server is
// not running.
func (s *RedisServer) Stop() {
	s.t.Helper()
	if err := s.r.Stop(syscall.SIGTERM, 30*time.Second); err != nil {
		s.t.Fatalf("testenv: stop: %v", err)
	}
}

// Restart stops the server if it is running and starts it again on the same
// port with the same options. Data survives only if persistence is
// configured (and, after Kill, only what was already written).
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.Stop()
	ctx, cancel := opContext(opTimeout)
	defer cancel()
	if err := s.r.Restart(ctx); err != nil {
		s.t.Fatalf("testenv: restart: %v", err)
	}
}

// logPath returns the server's log file.
func (s *RedisServer) logPath() string { return s.r.LogPath() }

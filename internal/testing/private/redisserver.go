package private

import (
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testing/launch"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
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
	// hold keeps the port of a killed or stopped server until Restart or
	// the test's end (holdPort).
	hold net.Listener
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
	ctx, cancel := testenv.OpContext(testenv.OpTimeout)
	defer cancel()
	r, err := launch.StartRedis(ctx, launch.RedisConfig{Bin: bin, Dir: dir, Args: extraArgs})
	if err != nil {
		t.Fatalf("private: %v", err)
	}
	return ownRedis(t, r)
}

// ownRedis makes r t's, to be killed when t ends (before t.TempDir() is
// removed: cleanups run last-registered first).
func ownRedis(t testing.TB, r *launch.Redis) *RedisServer {
	s := &RedisServer{t: t, r: r}
	t.Cleanup(func() {
		_ = r.Stop(syscall.SIGKILL, 10*time.Second)
		s.release()
	})
	return s
}

// holdPort keeps the port of the server, which a test has killed or
// stopped, from every other server until Restart or the test's end: a
// listener that closes each connection at once, as a server that went
// away does. Without it a server that another test starts meanwhile may
// get the port, and this test's replicas and Sentinels, which go on
// trying the address, reach that server: a replica that syncs from it
// counts in its WAIT (seen: WAIT 1 answered 2 in another test's fresh
// primary), a Sentinel makes it a replica and kills its clients' connections.
// If the port is taken already, it holds nothing.
func (s *RedisServer) holdPort() {
	if s.hold != nil {
		return
	}
	ln, err := net.Listen("tcp", s.Addr())
	if err != nil {
		return
	}
	s.hold = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by release
			}
			_ = c.Close()
		}
	}()
}

// release lets the port held by holdPort go.
func (s *RedisServer) release() {
	if s.hold != nil {
		_ = s.hold.Close()
		s.hold = nil
	}
}

// redisBinaries returns redis-server (SNOWKEY_TEST_REDIS_SERVER, else from
// PATH) and the redis-cli beside it or in PATH (empty if none), or skips
// the test (fails it in CI) when there is no redis-server.
func redisBinaries(t testing.TB) (server, cli string) {
	t.Helper()
	server, cli, err := launch.FindRedis(os.Getenv(testenv.EnvRedisServer))
	if err != nil {
		testenv.Skip(t, "redis-server not found: set "+testenv.EnvRedisServer+
			" or install it (Debian: apt-get install redis-server), or run `make test`")
	}
	return server, cli
}

// Addr returns the server's address, "127.0.0.1:PORT". It stays the same
// across restarts.
func (s *RedisServer) Addr() string { return s.r.Addr() }

// dir returns the server's working directory, where it keeps its RDB and
// AOF files and its log (redis.log).
func (s *RedisServer) dir() string { return s.r.Dir() }

// Kill ends the server at once with SIGKILL, as a crash would: nothing is
// saved. It does nothing if the server is not running. Its port stays
// this test's until Restart or the test's end, each connection to it
// closed at once (holdPort).
func (s *RedisServer) Kill() {
	s.t.Helper()
	if err := s.r.Stop(syscall.SIGKILL, 10*time.Second); err != nil {
		s.t.Fatalf("private: kill: %v", err)
	}
	s.holdPort()
}

// Stop shuts the server down with SIGTERM, which saves data if persistence
// is configured, and waits for it to exit. It does nothing if the server is
// not running. Its port stays this test's, as after Kill.
func (s *RedisServer) Stop() {
	s.t.Helper()
	if err := s.r.Stop(syscall.SIGTERM, 30*time.Second); err != nil {
		s.t.Fatalf("private: stop: %v", err)
	}
	s.holdPort()
}

// Restart stops the server if it is running and starts it again on the same
// port with the same options. Data survives only if persistence is
// configured (and, after Kill, only what was already written).
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.Stop()
	s.release()
	ctx, cancel := testenv.OpContext(testenv.OpTimeout)
	defer cancel()
	if err := s.r.Restart(ctx); err != nil {
		s.t.Fatalf("private: restart: %v", err)
	}
}

// logPath returns the server's log file.
func (s *RedisServer) logPath() string { return s.r.LogPath() }

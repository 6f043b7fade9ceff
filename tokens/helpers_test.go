package tokens

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testenv"
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
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// sentinelClient starts a private master and a Sentinel that monitors it,
// and returns a FailoverClient that finds the master through the Sentinel.
func sentinelClient(t testing.TB) redis.UniversalClient {
	t.Helper()
	master := testenv.StartRedis(t)
	addr := startSentinel(t, master.Addr())
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    "snowkey",
		SentinelAddrs: []string{addr},
	})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping through sentinel %s: %v", addr, err)
	}
	return c
}

// startSentinel runs redis-server in Sentinel mode on a free port,
// monitoring the master at masterAddr under the name "snowkey", and
// returns its address. It is killed when the test ends.
func startSentinel(t testing.TB, masterAddr string) string {
	t.Helper()
	bin := os.Getenv(testenv.EnvRedisServer)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("redis-server"); err != nil {
			t.Skip("redis-server not found")
		}
	}
	host, port, _ := net.SplitHostPort(masterAddr)
	dir := t.TempDir()
	var last error
	for range 3 {
		sp := testenv.FreePort(t)
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
			"sentinel monitor snowkey %s %s 1\nsentinel down-after-milliseconds snowkey 5000\n",
			sp, dir, filepath.Join(dir, "sentinel.log"), host, port)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, conf, "--sentinel")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start sentinel: %v", err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
		addr := "127.0.0.1:" + strconv.Itoa(sp)
		if last = waitPing(addr, done, 10*time.Second); last == nil {
			return addr
		}
	}
	t.Fatalf("sentinel did not start: %v", last)
	return ""
}

// waitPing waits until addr answers PING or the process ends.
func waitPing(addr string, done <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.SetDeadline(time.Now().Add(time.Second))
			_, err = io.WriteString(conn, "PING\r\n")
			var line string
			if err == nil {
				line, err = bufio.NewReader(conn).ReadString('\n')
			}
			conn.Close()
			if err == nil && strings.TrimSpace(line) == "+PONG" {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("exited: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG within %v: %v", timeout, err)
		}
	}
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

// newManager returns a Manager over c with keys under the test's prefix,
// unless opts says otherwise.
func newManager(t testing.TB, c redis.UniversalClient, gen *idtype.Generator, opts Options) *Manager {
	t.Helper()
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = testenv.KeyPrefix(t)
	}
	m, err := New(c, gen, opts)
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
func startPersistentRedis(t testing.TB) *testenv.RedisServer {
	t.Helper()
	return testenv.StartRedis(t, "--appendonly", "yes", "--appendfsync", "always")
}

// clientFor returns a client of one server that gives up quickly when the
// server is gone.
func clientFor(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: 1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

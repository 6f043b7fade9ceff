package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testenv/redisctl"
)

// RedisServer is a redis-server process that belongs to one test, which may
// kill, stop and restart it, for example to see how code behaves while
// Redis is down. Make one with StartRedis.
//
// Its methods report failures with t.Fatal and so must be called from the
// test's goroutine.
type RedisServer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string // all arguments, the same at every (re)start

	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited

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
	return startRedis(t, func() (int, error) { return FreePort(t), nil }, func(string) []string { return extraArgs })
}

// startRedis starts a private redis-server on a port from pickPort, with
// the options args gives for its working directory.
func startRedis(t testing.TB, pickPort func() (int, error), args func(dir string) []string) *RedisServer {
	t.Helper()
	bin := os.Getenv(EnvRedisServer)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("redis-server"); err != nil {
			unavailable(t, "redis-server not found: set "+EnvRedisServer+
				" or install it (Debian: apt-get install redis-server), or run `make test`")
		}
	}
	s := &RedisServer{t: t, bin: bin, dir: t.TempDir()}
	t.Cleanup(func() {
		if s.running() {
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	// A free port can be taken before redis-server binds it: try another.
	var err error
	for range 3 {
		if s.port, err = pickPort(); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		s.args = append([]string{
			"--port", strconv.Itoa(s.port),
			"--bind", "127.0.0.1",
			"--dir", s.dir,
			"--save", "",
			"--appendonly", "no",
			"--logfile", s.logPath(),
			"--daemonize", "no",
			// A replica's full sync starts at once, not after the default 5s
			// wait for more replicas.
			"--repl-diskless-sync-delay", "0",
		}, args(s.dir)...)
		if err = s.start(); err == nil || !redisctl.IsBindError(err) {
			break
		}
		_ = os.Remove(filepath.Join(s.dir, "nodes.conf")) // a cluster node's, naming the taken port
	}
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return s
}

// Addr returns the server's address, "127.0.0.1:PORT". It stays the same
// across restarts.
func (s *RedisServer) Addr() string {
	return "127.0.0.1:" + strconv.Itoa(s.port)
}

// Dir returns the server's working directory, where it keeps its RDB and
// AOF files and its log (redis.log).
func (s *RedisServer) Dir() string {
	return s.dir
}

// Kill ends the server at once with SIGKILL, as a crash would: nothing is
// saved. It does nothing if the server is not running.
func (s *RedisServer) Kill() {
	s.t.Helper()
	if !s.running() {
		return
	}
	_ = s.cmd.Process.Kill()
	s.wait(10 * time.Second)
}

// Stop shuts the server down with SIGTERM, which saves data if persistence
// is configured, and waits for it to exit. It does nothing if the server is
// not running.
func (s *RedisServer) Stop() {
	s.t.Helper()
	if !s.running() {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	s.wait(30 * time.Second)
}

// Restart stops the server if it is running and starts it again on the same
// port with the same options. Data survives only if persistence is
// configured (and, after Kill, only what was already written).
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		s.t.Fatalf("testenv: restart: %v", err)
	}
}

func (s *RedisServer) logPath() string {
	return filepath.Join(s.dir, "redis.log")
}

func (s *RedisServer) running() bool {
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// wait waits for the process to exit, failing the test after timeout.
func (s *RedisServer) wait(timeout time.Duration) {
	s.t.Helper()
	select {
	case <-s.done:
	case <-time.After(timeout):
		_ = s.cmd.Process.Kill()
		s.t.Fatalf("testenv: redis-server at %s did not exit within %v", s.Addr(), timeout)
	}
}

// start runs redis-server with s.args and waits until it answers PING.
func (s *RedisServer) start() error {
	log, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = log, log
	// If the test binary dies, the server goes with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done = cmd, done

	deadline := time.Now().Add(opTimeout)
	for {
		err := ping(s.Addr())
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server at %s exited during startup (%v)\n%s",
				s.Addr(), cmd.ProcessState, tail(s.logPath()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("redis-server at %s did not answer PING within %v: %v\n%s",
				s.Addr(), opTimeout, err, tail(s.logPath()))
		}
	}
}

// ping sends PING and expects PONG.
func ping(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	reply, err := redisctl.Do(ctx, addr, "PING")
	if err == nil && reply != "PONG" {
		err = fmt.Errorf("PING answered %q", reply)
	}
	return err
}

// tail returns the end of a log file for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return "--- end of " + path + " ---\n" + string(b)
}

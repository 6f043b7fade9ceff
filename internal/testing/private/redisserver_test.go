package private

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func TestStartRedis(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	s := StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	s.Kill()
	if err := c.Ping(ctx).Err(); !isDown(err) {
		t.Fatalf("PING after Kill: %v, want a connection error", err)
	}
	// The dead server's port stays the test's, so that no server started
	// meanwhile gets the address its replicas and Sentinels keep trying.
	if !portTaken(s.Addr()) {
		t.Errorf("after Kill, %s could be listened on by another server", s.Addr())
	}
	s.Kill() // a no-op on a dead server

	s.Restart()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET k after a restart without persistence: %v, want redis.Nil", err)
	}

	s.Stop()
	if err := c.Ping(ctx).Err(); !isDown(err) {
		t.Fatalf("PING after Stop: %v, want a connection error", err)
	}
	if !portTaken(s.Addr()) {
		t.Errorf("after Stop, %s could be listened on by another server", s.Addr())
	}
	s.Restart()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Stop and Restart: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.dir(), "redis.log")); err != nil {
		t.Errorf("no log in Dir(): %v", err)
	}
}

func TestStartRedisPersistence(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	s := StartRedis(t, "--appendonly", "yes", "--appendfsync", "always")
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	ctx := t.Context()
	if err := c.Set(ctx, "k", "kept", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	s.Restart()
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "kept" {
		t.Fatalf("GET k after Kill and Restart with appendonly: %q, %v; want \"kept\"", got, err)
	}
}

// isDown reports whether a client call failed because the server is
// gone: nothing listens, or the port's holder closed the connection.
func isDown(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, io.EOF)
}

// portTaken reports whether addr cannot be listened on by another.
func portTaken(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return true
	}
	_ = ln.Close()
	return false
}

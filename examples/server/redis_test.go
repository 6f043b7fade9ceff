package main

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testenv"
)

// TestEmbeddedRedisAuth starts the embedded Redis of make run and talks to
// it as another process of the machine would: without the password, and
// with a wrong one, every command is refused; the App, which holds the
// password, is served. The control is a miniredis started as the
// embedded one once was, which the same client writes a session into.
func TestEmbeddedRedisAuth(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	app, srv := startApp(t, embedded())
	if r := call(t, srv, "GET", "/readyz", "", ""); r.status != 200 {
		t.Fatalf("the App cannot use its Redis: %d %s", r.status, r.body)
	}
	addr := app.rdb.(*redis.Client).Options().Addr
	if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
		t.Errorf("the embedded Redis listens on %s, not on loopback", addr)
	}
	stranger := func(addr, password string) error {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1})
		defer c.Close()
		return c.Set(ctx, "tok:forged-session", "for any user", 0).Err()
	}
	for _, pw := range []string{"", "guess", strings.Repeat("0", 64)} {
		err := stranger(addr, pw)
		if err == nil || !(strings.Contains(err.Error(), "NOAUTH") || strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), "invalid password")) {
			t.Errorf("another local client with password %q: %v; want it refused", pw, err)
		}
	}
	if n, err := app.rdb.Exists(ctx, "tok:forged-session").Result(); err != nil || n != 0 {
		t.Errorf("the forged key: %d, %v; want none", n, err)
	}

	// Control: a miniredis without a password takes the stranger's write.
	open := miniredis.RunT(t)
	if err := stranger(open.Addr(), ""); err != nil || !open.Exists("tok:forged-session") {
		t.Errorf("control: a Redis without a password refused the write (%v); the test proves nothing", err)
	}
}

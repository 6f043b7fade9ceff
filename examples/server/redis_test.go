package main

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestEmbeddedRedisAuth starts the embedded Redis of make run and talks to
// it as another process of the machine would: without the password, and
// with a wrong one, it can neither read the App's secrets (the key that
// signs device cookies) nor write a key the App reads; the server itself
// refuses it (NOAUTH, WRONGPASS), so the stranger did reach it. The App,
// which holds the password, is served. In the control run the App's Redis
// is one on loopback with no password, as the embedded one was before it
// had one, and the same stranger reads the signing key and plants a key
// that the App then reads.
func TestEmbeddedRedisAuth(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "password", true: "control"}[control], func(t *testing.T) {
			ctx := testenv.Deadline(t, time.Minute)
			cfg := Config{Throttle: generous()}
			if control {
				bare := miniredis.NewMiniRedis()
				if err := bare.StartAddr("127.0.0.1:0"); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(bare.Close)
				rdb := redis.NewClient(&redis.Options{Addr: bare.Addr()})
				t.Cleanup(func() { _ = rdb.Close() })
				cfg.Redis, cfg.Worker = rdb, 1
			}
			app, srv := startAppConfig(t, cfg)
			if r := call(t, srv, "GET", "/readyz", "", ""); r.status != 200 {
				t.Fatalf("the App cannot use its Redis: %d %s", r.status, r.body)
			}
			addr := app.rdb.(*redis.Client).Options().Addr
			if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
				t.Errorf("the embedded Redis listens on %s, not on loopback", addr)
			}
			deviceKey, err := app.rdb.Get(ctx, defaultKeyPrefix+"device-key").Result()
			if err != nil {
				t.Fatalf("the App's device-cookie key: %v", err)
			}
			const planted = defaultKeyPrefix + "planted"
			for _, pw := range []string{"", "guess", strings.Repeat("0", 64)} {
				c := redis.NewClient(&redis.Options{Addr: addr, Password: pw, MaxRetries: -1})
				read, rerr := c.Get(ctx, defaultKeyPrefix+"device-key").Result()
				werr := c.Set(ctx, planted, "by a stranger", 0).Err()
				c.Close()
				if control {
					if rerr != nil || read != deviceKey || werr != nil {
						t.Errorf("control: a client with password %q read %q (%v), wrote (%v); want the App's key read and the write taken", pw, read, rerr, werr)
					}
					continue
				}
				for _, err := range []error{rerr, werr} {
					if err == nil || !(strings.Contains(err.Error(), "NOAUTH") || strings.Contains(err.Error(), "WRONGPASS") || strings.Contains(err.Error(), "invalid password")) {
						t.Errorf("another local client with password %q: %v; want the server's refusal", pw, err)
					}
				}
			}
			got, err := app.rdb.Get(ctx, planted).Result()
			switch {
			case control && got != "by a stranger":
				t.Errorf("control: the App reads %q (%v) where the stranger wrote; the test proves nothing", got, err)
			case !control && !errors.Is(err, redis.Nil):
				t.Errorf("the App reads %q (%v) where a stranger tried to write; want nothing", got, err)
			}
		})
	}
}

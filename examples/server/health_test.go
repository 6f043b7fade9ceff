package main

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testing/faultproxy"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/tokens"
	"github.com/snowkeyhq/snowkey/workerid"
)

// readiness is what /readyz answered.
type readiness struct {
	status int
	checks map[string]readyCheck
}

func ready(t *testing.T, srv string) readiness {
	t.Helper()
	r := callURL(t, srv+"/readyz")
	var body struct {
		Status string
		Checks []readyCheck
	}
	r.json(t, &body)
	out := readiness{status: r.status, checks: map[string]readyCheck{}}
	for _, c := range body.Checks {
		out.checks[c.Name] = c
	}
	if len(out.checks) != 3 || (r.status == 200) != (body.Status == "ready") {
		t.Fatalf("/readyz: %d %s", r.status, r.body)
	}
	return out
}

// waitReady polls /readyz until ok(answer) or the deadline, and returns the
// last answer.
func waitReady(t *testing.T, srv string, within time.Duration, ok func(readiness) bool) readiness {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := ready(t, srv)
		if ok(r) || time.Now().After(deadline) {
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// healthy checks /healthz, which answers 200 whatever the dependencies do.
func healthy(t *testing.T, srv string) {
	t.Helper()
	if r := callURL(t, srv+"/healthz"); r.status != 200 {
		t.Errorf("/healthz: %d %s", r.status, r.body)
	}
}

// publicReady checks the public listener's /readyz: the status alone,
// with no check's detail (the worker number, the lease).
func publicReady(t *testing.T, srv string, want int) {
	t.Helper()
	r := callURL(t, srv+"/readyz")
	word := map[int]string{200: "ready", 503: "not ready"}[want]
	if r.status != want || string(r.body) != `{"status":"`+word+`"}`+"\n" {
		t.Errorf("public /readyz: %d %s; want %d and the status alone", r.status, r.body, want)
	}
}

// viaProxy returns the PostgreSQL URL u with its host and port replaced
// by the proxy's.
func viaProxy(t *testing.T, u string, p *faultproxy.Proxy) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	parsed.Host = p.Addr()
	return parsed.String()
}

// TestReadyDatabase cuts the path to PostgreSQL: /readyz fails on the
// database check alone and recovers when the path is back.
func TestReadyDatabase(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	pgURL := testenv.Postgres(t)
	parsed, _ := url.Parse(pgURL)
	proxy := faultproxy.Start(t, parsed.Host)
	prefix := testenv.KeyPrefix(t)
	cfg := Config{DatabaseURL: viaProxy(t, pgURL, proxy), Redis: testenv.RedisClient(t), Worker: 11,
		KeyPrefix: prefix + "ex:", Tokens: tokens.Options{KeyPrefix: prefix + "tok:"}, Throttle: generous()}
	app, srv := startAppConfig(t, cfg)
	ops := startOps(t, app)
	if r := ready(t, ops); r.status != 200 {
		t.Fatalf("ready before the cut: %+v", r)
	}
	proxy.Cut()
	r := waitReady(t, ops, 20*time.Second, func(r readiness) bool { return r.status != 200 })
	if r.status != 503 || r.checks["database"].OK || r.checks["database"].Detail != "unreachable" || !r.checks["redis"].OK || !r.checks["lease"].OK {
		t.Fatalf("ready with the database cut: %+v, want 503 with only the database failing", r)
	}
	healthy(t, srv.URL)
	publicReady(t, srv.URL, 503)
	proxy.Restore()
	if r := waitReady(t, ops, 30*time.Second, func(r readiness) bool { return r.status == 200 }); r.status != 200 {
		t.Fatalf("ready after the database came back: %+v", r)
	}
}

// TestReadyRedis cuts the path to Redis: /readyz fails on the Redis check
// alone (the worker is fixed, so there is no lease to lose).
func TestReadyRedis(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	proxy := faultproxy.Start(t, testenv.Redis(t))
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	prefix := testenv.KeyPrefix(t)
	cfg := Config{Redis: rdb, Worker: 12, KeyPrefix: prefix + "ex:", Tokens: tokens.Options{KeyPrefix: prefix + "tok:"}, Throttle: generous()}
	app, srv := startAppConfig(t, cfg)
	ops := startOps(t, app)
	if r := ready(t, ops); r.status != 200 || !strings.HasPrefix(r.checks["lease"].Detail, "fixed worker 12") {
		t.Fatalf("ready before the cut: %+v", r)
	}
	proxy.Cut()
	r := waitReady(t, ops, 20*time.Second, func(r readiness) bool { return r.status != 200 })
	if r.status != 503 || r.checks["redis"].OK || !r.checks["database"].OK || !r.checks["lease"].OK {
		t.Fatalf("ready with Redis cut: %+v, want 503 with only Redis failing", r)
	}
	healthy(t, srv.URL)
	publicReady(t, srv.URL, 503)
	proxy.Restore()
	if r := waitReady(t, ops, 30*time.Second, func(r readiness) bool { return r.status == 200 }); r.status != 200 {
		t.Fatalf("ready after Redis came back: %+v", r)
	}
}

// TestReadyLease leases the worker number from a Redis behind a proxy,
// with a short TTL, and cuts the path: once the lease has gone
// unconfirmed for TTL - Margin, /readyz fails on the lease check too, and
// recovers when renewals get through again.
func TestReadyLease(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	proxy := faultproxy.Start(t, testenv.Redis(t))
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	prefix := testenv.KeyPrefix(t)
	cfg := Config{Redis: rdb, KeyPrefix: prefix + "ex:", Tokens: tokens.Options{KeyPrefix: prefix + "tok:"},
		Leases: workerid.Options{KeyPrefix: prefix + "wid:", TTL: 3 * time.Second}, Throttle: generous()}
	app, srv := startAppConfig(t, cfg)
	if app.lease == nil {
		t.Fatal("no lease")
	}
	ops := startOps(t, app)
	if r := ready(t, ops); r.status != 200 || !strings.Contains(r.checks["lease"].Detail, "held") {
		t.Fatalf("ready before the cut: %+v", r)
	}
	proxy.Cut()
	r := waitReady(t, ops, 30*time.Second, func(r readiness) bool { return !r.checks["lease"].OK })
	if r.status != 503 || r.checks["lease"].OK || !strings.Contains(r.checks["lease"].Detail, "expired") {
		t.Fatalf("ready with the lease's Redis cut: %+v, want 503 with the lease expired", r)
	}
	healthy(t, srv.URL)
	publicReady(t, srv.URL, 503)
	proxy.Restore()
	if r := waitReady(t, ops, 30*time.Second, func(r readiness) bool { return r.status == 200 }); r.status != 200 {
		t.Fatalf("ready after the lease's Redis came back: %+v", r)
	}
}

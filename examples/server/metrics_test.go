package main

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/snowkeyhq/snowkey/extra/snowkeyotel"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// scrape reads /metrics and parses it as the Prometheus text format.
func scrape(t *testing.T, srv string) map[string]*dto.MetricFamily {
	t.Helper()
	r := callURL(t, srv+"/metrics")
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %s", r.status, r.header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(r.body))
	if err != nil {
		t.Fatalf("/metrics is not the text format: %v", err)
	}
	return fams
}

// value returns the value of the family's series with the labels, and
// whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if have[labels[i]] != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestMetrics serves requests on the real servers, with a leased worker,
// and reads them back from /metrics: the generator's, the lease's and the
// tokens' counters, and the HTTP requests by route pattern and status,
// whose labels stay few whatever paths clients send.
func TestMetrics(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	app, srv := startApp(t, realServers())
	signupLogin(t, srv, "metrics@example.com", goodPassword)
	call(t, srv, "POST", "/api/login", "", `{"email":"metrics@example.com","password":"`+goodPassword+`"}`)
	call(t, srv, "POST", "/api/login", "", `{"email":"metrics@example.com","password":"`+otherPassword+`"}`)
	for i := range 30 {
		call(t, srv, "GET", fmt.Sprintf("/api/nothing-%d", i), "", "")
		call(t, srv, "GET", fmt.Sprintf("/no/such/page/%d?x=%d", i, i), "", "")
	}
	callType(t, srv, "BREW", "/api/login", "", "", "")
	// The public listener has no /metrics; the operators' one does.
	if r := call(t, srv, "GET", "/metrics", "", ""); r.status != 404 {
		t.Errorf("GET /metrics on the public listener: %d, want 404", r.status)
	}
	fams := scrape(t, startOps(t, app))

	ids, ok := value(fams, "snowkey_ids_issued_total")
	if st := app.gen.Stats(); !ok || ids < 2 || ids > float64(st.IDs) {
		t.Errorf("snowkey_ids_issued_total %v (%v); the generator says %d", ids, ok, st.IDs)
	}
	for _, name := range []string{"snowkey_id_clock_waits_total", "snowkey_id_clock_backward_steps_total", "snowkey_id_clock_max_backward_seconds",
		"snowkey_id_max_drift_seconds", "snowkey_tokens_refresh_failures_total", "snowkey_tokens_validations_total", "snowkey_tokens_issued_total", "snowkey_tokens_revocations_total", "snowkey_tokens_refreshes_total", "snowkey_tokens_cache_lookups_total", "snowkey_example_password_hashes_total",
		"snowkey_example_password_hash_rejected_total", "snowkey_example_password_hash_pending", "go_goroutines"} {
		if _, ok := value(fams, name); !ok {
			t.Errorf("no %s", name)
		}
	}
	if v, _ := value(fams, "snowkey_tokens_issued_total"); v < 1 || v != float64(app.tokens.Stats().Issued) {
		t.Errorf("snowkey_tokens_issued_total %v after a login; the Manager says %d", v, app.tokens.Stats().Issued)
	}
	if w, _ := value(fams, "snowkey_id_worker", "source", "lease"); w != float64(app.gen.Worker()) {
		t.Errorf("snowkey_id_worker %v, the generator's is %d", w, app.gen.Worker())
	}
	for state, want := range map[string]float64{"held": 1, "expired": 0, "lost": 0, "closed": 0} {
		if v, ok := value(fams, "snowkey_lease_state", "state", state); !ok || v != want {
			t.Errorf("snowkey_lease_state{state=%q} %v (%v), want %v", state, v, ok, want)
		}
	}
	renewed, _ := value(fams, "snowkey_lease_last_renewal_timestamp_seconds")
	if now := float64(time.Now().UnixNano()) / 1e9; renewed < now-60 || renewed > now+1 {
		t.Errorf("snowkey_lease_last_renewal_timestamp_seconds %v, now %v", renewed, now)
	}
	if until, _ := value(fams, "snowkey_lease_valid_until_timestamp_seconds"); until <= renewed {
		t.Errorf("lease valid until %v, not after its last renewal %v", until, renewed)
	}
	for _, limit := range []string{"login-ip", "login-account-ip", "login-account", "login-device", "signup-ip", "signup-account"} {
		if _, ok := value(fams, "snowkey_example_throttled_total", "limit", limit); !ok {
			t.Errorf("no snowkey_example_throttled_total{limit=%q}", limit)
		}
	}

	for _, c := range []struct {
		route, status string
		want          float64
	}{
		{"POST /api/signup", "202", 1},
		{"POST /api/verify", "200", 1},
		{"POST /api/login", "200", 1},
		{"POST /api/login", "401", 1},
		{"unmatched", "404", 61},
		{"unmatched", "405", 1},
	} {
		if v, _ := value(fams, "snowkey_example_http_requests_total", "route", c.route, "status", c.status); v != c.want {
			t.Errorf("requests{route=%q,status=%q} = %v, want %v", c.route, c.status, v, c.want)
		}
		if v, _ := value(fams, "snowkey_example_http_request_duration_seconds", "route", c.route, "status", c.status); v != c.want {
			t.Errorf("duration count{route=%q,status=%q} = %v, want %v", c.route, c.status, v, c.want)
		}
	}
	// Bounded labels: every route is one of the mux's patterns or
	// "unmatched", however many paths were asked for.
	routes := map[string]bool{}
	for _, m := range fams["snowkey_example_http_requests_total"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "route" {
				routes[l.GetValue()] = true
			}
		}
	}
	for r := range routes {
		if r != "unmatched" && !strings.Contains(r, " /") {
			t.Errorf("route label %q is not a pattern", r)
		}
	}
	if len(routes) > 5 {
		t.Errorf("%d route labels after 60 distinct unknown paths: %v", len(routes), routes)
	}
}

// TestStatusLabel keeps the status label to numbers a server can send.
func TestStatusLabel(t *testing.T) {
	t.Parallel()
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1})
	if err != nil {
		t.Fatal(err)
	}
	m, err := newMetrics(&App{gen: gen})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []int{0, 200, 99, 600, math.MaxInt32} {
		m.request("GET /x", s, time.Millisecond)
	}
	var labels []string
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.requests)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "snowkey_example_http_requests_total" {
			continue
		}
		for _, x := range f.Metric {
			for _, l := range x.Label {
				if l.GetName() == "status" {
					labels = append(labels, l.GetValue())
				}
			}
		}
	}
	if strings.Join(labels, ",") != "200,other" {
		t.Errorf("status labels %v, want 200 and other", labels)
	}
}

// TestTelemetry runs the server on the real servers with snowkeyotel's
// observers on a tracer of the test's own (the Config's, in place of the
// global providers the server uses by default): a signup and a login
// leave the lease's Acquire and the token calls as spans.
func TestTelemetry(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	spans := tracetest.NewSpanRecorder()
	opts := snowkeyotel.Options{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))}
	tokObs, err := snowkeyotel.NewTokens(opts)
	if err != nil {
		t.Fatal(err)
	}
	leaseObs, err := snowkeyotel.NewLeases(opts)
	if err != nil {
		t.Fatal(err)
	}
	cfg := realServers().config(t)
	cfg.Throttle = generous()
	cfg.Tokens.Observer = tokObs
	cfg.Leases.Observer = leaseObs
	_, srv := startAppConfig(t, cfg)
	_, tok := signupLogin(t, srv, "otel@example.com", goodPassword)
	if r := call(t, srv, "GET", "/api/me", tok, ""); r.status != 200 {
		t.Fatalf("/api/me: %d %s", r.status, r.body)
	}
	seen := map[string]int{}
	for _, s := range spans.Ended() {
		seen[s.Name()]++
	}
	for _, name := range []string{"snowkey.workerid.acquire", "snowkey.tokens.issue", "snowkey.tokens.validate"} {
		if seen[name] == 0 {
			t.Errorf("no %s span; spans: %v", name, seen)
		}
	}
}

package snowkeyprom_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/snowkeyhq/snowkey/extra/snowkeyprom"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/tokens"
	"github.com/snowkeyhq/snowkey/workerid"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 3*time.Minute))
}

// renewals is a workerid.Observer that signals each confirmed renewal.
type renewals chan struct{}

func (r renewals) Start(ctx context.Context, _ workerid.Op, _ int64) context.Context { return ctx }

func (r renewals) End(_ context.Context, op workerid.Op, _ int64, err error) {
	if op == workerid.OpRenew && err == nil {
		select {
		case r <- struct{}{}:
		default:
		}
	}
}

// TestCollector registers a Collector of a generator on a lease from a
// real Redis and of a token Manager on the same Redis, uses them, and
// reads back from the registry what each Stats and Status say.
func TestCollector(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	rdb := testenv.RedisClient(t)
	prefix := testenv.KeyPrefix(t)
	renewed := make(renewals, 1)
	pool, err := workerid.Redis(rdb, workerid.Options{KeyPrefix: prefix + "wid:", TTL: time.Second,
		Margin: 200 * time.Millisecond, RenewEvery: 250 * time.Millisecond, Observer: renewed})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close(context.Background())
	gen, err := lease.NewGenerator()
	if err != nil {
		t.Fatal(err)
	}
	m, err := tokens.New(rdb, gen, tokens.Options{KeyPrefix: prefix + "tok:", CacheTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c, err := snowkeyprom.NewCollector(snowkeyprom.Options{Generator: gen, Lease: lease, Tokens: m,
		ConstLabels: prometheus.Labels{"service": "test"}})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)

	tok, _, err := m.Issue(ctx, 42, tokens.Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // a miss, then hits
		if _, err := m.Validate(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	// Another last digit: "0", or "1" if it was "0" already, which would
	// leave the token valid.
	bad := tok[:len(tok)-1] + "0"
	if bad == tok {
		bad = tok[:len(tok)-1] + "1"
	}
	if _, err := m.Validate(ctx, bad); !errors.Is(err, tokens.ErrInvalidToken) {
		t.Fatalf("a bad token: %v", err)
	}
	if err := m.Revoke(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := gen.Next(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-renewed:
	case <-ctx.Done():
		t.Fatal("no renewal")
	}

	fams := gather(t, reg)
	st, ls, ts := gen.Stats(), lease.Status(), m.Stats()
	for _, w := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"snowkey_ids_issued_total", nil, float64(st.IDs)},
		{"snowkey_id_clock_waits_total", nil, float64(st.Waits)},
		{"snowkey_id_worker", []string{"source", "lease"}, float64(gen.Worker())},
		{"snowkey_lease_state", []string{"state", "held"}, 1},
		{"snowkey_lease_state", []string{"state", "lost"}, 0},
		{"snowkey_lease_renewals_total", nil, float64(ls.Renewals)},
		{"snowkey_lease_renewal_failures", nil, 0},
		{"snowkey_tokens_issued_total", nil, 1},
		{"snowkey_tokens_revocations_total", nil, 1},
		{"snowkey_tokens_validations_total", []string{"result", "ok"}, 3},
		{"snowkey_tokens_validations_total", []string{"result", "invalid"}, 1},
		{"snowkey_tokens_validations_total", []string{"result", "unavailable"}, 0},
		{"snowkey_tokens_cache_lookups_total", []string{"result", "hit"}, float64(ts.CacheHits)},
		{"snowkey_tokens_cache_lookups_total", []string{"result", "miss"}, float64(ts.CacheMisses)},
		{"snowkey_tokens_refresh_failures_total", nil, 0},
	} {
		if got, ok := value(fams, w.name, w.labels...); !ok || got != w.want {
			t.Errorf("%s%v = %v (found %v), want %v", w.name, w.labels, got, ok, w.want)
		}
	}
	if st.IDs < 2 || ls.Renewals < 1 || ts.CacheHits < 2 {
		t.Errorf("the scenario did not happen: %d IDs (a session and one more), %d renewals, %d cache hits", st.IDs, ls.Renewals, ts.CacheHits)
	}
	if got, _ := value(fams, "snowkey_lease_valid_until_timestamp_seconds"); got != float64(ls.ValidUntil.UnixNano())/1e9 {
		t.Errorf("valid until %v, the lease says %v", got, ls.ValidUntil)
	}
	for _, f := range fams {
		for _, mt := range f.Metric {
			if l := labelsOf(mt); l["service"] != "test" {
				t.Errorf("%s%v lacks the constant label", f.GetName(), l)
			}
		}
	}

	// The state follows the lease.
	if err := lease.Close(ctx); err != nil {
		t.Fatal(err)
	}
	fams = gather(t, reg)
	if v, _ := value(fams, "snowkey_lease_state", "state", "closed"); v != 1 {
		t.Errorf("after Close, snowkey_lease_state{state=closed} = %v, want 1", v)
	}
	if v, _ := value(fams, "snowkey_lease_state", "state", "held"); v != 0 {
		t.Errorf("after Close, snowkey_lease_state{state=held} = %v, want 0", v)
	}
}

// TestCollectorParts: a Collector of a fixed-worker generator alone
// reports its metrics and nothing of leases or tokens, under another
// namespace.
func TestCollectorParts(t *testing.T) {
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 5})
	if err != nil {
		t.Fatal(err)
	}
	c, err := snowkeyprom.NewCollector(snowkeyprom.Options{Generator: gen, Namespace: "app"})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams := gather(t, reg)
	if v, ok := value(fams, "app_id_worker", "source", "fixed"); !ok || v != 5 {
		t.Errorf("app_id_worker{source=fixed} = %v (%v), want 5", v, ok)
	}
	for name := range fams {
		if name[:len("app_id")] != "app_id" {
			t.Errorf("a generator-only collector reports %s", name)
		}
	}
}

func TestNewCollectorErrors(t *testing.T) {
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []snowkeyprom.Options{{}, {Generator: gen, Namespace: "9lives"}, {Generator: gen, Namespace: "a-b"}} {
		if _, err := snowkeyprom.NewCollector(o); !errors.Is(err, idtype.ErrInvalidOptions) {
			t.Errorf("NewCollector(%+v): %v, want ErrInvalidOptions", o, err)
		}
	}
}

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	list, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	fams := map[string]*dto.MetricFamily{}
	for _, f := range list {
		fams[f.GetName()] = f
	}
	return fams
}

func labelsOf(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.Label {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// value returns the value of the family's series with the labels (name,
// value pairs), and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
next:
	for _, m := range fams[name].GetMetric() {
		have := labelsOf(m)
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
		}
	}
	return 0, false
}

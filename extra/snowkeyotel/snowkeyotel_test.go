package snowkeyotel_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/snowkeyhq/snowkey/extra/snowkeyotel"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/tokens"
	"github.com/snowkeyhq/snowkey/workerid"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 3*time.Minute))
}

// renewEnded is a span processor that signals each ended renewal span.
type renewEnded chan struct{}

func (r renewEnded) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (r renewEnded) OnEnd(s sdktrace.ReadOnlySpan) {
	if s.Name() == "snowkey.workerid.renew" {
		select {
		case r <- struct{}{}:
		default:
		}
	}
}
func (r renewEnded) Shutdown(context.Context) error   { return nil }
func (r renewEnded) ForceFlush(context.Context) error { return nil }

// TestTelemetry runs a worker lease and a token Manager on real Redis
// with snowkeyotel's observers, and reads back the spans and the
// histograms they recorded.
func TestTelemetry(t *testing.T) {
	ctx := testenv.Deadline(t, time.Minute)
	spans := tracetest.NewSpanRecorder()
	renewed := make(renewEnded, 1)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans), sdktrace.WithSpanProcessor(renewed))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	opts := snowkeyotel.Options{TracerProvider: tp, MeterProvider: mp}
	tokObs, err := snowkeyotel.NewTokens(opts)
	if err != nil {
		t.Fatal(err)
	}
	leaseObs, err := snowkeyotel.NewLeases(opts)
	if err != nil {
		t.Fatal(err)
	}

	rdb := testenv.RedisClient(t)
	prefix := testenv.KeyPrefix(t)
	pool, err := workerid.Redis(rdb, workerid.Options{KeyPrefix: prefix + "wid:", TTL: time.Second,
		Margin: 200 * time.Millisecond, RenewEvery: 250 * time.Millisecond, Observer: leaseObs})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close(context.Background())
	select {
	case <-renewed:
	case <-ctx.Done():
		t.Fatal("no renewal span")
	}
	gen, err := lease.NewGenerator()
	if err != nil {
		t.Fatal(err)
	}
	m, err := tokens.New(rdb, gen, tokens.Options{KeyPrefix: prefix + "tok:", Observer: tokObs})
	if err != nil {
		t.Fatal(err)
	}

	parentCtx, parent := tp.Tracer("test").Start(ctx, "login")
	tok, _, err := m.Issue(parentCtx, 42, tokens.Metadata{})
	parent.End()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Validate(ctx, tok); err != nil {
		t.Fatal(err)
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
	if err := m.Revoke(ctx, tok); !errors.Is(err, tokens.ErrInvalidToken) {
		t.Fatalf("a second Revoke: %v", err)
	}

	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans.Ended() {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	one := func(name string) sdktrace.ReadOnlySpan {
		t.Helper()
		if len(byName[name]) == 0 {
			t.Fatalf("no %s span; spans: %v", name, byName)
		}
		return byName[name][0]
	}
	if s := one("snowkey.tokens.issue"); s.Parent().SpanID() != parent.SpanContext().SpanID() || attr(s, "snowkey.result") != "ok" {
		t.Errorf("issue span: parent %v (want the caller's %v), result %q", s.Parent().SpanID(), parent.SpanContext().SpanID(), attr(s, "snowkey.result"))
	}
	if got := len(byName["snowkey.tokens.validate"]); got != 2 {
		t.Errorf("%d validate spans, want 2", got)
	}
	for _, s := range byName["snowkey.tokens.validate"] {
		// An invalid token is Validate's answer, not its failure.
		if s.Status().Code == codes.Error {
			t.Errorf("a validate span (result %q) has status Error", attr(s, "snowkey.result"))
		}
	}
	revokes := byName["snowkey.tokens.revoke"]
	if len(revokes) != 2 || attr(revokes[0], "snowkey.result") != "ok" || attr(revokes[1], "snowkey.result") != "invalid" ||
		revokes[1].Status().Code != codes.Error || len(revokes[1].Events()) == 0 {
		t.Errorf("revoke spans: %d; want an ok one and an invalid one with status Error and the error recorded", len(revokes))
	}
	if s := one("snowkey.workerid.acquire"); attr(s, "snowkey.worker") != lease.Worker() || attr(s, "snowkey.result") != "ok" {
		t.Errorf("acquire span: worker %v, result %v; want %d, ok", attr(s, "snowkey.worker"), attr(s, "snowkey.result"), lease.Worker())
	}
	if s := one("snowkey.workerid.renew"); attr(s, "snowkey.worker") != lease.Worker() || s.Parent().IsValid() {
		t.Errorf("renew span: worker %v, parent %v; want %d and a trace of its own", attr(s, "snowkey.worker"), s.Parent(), lease.Worker())
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != snowkeyotel.ScopeName {
			continue
		}
		for _, mt := range sm.Metrics {
			h, ok := mt.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("%s is a %T, want a histogram", mt.Name, mt.Data)
			}
			for _, dp := range h.DataPoints {
				op, _ := dp.Attributes.Value("snowkey.op")
				res, _ := dp.Attributes.Value("snowkey.result")
				counts[mt.Name+" "+op.AsString()+" "+res.AsString()] += dp.Count
			}
		}
	}
	for key, want := range map[string]uint64{
		"snowkey.tokens.duration issue ok":         1,
		"snowkey.tokens.duration validate ok":      1,
		"snowkey.tokens.duration validate invalid": 1,
		"snowkey.tokens.duration revoke ok":        1,
		"snowkey.tokens.duration revoke invalid":   1,
		"snowkey.workerid.duration acquire ok":     1,
	} {
		if counts[key] != want {
			t.Errorf("%s: %d calls, want %d (all: %v)", key, counts[key], want, counts)
		}
	}
	if counts["snowkey.workerid.duration renew ok"] < 1 {
		t.Errorf("no renewal in the histogram: %v", counts)
	}
}

// attr returns the value of the span's attribute key, or nil.
func attr(s sdktrace.ReadOnlySpan, key attribute.Key) any {
	for _, a := range s.Attributes() {
		if a.Key == key {
			return a.Value.AsInterface()
		}
	}
	return nil
}

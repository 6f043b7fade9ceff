// Package snowkeyotel reports snowkey's work to OpenTelemetry: a span and
// a duration for each token Manager call (Issue, Validate, Rotate and the
// revocations) and for each worker lease's Acquire and renewal. It plugs
// into the observer hooks of the core packages, so the Manager and the
// Pool are used as they are:
//
//	tok, err := snowkeyotel.NewTokens(snowkeyotel.Options{})
//	if err != nil {
//		return err
//	}
//	manager, err := tokens.New(rdb, gen, tokens.Options{Observer: tok})
//
//	leases, err := snowkeyotel.NewLeases(snowkeyotel.Options{})
//	if err != nil {
//		return err
//	}
//	pool, err := workerid.Redis(rdb, workerid.Options{Observer: leases})
//
// It is a module of its own (github.com/snowkeyhq/snowkey/extra/snowkeyotel),
// so that snowkey's own module does not depend on OpenTelemetry. For the
// counters that the core keeps anyway (IDs issued, cache hits, the
// lease's state), see the Prometheus collector in extra/snowkeyprom.
//
// # Spans
//
// Each call is a span of kind internal, named "snowkey.tokens.issue",
// "snowkey.tokens.validate", … and "snowkey.workerid.acquire",
// "snowkey.workerid.renew", with the attribute snowkey.result and, for a
// lease, snowkey.worker (the number; -1 when Acquire got none). A token
// call's span is a child of the caller's, and the parent of the Redis
// client's spans when go-redis is instrumented too; a renewal runs on the
// lease's goroutine and starts a trace of its own. A call that failed
// records its error and sets the span's status to Error, except a
// Validate of an invalid token: rejecting one is the call doing its job.
//
// # Metrics
//
//	snowkey.tokens.duration     histogram, s   attributes snowkey.op, snowkey.result
//	snowkey.workerid.duration   histogram, s   attributes snowkey.op, snowkey.result
//
// snowkey.result is "ok", "invalid" (a token that is malformed, unknown,
// expired or revoked), "unavailable" (Redis or the lease store failed), "lost" (the lease's
// number was taken over) or "error" (anything else). A histogram's count
// is the number of calls, so the rate of invalid tokens, of failed
// renewals and of Acquires are all one query away.
package snowkeyotel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/tokens"
	"github.com/snowkeyhq/snowkey/workerid"
)

// ScopeName is the instrumentation scope of the tracers and meters this
// package makes.
const ScopeName = "github.com/snowkeyhq/snowkey/extra/snowkeyotel"

// Options says where spans and metrics go.
type Options struct {
	// TracerProvider makes the tracer of the spans. Nil means the global
	// one, otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter of the histograms. Nil means the
	// global one, otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
}

// instruments are what both observers record with.
type instruments struct {
	tracer   trace.Tracer
	duration metric.Float64Histogram
}

func newInstruments(opts Options, name, desc string) (instruments, error) {
	tp, mp := opts.TracerProvider, opts.MeterProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	h, err := mp.Meter(ScopeName).Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc))
	if err != nil {
		return instruments{}, err
	}
	return instruments{tracer: tp.Tracer(ScopeName), duration: h}, nil
}

// startKey holds the time a call started in its context.
type startKey struct{}

func (in instruments) start(ctx context.Context, span string, attrs ...attribute.KeyValue) context.Context {
	ctx, _ = in.tracer.Start(ctx, span, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, startKey{}, time.Now())
}

// end ends the call's span and records its duration; failed says whether
// the outcome is an error of the call rather than a refusal it exists to
// give.
func (in instruments) end(ctx context.Context, op, result string, err error, failed bool, attrs ...attribute.KeyValue) {
	span := trace.SpanFromContext(ctx)
	attrs = append(attrs, attribute.String("snowkey.result", result))
	span.SetAttributes(attrs...)
	if err != nil && failed {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	// The duration first: whoever waits for the span's end then finds the
	// call in the histogram too.
	if started, ok := ctx.Value(startKey{}).(time.Time); ok {
		in.duration.Record(ctx, time.Since(started).Seconds(),
			metric.WithAttributes(attribute.String("snowkey.op", op), attribute.String("snowkey.result", result)))
	}
	span.End()
}

// Tokens is a tokens.Observer that records a span and a duration for each
// call of a Manager. Set it as tokens.Options.Observer.
type Tokens struct{ in instruments }

var _ tokens.Observer = (*Tokens)(nil)

// NewTokens returns a Tokens that records to the providers of opts. The
// error is the meter's, when it cannot make the histogram.
func NewTokens(opts Options) (*Tokens, error) {
	in, err := newInstruments(opts, "snowkey.tokens.duration", "Time a token Manager call took, by operation and result.")
	if err != nil {
		return nil, err
	}
	return &Tokens{in: in}, nil
}

// Start starts the call's span.
func (t *Tokens) Start(ctx context.Context, op tokens.Op) context.Context {
	return t.in.start(ctx, "snowkey.tokens."+string(op))
}

// End ends the call's span and records its duration.
func (t *Tokens) End(ctx context.Context, op tokens.Op, err error) {
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, tokens.ErrInvalidToken):
		result = "invalid"
	case errors.Is(err, tokens.ErrUnavailable):
		result = "unavailable"
	default:
		result = "error"
	}
	t.in.end(ctx, string(op), result, err, result != "invalid" || op != tokens.OpValidate)
}

// Leases is a workerid.Observer that records a span and a duration for
// each Acquire of a Pool and each renewal of its leases. Set it as
// workerid.Options.Observer.
type Leases struct{ in instruments }

var _ workerid.Observer = (*Leases)(nil)

// NewLeases returns a Leases that records to the providers of opts. The
// error is the meter's, when it cannot make the histogram.
func NewLeases(opts Options) (*Leases, error) {
	in, err := newInstruments(opts, "snowkey.workerid.duration", "Time a worker lease's Acquire or renewal took, by operation and result.")
	if err != nil {
		return nil, err
	}
	return &Leases{in: in}, nil
}

// Start starts the operation's span.
func (l *Leases) Start(ctx context.Context, op workerid.Op, worker int64) context.Context {
	var attrs []attribute.KeyValue
	if worker >= 0 {
		attrs = append(attrs, attribute.Int64("snowkey.worker", worker))
	}
	return l.in.start(ctx, "snowkey.workerid."+string(op), attrs...)
}

// End ends the operation's span and records its duration.
func (l *Leases) End(ctx context.Context, op workerid.Op, worker int64, err error) {
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, idtype.ErrLeaseLost):
		result = "lost"
	case errors.Is(err, workerid.ErrStore):
		result = "unavailable"
	default:
		result = "error"
	}
	l.in.end(ctx, string(op), result, err, true, attribute.Int64("snowkey.worker", worker))
}

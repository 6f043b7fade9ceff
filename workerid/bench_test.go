package workerid

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/bench/benchpair"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// wideLayout is 41/1/21: a sequence so wide that one goroutine never spends
// a millisecond's, so Next never waits for the clock and the benchmark
// measures the hot path itself.
var wideLayout = idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 1, SequenceBits: 21}

// benchGenerators returns a fixed-worker generator and one on a Redis
// lease, both of layout l.
func benchGenerators(b *testing.B, l idtype.Layout) (fixed, leased *idtype.Generator) {
	fixed, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1, Layout: l})
	if err != nil {
		b.Fatal(err)
	}
	// Production timings: renewals every 3.3s, not the tests' 250ms.
	p := redisPool(b, testenv.Redis(b), testenv.KeyPrefix(b), Options{Layout: l, TTL: DefaultTTL})
	trustRecord(b, p)
	lease := acquire(b, p)
	leased, err = lease.NewGenerator()
	if err != nil {
		b.Fatal(err)
	}
	return fixed, leased
}

// BenchmarkNext compares Next on a leased generator with Next on a
// fixed-number one: both take the same path (a fixed generator's grant
// allows the layout's whole time), and the lease's renewals run in the
// background meanwhile. On 41/10/12 a
// single goroutine runs at the layout's ceiling of 4,096 IDs per ms.
func BenchmarkNext(b *testing.B) {
	for _, layout := range []struct {
		name string
		l    idtype.Layout
	}{{"41-10-12", idtype.DefaultLayout}, {"41-1-21", wideLayout}} {
		fixed, leased := benchGenerators(b, layout.l)
		for _, g := range []struct {
			name string
			g    *idtype.Generator
		}{{"fixed", fixed}, {"leased", leased}} {
			b.Run(layout.name+"/"+g.name, func(b *testing.B) {
				for b.Loop() {
					if _, err := g.g.Next(); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(layout.name+"/"+g.name+"/parallel", func(b *testing.B) {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := g.g.Next(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkNextPaired is Next on a leased generator against Next on a
// fixed-worker one under contention: in every op, G goroutines take IDs
// from one and then G from the other, in alternating order
// (internal/bench/benchpair), so the ratio compares the same moments of a noisy
// machine. "leased/fixed-ids/s" is the leased generator's IDs a second
// over the fixed one's. Each side issues a few milliseconds' worth of IDs
// an op (on 41/10/12 both run at the layout's ceiling).
func BenchmarkNextPaired(b *testing.B) {
	for _, layout := range []struct {
		name string
		l    idtype.Layout
		ids  int // a side's IDs per op
	}{{"41-10-12", idtype.DefaultLayout, 1 << 14}, {"41-1-21", wideLayout, 1 << 17}} {
		fixed, leased := benchGenerators(b, layout.l)
		for _, goroutines := range []int{1, 2, 8, 64} {
			b.Run(fmt.Sprintf("%s/%d", layout.name, goroutines), func(b *testing.B) {
				each := layout.ids / goroutines
				side := func(g *idtype.Generator) func() {
					return benchpair.Parallel(goroutines, func() {
						for range each {
							if _, err := g.Next(); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				tLeased, tFixed := benchpair.Times(b, side(leased), side(fixed))
				b.ReportMetric(tFixed.Seconds()/tLeased.Seconds(), "leased/fixed-ids/s")
			})
		}
	}
}

// BenchmarkAcquire measures Pool.Acquire on a worker space of 1,023
// numbers (41/10/12 less snowflake_id's) that is empty, or 90% held by
// other owners. roundtrips/op counts the requests one Acquire sends to
// the store; the Close after each is not timed or counted.
func BenchmarkAcquire(b *testing.B) {
	for _, k := range []string{"redis", "postgres"} {
		for _, full := range []int{0, 90} {
			b.Run(fmt.Sprintf("%s/full%d", k, full), func(b *testing.B) {
				p, sent := benchPool(b, k)
				held := p.Size() * full / 100
				holdNumbers(b, p, held)
				ctx := context.Background()
				var trips int64
				for b.Loop() {
					before := sent.n.Load()
					l, err := p.Acquire(ctx)
					if err != nil {
						b.Fatal(err)
					}
					trips += sent.n.Load() - before
					b.StopTimer()
					if err := l.Close(ctx); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(trips)/float64(b.N), "roundtrips/op")
			})
		}
	}
}

// benchPool returns a pool on a fresh place in store k, and the count of
// the requests its client sends to the server.
func benchPool(b *testing.B, k string) (*Pool, *requestCounter) {
	o := testOptions(b, Options{TTL: time.Minute, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	sent := &requestCounter{}
	if k == "redis" {
		c := redisClient(b, testenv.Redis(b))
		c.AddHook(sent)
		o.KeyPrefix = testenv.KeyPrefix(b)
		p, err := Redis(c, o)
		if err != nil {
			b.Fatal(err)
		}
		trustRecord(b, p)
		return p, sent
	}
	dsn := testenv.Postgres(b)
	migrate(b, dsn)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Tracer = sent
	db := stdlib.OpenDB(*cfg)
	b.Cleanup(func() { _ = db.Close() })
	p, err := Postgres(db, o)
	if err != nil {
		b.Fatal(err)
	}
	return p, sent
}

// requestCounter counts the requests a client sends to its server, one
// round trip each: Redis commands and pipelines (a go-redis hook), and
// PostgreSQL statements (a pgx tracer).
type requestCounter struct{ n atomic.Int64 }

func (c *requestCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *requestCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *requestCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

func (c *requestCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *requestCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// holdNumbers makes numbers 0..n-1 held by another owner for an hour,
// written straight into the store.
func holdNumbers(b *testing.B, p *Pool, n int) {
	ctx := context.Background()
	switch s := p.store.(type) {
	case *redisStore:
		until := time.Now().Add(time.Hour).UnixMilli()
		pipe := s.c.Pipeline()
		for w := range int64(n) {
			pipe.HSet(ctx, s.leases, w, strconv.FormatInt(until, 10)+"||other/holder")
			pipe.ZAdd(ctx, s.hw, redis.Z{Score: float64(until), Member: w})
		}
		pipe.HSet(ctx, s.meta, "next", n)
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	case *pgStore:
		_, err := s.db.ExecContext(ctx, `
			INSERT INTO snowkey_worker_leases (namespace, worker, owner, holder, expires_at, high_water)
			SELECT $1, w, 'other', 'other', now() + interval '1 hour', 0 FROM generate_series(0, $2::int - 1) AS w`,
			s.ns, n)
		if err != nil {
			b.Fatal(err)
		}
	}
}

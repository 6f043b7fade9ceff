package workerid

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Defaults of Options.
const (
	// DefaultTTL is how long a lease lasts without renewal.
	DefaultTTL = 10 * time.Second
	// DefaultNamespace is the namespace when Options.Namespace is empty.
	DefaultNamespace = "default"
	// DefaultKeyPrefix starts every Redis key of this package.
	DefaultKeyPrefix = "snowkey:workerid:"
)

// SQLWorker is the worker number that snowflake_id(), the PostgreSQL
// function of package migrations, stamps on rows inserted by SQL alone,
// unless migrations moved it (migrations.Options.ReservedWorker). Pools
// never lease it in a layout that has it, and a Postgres pool also skips
// the number its database's snowflake_id() uses, wherever it was moved.
const SQLWorker int64 = 1023

// Options configure a Pool (Redis, Postgres) and the generators built on
// its leases (Lease.NewGenerator). The zero value of every field is a
// safe default, said in the field's doc; a bad value is an error wrapping
// idtype.ErrInvalidOptions that names the field.
type Options struct {
	// Layout is the ID layout whose worker numbers are leased:
	// 0..Layout.MaxWorker(). Generators on the leases use it. The zero
	// Layout means idtype.DefaultLayout.
	Layout idtype.Layout
	// Namespace separates fleets that share a store but not an ID space
	// (another layout, another database of IDs). Leases of one namespace
	// never share a number. Empty means DefaultNamespace.
	Namespace string
	// Reserved lists worker numbers never to lease, besides SQLWorker when
	// the layout has it: numbers of one-box fixed workers, say. A Postgres
	// pool also skips the number the database says snowflake_id() uses;
	// if migrations.Options.ReservedWorker moved it, list it here for a
	// Redis pool. Nil means none besides SQLWorker.
	Reserved []int64
	// TTL is how long a lease lasts without renewal. A crashed owner's
	// number is free again after it; on Redis that may have lost data (a
	// new namespace, a restart, a failover), new owners wait it out before
	// their first ID (see the package doc). Zero means DefaultTTL (10 s).
	TTL time.Duration
	// Margin is how long before the lease's end, by its own clock, its
	// generator stops issuing when renewals fail. It must cover the
	// disagreement between this host's clock and the store's, and between
	// hosts of one namespace (see the package doc). Zero means TTL/5.
	Margin time.Duration
	// RenewEvery is how often a lease renews itself, less up to a fifth
	// at random. After a failed renewal it retries after RenewEvery/4,
	// and after RenewEvery/2 once retries too have failed (each less up
	// to half at random), no later than half the time its generator has
	// left. It must be less than TTL - Margin. Zero means TTL/3.
	RenewEvery time.Duration
	// MaxStartWait bounds how long Acquire waits for the clock to pass the
	// number's high-water mark (a clock set back, Redis's loss window)
	// before it gives the number back and fails with an error wrapping
	// idtype.ErrClockBehind. Zero means TTL + 1 minute.
	MaxStartWait time.Duration
	// MaxWait applies to the generators on the pool's leases: how long
	// one call of Next or NextN waits for the clock, as
	// idtype.GeneratorOptions.MaxWait. Zero means idtype.DefaultMaxWait
	// (1 s); a negative value means never wait.
	MaxWait time.Duration
	// MaxDrift applies to the generators on the pool's leases: how far
	// ahead of the clock they may issue in a burst, as
	// idtype.GeneratorOptions.MaxDrift; at most idtype.MaxDriftCap. The
	// lease bounds it too: no ID is later than what the lease has
	// confirmed. Zero means strict: no ID later than the clock.
	MaxDrift time.Duration
	// RandomSequenceStart applies to the generators on the pool's leases,
	// as idtype.GeneratorOptions.RandomSequenceStart: each millisecond's
	// sequence starts at a random number, so that id % n spreads evenly
	// over shards at low traffic. False, the zero value, starts at 0.
	RandomSequenceStart bool
	// Clock is the time source of the leases, and of the generators built
	// on them. Nil means idtype.SystemClock().
	Clock idtype.Clock
	// Logger receives a line when a lease is acquired, expires, recovers,
	// is re-acquired, lost or released. Nil means slog.Default() as it is
	// when the options are used, at warn and error only: the lease says
	// nothing while all is well, as pgx and go-redis do, but a renewal
	// that fails, an expiry or a loss, which happen in the background
	// with no caller to return an error to, still reach the default
	// logger, as go-redis's background failures do.
	Logger *slog.Logger
	// Holder names this process to operators, in the store beside each
	// lease it holds and in Status. Empty means "hostname:pid".
	Holder string
	// KeyPrefix starts every Redis key (Redis only). Empty means
	// DefaultKeyPrefix. The namespace follows it in braces, a Redis
	// Cluster hash tag, so that all keys of a namespace share a slot.
	KeyPrefix string
	// WaitForFree makes Acquire wait, while every number is held, until
	// one frees up (a lease is closed, or lapses after its owner crashed),
	// asking the store again every TTL/20 to TTL/10, until its context
	// ends. False, the zero value, fails at once with ErrNoFreeWorker.
	WaitForFree bool
	// MaxConns bounds how many statements a PostgreSQL pool runs at once,
	// and so how many connections of its *sql.DB it holds, however many
	// leases it serves (PostgreSQL only): a fleet of P processes, each
	// with one pool, costs at most P * MaxConns connections for its
	// leases. Zero means 1.
	MaxConns int
	// Observer, when set, is told when each Acquire and each renewal
	// starts and ends, for metrics and tracing (see Observer). Nil
	// observes nothing.
	Observer Observer
}

// resolve fills in defaults and checks o.
func (o Options) resolve() (Options, error) {
	if o.Layout.IsZero() {
		o.Layout = idtype.DefaultLayout
	}
	if err := o.Layout.Validate(); err != nil {
		return o, fmt.Errorf("%w: Layout: %w", idtype.ErrInvalidOptions, err)
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.Margin == 0 {
		o.Margin = o.TTL / 5
	}
	if o.RenewEvery == 0 {
		o.RenewEvery = o.TTL / 3
	}
	if o.MaxConns == 0 {
		o.MaxConns = 1
	}
	if o.MaxStartWait == 0 {
		o.MaxStartWait = o.TTL + time.Minute
	}
	switch {
	case o.TTL < 10*time.Millisecond:
		return o, fmt.Errorf("%w: TTL %v is under 10ms", idtype.ErrInvalidOptions, o.TTL)
	case o.Margin <= 0 || o.Margin >= o.TTL:
		return o, fmt.Errorf("%w: Margin %v is outside (0, TTL %v)", idtype.ErrInvalidOptions, o.Margin, o.TTL)
	case o.RenewEvery <= 0 || o.RenewEvery >= o.TTL-o.Margin:
		return o, fmt.Errorf("%w: RenewEvery %v is outside (0, TTL - Margin = %v)", idtype.ErrInvalidOptions, o.RenewEvery, o.TTL-o.Margin)
	case o.MaxStartWait < 0:
		return o, fmt.Errorf("%w: MaxStartWait %v is negative", idtype.ErrInvalidOptions, o.MaxStartWait)
	case o.MaxConns < 0:
		return o, fmt.Errorf("%w: MaxConns %d is negative", idtype.ErrInvalidOptions, o.MaxConns)
	case o.MaxDrift < 0 || o.MaxDrift > idtype.MaxDriftCap:
		return o, fmt.Errorf("%w: MaxDrift %v is outside 0..%v (idtype.MaxDriftCap)", idtype.ErrInvalidOptions, o.MaxDrift, idtype.MaxDriftCap)
	}
	for _, r := range o.Reserved {
		if r < 0 || r > o.Layout.MaxWorker() {
			return o, fmt.Errorf("%w: Reserved number %d is outside 0..%d", idtype.ErrInvalidOptions, r, o.Layout.MaxWorker())
		}
	}
	if o.Clock == nil {
		o.Clock = idtype.SystemClock()
	}
	if o.Logger == nil {
		o.Logger = slog.New(warnAndUp{slog.Default().Handler()})
	}
	if o.Holder == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "unknown-host"
		}
		o.Holder = host + ":" + strconv.Itoa(os.Getpid())
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	return o, nil
}

// reserved returns the numbers of the layout a lease never takes:
// Options.Reserved and SQLWorker, sorted, once each.
func (o Options) reserved() []int64 {
	var r []int64
	for _, w := range append(slices.Clone(o.Reserved), SQLWorker) {
		if w <= o.Layout.MaxWorker() {
			r = append(r, w)
		}
	}
	slices.Sort(r)
	return slices.Compact(r)
}

// warnAndUp passes a handler's warnings and errors, and drops the rest.
type warnAndUp struct{ slog.Handler }

func (h warnAndUp) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnAndUp) WithAttrs(as []slog.Attr) slog.Handler { return warnAndUp{h.Handler.WithAttrs(as)} }
func (h warnAndUp) WithGroup(name string) slog.Handler    { return warnAndUp{h.Handler.WithGroup(name)} }

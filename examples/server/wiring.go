package main

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/extra/snowkeyotel"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/migrations"
	"github.com/snowkeyhq/snowkey/pgkit/partition"
	"github.com/snowkeyhq/snowkey/tokens"
	"github.com/snowkeyhq/snowkey/workerid"
)

// This file is every line of the example that builds a snowkey object:
// the generator (on a lease or a fixed worker), the lease pools, the
// library's migrations, the posts table's partitions on PostgreSQL, the
// token manager, its cookie transport and its middleware. The rest of
// the server works with what these return, so that a change to the
// library's constructors changes this file alone.

// sqlReservedWorker is the worker number snowflake_id() stamps on the IDs
// PostgreSQL issues by itself; no app generator may use it.
const sqlReservedWorker = workerid.SQLWorker

// databaseReservedWorker returns the worker number snowflake_id() uses in
// db, which migrations may have moved from sqlReservedWorker.
func databaseReservedWorker(ctx context.Context, db *sql.DB) (int64, error) {
	return migrations.ReservedWorkerOf(ctx, db)
}

// migrateLibrary applies snowkey's own migrations: snowflake_id() and the
// worker-lease table.
func migrateLibrary(ctx context.Context, db *sql.DB) error {
	return migrations.Up(ctx, db, migrations.Options{})
}

// postsTable is the table of Post on PostgreSQL, partitioned by the month
// of its key (migration 00003).
const postsTable = "posts"

// postsPartitioner builds what keeps the posts table's partitions on
// PostgreSQL: one per calendar month, made ahead of time (the default
// premake, four months), never removed, since the example keeps every
// post (zero Retention). A nil clock means the system clock; Run logs to
// log.
func postsPartitioner(layout idtype.Layout, clock idtype.Clock, log *slog.Logger) (*partition.Table, error) {
	return partition.New(postsTable, layout, partition.Options{Period: partition.Month, Clock: clock, Logger: log})
}

// maintainPartitions runs one maintenance of p's table now; runPartitions
// runs it every hour until ctx ends.
func maintainPartitions(ctx context.Context, p *partition.Table, db *sql.DB) (partition.Report, error) {
	return p.Maintain(ctx, db)
}

func runPartitions(ctx context.Context, p *partition.Table, db *sql.DB) error {
	return p.Run(ctx, db)
}

// postgresPool and redisPool return the pools that lease worker numbers.
// Their Acquires and renewals are traced and timed through OpenTelemetry
// (see leaseTelemetry).
func postgresPool(db *sql.DB, opts workerid.Options) (*workerid.Pool, error) {
	if err := leaseTelemetry(&opts); err != nil {
		return nil, err
	}
	return workerid.Postgres(db, opts)
}

func redisPool(rdb redis.UniversalClient, opts workerid.Options) (*workerid.Pool, error) {
	if err := leaseTelemetry(&opts); err != nil {
		return nil, err
	}
	return workerid.Redis(rdb, opts)
}

// leaseTelemetry and tokenTelemetry set, unless the Config set one, an
// observer that reports spans and durations to OpenTelemetry's global
// providers: nowhere until the process installs an SDK
// (otel.SetTracerProvider, otel.SetMeterProvider), which a deployment
// does in main with the exporter it uses.
func leaseTelemetry(opts *workerid.Options) error {
	if opts.Observer != nil {
		return nil
	}
	obs, err := snowkeyotel.NewLeases(snowkeyotel.Options{})
	opts.Observer = obs
	return err
}

func tokenTelemetry(opts *tokens.Options) error {
	if opts.Observer != nil {
		return nil
	}
	obs, err := snowkeyotel.NewTokens(snowkeyotel.Options{})
	opts.Observer = obs
	return err
}

// generatorOnLease builds the generator of a leased worker number.
func generatorOnLease(lease *workerid.Lease) (*idtype.Generator, error) {
	return lease.NewGenerator()
}

// fixedGenerator builds the generator of a fixed worker number that issues
// nothing at or before notBefore. A nil clock means the system clock.
func fixedGenerator(worker int64, layout idtype.Layout, notBefore time.Time, clock idtype.Clock) (*idtype.Generator, error) {
	return idtype.NewGenerator(idtype.GeneratorOptions{Worker: worker, Layout: layout, NotBefore: notBefore, Clock: clock})
}

// newTokenManager builds the login-token manager on rdb, with session IDs
// from gen.
func newTokenManager(rdb redis.UniversalClient, gen idtype.Source, opts tokens.Options) (*tokens.Manager, error) {
	if err := tokenTelemetry(&opts); err != nil {
		return nil, err
	}
	return tokens.New(rdb, gen, opts)
}

// The session lifetimes of the example: OWASP ASVS 4.0.3 level 2 asks
// for re-authentication after at most 12 hours of use and 30 minutes
// without (V3.3.2, from NIST SP 800-63B AAL2). A refresh at most once a
// minute ends an unused session between 29 and 30 minutes after its last
// use, for one Redis write per active session a minute.
const (
	sessionIdleTimeout      = 30 * time.Minute
	sessionAbsoluteLifetime = 12 * time.Hour
	sessionRefreshInterval  = time.Minute
)

// sessionOptions fills the zero lifetimes of opts with the example's.
func sessionOptions(opts tokens.Options) tokens.Options {
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = sessionIdleTimeout
		if opts.RefreshInterval == 0 {
			opts.RefreshInterval = sessionRefreshInterval
		}
	}
	if opts.AbsoluteLifetime == 0 {
		opts.AbsoluteLifetime = sessionAbsoluteLifetime
	}
	return opts
}

// cookieTransport builds the cookie in which the web page's token travels.
func cookieTransport(m *tokens.Manager, opts tokens.CookieOptions) (*tokens.Cookies, error) {
	return tokens.NewCookies(m, opts)
}

// tokenAuth returns the middleware that lets only requests with a valid
// token through, from the Authorization header (apps) or the cookie (the
// web page), answering the others itself (RFC 6750, and 403 for
// cross-origin requests with the cookie), and logs to log.
func tokenAuth(m *tokens.Manager, c *tokens.Cookies, log *slog.Logger) (func(http.Handler) http.Handler, error) {
	return tokens.NewMiddleware(m, tokens.MiddlewareOptions{Logger: log, Cookies: c})
}

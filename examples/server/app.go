package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/tokens"
	"github.com/snowkeyhq/snowkey/workerid"
)

// Config configures the example server. The zero Config runs on the
// embedded defaults: SQLite in memory and an in-process Redis.
type Config struct {
	// DatabaseURL picks the database: a postgres:// URL or a key=value
	// connection string for PostgreSQL; "sqlite:PATH" for an SQLite file;
	// empty for SQLite in memory. Its password never reaches a log line
	// or an error (see redact.go).
	DatabaseURL string
	// RedisURL is a redis://, rediss:// or unix:// URL of the Redis that
	// keeps the login sessions and the rate limits; empty means an
	// in-process Redis (miniredis), whose sessions die with the process.
	RedisURL string
	// Redis, when not nil, is used instead of RedisURL; the App does not
	// close it. Tests pass the shared test server's client here.
	Redis redis.UniversalClient
	// Worker, when positive, is the generator's fixed worker number: 1 to
	// the layout's largest, but never sqlReservedWorker (1023), which
	// PostgreSQL's snowflake_id() stamps. Zero means: lease a number (see
	// ids.go) when PostgreSQL or a real Redis is configured, else use
	// worker 1.
	Worker int64
	// Layout is the bit layout of every ID; the zero Layout means
	// idtype.DefaultLayout. PostgreSQL needs the default: its
	// snowflake_id() issues IDs in it.
	Layout idtype.Layout
	// Leases configures the worker-number leases (see newGenerator). A
	// zero Logger means the App's; a zero Layout means Layout; a nil
	// Clock means Clock.
	Leases workerid.Options
	// Clock is the time source of the IDs: of a fixed worker's generator
	// and its restart floor, and of the leases unless Leases.Clock is
	// set. Nil means idtype.SystemClock(). Set one to run the server on a
	// simulated clock, such as one set back before a restart.
	Clock idtype.Clock
	// Tokens configures the login tokens. Zero lifetimes mean the
	// example's: IdleTimeout 30 minutes, AbsoluteLifetime 12 hours and
	// RefreshInterval 1 minute, the re-authentication bounds of OWASP ASVS
	// 4.0.3 level 2 (V3.3.2, after NIST SP 800-63B AAL2), rather than the
	// library's defaults (7 and 30 days), which suit apps that re-check
	// the user by other means. See sessionOptions.
	Tokens tokens.Options
	// Cookie configures the cookie in which the web page's token travels;
	// the zero value is tokens' defaults (an HttpOnly, Secure, SameSite=Lax
	// cookie named __Host-session).
	Cookie tokens.CookieOptions
	// Mailer sends the sign-up links and notices. Nil means the
	// development outbox, which keeps them in memory and shows them to
	// this machine at GET /api/dev/outbox, for the page to show: never
	// use it for a server that others can reach (main refuses to).
	Mailer Mailer
	// PublicURL is the page's address as users reach it, for the links in
	// mails, such as https://app.example.com/. Empty means
	// http://localhost:8080/. It is never taken from a request's Host,
	// which the client chooses.
	PublicURL string
	// Throttle configures the rate limits of signup and login and the
	// queue in front of the password hashes; the zero value is the
	// documented defaults.
	Throttle ThrottleOptions
	// KeyPrefix starts the Redis keys the example writes itself: the rate
	// limits and the session floor. Empty means "example:".
	KeyPrefix string
	// Argon2 sets the cost of password hashes; zero means DefaultArgon2.
	Argon2 Argon2Params
	// Logger receives the server's log lines; nil means slog.Default().
	// Open wraps it so that no line holds a secret of DatabaseURL or
	// RedisURL.
	Logger *slog.Logger
}

// defences are the switches of the two rules whose controls cannot be
// built around the App, and the hook a test parks logins at. A control
// that can (a front before its handler, a Config value, a test's own
// Redis, the App's own steps composed in the test) is built by its
// test; these two rules sit inside startSession and the device cookie's
// check, where a control would have to write that code again in the
// test. The zero value is every defence on; only export_test.go sets
// one.
type defences struct {
	devicesAnyEpoch       bool // a device cookie stays valid after the password it was earned with changes
	inFlightLoginSurvives bool // a login whose password check preceded a password change still gets its session
	// loginStep, when set, is called by every login (and sign-up
	// verification) whose password matched, as it passes each step of
	// startSession: "checked" before its session is issued, "issued"
	// after. A test parks logins there to race a password change.
	loginStep func(step string)
}

// App is the example backend: its database, Redis, ID generator and
// login tokens, and the HTTP handler that serves the API and the page.
// Open builds one; Close releases what it holds.
type App struct {
	log     *slog.Logger
	secrets *redactor
	db      *gorm.DB
	sqlDB   *sql.DB
	rdb     redis.UniversalClient
	layout  idtype.Layout
	gen     *idtype.Generator
	lease   *workerid.Lease // nil with a fixed worker
	floor   *sessionFloor   // nil unless a fixed worker's sessions outlive the process
	tokens  *tokens.Manager
	cookies *tokens.Cookies
	auth    func(http.Handler) http.Handler
	devices *devices
	limits  *throttle
	hashes  *hashPool
	argon   Argon2Params
	// dummyHash is checked against when an email is unknown, so timing
	// does not tell.
	dummyHash string
	mailer    Mailer
	outbox    *outbox // the mailer when it is the development outbox; nil otherwise
	publicURL string
	keyPrefix string
	metrics   *metrics
	closers   []func(context.Context) error
	handler   http.Handler
	ops       http.Handler
	// defences are on (the zero value) in every App that Open makes; only
	// export_test.go turns one off.
	defences defences
}

// ErrConfig means the Config cannot work; the message says which field.
var ErrConfig = errors.New("invalid server configuration")

// Open connects to (or starts) the database and Redis that cfg names,
// applies the migrations and builds the App. Its first log line says
// which database and Redis it uses, without their passwords. On error
// nothing is left open, and the error holds no secret of the URLs.
func Open(ctx context.Context, cfg Config) (*App, error) {
	return open(ctx, cfg, defences{})
}

// open is Open with the defences in d; only the tests turn one off.
func open(ctx context.Context, cfg Config, d defences) (_ *App, err error) {
	secrets := newRedactor(cfg.DatabaseURL, cfg.RedisURL)
	defer func() { err = secrets.err(err) }()
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	a := &App{log: secrets.logger(log), secrets: secrets, argon: cfg.Argon2, defences: d, keyPrefix: cfg.KeyPrefix}
	if a.keyPrefix == "" {
		a.keyPrefix = defaultKeyPrefix
	}
	if a.publicURL, err = checkPublicURL(cfg.PublicURL); err != nil {
		return nil, err
	}
	if a.mailer = cfg.Mailer; a.mailer == nil {
		a.outbox = newOutbox()
		a.mailer = a.outbox
	}
	if a.argon == (Argon2Params{}) {
		a.argon = DefaultArgon2()
	}
	if a.layout = cfg.Layout; a.layout.IsZero() {
		a.layout = idtype.DefaultLayout
	}
	if err := a.layout.Validate(); err != nil {
		return nil, fmt.Errorf("%w: Layout: %w", ErrConfig, err)
	}
	if err := checkWorker(cfg.Worker, a.layout); err != nil {
		return nil, err
	}
	dbKind, err := databaseKind(cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if dbKind.postgres && a.layout != idtype.DefaultLayout {
		return nil, fmt.Errorf("%w: Layout: PostgreSQL's snowflake_id() issues IDs in idtype.DefaultLayout, and IDs of two layouts do not mix", ErrConfig)
	}
	redisDesc, err := describeRedis(cfg)
	if err != nil {
		return nil, err
	}
	if a.limits, err = newThrottle(cfg.Throttle, cfg.KeyPrefix); err != nil {
		return nil, err
	}
	if a.hashes, err = newHashPool(cfg.Throttle); err != nil {
		return nil, err
	}
	a.log.Info("snowkey example server starting", "database", dbKind.describe(), "redis", redisDesc)

	defer func() {
		if err != nil {
			_ = a.Close(context.WithoutCancel(ctx))
		}
	}()
	if a.db, err = a.openDatabase(ctx, cfg.DatabaseURL, dbKind); err != nil {
		return nil, err
	}
	if a.sqlDB, err = a.db.DB(); err != nil {
		return nil, err
	}
	if a.rdb, err = a.openRedis(ctx, cfg); err != nil {
		return nil, err
	}
	a.limits.bind(a.rdb)
	if a.gen, err = a.newGenerator(ctx, cfg, dbKind); err != nil {
		return nil, err
	}
	if err = a.useGenerator(); err != nil {
		return nil, err
	}
	if a.tokens, err = newTokenManager(a.rdb, a.gen, sessionOptions(cfg.Tokens)); err != nil {
		return nil, err
	}
	if a.cookies, err = cookieTransport(a.tokens, cfg.Cookie); err != nil {
		return nil, err
	}
	if a.auth, err = tokenAuth(a.tokens, a.cookies, a.log); err != nil {
		return nil, err
	}
	if a.devices, err = newDevices(ctx, a.rdb, a.keyPrefix, d); err != nil {
		return nil, err
	}
	if a.dummyHash, err = hashPassword("not a password", a.argon); err != nil {
		return nil, err
	}
	if a.metrics, err = newMetrics(a); err != nil {
		return nil, err
	}
	a.handler = nosniff(a.routes())
	a.ops = nosniff(a.opsRoutes())
	return a, nil
}

// Handler returns the HTTP handler of the API, the web page and the
// health checks a load balancer asks: /healthz, and /readyz without its
// detail.
func (a *App) Handler() http.Handler { return a.handler }

// OpsHandler returns the HTTP handler of what operators read: /metrics,
// and /readyz with each check's detail (the worker number and the
// lease's state). Serve it on a listener of its own that the internet
// cannot reach (main's -metrics-addr, loopback by default).
func (a *App) OpsHandler() http.Handler { return a.ops }

// Done returns a channel that is closed when the App's worker lease is
// lost: the generator has stopped for good and nothing can be created, so
// the server should exit and be restarted. With a fixed worker it is nil,
// which never closes.
func (a *App) Done() <-chan struct{} {
	if a.lease == nil {
		return nil
	}
	return a.lease.Done()
}

// Close releases what Open acquired, in reverse order: the session floor,
// the worker lease, the Redis client or in-process Redis, the database.
func (a *App) Close(ctx context.Context) error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i](ctx))
	}
	a.closers = nil
	return a.secrets.err(errors.Join(errs...))
}

// onClose registers f to run on Close.
func (a *App) onClose(f func(context.Context) error) { a.closers = append(a.closers, f) }

// closeFunc adapts an io.Closer for onClose.
func closeFunc(c io.Closer) func(context.Context) error {
	return func(context.Context) error { return c.Close() }
}

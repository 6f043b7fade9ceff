package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/idtype/workerid"
	"github.com/snowkeyhq/snowkey/tokens"
)

// Config configures the example server. The zero Config runs on the
// embedded defaults: SQLite in memory and an in-process Redis.
type Config struct {
	// DatabaseURL picks the database: a postgres:// URL for PostgreSQL;
	// "sqlite:PATH" for an SQLite file; empty for SQLite in memory.
	DatabaseURL string
	// RedisURL is a redis:// URL of the Redis that keeps the login
	// sessions; empty means an in-process Redis (miniredis), whose
	// sessions die with the process.
	RedisURL string
	// Redis, when not nil, is used instead of RedisURL; the App does not
	// close it. Tests pass the shared test server's client here.
	Redis redis.UniversalClient
	// Worker, when positive, is the generator's fixed worker number.
	// Zero means: lease a number (see ids.go) when PostgreSQL or a real
	// Redis is configured, else use worker 1.
	Worker int64
	// Leases configures the worker-number leases (see newGenerator). A
	// zero Logger means the App's.
	Leases workerid.Options
	// Tokens configures the login tokens. Their middleware logs to the
	// App's Logger.
	Tokens tokens.Options
	// Argon2 sets the cost of password hashes; zero means DefaultArgon2.
	Argon2 Argon2Params
	// Logger receives the server's log lines; nil means slog.Default().
	Logger *slog.Logger
}

// App is the example backend: its database, Redis, ID generator and
// login tokens, and the HTTP handler that serves the API and the page.
// Open builds one; Close releases what it holds.
type App struct {
	log       *slog.Logger
	db        *gorm.DB
	rdb       redis.UniversalClient
	gen       *idtype.Generator
	tokens    *tokens.Manager
	auth      func(http.Handler) http.Handler // the tokens middleware
	argon     Argon2Params
	dummyHash string // checked against when an email is unknown, so timing does not tell
	// hashSlots bounds the password hashes computed at once: each takes
	// Argon2Params.Memory, so a burst of logins cannot exhaust memory.
	hashSlots chan struct{}
	leaseDone <-chan struct{} // of the worker lease; nil with a fixed worker
	closers   []func(context.Context) error
	handler   http.Handler
}

// ErrConfig means the Config cannot work; the message says which field.
var ErrConfig = errors.New("invalid server configuration")

// Open connects to (or starts) the database and Redis that cfg names,
// applies the migrations and builds the App. Its first log line says
// which database and Redis it uses. On error nothing is left open.
func Open(ctx context.Context, cfg Config) (_ *App, err error) {
	a := &App{log: cfg.Logger, argon: cfg.Argon2, hashSlots: make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.argon == (Argon2Params{}) {
		a.argon = DefaultArgon2()
	}
	if cfg.Worker < 0 {
		return nil, fmt.Errorf("%w: Worker %d is negative", ErrConfig, cfg.Worker)
	}
	dbKind, err := databaseKind(cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	a.log.Info("snowkey example server starting", "database", dbKind.describe(), "redis", describeRedis(cfg))

	defer func() {
		if err != nil {
			_ = a.Close(context.WithoutCancel(ctx))
		}
	}()
	if a.db, err = a.openDatabase(ctx, cfg.DatabaseURL, dbKind); err != nil {
		return nil, err
	}
	if a.rdb, err = a.openRedis(ctx, cfg); err != nil {
		return nil, err
	}
	if a.gen, err = a.newGenerator(ctx, cfg, dbKind); err != nil {
		return nil, err
	}
	if err = a.useGenerator(); err != nil {
		return nil, err
	}
	if a.tokens, err = tokens.New(a.rdb, a.gen, cfg.Tokens); err != nil {
		return nil, err
	}
	if a.auth, err = tokens.NewMiddleware(a.tokens, tokens.MiddlewareOptions{Logger: a.log}); err != nil {
		return nil, err
	}
	if a.dummyHash, err = hashPassword("not a password", a.argon); err != nil {
		return nil, err
	}
	a.handler = a.routes()
	return a, nil
}

// Handler returns the HTTP handler of the API and the web page.
func (a *App) Handler() http.Handler { return a.handler }

// Done returns a channel that is closed when the App's worker lease is
// lost: the generator has stopped for good and nothing can be created, so
// the server should exit and be restarted. With a fixed worker it is nil,
// which never closes.
func (a *App) Done() <-chan struct{} { return a.leaseDone }

// Close releases what Open acquired, in reverse order: the worker lease,
// the Redis client or in-process Redis, the database.
func (a *App) Close(ctx context.Context) error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i](ctx))
	}
	a.closers = nil
	return errors.Join(errs...)
}

// onClose registers f to run on Close.
func (a *App) onClose(f func(context.Context) error) { a.closers = append(a.closers, f) }

// closeFunc adapts an io.Closer for onClose.
func closeFunc(c io.Closer) func(context.Context) error {
	return func(context.Context) error { return c.Close() }
}

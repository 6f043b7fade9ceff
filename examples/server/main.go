// Command server is snowkey's example backend: users, posts and login
// sessions whose keys are snowflake IDs, served as a JSON API and a web
// page.
//
//	go -C examples run ./server     # or: make run
//
// With no environment it runs on embedded defaults, SQLite in memory and
// an in-process Redis, and says so in its first log line. Set
// DATABASE_URL (postgres://…, or sqlite:PATH for an SQLite file) and
// REDIS_URL (redis://…) for real servers. PORT, or -addr, picks where it
// listens; the default is localhost:8080. Sign-up links go by mail
// through SMTP_URL (smtp:// or smtps://) from MAIL_FROM, pointing at
// PUBLIC_URL; without SMTP_URL, on loopback only, to an outbox the page
// shows.
//
// API (JSON bodies, sent as application/json; IDs are strings):
//
//	POST   /api/signup        {email,password,name} -> 202, new email or not; a mail says which
//	POST   /api/verify        {token,password}  -> as login: the link's sign-up becomes an account
//	POST   /api/login         {email,password}  -> {"token","session"}; with "cookie":true the token in a cookie
//	GET    /api/layout        the bit layout of the IDs
//	GET    /api/me
//	POST   /api/posts         {title,body}      -> 201 the post
//	GET    /api/posts         ?before=<id>&limit=<n>, newest first
//	GET    /api/posts/{id}
//	GET    /api/sessions
//	DELETE /api/sessions/{id}
//	POST   /api/logout
//	POST   /api/logout-all
//	POST   /api/password      {current_password,new_password} -> {"revoked"}: other sessions end
//
// Everything but signup, verify, login and layout takes "Authorization:
// Bearer <token>", or the cookie the page's login sets. Signup and login
// are rate-limited (429 with Retry-After). GET /healthz and /readyz
// serve load balancers; /metrics (Prometheus) and /readyz with detail
// serve operators on a listener of their own (-metrics-addr,
// localhost:9090 by default).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
)

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// go-redis logs a few lines of its own (failed dials, pool trouble)
	// through a process-wide logger: into this one, redacted too.
	redis.SetLogger(redisLogger{newRedactor(os.Getenv("DATABASE_URL"), os.Getenv("REDIS_URL")).logger(logger)})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr, logger); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		logger.Error("server stopped", "error", err)
		os.Exit(1)
	}
}

// run is main without the process: it serves until ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, logger *slog.Logger) error {
	// Every line this function logs passes through the same redaction as
	// the App's own (see redact.go).
	logger = newRedactor(getenv("DATABASE_URL"), getenv("REDIS_URL"), getenv("SMTP_URL")).logger(logger)
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defaultAddr, defaultOps := defaultAddrs(getenv)
	addr := fs.String("addr", defaultAddr, "address to listen on, host:port (default from PORT when set)")
	opsAddr := fs.String("metrics-addr", defaultOps, "address of the operators' listener (/metrics, and /readyz with detail), host:port, or off (also METRICS_ADDR)")
	worker := fs.Int64("worker", 0, fmt.Sprintf("fixed worker number, 1 to %d; %d is PostgreSQL's snowflake_id()'s (default: lease one when DATABASE_URL or REDIS_URL is set, else 1; also WORKER_ID)",
		workerCeiling(idtype.DefaultLayout), sqlReservedWorker))
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if v := getenv("WORKER_ID"); v != "" && *worker == 0 {
		w, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: WORKER_ID %q is not a number", ErrConfig, v)
		}
		*worker = w
	}

	// Listen first: a port in use fails before any database work.
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *addr, err)
	}
	defer ln.Close() // in case Open fails; Serve closes it otherwise
	var opsLn net.Listener
	if *opsAddr != "off" {
		if opsLn, err = (&net.ListenConfig{}).Listen(ctx, "tcp", *opsAddr); err != nil {
			return fmt.Errorf("listen on -metrics-addr %s: %w", *opsAddr, err)
		}
		defer opsLn.Close()
	}

	mailer, err := mailerOf(getenv, ln.Addr())
	if err != nil {
		return err
	}
	publicURL := getenv("PUBLIC_URL")
	if publicURL == "" {
		publicURL = pageURL(ln.Addr())
	}
	app, err := Open(ctx, Config{
		DatabaseURL: getenv("DATABASE_URL"),
		RedisURL:    getenv("REDIS_URL"),
		Worker:      *worker,
		Mailer:      mailer,
		PublicURL:   publicURL,
		Logger:      logger,
	})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := app.Close(cctx); err != nil {
			logger.Error("close", "error", err)
		}
	}()

	newServer := func(h http.Handler) *http.Server {
		return &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		}
	}
	srv := newServer(app.Handler())
	servers := []*http.Server{srv}
	served := make(chan error, 2)
	if opsLn != nil {
		ops := newServer(app.OpsHandler())
		servers = append(servers, ops)
		logger.Info("operators' listener", "metrics", "http://"+opsLn.Addr().String()+"/metrics")
		go func() { served <- ops.Serve(opsLn) }()
	}
	if mailer == nil {
		logger.Info("no SMTP_URL: mail goes to the development outbox, which the page shows")
	}
	logger.Info("listening", "url", pageURL(ln.Addr()))
	go func() { served <- srv.Serve(ln) }()
	shutdown := func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		var errs []error
		for _, s := range servers {
			errs = append(errs, s.Shutdown(sctx))
		}
		return errors.Join(errs...)
	}
	select {
	case err := <-served:
		return errors.Join(err, shutdown())
	case <-ctx.Done():
	case <-app.Done():
		err := errors.New("the worker lease is lost, so no ID can be issued; exiting to be restarted")
		return errors.Join(err, shutdown())
	}
	logger.Info("shutting down")
	return shutdown()
}

// mailerOf returns the SMTP mailer of SMTP_URL and MAIL_FROM, or nil, the
// development outbox, when SMTP_URL is unset and the server listens on
// loopback alone. Anywhere else the outbox would show every sign-up's
// link to whoever asks, so the server refuses to start without SMTP_URL.
func mailerOf(getenv func(string) string, listen net.Addr) (Mailer, error) {
	raw := getenv("SMTP_URL")
	if raw == "" {
		if tcp, ok := listen.(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
			return nil, fmt.Errorf("%w: SMTP_URL is unset and the server listens on %s, beyond this machine: "+
				"set SMTP_URL (and MAIL_FROM) so that sign-up links go by mail, or listen on localhost for the development outbox", ErrConfig, listen)
		}
		return nil, nil
	}
	from := getenv("MAIL_FROM")
	if from == "" {
		return nil, fmt.Errorf("%w: SMTP_URL is set but MAIL_FROM is not: the address the mails come from", ErrConfig)
	}
	m, err := NewSMTPMailer(raw, from)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// redisLogger passes go-redis's log lines to slog, at Warn.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, args ...any) {
	r.l.WarnContext(ctx, "redis: "+fmt.Sprintf(format, args...))
}

// pageURL is the address of the web page on the listener: localhost when
// it listens on every interface.
func pageURL(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(tcp.Port)) + "/"
}

// defaultAddrs returns the listeners' addresses when no flag names them:
// the public one from PORT (every interface, as hosting platforms route
// to it from outside) or localhost:8080; the operators' one from
// METRICS_ADDR or localhost:9090, loopback whatever PORT says, since it
// names the worker and the lease.
func defaultAddrs(getenv func(string) string) (public, ops string) {
	public, ops = "localhost:8080", "localhost:9090"
	if p := getenv("PORT"); p != "" {
		public = ":" + p
	}
	if v := getenv("METRICS_ADDR"); v != "" {
		ops = v
	}
	return public, ops
}

package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// secretForms are DATABASE_URL and REDIS_URL values with their secrets:
// every place a password can stand, a ?password= beside a userinfo
// password first. The hosts are a closed
// port on loopback, so that Open fails at once, after parsing.
var secretForms = []struct {
	name, db, redis string
	secrets         []string
}{
	{name: "query and userinfo", db: "postgres://a:x@127.0.0.1:1/db?password=qpw", secrets: []string{"qpw"}},
	{name: "userinfo", db: "postgres://ann:s3cr3t-userinfo@127.0.0.1:1/app?sslmode=disable", secrets: []string{"s3cr3t-userinfo"}},
	{name: "postgresql scheme, both", db: "postgresql://ann:ui-secret-1@127.0.0.1:1/app?password=query-secret-1&sslmode=disable",
		secrets: []string{"ui-secret-1", "query-secret-1"}},
	{name: "percent-encoded", db: "postgres://ann:p%40ss%2Fw0rd-enc@127.0.0.1:1/app?sslmode=disable",
		secrets: []string{"p%40ss%2Fw0rd-enc", "p@ss/w0rd-enc"}},
	{name: "sslpassword", db: "postgres://ann@127.0.0.1:1/app?sslmode=disable&sslpassword=key-secret-2", secrets: []string{"key-secret-2"}},
	{name: "key=value", db: "host=127.0.0.1 port=1 user=ann password=dsn-secret-3 dbname=app sslmode=disable", secrets: []string{"dsn-secret-3"}},
	{name: "key=value quoted", db: `host=127.0.0.1 port=1 user=ann password='quoted secret\'4' dbname=app sslmode=disable`,
		secrets: []string{"quoted secret'4", `quoted secret\'4`}},
	{name: "unescaped slash", db: "postgres://ann:sla/sh-secret-5@127.0.0.1:1/app", secrets: []string{"sla/sh-secret-5"}},
	{name: "bad port", db: "postgres://ann:port-secret-6@127.0.0.1:x/app", secrets: []string{"port-secret-6"}},
	{name: "redis password", redis: "redis://:redis-secret-7@127.0.0.1:1/0", secrets: []string{"redis-secret-7"}},
	{name: "redis ACL user", redis: "redis://app:redis-acl-secret-8@127.0.0.1:1/1", secrets: []string{"redis-acl-secret-8"}},
	{name: "rediss encoded", redis: "rediss://app:p%40redis-secret-9@127.0.0.1:1", secrets: []string{"p%40redis-secret-9", "p@redis-secret-9"}},
	{name: "unix socket", redis: "unix://app:unix-secret-10@/nonexistent/redis.sock?db=2", secrets: []string{"unix-secret-10"}},
	{name: "redis unparsable", redis: "redis://:spa ce-secret-11@127.0.0.1:x/0", secrets: []string{"spa ce-secret-11", "ce-secret-11"}},
	{name: "redis slash", redis: "redis://:sl/ash-secret-12@127.0.0.1:1/0", secrets: []string{"sl/ash-secret-12", "ash-secret-12"}},
	{name: "redis query password", redis: "redis://127.0.0.1:1/0?password=query-secret-13", secrets: []string{"query-secret-13"}},
}

// TestRedaction opens the server on each form and checks that neither its
// log nor its error holds a secret. The control run, which takes the same
// steps without the redactor (see openUnredacted), must find the secrets
// of the forms that reach the first log line.
func TestRedaction(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		var leaked atomic.Int64
		t.Run(map[bool]string{false: "redacted", true: "control"}[control], func(t *testing.T) {
			testRedaction(t, control, &leaked)
		})
		if control && leaked.Load() == 0 {
			t.Error("control run: no secret leaked with redaction off; the test cannot see a leak")
		}
	}
}

// testRedaction opens the server on every form at once: each waits on
// go-redis's retries to dial a closed port.
func testRedaction(t *testing.T, control bool, leaked *atomic.Int64) {
	for _, f := range secretForms {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Deadline(t, 30*time.Second)
			var log testenv.LogBuffer
			cfg := Config{DatabaseURL: f.db, RedisURL: f.redis, Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			var err error
			if control {
				err = openUnredacted(ctx, cfg)
			} else {
				var app *App
				if app, err = Open(ctx, cfg); err == nil {
					_ = app.Close(ctx)
				}
			}
			if err == nil {
				t.Fatal("Open succeeded on a closed port")
			}
			text := log.String() + "\nerror: " + err.Error()
			for _, s := range f.secrets {
				if strings.Contains(text, s) {
					if !control {
						t.Errorf("secret %q in the log or error:\n%s", s, text)
					}
					leaked.Add(1)
				}
			}
			// The error still says what is wrong, in the driver's
			// words or the server's.
			if !control && !strings.Contains(text, "DATABASE_URL") && !strings.Contains(text, "REDIS_URL") &&
				!strings.Contains(text, "connect") && !strings.Contains(text, "redis:") {
				t.Errorf("the error says nothing useful: %v", err)
			}
			if !control && errors.Is(err, ErrConfig) != (strings.Contains(f.name, "bad port") || strings.Contains(f.name, "unparsable") ||
				strings.Contains(f.name, "query password") || strings.Contains(f.name, "slash")) {
				t.Errorf("errors.Is(err, ErrConfig) = %v for %v", errors.Is(err, ErrConfig), err)
			}
		})
	}
}

// openUnredacted is the control of TestRedaction: Open's steps that meet
// the URLs, its first log line and its connections to the database and
// Redis, taken without the redactor, as a server that trusted
// url.URL.Redacted would take them. It returns the first error, as the
// drivers word it.
func openUnredacted(ctx context.Context, cfg Config) error {
	a := &App{log: cfg.Logger, keyPrefix: defaultKeyPrefix, layout: idtype.DefaultLayout}
	defer func() { _ = a.Close(context.WithoutCancel(ctx)) }()
	kind, err := databaseKind(cfg.DatabaseURL)
	if err != nil {
		return err
	}
	if _, err := describeRedis(cfg); err != nil {
		return err
	}
	a.log.Info("snowkey example server starting", "database", cfg.DatabaseURL, "redis", cfg.RedisURL)
	if a.db, err = a.openDatabase(ctx, cfg.DatabaseURL, kind); err != nil {
		return err
	}
	_, err = a.openRedis(ctx, cfg)
	return err
}

// TestRedactedLogger checks the log handler on its own: a secret in the
// message, a string, an error, a group and a handler's own attributes.
func TestRedactedLogger(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	r := newRedactor("postgres://u:pg-secret@h/db", "redis://:rd-secret@h/0")
	var buf testenv.LogBuffer
	l := r.logger(slog.New(slog.NewTextHandler(&buf, nil))).With("dsn", "postgres://u:pg-secret@h/db")
	l.Info("connect with rd-secret", "err", errors.New("auth pg-secret failed"),
		slog.Group("g", "v", "rd-secret"), "any", struct{ S string }{"pg-secret"})
	l.WithGroup("grp").Info("x", "k", "rd-secret")
	out := buf.String()
	if strings.Contains(out, "pg-secret") || strings.Contains(out, "rd-secret") {
		t.Fatalf("a secret in the log:\n%s", out)
	}
	if n := strings.Count(out, "xxxxx"); n != 7 {
		t.Errorf("%d redactions, want 7:\n%s", n, out)
	}
	wrapped := r.err(errors.Join(ErrConfig, errors.New("pg-secret")))
	if strings.Contains(wrapped.Error(), "pg-secret") || !errors.Is(wrapped, ErrConfig) {
		t.Errorf("redacted error %q; errors.Is ErrConfig %v", wrapped, errors.Is(wrapped, ErrConfig))
	}
	if newRedactor("", "sqlite:x.db", "redis://h/0") != nil {
		t.Error("a redactor for URLs without secrets")
	}
}

// TestRedactionRunning runs the server (run, as main does) on a real
// PostgreSQL, a Redis that needs a password and an SMTP server that needs
// one, all given with secrets in their URLs, signs up, follows the mailed
// link and logs in, stops it, and finds no secret in anything it logged.
func TestRedactionRunning(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 2*time.Minute)
	const pgUser, pgQuery, redisPW, smtpPW = "userinfo-secret-e2e", "query-secret-e2e", "redis-secret-e2e", "smtp-secret-e2e"
	// The test server trusts local connections, so the passwords are
	// parsed and sent but not checked.
	dbURL := strings.Replace(testenv.Postgres(t), "postgres://postgres@", "postgres://postgres:"+pgUser+"@", 1) + "&password=" + pgQuery
	if !strings.Contains(dbURL, pgUser) {
		t.Fatalf("cannot put a password into %s", dbURL)
	}
	m := miniredis.RunT(t)
	m.RequireAuth(redisPW)
	sink := startSMTP(t, "mailer", smtpPW, nil)
	env := map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": "redis://:" + redisPW + "@" + m.Addr() + "/0", "WORKER_ID": "5",
		"SMTP_URL": "smtp://mailer:" + smtpPW + "@" + sink.addr, "MAIL_FROM": "noreply@example.test"}
	var log testenv.LogBuffer
	logger := slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- run(rctx, []string{"-addr", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0"}, func(k string) string { return env[k] }, &log, logger)
	}()
	re := regexp.MustCompile(`msg=listening url=(\S+)`)
	var url string
	for url == "" {
		select {
		case err := <-done:
			t.Fatalf("run ended before listening: %v\n%s", err, log.String())
		case <-ctx.Done():
			t.Fatalf("no listening line:\n%s", log.String())
		case <-time.After(20 * time.Millisecond):
			if m := re.FindStringSubmatch(log.String()); m != nil {
				url = m[1]
			}
		}
	}
	// Each step must get its status: a request that failed would leave
	// "no secret in the log" true of a log that holds nothing.
	steps := []struct {
		path   string
		body   func() string
		status int
	}{
		{"api/signup", func() string { return `{"email":"e2e@example.com","password":"` + goodPassword + `","name":"E"}` }, http.StatusAccepted},
		{"api/verify", func() string {
			mails, _ := sink.received()
			if len(mails) == 0 {
				t.Fatal("the sign-up sent no mail")
			}
			tok := verifyTokenRE.FindStringSubmatch(mails[len(mails)-1].body)
			if tok == nil {
				t.Fatalf("no link in the mail: %+v", mails)
			}
			return `{"token":"` + tok[1] + `","password":"` + goodPassword + `"}`
		}, http.StatusOK},
		{"api/login", func() string { return `{"email":"e2e@example.com","password":"` + otherPassword + `"}` }, http.StatusUnauthorized},
		{"api/login", func() string { return `{"email":"e2e@example.com","password":"` + goodPassword + `"}` }, http.StatusOK},
	}
	for _, step := range steps {
		req, err := http.NewRequestWithContext(ctx, "POST", url+step.path, strings.NewReader(step.body()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != step.status {
			t.Fatalf("POST %s: %d %s (%v); want %d", step.path, res.StatusCode, body, err, step.status)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
	out := log.String()
	first, _, _ := strings.Cut(out, "\n")
	if !strings.Contains(first, "user=postgres host=127.0.0.1") || !strings.Contains(first, m.Addr()) {
		t.Errorf("the first line does not name the servers: %s", first)
	}
	for _, s := range []string{pgUser, pgQuery, redisPW, smtpPW} {
		if strings.Contains(out, s) {
			t.Errorf("secret %q in the log:\n%s", s, out)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/tokens"
	"github.com/snowkeyhq/snowkey/workerid"
)

// backend is a database and Redis a test app runs on.
type backend struct {
	name   string
	config func(t *testing.T) Config
}

// embedded runs on the defaults: SQLite in memory and miniredis.
func embedded() backend {
	return backend{"embedded", func(*testing.T) Config { return Config{} }}
}

// realServers runs on the harness's PostgreSQL (a fresh database) and
// Redis (keys under the test's prefix); the worker number is leased from
// PostgreSQL. Without the harness the test is skipped (fails in CI).
func realServers() backend {
	return backend{"postgres+redis", func(t *testing.T) Config {
		prefix := testenv.KeyPrefix(t)
		return Config{
			DatabaseURL: testenv.Postgres(t),
			Redis:       testenv.RedisClient(t),
			Tokens:      tokens.Options{KeyPrefix: prefix + "tok:"},
			Leases:      workerid.Options{KeyPrefix: prefix + "wid:"},
			KeyPrefix:   prefix + "ex:",
		}
	}}
}

// cluster runs on SQLite in memory and the harness's Redis Cluster, with a
// fixed worker, so that its session floor lives in the Cluster too.
func cluster() backend {
	return backend{"sqlite+cluster", func(t *testing.T) Config {
		prefix := testenv.KeyPrefix(t)
		return Config{
			Redis:     testenv.RedisClusterClient(t),
			Worker:    7,
			Tokens:    tokens.Options{KeyPrefix: prefix + "tok:"},
			KeyPrefix: prefix + "ex:",
		}
	}}
}

func backends() []backend { return []backend{embedded(), realServers()} }

// generous are rate limits that the tests of other things never reach:
// they sign up and log in many times from one address.
func generous() ThrottleOptions {
	l := redis_rate.Limit{Rate: 1000, Period: time.Second, Burst: 1000}
	// A hash waits for a slot as long as the test's deadline lets it: on a
	// busy machine, logins sent at once would otherwise outwait the
	// default second and get 503s that no test of other things expects.
	return ThrottleOptions{LoginPerIP: l, LoginPerAccountPerIP: l, LoginPerAccount: l, SignupPerIP: l, SignupPerAccount: l,
		HashWait: time.Hour}
}

// testLogger writes the app's log lines to the test's log, shown when it
// fails or with -v.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// startApp opens an App on the backend and serves it with httptest; both
// are closed when the test ends.
func startApp(t *testing.T, b backend) (*App, *httptest.Server) {
	t.Helper()
	cfg := b.config(t)
	if cfg.Throttle == (ThrottleOptions{}) {
		cfg.Throttle = generous()
	}
	return startAppConfig(t, cfg)
}

// startAppConfig opens an App on cfg and serves it with httptest; both
// are closed when the test ends.
func startAppConfig(t *testing.T, cfg Config) (*App, *httptest.Server) {
	t.Helper()
	return startAppWithout(t, cfg, defences{})
}

// startAppWithout is startAppConfig with the defences in d switched off
// (see openWithout).
func startAppWithout(t *testing.T, cfg Config, d defences) (*App, *httptest.Server) {
	t.Helper()
	return serveApp(t, cfg, d, nil)
}

// startAppBehind is startAppConfig serving the handler that front builds
// of the App, in place of its Handler: a control run's stand-in, written
// in the test, for a server without one of the App's defences of its
// answers. The App itself is the one Open makes. A nil front serves the
// App's Handler.
func startAppBehind(t *testing.T, cfg Config, front func(*App) http.Handler) (*App, *httptest.Server) {
	t.Helper()
	return serveApp(t, cfg, defences{}, front)
}

// serveApp opens an App on cfg with the defences in d switched off and
// serves its Handler, or what front builds of it when front is not nil.
func serveApp(t *testing.T, cfg Config, d defences, front func(*App) http.Handler) (*App, *httptest.Server) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	// A test that leaves the hash's cost unset tests something else than
	// the cost: it hashes with cheapArgon2, not DefaultArgon2, whose 19
	// MiB and two passes each login and signup would pay, slowed by the
	// race detector. A test of the cost sets it.
	if cfg.Argon2 == (Argon2Params{}) {
		cfg.Argon2 = cheapArgon2
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// The server's address is known before Open, so that the links in
	// its mails point at it.
	srv := httptest.NewUnstartedServer(nil)
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + srv.Listener.Addr().String() + "/"
	}
	app, err := openWithout(ctx, cfg, d)
	if err != nil {
		srv.Close()
		t.Fatalf("Open: %v", err)
	}
	srv.Config.Handler = app.Handler()
	if front != nil {
		srv.Config.Handler = front(app)
	}
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := app.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return app, srv
}

// response is an answer of the server.
type response struct {
	status int
	header http.Header
	body   []byte
}

// callURL GETs a full URL.
func callURL(t *testing.T, u string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return response{res.StatusCode, res.Header, b}
}

// json decodes the body into v, failing the test if it is not JSON.
func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("status %d, body %q: not JSON: %v", r.status, r.body, err)
	}
}

// errorMsg is the "error" of a JSON error answer.
func (r response) errorMsg(t *testing.T) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	r.json(t, &e)
	return e.Error
}

// call sends a request with an optional bearer token and a raw body, as
// application/json.
func call(t *testing.T, srv *httptest.Server, method, path, token, body string) response {
	t.Helper()
	return callType(t, srv, method, path, token, body, "application/json")
}

// callType is call with the body's Content-Type; "" sends none.
func callType(t *testing.T, srv *httptest.Server, method, path, token, body, contentType string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" && method != "GET" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{res.StatusCode, res.Header, b}
}

// mustJSON encodes v.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// startOps serves the App's operators' handler (/metrics, /readyz with
// detail) and returns its URL.
func startOps(t *testing.T, app *App) string {
	t.Helper()
	return startHandler(t, app.OpsHandler())
}

// startHandler serves h with httptest until the test ends and returns its
// URL.
func startHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// signupLogin creates a user named after the email's local part, follows
// the link of its mail from the development outbox, which logs in, and
// returns the user's ID and the token.
func signupLogin(t *testing.T, srv *httptest.Server, email, password string) (id, token string) {
	t.Helper()
	name, _, _ := strings.Cut(email, "@")
	r := call(t, srv, "POST", "/api/signup", "", mustJSON(t, map[string]string{"email": email, "password": password, "name": "The " + name}))
	if r.status != http.StatusAccepted {
		t.Fatalf("signup %s: status %d, body %s", email, r.status, r.body)
	}
	r = call(t, srv, "POST", "/api/verify", "", mustJSON(t, map[string]string{"token": outboxToken(t, srv.URL, email), "password": password}))
	if r.status != http.StatusOK {
		t.Fatalf("verify %s: status %d, body %s", email, r.status, r.body)
	}
	var l struct {
		Token   string
		Session struct {
			UserID string `json:"user_id"`
		}
	}
	r.json(t, &l)
	return l.Session.UserID, l.Token
}

// verifyTokenRE finds the token of a sign-up link in a mail.
var verifyTokenRE = regexp.MustCompile(`#verify=([A-Za-z0-9_-]{43})`)

// outboxToken returns the token of the newest sign-up link to email in the
// development outbox of the server at base.
func outboxToken(t *testing.T, base, email string) string {
	t.Helper()
	var box struct{ Messages []Message }
	callURL(t, base+"/api/dev/outbox").json(t, &box)
	for _, m := range box.Messages {
		if m.To != email {
			continue
		}
		if tok := verifyTokenRE.FindStringSubmatch(m.Body); tok != nil {
			return tok[1]
		}
	}
	t.Fatalf("no sign-up link to %s in the outbox: %+v", email, box.Messages)
	return ""
}

// Passwords the policy accepts, for test users.
const (
	goodPassword  = "plum-kite-orbit-93"
	otherPassword = "mauve-tulip-argon-41"
)

package tokens

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// serve sends one request with a Bearer token through m's middleware,
// with its logs discarded, and returns the status.
func serve(m *Manager, tok string) int {
	r := httptest.NewRequest("GET", "/me", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	w := httptest.NewRecorder()
	auth, err := NewMiddleware(m, MiddlewareOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err) // the options are valid
	}
	auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})).ServeHTTP(w, r)
	return w.Code
}

func TestMiddleware(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, []backend{miniBackend, singleBackend, clusterBackend}, func(t *testing.T, b backend) {
		gen := newGen(t)
		var logs bytes.Buffer
		m := openManager(t, b.client(t), gen, Options{})
		auth, err := NewMiddleware(m, MiddlewareOptions{
			Header: "x-session-token",
			Realm:  "example",
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
		if err != nil {
			t.Fatal(err)
		}
		user := userID(t, gen)
		tok, sess := issue(t, m, user, Metadata{})
		revoked, revokedS := issue(t, m, user, Metadata{})
		if err := m.Revoke(t.Context(), revoked); err != nil {
			t.Fatal(err)
		}
		p, _ := parseToken("snk", tok)
		p.secret[0] ^= 1
		wrongSecret := p.format("snk")

		const (
			challenge = `Bearer realm="example"`
			invalid   = `Bearer realm="example", error="invalid_token"`
			malformed = `Bearer realm="example", error="invalid_request"`
		)
		tests := []struct {
			name      string
			headers   [][2]string
			query     string
			status    int
			challenge string
		}{
			{"no credentials", nil, "", 401, challenge},
			{"basic auth", [][2]string{{"Authorization", "Basic dXNlcjpwYXNz"}}, "", 401, challenge},
			{"empty authorization", [][2]string{{"Authorization", ""}}, "", 401, challenge},
			{"token in the query string only", nil, "?access_token=" + tok, 401, challenge},
			{"bearer", [][2]string{{"Authorization", "Bearer " + tok}}, "", 200, ""},
			{"bearer, lower case", [][2]string{{"Authorization", "bearer " + tok}}, "", 200, ""},
			{"bearer, two spaces", [][2]string{{"Authorization", "Bearer  " + tok}}, "", 200, ""},
			{"custom header", [][2]string{{"X-Session-Token", tok}}, "", 200, ""},
			{"bearer without token", [][2]string{{"Authorization", "Bearer"}}, "", 400, malformed},
			{"bearer with a space inside", [][2]string{{"Authorization", "Bearer " + tok[:10] + " " + tok[10:]}}, "", 400, malformed},
			{"bearer with a bad character", [][2]string{{"Authorization", "Bearer " + tok + "!"}}, "", 400, malformed},
			{"two authorization headers", [][2]string{{"Authorization", "Bearer " + tok}, {"Authorization", "Bearer " + tok}}, "", 400, malformed},
			{"bearer and custom header", [][2]string{{"Authorization", "Bearer " + tok}, {"X-Session-Token", tok}}, "", 400, malformed},
			{"custom header with a bad character", [][2]string{{"X-Session-Token", "a,b"}}, "", 400, malformed},
			{"garbage token", [][2]string{{"Authorization", "Bearer abc.def"}}, "", 401, invalid},
			{"wrong secret", [][2]string{{"Authorization", "Bearer " + wrongSecret}}, "", 401, invalid},
			{"revoked", [][2]string{{"Authorization", "Bearer " + revoked}}, "", 401, invalid},
			{"revoked, custom header", [][2]string{{"X-Session-Token", revoked}}, "", 401, invalid},
		}
		for _, tt := range tests {
			var got Session
			var reached bool
			h := auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, reached = FromContext(r.Context())
			}))
			r := httptest.NewRequest("GET", "/me"+tt.query, nil)
			for _, kv := range tt.headers {
				r.Header.Add(kv[0], kv[1])
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Errorf("%s: status %d, want %d", tt.name, w.Code, tt.status)
			}
			if c := w.Header().Get("WWW-Authenticate"); c != tt.challenge {
				t.Errorf("%s: WWW-Authenticate %q, want %q", tt.name, c, tt.challenge)
			}
			if reached != (tt.status == 200) {
				t.Errorf("%s: handler reached = %v", tt.name, reached)
			}
			if reached && got != sess {
				t.Errorf("%s: session in context %+v, want %+v", tt.name, got, sess)
			}
			if strings.Contains(w.Body.String(), tok) {
				t.Errorf("%s: the response holds the token", tt.name)
			}
		}
		out := logs.String()
		if !strings.Contains(out, "session="+revokedS.ID.String()) {
			t.Errorf("the logs do not name the revoked session %d:\n%s", revokedS.ID, out)
		}
		secret := tok[len("snk_")+sidDigits+tagDigits : len(tok)-sumDigits]
		for _, s := range []string{secret, revoked[len("snk_")+sidDigits+tagDigits : len(revoked)-sumDigits], "abc.def"} {
			if strings.Contains(out, s) {
				t.Errorf("the logs hold a token or secret %q:\n%s", s, out)
			}
		}
	})
}

func TestMiddlewareUnavailable(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	// Nothing listens on port 1: every call fails at once.
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	var logs bytes.Buffer
	m, err := New(c, newGen(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := NewMiddleware(m, MiddlewareOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tok := (&token{session: 1863486340915077120, tag: 3}).format("snk")
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	w := httptest.NewRecorder()
	auth(http.NotFoundHandler()).ServeHTTP(w, r)
	if w.Code != 503 {
		t.Errorf("status %d, want 503", w.Code)
	}
	if w.Header().Get("WWW-Authenticate") != "" {
		t.Errorf("a 503 with a challenge: %q", w.Header().Get("WWW-Authenticate"))
	}
	if body := w.Body.String(); strings.Contains(body, "127.0.0.1") || strings.Contains(body, "refused") {
		t.Errorf("the 503 leaks detail: %q", body)
	}
	if out := logs.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "session=1863486340915077120") ||
		strings.Contains(out, tok) {
		t.Errorf("log: %s", out)
	}

	// A request whose client has gone is not logged as a store failure.
	logs.Reset()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w = httptest.NewRecorder()
	auth(http.NotFoundHandler()).ServeHTTP(w, r.WithContext(ctx))
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a canceled request was logged as an error: %s", logs.String())
	}
}

func TestParseCredentials(t *testing.T) {
	tests := []struct {
		name   string
		auth   []string
		custom []string
		tok    string
		res    credResult
	}{
		{"nothing", nil, nil, "", credNone},
		{"bearer", []string{"Bearer abc"}, nil, "abc", credToken},
		{"BEARER", []string{"BEARER abc"}, nil, "abc", credToken},
		{"padding", []string{"Bearer abc=="}, nil, "abc==", credToken},
		{"all b64token characters", []string{"Bearer aZ09-._~+/="}, nil, "aZ09-._~+/=", credToken},
		{"only padding", []string{"Bearer =="}, nil, "", credMalformed},
		{"padding inside", []string{"Bearer a=b"}, nil, "", credMalformed},
		{"trailing space in the token", []string{"Bearer abc def"}, nil, "", credMalformed},
		{"no token", []string{"Bearer "}, nil, "", credMalformed},
		{"scheme only", []string{"Bearer"}, nil, "", credMalformed},
		{"other scheme", []string{"Token abc"}, nil, "", credNone},
		{"scheme glued to token", []string{"Bearerabc"}, nil, "", credNone},
		{"custom", nil, []string{"abc"}, "abc", credToken},
		{"custom, spaces around", nil, []string{" abc "}, "abc", credToken},
		{"custom, empty", nil, []string{""}, "", credNone},
		{"custom twice", nil, []string{"abc", "abc"}, "", credMalformed},
		{"both", []string{"Bearer abc"}, []string{"abc"}, "", credMalformed},
		{"basic and custom", []string{"Basic abc"}, []string{"abc"}, "abc", credToken},
		{"two authorization", []string{"Bearer abc", "Basic x"}, nil, "", credMalformed},
		{"non-ASCII", []string{"Bearer ab\xffc"}, nil, "", credMalformed},
	}
	for _, tt := range tests {
		tok, res := parseCredentials(tt.auth, tt.custom)
		if tok != tt.tok || res != tt.res {
			t.Errorf("%s: parseCredentials(%q, %q) = %q, %d; want %q, %d", tt.name, tt.auth, tt.custom, tok, res, tt.tok, tt.res)
		}
	}
}

func TestFromContext(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Error("a session in an empty context")
	}
	s := Session{ID: 5, UserID: idtype.ID(7), IssuedAt: time.Unix(1, 0)}
	if got, ok := FromContext(NewContext(context.Background(), s)); !ok || got != s {
		t.Errorf("FromContext(NewContext(s)) = %+v, %v", got, ok)
	}
}

// TestMiddlewareZeroOptions checks that Manager.Middleware is the
// middleware of the zero MiddlewareOptions: Bearer only, realm "api",
// slog.Default().
func TestMiddlewareZeroOptions(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	gen := newGen(t)
	m := openManager(t, miniClient(t), gen, Options{})
	user := userID(t, gen)
	tok, sess := issue(t, m, user, Metadata{})
	revoked, _ := issue(t, m, user, Metadata{})
	if err := m.Revoke(t.Context(), revoked); err != nil {
		t.Fatal(err)
	}
	var got Session
	h := m.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = FromContext(r.Context())
	}))
	tests := []struct {
		name, header, value string
		status              int
		challenge           string
	}{
		{"bearer", "Authorization", "Bearer " + tok, 200, ""},
		{"a custom header is not read", "X-Session-Token", tok, 401, `Bearer realm="api"`},
		{"revoked", "Authorization", "Bearer " + revoked, 401, `Bearer realm="api", error="invalid_token"`},
		{"malformed", "Authorization", "Bearer", 400, `Bearer realm="api", error="invalid_request"`},
	}
	for _, tt := range tests {
		got = Session{}
		r := httptest.NewRequest("GET", "/me", nil)
		r.Header.Set(tt.header, tt.value)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.status || w.Header().Get("WWW-Authenticate") != tt.challenge {
			t.Errorf("%s: %d %q, want %d %q", tt.name, w.Code, w.Header().Get("WWW-Authenticate"), tt.status, tt.challenge)
		}
		if tt.status == 200 && got != sess {
			t.Errorf("%s: session in context %+v, want %+v", tt.name, got, sess)
		}
	}
	mw, err := newMiddleware(m, MiddlewareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := mw.opts; o.Header != "" || o.Realm != DefaultRealm || o.Logger != slog.Default() {
		t.Errorf("the zero MiddlewareOptions became %+v, want no Header, Realm %q, slog.Default()", o, DefaultRealm)
	}
}

func TestMiddlewareOptions(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	m := openManager(t, miniClient(t), newGen(t), Options{})
	logger := slog.New(slog.DiscardHandler)
	mw, err := newMiddleware(m, MiddlewareOptions{Header: "x-session-token", Realm: "example", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if o := mw.opts; o.Header != "X-Session-Token" || o.Realm != "example" || o.Logger != logger {
		t.Errorf("options in force %+v", o)
	}

	tests := []struct {
		name  string
		opts  MiddlewareOptions
		field string
	}{
		{"Header with a space", MiddlewareOptions{Header: "X Token"}, "Header"},
		{"Header with a colon", MiddlewareOptions{Header: "X-Token:"}, "Header"},
		{"Header Authorization", MiddlewareOptions{Header: "authorization"}, "Header"},
		{"quote in Realm", MiddlewareOptions{Realm: `a"b`}, "Realm"},
		{"backslash in Realm", MiddlewareOptions{Realm: `a\b`}, "Realm"},
		{"newline in Realm", MiddlewareOptions{Realm: "a\nb"}, "Realm"},
	}
	for _, tt := range tests {
		auth, err := NewMiddleware(m, tt.opts)
		if !errors.Is(err, idtype.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.field) || auth != nil {
			t.Errorf("%s: NewMiddleware = %v, want idtype.ErrInvalidOptions naming %s and no middleware", tt.name, err, tt.field)
		}
	}
	if _, err := NewMiddleware(nil, MiddlewareOptions{}); !errors.Is(err, idtype.ErrInvalidOptions) {
		t.Errorf("nil Manager: %v, want idtype.ErrInvalidOptions", err)
	}
}

package tokens

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testenv"
)

// cookieRig is a Manager with a cookie transport and the middleware that
// reads it, over one backend, and the handler behind it, which records the
// session it saw.
type cookieRig struct {
	m       *Manager
	c       *Cookies
	h       http.Handler
	reached bool
	got     Session
	logs    bytes.Buffer
}

func newCookieRig(t *testing.T, b backend, opts CookieOptions) *cookieRig {
	t.Helper()
	rig := &cookieRig{m: newManager(t, b.client(t), newGen(t), Options{})}
	c, err := NewCookies(rig.m, opts)
	if err != nil {
		t.Fatal(err)
	}
	rig.c = c
	auth, err := NewMiddleware(rig.m, MiddlewareOptions{Cookies: c,
		Logger: slog.New(slog.NewTextHandler(&rig.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	rig.h = auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rig.got, rig.reached = FromContext(r.Context())
	}))
	return rig
}

// serve sends r through the middleware.
func (rig *cookieRig) serve(r *http.Request) *httptest.ResponseRecorder {
	rig.reached, rig.got = false, Session{}
	w := httptest.NewRecorder()
	rig.h.ServeHTTP(w, r)
	return w
}

// login issues a session through Cookies.Issue, as a login handler does,
// and returns the token the Set-Cookie carries.
func (rig *cookieRig) login(t *testing.T, user idtype.ID) (string, Session) {
	t.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/login", nil)
	s, err := rig.c.Issue(w, r, user, Metadata{Device: "browser"})
	if err != nil {
		t.Fatal(err)
	}
	ck := setCookie(t, w, rig.c.opts.Name)
	if ck == nil || ck.Value == "" {
		t.Fatalf("Issue set no cookie: %q", w.Header().Values("Set-Cookie"))
	}
	return ck.Value, s
}

// setCookie returns the cookie named name that the response sets, or nil.
func setCookie(t *testing.T, w *httptest.ResponseRecorder, name string) *http.Cookie {
	t.Helper()
	var found *http.Cookie
	for _, line := range w.Header().Values("Set-Cookie") {
		ck, err := http.ParseSetCookie(line)
		if err != nil {
			t.Fatalf("Set-Cookie %q: %v", line, err)
		}
		if ck.Name == name {
			if found != nil {
				t.Fatalf("two Set-Cookie lines for %s: %q", name, w.Header().Values("Set-Cookie"))
			}
			found = ck
		}
	}
	return found
}

// request makes a request with the cookie's value (none when ""), the
// Sec-Fetch-Site a browser would send (none when "") and any more headers.
func request(method, site, cookieValue string, headers ...[2]string) *http.Request {
	r := httptest.NewRequest(method, "/api/posts", nil)
	if cookieValue != "" {
		r.AddCookie(&http.Cookie{Name: DefaultCookieName, Value: cookieValue})
	}
	if site != "" {
		r.Header.Set("Sec-Fetch-Site", site)
	}
	for _, kv := range headers {
		r.Header.Add(kv[0], kv[1])
	}
	return r
}

// TestCookieAttributes checks the cookie Issue sets and Clear deletes:
// HttpOnly, Secure, SameSite, the __Host- name, no Domain, Path /, and
// an answer no cache keeps.
func TestCookieAttributes(t *testing.T) {
	b := miniBackend // the attributes do not depend on the store
	rig := newCookieRig(t, b, CookieOptions{})
	user := idtype.ID(1863486340915077120)
	w := httptest.NewRecorder()
	s, err := rig.c.Issue(w, httptest.NewRequest("POST", "/login", nil), user, Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	ck := setCookie(t, w, "__Host-session")
	switch {
	case ck == nil:
		t.Fatalf("no __Host-session cookie: %q", w.Header().Values("Set-Cookie"))
	case !ck.HttpOnly || !ck.Secure || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Domain != "":
		t.Errorf("cookie %q: want HttpOnly, Secure, SameSite=Lax, Path=/, no Domain", w.Header().Get("Set-Cookie"))
	case ck.MaxAge != 0 || !ck.Expires.IsZero():
		t.Errorf("cookie %q outlives the browser session by default", w.Header().Get("Set-Cookie"))
	}
	if got, err := rig.m.Validate(t.Context(), ck.Value); err != nil || got.ID != s.ID {
		t.Errorf("the cookie's token validates as %+v, %v; Issue returned session %d", got, err, s.ID)
	}
	if w.Header().Get("Cache-Control") != "no-store" || w.Header().Get("Vary") != "Cookie" {
		t.Errorf("Cache-Control %q, Vary %q; want no-store and Cookie", w.Header().Get("Cache-Control"), w.Header().Get("Vary"))
	}

	w = httptest.NewRecorder()
	rig.c.Clear(w)
	del := setCookie(t, w, "__Host-session")
	if del == nil || del.Value != "" || del.MaxAge >= 0 || !del.Secure || !del.HttpOnly || del.Path != "/" {
		t.Errorf("Clear sent %q; want an empty __Host-session with Max-Age=0, Secure, Path=/", w.Header().Values("Set-Cookie"))
	}

	// Persistent: until the session's absolute expiry, with another name
	// and SameSite.
	p := newCookieRig(t, b, CookieOptions{Name: "sid", SameSite: http.SameSiteStrictMode, Persistent: true, Domain: "example.com"})
	w = httptest.NewRecorder()
	s, err = p.c.Issue(w, httptest.NewRequest("POST", "/login", nil), user, Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	ck = setCookie(t, w, "sid")
	if ck == nil || ck.SameSite != http.SameSiteStrictMode || ck.Domain != "example.com" || !ck.Secure || !ck.HttpOnly ||
		ck.Expires.Unix() != s.AbsoluteExpiresAt.Unix() || ck.MaxAge < int(DefaultAbsoluteLifetime.Seconds())-60 {
		t.Errorf("persistent cookie %q; session ends at %v", w.Header().Values("Set-Cookie"), s.AbsoluteExpiresAt)
	}
}

// TestCookieMiddleware sends requests with the cookie, a header, both and
// neither through the middleware.
func TestCookieMiddleware(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		rig := newCookieRig(t, b, CookieOptions{TrustedOrigins: []string{"https://app.example.com"}})
		gen := newGen(t)
		user := userID(t, gen)
		cookieTok, cookieS := rig.login(t, user)
		headerTok, headerS := issue(t, rig.m, userID(t, gen), Metadata{})
		revoked, _ := rig.login(t, user)
		if err := rig.m.Revoke(t.Context(), revoked); err != nil {
			t.Fatal(err)
		}
		bearer := [2]string{"Authorization", "Bearer " + headerTok}
		const (
			challenge = `Bearer realm="api"`
			invalid   = `Bearer realm="api", error="invalid_token"`
			malformed = `Bearer realm="api", error="invalid_request"`
		)
		tests := []struct {
			name      string
			r         *http.Request
			status    int
			session   Session // whose session the handler sees
			challenge string
			clears    bool // the answer deletes the cookie
		}{
			{"cookie", request("GET", "", cookieTok), 200, cookieS, "", false},
			{"cookie, same-origin POST", request("POST", "same-origin", cookieTok), 200, cookieS, "", false},
			{"cookie, POST typed in the address bar", request("POST", "none", cookieTok), 200, cookieS, "", false},
			{"cookie, POST from a client that is no browser", request("POST", "", cookieTok), 200, cookieS, "", false},
			{"cookie, cross-site GET", request("GET", "cross-site", cookieTok), 200, cookieS, "", false},
			{"cookie, cross-site POST", request("POST", "cross-site", cookieTok), 403, Session{}, "", false},
			{"cookie, same-site POST from another origin", request("DELETE", "same-site", cookieTok), 403, Session{}, "", false},
			{"cookie, POST from an old browser on another origin", request("POST", "", cookieTok, [2]string{"Origin", "https://evil.example"}), 403, Session{}, "", false},
			{"cookie, POST from a trusted origin", request("POST", "cross-site", cookieTok, [2]string{"Origin", "https://app.example.com"}), 200, cookieS, "", false},
			{"header", request("POST", "", "", bearer), 200, headerS, "", false},
			{"header and cookie: the header decides", request("POST", "", cookieTok, bearer), 200, headerS, "", false},
			{"header and cookie, cross-site: the header decides", request("POST", "cross-site", cookieTok, bearer), 200, headerS, "", false},
			{"revoked header and a valid cookie", request("GET", "", cookieTok, [2]string{"Authorization", "Bearer " + revoked}), 401, Session{}, invalid, false},
			{"revoked cookie", request("GET", "", revoked), 401, Session{}, invalid, true},
			{"junk cookie", request("GET", "", "junk"), 401, Session{}, invalid, true},
			{"revoked cookie, cross-site POST", request("POST", "cross-site", revoked), 403, Session{}, "", false},
			{"no credentials", request("POST", "same-origin", ""), 401, Session{}, challenge, false},
			{"empty cookie", request("GET", "", "", [2]string{"Cookie", DefaultCookieName + "="}), 401, Session{}, challenge, false},
			{"the cookie twice", request("GET", "", cookieTok, [2]string{"Cookie", DefaultCookieName + "=" + revoked}), 400, Session{}, malformed, false},
			{"a malformed header and a cookie", request("GET", "", cookieTok, [2]string{"Authorization", "Bearer"}), 400, Session{}, malformed, false},
		}
		validations := func() uint64 {
			s := rig.m.Stats()
			return s.ValidationsOK + s.ValidationsInvalid + s.ValidationsUnavailable
		}
		for _, tt := range tests {
			before := validations()
			w := rig.serve(tt.r)
			if w.Code != tt.status {
				t.Errorf("%s: status %d, want %d (%s)", tt.name, w.Code, tt.status, w.Body)
				continue
			}
			if rig.reached != (tt.status == 200) || rig.got != tt.session {
				t.Errorf("%s: handler reached %v with session %d, want session %d", tt.name, rig.reached, rig.got.ID, tt.session.ID)
			}
			if c := w.Header().Get("WWW-Authenticate"); c != tt.challenge {
				t.Errorf("%s: WWW-Authenticate %q, want %q", tt.name, c, tt.challenge)
			}
			if del := setCookie(t, w, DefaultCookieName); (del != nil && del.MaxAge < 0) != tt.clears {
				t.Errorf("%s: Set-Cookie %q; want the cookie deleted: %v", tt.name, w.Header().Values("Set-Cookie"), tt.clears)
			}
			if w.Header().Get("Vary") != "Cookie" {
				t.Errorf("%s: Vary %q, want Cookie", tt.name, w.Header().Get("Vary"))
			}
			// A refused cross-origin request costs no Redis round trip.
			if tt.status == 403 && validations() != before {
				t.Errorf("%s: refused after a validation", tt.name)
			}
		}
		if out := rig.logs.String(); !strings.Contains(out, "cross-origin request refused") || strings.Contains(out, cookieTok) {
			t.Errorf("logs: the refusals are missing, or a token is there:\n%s", out)
		}
	})
}

// TestCookieCrossOrigin is the forgery the cross-origin check stops: a
// page on another origin makes the browser post with the user's cookie.
// The middleware refuses it, and so do Issue (a forced login into the
// attacker's account), Rotate and Revoke (a forced logout). The control
// run, with the check off, sees each request get through.
func TestCookieCrossOrigin(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		for _, control := range []bool{false, true} {
			t.Run(map[bool]string{false: "checked", true: "control"}[control], func(t *testing.T) {
				rig := newCookieRig(t, b, CookieOptions{})
				rig.c.setDefences(cookieDefences{noCrossOriginCheck: control})
				gen := newGen(t)
				user := userID(t, gen)
				tok, s := rig.login(t, user)
				forged := func(method string) *http.Request {
					return request(method, "cross-site", tok, [2]string{"Origin", "https://evil.example"})
				}

				w := rig.serve(forged("POST"))
				if control {
					if w.Code != 200 || rig.got.ID != s.ID {
						t.Errorf("control: the forged POST got %d; want it served as the user", w.Code)
					}
				} else if w.Code != 403 || rig.reached {
					t.Errorf("the forged POST got %d, handler reached %v; want 403", w.Code, rig.reached)
				}

				w = httptest.NewRecorder()
				_, err := rig.c.Issue(w, forged("POST"), userID(t, gen), Metadata{})
				checkForged(t, control, "Issue", err, w)

				w = httptest.NewRecorder()
				_, err = rig.c.Rotate(w, forged("POST"))
				checkForged(t, control, "Rotate", err, w)
				if control {
					tok = setCookie(t, w, DefaultCookieName).Value
				}

				w = httptest.NewRecorder()
				err = rig.c.Revoke(w, forged("POST"))
				checkForged(t, control, "Revoke", err, w)
				_, err = rig.m.Validate(t.Context(), tok)
				if control != errors.Is(err, ErrInvalidToken) {
					t.Errorf("after the forged logout the session validates with %v", err)
				}
			})
		}
	})
}

// checkForged checks the outcome of a forged Issue, Rotate or Revoke:
// ErrCrossOrigin and no cookie, or, in the control run, success and a
// cookie set or deleted.
func checkForged(t *testing.T, control bool, op string, err error, w *httptest.ResponseRecorder) {
	t.Helper()
	set := len(w.Header().Values("Set-Cookie"))
	switch {
	case control && (err != nil || set != 1):
		t.Errorf("control: forged %s: %v, %d Set-Cookie; want it done", op, err, set)
	case !control && (!errors.Is(err, ErrCrossOrigin) || set != 0):
		t.Errorf("forged %s: %v, %d Set-Cookie; want ErrCrossOrigin and no cookie", op, err, set)
	}
}

// TestCookieRotateRevoke logs in, rotates and logs out through the
// cookie helpers, as login and logout handlers do.
func TestCookieRotateRevoke(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		rig := newCookieRig(t, b, CookieOptions{})
		user := userID(t, newGen(t))
		tok, s := rig.login(t, user)

		w := httptest.NewRecorder()
		ns, err := rig.c.Rotate(w, request("POST", "same-origin", tok))
		nc := setCookie(t, w, DefaultCookieName)
		if err != nil || nc == nil || nc.Value == tok || ns.ID == s.ID || ns.UserID != user {
			t.Fatalf("Rotate: %+v, %v, cookie %q", ns, err, w.Header().Values("Set-Cookie"))
		}
		if _, err := rig.m.Validate(t.Context(), tok); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("the rotated-out token validates: %v", err)
		}
		// Rotating the old token again fails, and deletes the cookie.
		w = httptest.NewRecorder()
		if _, err := rig.c.Rotate(w, request("POST", "same-origin", tok)); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("Rotate of a rotated-out token: %v", err)
		}
		if del := setCookie(t, w, DefaultCookieName); del == nil || del.MaxAge >= 0 {
			t.Errorf("Rotate of a dead token left the cookie: %q", w.Header().Values("Set-Cookie"))
		}

		w = httptest.NewRecorder()
		if err := rig.c.Revoke(w, request("POST", "same-origin", nc.Value)); err != nil {
			t.Fatalf("Revoke: %v", err)
		}
		if del := setCookie(t, w, DefaultCookieName); del == nil || del.MaxAge >= 0 {
			t.Errorf("Revoke did not delete the cookie: %q", w.Header().Values("Set-Cookie"))
		}
		if _, err := rig.m.Validate(t.Context(), nc.Value); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("the token validates after Revoke: %v", err)
		}
		// A logout without the cookie, or a repeated one: ErrInvalidToken,
		// and the cookie deleted all the same.
		for _, v := range []string{"", nc.Value} {
			w = httptest.NewRecorder()
			if err := rig.c.Revoke(w, request("POST", "same-origin", v)); !errors.Is(err, ErrInvalidToken) {
				t.Errorf("Revoke with cookie %q: %v, want ErrInvalidToken", v, err)
			}
			if del := setCookie(t, w, DefaultCookieName); del == nil || del.MaxAge >= 0 {
				t.Errorf("Revoke with cookie %q left it: %q", v, w.Header().Values("Set-Cookie"))
			}
		}
	})
}

// TestCookieUnavailable: with Redis down, the middleware answers 503 and
// keeps the cookie, and Revoke keeps it for the retry.
func TestCookieUnavailable(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, []backend{miniBackend, singleBackend}, func(t *testing.T, b backend) {
		rig := newCookieRig(t, b, CookieOptions{})
		tok, _ := rig.login(t, userID(t, newGen(t)))
		if err := rig.m.rdb.Close(); err != nil {
			t.Fatal(err)
		}
		w := rig.serve(request("GET", "", tok))
		if w.Code != 503 || len(w.Header().Values("Set-Cookie")) != 0 {
			t.Errorf("Redis down: %d, Set-Cookie %q; want 503 and the cookie kept", w.Code, w.Header().Values("Set-Cookie"))
		}
		w = httptest.NewRecorder()
		if err := rig.c.Revoke(w, request("POST", "", tok)); !errors.Is(err, ErrUnavailable) || len(w.Header().Values("Set-Cookie")) != 0 {
			t.Errorf("Revoke with Redis down: %v, Set-Cookie %q; want ErrUnavailable and the cookie kept", err, w.Header().Values("Set-Cookie"))
		}
	})
}

func TestCookieOptions(t *testing.T) {
	m := newManager(t, miniClient(t), newGen(t), Options{})
	c, err := NewCookies(m, CookieOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := c.Options(); o.Name != DefaultCookieName || o.Path != "/" || o.Domain != "" || o.SameSite != http.SameSiteLaxMode || o.Persistent {
		t.Errorf("the zero CookieOptions became %+v", o)
	}
	tests := []struct {
		name  string
		opts  CookieOptions
		field string
	}{
		{"Name with a space", CookieOptions{Name: "a b"}, "Name"},
		{"Name with =", CookieOptions{Name: "a=b"}, "Name"},
		{"Name with ;", CookieOptions{Name: "a;b"}, "Name"},
		{"Path without /", CookieOptions{Name: "sid", Path: "api"}, "Path"},
		{"Path with ;", CookieOptions{Name: "sid", Path: "/a;b"}, "Path"},
		{"__Host- with a Path", CookieOptions{Path: "/api"}, "Path"},
		{"__host- with a Domain", CookieOptions{Name: "__host-x", Domain: "example.com"}, "Domain"},
		{"Domain with a slash", CookieOptions{Name: "sid", Domain: "example.com/x"}, "Domain"},
		{"Domain with an empty label", CookieOptions{Name: "sid", Domain: "example..com"}, "Domain"},
		{"SameSite default mode", CookieOptions{SameSite: http.SameSiteDefaultMode}, "SameSite"},
		{"SameSite 9", CookieOptions{SameSite: 9}, "SameSite"},
		{"TrustedOrigins with a path", CookieOptions{TrustedOrigins: []string{"https://a.example/"}}, "TrustedOrigins"},
		{"TrustedOrigins without a scheme", CookieOptions{TrustedOrigins: []string{"a.example"}}, "TrustedOrigins"},
		{"TrustedOrigins with user info", CookieOptions{TrustedOrigins: []string{"https://u@a.example"}}, "TrustedOrigins"},
		{"TrustedOrigins with a query", CookieOptions{TrustedOrigins: []string{"https://a.example?x"}}, "TrustedOrigins"},
	}
	for _, tt := range tests {
		c, err := NewCookies(m, tt.opts)
		if !errors.Is(err, idtype.ErrInvalidOptions) || !strings.Contains(err.Error(), tt.field) || c != nil {
			t.Errorf("%s: NewCookies = %v, want idtype.ErrInvalidOptions naming %s", tt.name, err, tt.field)
		}
	}
	if _, err := NewCookies(nil, CookieOptions{}); !errors.Is(err, idtype.ErrInvalidOptions) {
		t.Errorf("nil Manager: %v", err)
	}
	other := newManager(t, miniClient(t), newGen(t), Options{})
	if _, err := NewMiddleware(other, MiddlewareOptions{Cookies: c}); !errors.Is(err, idtype.ErrInvalidOptions) || !strings.Contains(err.Error(), "Cookies") {
		t.Errorf("Cookies of another Manager: %v", err)
	}
	// The options in force are a copy: changing them changes nothing.
	c, err = NewCookies(m, CookieOptions{TrustedOrigins: []string{"https://a.example"}})
	if err != nil {
		t.Fatal(err)
	}
	c.Options().TrustedOrigins[0] = "https://evil.example"
	if got := c.Options().TrustedOrigins[0]; got != "https://a.example" {
		t.Errorf("Options() shares its slice: %q", got)
	}
}

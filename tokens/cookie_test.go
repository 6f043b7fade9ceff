package tokens

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
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
	return newCookieRigWith(t, b, Options{}, defences{}, opts, cookieDefences{})
}

// newCookieRigWith is newCookieRig with a Manager of the options mo and
// the defences in mOff switched off, and the cookie transport's defences
// in off switched off.
func newCookieRigWith(t *testing.T, b backend, mo Options, mOff defences, opts CookieOptions, off cookieDefences) *cookieRig {
	t.Helper()
	rig := &cookieRig{m: openManagerWithout(t, b.client(t), newGen(t), mo, mOff)}
	c, err := newCookiesWithout(rig.m, opts, off)
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
	p := newCookieRig(t, b, CookieOptions{Name: "__Secure-sid", SameSite: http.SameSiteStrictMode, Persistent: true, Domain: "example.com"})
	w = httptest.NewRecorder()
	s, err = p.c.Issue(w, httptest.NewRequest("POST", "/login", nil), user, Metadata{})
	if err != nil {
		t.Fatal(err)
	}
	ck = setCookie(t, w, "__Secure-sid")
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
			{"the cookie twice", request("GET", "", cookieTok, [2]string{"Cookie", DefaultCookieName + "=" + revoked}), 401, Session{}, invalid, true},
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
				rig := newCookieRigWith(t, b, Options{}, defences{}, CookieOptions{}, cookieDefences{noCrossOriginCheck: control})
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
		// Within the grace window, rotating the old token again (a
		// double click) sets the same cookie.
		w = httptest.NewRecorder()
		if again, err := rig.c.Rotate(w, request("POST", "same-origin", tok)); err != nil || again.ID != ns.ID {
			t.Errorf("Rotate of the rotated-out token: %+v, %v; want session %d", again, err, ns.ID)
		}
		if again := setCookie(t, w, DefaultCookieName); again == nil || again.Value != nc.Value {
			t.Errorf("Rotate of the rotated-out token set %q, want the new token again", w.Header().Values("Set-Cookie"))
		}
		// Rotating a dead token fails, and deletes the cookie.
		dead, _ := rig.login(t, user)
		if err := rig.m.Revoke(t.Context(), dead); err != nil {
			t.Fatal(err)
		}
		w = httptest.NewRecorder()
		if _, err := rig.c.Rotate(w, request("POST", "same-origin", dead)); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("Rotate of a revoked token: %v", err)
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
	m := openManager(t, miniClient(t), newGen(t), Options{})
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
		{"Name with a space", CookieOptions{Name: "a b", AcceptCookieTossing: true}, "Name"},
		{"Name with =", CookieOptions{Name: "a=b", AcceptCookieTossing: true}, "Name"},
		{"Name with ;", CookieOptions{Name: "a;b", AcceptCookieTossing: true}, "Name"},
		{"Name without a prefix", CookieOptions{Name: "sid"}, "AcceptCookieTossing"},
		{"Name with a prefix inside", CookieOptions{Name: "x__Secure-sid"}, "AcceptCookieTossing"},
		{"Path without /", CookieOptions{Name: "__Secure-sid", Path: "api"}, "Path"},
		{"Path with ;", CookieOptions{Name: "__Secure-sid", Path: "/a;b"}, "Path"},
		{"__Host- with a Path", CookieOptions{Path: "/api"}, "Path"},
		{"__host- with a Domain", CookieOptions{Name: "__host-x", Domain: "example.com"}, "Domain"},
		{"Domain with a slash", CookieOptions{Name: "__Secure-sid", Domain: "example.com/x"}, "Domain"},
		{"Domain with an empty label", CookieOptions{Name: "__Secure-sid", Domain: "example..com"}, "Domain"},
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
	other := openManager(t, miniClient(t), newGen(t), Options{})
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

// TestCookieCrossSiteGet: Issue, Rotate and Revoke refuse a request that
// a page on another origin made the browser send whatever its method: a
// link to a login URL planted on another site (which would log the
// browser in to the attacker's account), a GET logout, an image that
// rotates. What passes: the app's own pages, the user's own navigation
// (typed, bookmarked, or from a mail program), clients that are no
// browser, and a trusted origin's fetch, which carries Origin. The
// middleware serves GETs from other sites all the same (see
// TestCookieMiddleware), so that links into the app work. The control,
// which checks unsafe methods only, as http.CrossOriginProtection does,
// logs the browser in to the attacker's account from a link.
func TestCookieCrossSiteGet(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		for _, control := range []bool{false, true} {
			t.Run(map[bool]string{false: "checked", true: "control"}[control], func(t *testing.T) {
				rig := newCookieRigWith(t, b, Options{}, defences{}, CookieOptions{TrustedOrigins: []string{"https://app.example.com"}},
					cookieDefences{unsafeMethodsOnly: control})
				gen := newGen(t)
				victim, attacker := userID(t, gen), userID(t, gen)
				tests := []struct {
					name    string
					r       func(tok string) *http.Request
					refused bool
				}{
					{"a link on another site", func(tok string) *http.Request { return request("GET", "cross-site", tok) }, true},
					{"a link on a sibling subdomain", func(tok string) *http.Request { return request("GET", "same-site", tok) }, true},
					{"a HEAD from another site", func(tok string) *http.Request { return request("HEAD", "cross-site", tok) }, true},
					{"a fetch from another origin, old browser", func(tok string) *http.Request {
						return request("GET", "", tok, [2]string{"Origin", "https://evil.example"})
					}, true},
					{"the app's own page", func(tok string) *http.Request { return request("GET", "same-origin", tok) }, false},
					{"typed, bookmarked, or from a mail program", func(tok string) *http.Request { return request("GET", "none", tok) }, false},
					{"no browser", func(tok string) *http.Request { return request("GET", "", tok) }, false},
					{"a trusted origin's fetch", func(tok string) *http.Request {
						return request("GET", "cross-site", tok, [2]string{"Origin", "https://app.example.com"})
					}, false},
				}
				forged := 0
				for _, tt := range tests {
					tok, s := rig.login(t, victim)
					refuse := tt.refused && !control
					check := func(op string, err error, w *httptest.ResponseRecorder) {
						t.Helper()
						set := len(w.Header().Values("Set-Cookie"))
						switch {
						case refuse && (!errors.Is(err, ErrCrossOrigin) || set != 0):
							t.Errorf("%s: %s = %v, %d Set-Cookie; want ErrCrossOrigin and no cookie", tt.name, op, err, set)
						case !refuse && (err != nil || set != 1):
							t.Errorf("%s: %s = %v, %d Set-Cookie; want it done", tt.name, op, err, set)
						}
					}
					// A login into the attacker's account.
					w := httptest.NewRecorder()
					got, err := rig.c.Issue(w, tt.r(tok), attacker, Metadata{})
					check("Issue", err, w)
					if tt.refused && err == nil && got.UserID == attacker {
						forged++
					}
					w = httptest.NewRecorder()
					_, err = rig.c.Rotate(w, tt.r(tok))
					check("Rotate", err, w)
					if err == nil {
						tok = setCookie(t, w, DefaultCookieName).Value
					}
					w = httptest.NewRecorder()
					err = rig.c.Revoke(w, tt.r(tok))
					check("Revoke", err, w)
					if _, verr := rig.m.Validate(t.Context(), tok); refuse != (verr == nil) {
						t.Errorf("%s: after the logout the victim's session %d validates with %v", tt.name, s.ID, verr)
					}
				}
				if control && forged == 0 {
					t.Errorf("control: no link from another site logged the browser in to the attacker's account: the test does not reach the fault")
				}
			})
		}
	})
}

// tossed returns the cookie a page on evil.example.com sets for the whole
// of example.com, under the name of the session cookie, with the
// attacker's token: the browser then sends it to app.example.com beside
// the user's own, first on the paths under /api.
func tossed(name, token string) *http.Cookie {
	return &http.Cookie{Name: name, Value: token, Domain: "example.com", Path: "/api", Secure: true, HttpOnly: true}
}

// TestCookieTossing: a page on a sibling subdomain sets a cookie of the
// session cookie's name for the parent domain, holding a session of the
// attacker's. A request that carries both is not served as either: every
// copy's session ends and every copy is deleted, and the answer says so
// (401; ErrDuplicateCookie from Rotate and Revoke). A login deletes the
// planted copy beside setting the new one. The control, which answers
// such requests as malformed and ends or deletes nothing, leaves the
// browser with two cookies after a login, and after a logout with the
// attacker's alone: the next request is served as the attacker.
func TestCookieTossing(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	const name = "__Secure-session"
	evil, _ := url.Parse("https://evil.example.com/")
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		for _, control := range []bool{false, true} {
			t.Run(map[bool]string{false: "defended", true: "control"}[control], func(t *testing.T) {
				rig := newCookieRigWith(t, b, Options{}, defences{}, CookieOptions{Name: name}, cookieDefences{noDuplicateClear: control})
				gen := newGen(t)
				// setUp logs the victim in and tosses the attacker's
				// cookie in; it returns the two tokens.
				setUp := func() (*browser, string, string) {
					br := newBrowser(t)
					w := httptest.NewRecorder()
					if _, err := rig.c.Issue(w, br.request("POST", "/api/login"), userID(t, gen), Metadata{}); err != nil {
						t.Fatal(err)
					}
					br.answer(w)
					mine := br.held(name)
					attackers, _ := issue(t, rig.m, userID(t, gen), Metadata{})
					br.jar.SetCookies(evil, []*http.Cookie{tossed(name, attackers)})
					if n := len(br.held(name)); n != 2 || len(mine) != 1 {
						t.Fatalf("the browser holds %d session cookies after the toss, want 2", n)
					}
					return br, mine[0], attackers
				}
				valid := func(tok string) bool {
					_, err := rig.m.Validate(t.Context(), tok)
					return err == nil
				}

				// A request of the app's own page.
				br, mine, theirs := setUp()
				w := rig.serve(br.request("GET", "/api/posts"))
				br.answer(w)
				switch held := br.held(name); {
				case control:
					if w.Code != 400 || len(held) != 2 {
						t.Errorf("control: %d, %d cookies held; want 400 and both kept", w.Code, len(held))
					}
				case w.Code != 401 || rig.reached || len(held) != 0 || valid(mine) || valid(theirs) ||
					!strings.Contains(w.Body.String(), "more than once"):
					t.Errorf("a request with both cookies: %d %q, handler reached %v, %d cookies held, sessions live %v and %v; "+
						"want 401 saying so, both deleted and ended", w.Code, w.Body, rig.reached, len(held), valid(mine), valid(theirs))
				}

				// Logging out.
				br, mine, _ = setUp()
				w = httptest.NewRecorder()
				err := rig.c.Revoke(w, br.request("POST", "/api/logout"))
				br.answer(w)
				w = rig.serve(br.request("GET", "/api/posts"))
				switch {
				case control:
					if w.Code != 200 || rig.got.UserID == 0 {
						t.Errorf("control: after the logout the next request got %d: the test does not reach the fault", w.Code)
					}
				case !errors.Is(err, ErrDuplicateCookie) || !errors.Is(err, ErrInvalidToken) || valid(mine) || len(br.held(name)) != 0 || w.Code != 401 || rig.reached:
					t.Errorf("logout with both cookies: %v; own session live %v, %d cookies held; the next request %d (reached %v)",
						err, valid(mine), len(br.held(name)), w.Code, rig.reached)
				}

				// Rotating.
				br, _, _ = setUp()
				w = httptest.NewRecorder()
				_, err = rig.c.Rotate(w, br.request("POST", "/api/reauth"))
				br.answer(w)
				if !control && (!errors.Is(err, ErrDuplicateCookie) || len(br.held(name)) != 0) {
					t.Errorf("Rotate with both cookies: %v, %d cookies held; want ErrDuplicateCookie and none", err, len(br.held(name)))
				}

				// Logging in again.
				br, _, _ = setUp()
				w = httptest.NewRecorder()
				s, err := rig.c.Issue(w, br.request("POST", "/api/login"), userID(t, gen), Metadata{})
				br.answer(w)
				held := br.held(name)
				switch {
				case err != nil:
					t.Fatal(err)
				case control:
					if len(held) != 2 {
						t.Errorf("control: a login left %d cookies: the test does not reach the fault", len(held))
					}
				case len(held) != 1:
					t.Errorf("a login with a planted cookie left %d cookies, want its own alone", len(held))
				default:
					if got, err := rig.m.Validate(t.Context(), held[0]); err != nil || got.ID != s.ID {
						t.Errorf("the cookie a login left: %+v, %v; want session %d", got, err, s.ID)
					}
				}
			})
		}
	})
}

// TestCookieNames: a name a sibling subdomain can set is refused unless
// AcceptCookieTossing says the app accepts that, and the prefixed names
// are taken in any case.
func TestCookieNames(t *testing.T) {
	m := openManager(t, miniClient(t), newGen(t), Options{})
	for _, tt := range []struct {
		opts CookieOptions
		ok   bool
	}{
		{CookieOptions{Name: "sid"}, false},
		{CookieOptions{Name: "session", Domain: "example.com"}, false},
		{CookieOptions{Name: "sid", AcceptCookieTossing: true}, true},
		{CookieOptions{Name: "session", Domain: "example.com", AcceptCookieTossing: true}, true},
		{CookieOptions{Name: "__Secure-sid"}, true},
		{CookieOptions{Name: "__SECURE-sid", Domain: "example.com"}, true},
		{CookieOptions{Name: "__host-sid"}, true},
		{CookieOptions{}, true},
	} {
		_, err := NewCookies(m, tt.opts)
		if tt.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "AcceptCookieTossing")) {
			t.Errorf("NewCookies(%+v) = %v, want ok %v", tt.opts, err, tt.ok)
		}
	}
}

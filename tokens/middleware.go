package tokens

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/snowkeyhq/snowkey/idtype"
)

// MiddlewareOptions configures the middleware that NewMiddleware returns.
// Like Options, its zero value is a working configuration: every field's
// zero value is a documented default, and Manager.Middleware is the
// middleware of the zero MiddlewareOptions.
type MiddlewareOptions struct {
	// Header names one more request header that the middleware reads a
	// token from, holding the bare token, such as "X-Session-Token". Zero
	// means none: only Authorization: Bearer is read, which is always
	// read; the query string never is. It must be a header name other
	// than Authorization.
	Header string

	// Realm is the realm of the WWW-Authenticate challenges. Zero means
	// DefaultRealm, "api". It must not hold '"', '\' or control
	// characters.
	Realm string

	// Logger receives the middleware's log lines: rejected tokens and
	// refused cross-origin requests at Debug (naming the session ID, never
	// the token) and store failures at Error. Zero (nil) means
	// slog.Default(), as it is when the middleware is made.
	Logger *slog.Logger

	// Cookies, when set, makes the middleware also read the token from the
	// cookie that Cookies sets, for browsers: a request without a token in
	// a header is authenticated by the cookie. Such a request is refused
	// with 403 if it is unsafe (not GET, HEAD or OPTIONS) and a page on
	// another origin made the browser send it (see Cookies.CheckOrigin);
	// one whose cookie is not valid is answered 401 with a Set-Cookie that
	// deletes it, since script cannot; one whose cookie Rotate replaced
	// within Options.RotationGrace is served as the new session, with a
	// Set-Cookie of the new token, in case the rotation's answer never
	// reached the browser; one that carries the cookie more than once is
	// answered 401 after the session of every copy is ended and every copy
	// deleted (see ErrDuplicateCookie), unless a page on another origin
	// sent it. A request with a token in a header is authenticated by the
	// header alone, whatever cookie it carries: the header is what the
	// client chose to send, and no page on another origin can add one.
	// Zero (nil) means no cookie is read. It must belong to the
	// middleware's Manager.
	//
	// GET, HEAD and OPTIONS requests with the cookie pass from any
	// origin, so that a link from another site into the app finds the
	// user logged in; so the handlers of those methods must only read.
	// They must not change data, and must not log in, rotate or log out:
	// Cookies.Issue, Rotate and Revoke refuse a request from another
	// origin whatever its method, and a handler that changes anything on
	// a safe method must call Cookies.CheckOrigin first and answer 403
	// when it fails.
	Cookies *Cookies
}

// DefaultRealm is the default MiddlewareOptions.Realm.
const DefaultRealm = "api"

// withDefaults fills in the zero fields and checks the result.
func (o MiddlewareOptions) withDefaults() (MiddlewareOptions, error) {
	if o.Realm == "" {
		o.Realm = DefaultRealm
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.Header != "" && !isHeaderName(o.Header):
		return o, fmt.Errorf("%w: Header %q is not a header name", idtype.ErrInvalidOptions, o.Header)
	case strings.EqualFold(o.Header, "Authorization"):
		return o, fmt.Errorf("%w: Header is Authorization, which is always read", idtype.ErrInvalidOptions)
	case !isRealm(o.Realm):
		return o, fmt.Errorf("%w: Realm %q holds '\"', '\\' or a control character", idtype.ErrInvalidOptions, o.Realm)
	}
	o.Header = http.CanonicalHeaderKey(o.Header)
	return o, nil
}

// middleware is what NewMiddleware and Manager.Middleware wrap handlers
// with.
type middleware struct {
	m    *Manager
	opts MiddlewareOptions
}

// Middleware authenticates every request before next sees it, with the
// zero MiddlewareOptions: the token is read from "Authorization: Bearer",
// challenges name the realm "api", and log lines go to slog.Default().
// NewMiddleware makes one with other options. The answers:
//
//   - no token (no Authorization header, or another scheme such as Basic):
//     401 with WWW-Authenticate: Bearer realm="…" and no error code;
//   - a malformed header, a Bearer scheme without a token, or a token sent
//     in more than one header: 400 with error="invalid_request";
//   - a token that is malformed, unknown, expired or revoked: 401 with
//     error="invalid_token";
//   - Redis unreachable or failing: 503, with no detail in the response
//     (fail closed);
//   - a valid token: next, with the Session in the request's context (see
//     FromContext).
//
// It logs rejected tokens at Debug and store failures at Error, naming the
// session ID (public) and never the token.
func (m *Manager) Middleware(next http.Handler) http.Handler {
	mw, _ := newMiddleware(m, MiddlewareOptions{}) // the zero options pass every check
	return mw.wrap(next)
}

// NewMiddleware returns the middleware of Manager.Middleware configured by
// opts: it reads the token from "Authorization: Bearer <token>" (RFC
// 6750), or from opts.Header if set, or, with opts.Cookies, from the
// cookie, never from the query string, and answers as Manager.Middleware
// says, plus 403 for a cross-origin request authenticated by the cookie. The error wraps
// idtype.ErrInvalidOptions and names the bad field; m must not be nil.
//
//	auth, err := tokens.NewMiddleware(m, tokens.MiddlewareOptions{Header: "X-Session"})
//	…
//	mux.Handle("/api/", auth(api))
func NewMiddleware(m *Manager, opts MiddlewareOptions) (func(http.Handler) http.Handler, error) {
	mw, err := newMiddleware(m, opts)
	if err != nil {
		return nil, err
	}
	return mw.wrap, nil
}

func newMiddleware(m *Manager, opts MiddlewareOptions) (*middleware, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: the Manager is nil", idtype.ErrInvalidOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.Cookies != nil && o.Cookies.m != m {
		return nil, fmt.Errorf("%w: Cookies belongs to another Manager", idtype.ErrInvalidOptions)
	}
	return &middleware{m: m, opts: o}, nil
}

func (mw *middleware) wrap(next http.Handler) http.Handler {
	m, o := mw.m, &mw.opts
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var custom []string
		if o.Header != "" {
			custom = r.Header.Values(o.Header)
		}
		tok, res := parseCredentials(r.Header.Values("Authorization"), custom)
		fromCookie := false
		if c := o.Cookies; c != nil {
			// What the middleware answers depends on the cookie: no
			// cache may give one browser's answer to another.
			addVary(w.Header(), "Cookie")
			if res == credNone {
				tok, res = c.fromRequest(r)
				fromCookie = res == credToken
			}
		}
		if fromCookie || res == credDuplicate {
			if err := o.Cookies.checkUnsafe(r); err != nil {
				o.Logger.LogAttrs(r.Context(), slog.LevelDebug, "tokens: cross-origin request refused",
					slog.String("error", err.Error()))
				http.Error(w, "Forbidden: cross-origin request", http.StatusForbidden)
				return
			}
		}
		switch res {
		case credNone:
			mw.challenge(w, http.StatusUnauthorized, "")
			return
		case credMalformed:
			o.Logger.LogAttrs(r.Context(), slog.LevelDebug, "tokens: malformed credentials")
			mw.challenge(w, http.StatusBadRequest, "invalid_request")
			return
		case credDuplicate:
			mw.duplicate(w, r)
			return
		}
		s, newer, err := m.validate(r.Context(), tok)
		if err == nil {
			if fromCookie && newer != "" {
				o.Cookies.Set(w, newer, s)
			}
			next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), s)))
			return
		}
		attrs := make([]slog.Attr, 0, 2)
		// The session ID is public: it names the session in the logs
		// without giving away the token.
		if t, ok := parseToken(m.opts.TokenPrefix, tok); ok {
			attrs = append(attrs, slog.Int64("session", int64(t.session)))
		}
		switch {
		case errors.Is(err, ErrInvalidToken):
			o.Logger.LogAttrs(r.Context(), slog.LevelDebug, "tokens: token rejected", attrs...)
			if fromCookie {
				o.Cookies.Clear(w)
			}
			mw.challenge(w, http.StatusUnauthorized, "invalid_token")
		case r.Context().Err() != nil:
			// The client is gone; nobody reads the answer.
			o.Logger.LogAttrs(r.Context(), slog.LevelDebug, "tokens: request ended during validation", attrs...)
			http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
		default:
			attrs = append(attrs, slog.String("error", err.Error()))
			o.Logger.LogAttrs(r.Context(), slog.LevelError, "tokens: session store unavailable", attrs...)
			http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
		}
	})
}

// duplicate answers a request that carries the session cookie more than
// once: 401 once every copy is ended and deleted, 503 if Redis could not
// end them (the cookies stay, for the retry). A request that a page on
// another origin made the browser send is answered 401 and changes
// nothing, since no other site may log the user out; the next request of
// the app's own pages does.
func (mw *middleware) duplicate(w http.ResponseWriter, r *http.Request) {
	c, log := mw.opts.Cookies, mw.opts.Logger
	if c.defences.noDuplicateClear {
		log.LogAttrs(r.Context(), slog.LevelDebug, "tokens: malformed credentials")
		mw.challenge(w, http.StatusBadRequest, "invalid_request")
		return
	}
	if err := c.CheckOrigin(r); err != nil {
		log.LogAttrs(r.Context(), slog.LevelDebug, "tokens: session cookie sent more than once, from another origin")
		mw.challenge(w, http.StatusUnauthorized, "invalid_token")
		return
	}
	err := c.endCopies(w, r)
	if !errors.Is(err, ErrDuplicateCookie) {
		log.LogAttrs(r.Context(), slog.LevelError, "tokens: session store unavailable", slog.String("error", err.Error()))
		http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
		return
	}
	log.LogAttrs(r.Context(), slog.LevelDebug, "tokens: session cookie sent more than once: every copy ended and deleted")
	w.Header().Set("WWW-Authenticate", `Bearer realm="`+mw.opts.Realm+`", error="invalid_token"`)
	http.Error(w, "Unauthorized: the session cookie came more than once; every copy is deleted, log in again", http.StatusUnauthorized)
}

// challenge answers with a Bearer challenge and, unless code is empty, an
// RFC 6750 error code.
func (mw *middleware) challenge(w http.ResponseWriter, status int, code string) {
	v := `Bearer realm="` + mw.opts.Realm + `"`
	if code != "" {
		v += `, error="` + code + `"`
	}
	w.Header().Set("WWW-Authenticate", v)
	http.Error(w, http.StatusText(status), status)
}

// credResult is what a request offers as credentials.
type credResult int

const (
	credNone      credResult = iota // no token
	credToken                       // exactly one token, of valid syntax
	credMalformed                   // a malformed header, or more than one token
	credDuplicate                   // the session cookie more than once
)

// parseCredentials finds the token in the values of the Authorization
// header and of the custom header (nil when none is configured). A token
// must be an RFC 6750 b64token; whether it is one of ours is Validate's
// business. It does not panic on any input.
func parseCredentials(auth, custom []string) (string, credResult) {
	var tok string
	found := 0
	switch len(auth) {
	case 0:
	case 1:
		scheme, rest, _ := strings.Cut(auth[0], " ")
		if !strings.EqualFold(scheme, "Bearer") {
			break // another scheme, or an empty header: no Bearer credentials
		}
		rest = strings.TrimLeft(rest, " ")
		if !isB64Token(rest) {
			return "", credMalformed
		}
		tok, found = rest, found+1
	default:
		return "", credMalformed
	}
	switch len(custom) {
	case 0:
	case 1:
		v := strings.Trim(custom[0], " \t")
		if v == "" {
			break
		}
		if !isB64Token(v) {
			return "", credMalformed
		}
		tok, found = v, found+1
	default:
		return "", credMalformed
	}
	switch found {
	case 0:
		return "", credNone
	case 1:
		return tok, credToken
	}
	return "", credMalformed // RFC 6750 §2: one method per request
}

// isB64Token reports whether s is an RFC 6750 b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || strings.IndexByte("-._~+/", c) >= 0) {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

type sessionKey struct{}

// NewContext returns a copy of ctx that carries the session, as Middleware
// passes it to handlers. Tests of handlers can use it to fake a login.
func NewContext(ctx context.Context, s Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// FromContext returns the session that Middleware validated for the
// request whose context ctx is, and false if there is none.
func FromContext(ctx context.Context) (Session, bool) {
	s, ok := ctx.Value(sessionKey{}).(Session)
	return s, ok
}

// isHeaderName reports whether s is an RFC 9110 token, the syntax of a
// field name.
func isHeaderName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isAlnum(string(c)) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return s != ""
}

func isRealm(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

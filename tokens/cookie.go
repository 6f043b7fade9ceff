package tokens

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// DefaultCookieName is the default CookieOptions.Name. Browsers keep a
// cookie whose name starts with "__Host-" only if it was set by a secure
// origin with Secure, Path=/ and no Domain, so neither a page on a
// sibling subdomain nor one served over plain HTTP can set or overwrite
// it.
const DefaultCookieName = "__Host-session"

// CookieOptions configures the cookie in which a browser carries its
// token, so that the token never reaches script: NewCookies takes it by
// value, the zero value of every field is a documented default, and a bad
// field makes NewCookies fail with an error wrapping
// idtype.ErrInvalidOptions that names it.
//
// The cookie is always HttpOnly (script cannot read it) and Secure (it is
// sent over HTTPS only; browsers also send it to http://localhost and
// http://127.0.0.1, which they count as secure, so development needs no
// certificate). Neither can be turned off.
type CookieOptions struct {
	// Name is the cookie's name. Zero means DefaultCookieName,
	// "__Host-session". It must be an RFC 6265 cookie name; one starting
	// with "__Host-" needs Path "/" and no Domain, as browsers require.
	Name string

	// Path limits the cookie to requests under it. Zero means "/". It
	// must start with '/' and hold no ';' or control characters.
	Path string

	// Domain, when set, sends the cookie to that domain's subdomains too.
	// Zero means none: the cookie goes back to the host that set it alone,
	// which is safer and which a "__Host-" name requires.
	Domain string

	// SameSite is the cookie's SameSite attribute. Zero means
	// http.SameSiteLaxMode: browsers send the cookie on requests from
	// other sites only for top-level navigations with a safe method.
	// http.SameSiteStrictMode and http.SameSiteNoneMode are the others;
	// http.SameSiteDefaultMode is refused, since browsers read its empty
	// value differently. SameSite does not tell origins of one site apart
	// (other ports, sibling subdomains): the cross-origin check does.
	SameSite http.SameSite

	// Persistent makes the cookie outlive the browser session, until the
	// session's AbsoluteExpiresAt. Zero (false) means a session cookie,
	// which the browser drops when it closes, as OWASP advises; the
	// server's idle timeout and absolute lifetime apply either way.
	Persistent bool

	// TrustedOrigins lists origins ("https://app.example.com", scheme,
	// host and port, no path) whose pages may send unsafe requests that
	// carry the cookie. Zero means none: only the server's own origin.
	TrustedOrigins []string
}

// withDefaults fills in the zero fields and checks the result.
func (o CookieOptions) withDefaults() (CookieOptions, error) {
	if o.Name == "" {
		o.Name = DefaultCookieName
	}
	if o.Path == "" {
		o.Path = "/"
	}
	if o.SameSite == 0 {
		o.SameSite = http.SameSiteLaxMode
	}
	bad := func(format string, args ...any) (CookieOptions, error) {
		return o, fmt.Errorf("%w: "+format, append([]any{idtype.ErrInvalidOptions}, args...)...)
	}
	hostPrefix := strings.HasPrefix(strings.ToLower(o.Name), "__host-")
	switch {
	case !isHeaderName(o.Name):
		return bad("Name %q is not an RFC 6265 cookie name", o.Name)
	case !strings.HasPrefix(o.Path, "/") || strings.ContainsFunc(o.Path, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ';' }):
		return bad("Path %q does not start with '/' or holds ';' or a control character", o.Path)
	case o.Domain != "" && !isDomain(o.Domain):
		return bad("Domain %q is not a domain name", o.Domain)
	case hostPrefix && o.Path != "/":
		return bad("Path %q: a __Host- cookie needs Path \"/\"", o.Path)
	case hostPrefix && o.Domain != "":
		return bad("Domain %q: a __Host- cookie takes no Domain", o.Domain)
	case o.SameSite != http.SameSiteLaxMode && o.SameSite != http.SameSiteStrictMode && o.SameSite != http.SameSiteNoneMode:
		return bad("SameSite %d is not Lax, Strict or None", o.SameSite)
	}
	o.TrustedOrigins = append([]string(nil), o.TrustedOrigins...)
	return o, nil
}

// isDomain reports whether s is a host name: dot-separated labels of
// letters, digits and '-', with an optional leading dot.
func isDomain(s string) bool {
	s = strings.TrimPrefix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !(isAlnum(string(c)) || c == '-') {
				return false
			}
		}
	}
	return true
}

// Cookies carries tokens to and from browsers in a cookie, beside the
// bearer header that apps use. NewCookies makes one; pass it to the
// middleware in MiddlewareOptions.Cookies, so that requests with the
// cookie are authenticated too, and call its Issue, Rotate and Revoke
// from the login and logout handlers, which set and clear the cookie.
//
// The token never appears where script can read it: not in the cookie
// (HttpOnly), and not in a response body, since Issue and Rotate return
// the session and not the token.
//
// A cookie is sent by the browser on every request to the server,
// including those a page on another origin makes it send: Cookies
// therefore refuses unsafe requests (any method but GET, HEAD and
// OPTIONS) from other origins that carry the cookie, with Go's
// http.CrossOriginProtection, which reads the browser's Sec-Fetch-Site
// header (or, from browsers before 2023, compares Origin with Host). The
// middleware answers them 403; Issue, Rotate and Revoke return an error
// wrapping ErrCrossOrigin. Requests authenticated by a header need no
// such check: a page on another origin cannot add one without a CORS
// preflight that the server grants.
//
// A Cookies is safe for any number of goroutines.
type Cookies struct {
	m    *Manager
	opts CookieOptions
	cop  *http.CrossOriginProtection
	def  cookieDefences
}

// cookieDefences are switches, one per defence of the cookie transport,
// that the package's own tests turn off for control runs. The zero value
// has every defence on.
type cookieDefences struct {
	// noCrossOriginCheck accepts the cookie on unsafe requests from any
	// origin, as a cookie session without a CSRF defence would.
	noCrossOriginCheck bool
}

// NewCookies returns the cookie transport of m's tokens, configured by
// opts (the zero CookieOptions is a working configuration). The error
// wraps idtype.ErrInvalidOptions and names the bad field; m must not be
// nil.
func NewCookies(m *Manager, opts CookieOptions) (*Cookies, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: the Manager is nil", idtype.ErrInvalidOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cop := http.NewCrossOriginProtection()
	for _, origin := range o.TrustedOrigins {
		if !isOrigin(origin) {
			return nil, fmt.Errorf("%w: TrustedOrigins %q is not an origin (scheme://host[:port], nothing after)",
				idtype.ErrInvalidOptions, origin)
		}
		if err := cop.AddTrustedOrigin(origin); err != nil {
			return nil, fmt.Errorf("%w: TrustedOrigins: %w", idtype.ErrInvalidOptions, err)
		}
	}
	// Refusals are the callers' to answer: the middleware answers 403,
	// Issue, Rotate and Revoke return ErrCrossOrigin.
	return &Cookies{m: m, opts: o, cop: cop}, nil
}

// isOrigin reports whether s is spelled as browsers send the Origin
// header: a scheme, "://" and a host with an optional port, and nothing
// after it (a trailing slash or a path would never match).
func isOrigin(s string) bool {
	scheme, host, ok := strings.Cut(s, "://")
	if !ok || scheme == "" || host == "" || strings.ContainsAny(host, "/?#@ \t") {
		return false
	}
	for i := 0; i < len(scheme); i++ {
		c := scheme[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && ('0' <= c && c <= '9' || strings.IndexByte("+-.", c) >= 0)) {
			return false
		}
	}
	return true
}

// Options returns the options in force, with every default filled in.
func (c *Cookies) Options() CookieOptions {
	o := c.opts
	o.TrustedOrigins = append([]string(nil), o.TrustedOrigins...)
	return o
}

// CheckOrigin returns an error wrapping ErrCrossOrigin if r is an unsafe
// request (not GET, HEAD or OPTIONS) that a page on another origin than
// the server's own, and not in CookieOptions.TrustedOrigins, made the
// browser send; nil otherwise. Requests that carry neither
// Sec-Fetch-Site nor Origin (any client but a browser) pass. The
// middleware and Issue, Rotate and Revoke call it; a handler that acts
// on the cookie by other means should too.
func (c *Cookies) CheckOrigin(r *http.Request) error {
	if c.def.noCrossOriginCheck {
		return nil
	}
	if err := c.cop.Check(r); err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrCrossOrigin, r.Method, r.URL.Path, err)
	}
	return nil
}

// Issue starts a session for the user, as Manager.Issue does, and sets
// the cookie that carries its token on w: call it from the login handler
// once the password has checked out, before the handler writes its
// answer. It returns the session, never the token, which the browser
// keeps where script cannot read it.
//
// It refuses a cross-origin request (ErrCrossOrigin), so that a page on
// another origin cannot log the browser in to an account of its choice;
// its other errors are Manager.Issue's. On error no cookie is set.
func (c *Cookies) Issue(w http.ResponseWriter, r *http.Request, userID idtype.ID, meta Metadata) (Session, error) {
	if err := c.CheckOrigin(r); err != nil {
		return Session{}, err
	}
	tok, s, err := c.m.Issue(r.Context(), userID, meta)
	if err != nil {
		return Session{}, err
	}
	c.Set(w, tok, s)
	return s, nil
}

// Rotate replaces the token of the request's cookie by a new one for the
// same session, as Manager.Rotate does, and sets the cookie to it: call
// it after the user re-authenticates or gains privileges. Its errors are
// ErrCrossOrigin, and those of Manager.Rotate; ErrInvalidToken (also for
// a request without the cookie) clears the cookie, an ErrUnavailable
// leaves it, so that the client can retry.
func (c *Cookies) Rotate(w http.ResponseWriter, r *http.Request) (Session, error) {
	if err := c.CheckOrigin(r); err != nil {
		return Session{}, err
	}
	tok, res := c.fromRequest(r)
	if res != credToken {
		c.Clear(w)
		return Session{}, ErrInvalidToken
	}
	nt, s, err := c.m.Rotate(r.Context(), tok)
	switch {
	case err == nil:
		c.Set(w, nt, s)
	case errors.Is(err, ErrInvalidToken):
		c.Clear(w)
	}
	return s, err
}

// Revoke ends the session of the request's cookie, as Manager.Revoke
// does, and clears the cookie: logging out. It returns ErrCrossOrigin
// without doing either for a cross-origin request, so that a page on
// another origin cannot log the user out. ErrInvalidToken (the session
// had ended, or the request had no cookie) clears the cookie too, and a
// logout handler may ignore it; an error wrapping ErrUnavailable leaves
// the cookie, so that the logout can be retried with it.
func (c *Cookies) Revoke(w http.ResponseWriter, r *http.Request) error {
	if err := c.CheckOrigin(r); err != nil {
		return err
	}
	tok, res := c.fromRequest(r)
	if res != credToken {
		c.Clear(w)
		return ErrInvalidToken
	}
	err := c.m.Revoke(r.Context(), tok)
	if err == nil || errors.Is(err, ErrInvalidToken) {
		c.Clear(w)
	}
	return err
}

// Set puts the cookie that carries token on w, for a token issued by
// other means than Issue and Rotate. It must run before the handler
// writes its answer. The answer is marked Cache-Control: no-store, so
// that no cache keeps the cookie, and Vary: Cookie.
func (c *Cookies) Set(w http.ResponseWriter, token string, s Session) {
	ck := c.cookie(token)
	if c.opts.Persistent {
		ck.Expires = s.AbsoluteExpiresAt.UTC()
		ck.MaxAge = max(1, int(math.Ceil(time.Until(s.AbsoluteExpiresAt).Seconds())))
	}
	c.write(w, ck)
}

// Clear puts a cookie on w that makes the browser delete the token's
// cookie. It must run before the handler writes its answer.
func (c *Cookies) Clear(w http.ResponseWriter) {
	ck := c.cookie("")
	ck.MaxAge = -1 // Max-Age=0: delete now
	ck.Expires = time.Unix(1, 0)
	c.write(w, ck)
}

// cookie returns the cookie of the options with the value v.
func (c *Cookies) cookie(v string) *http.Cookie {
	return &http.Cookie{
		Name:     c.opts.Name,
		Value:    v,
		Path:     c.opts.Path,
		Domain:   c.opts.Domain,
		Secure:   true,
		HttpOnly: true,
		SameSite: c.opts.SameSite,
	}
}

func (c *Cookies) write(w http.ResponseWriter, ck *http.Cookie) {
	h := w.Header()
	h.Add("Set-Cookie", ck.String())
	h.Set("Cache-Control", "no-store")
	addVary(h, "Cookie")
}

// fromRequest finds the token in the request's cookies: credNone
// without the cookie, credMalformed when it is there more than once (set
// for other paths or domains, as a page on a sibling subdomain can do
// with a name without the "__Host-" prefix), in which case which one is
// the user's is unknowable.
func (c *Cookies) fromRequest(r *http.Request) (string, credResult) {
	cs := r.CookiesNamed(c.opts.Name)
	switch len(cs) {
	case 0:
		return "", credNone
	case 1:
		if cs[0].Value == "" {
			return "", credNone
		}
		return cs[0].Value, credToken
	}
	return "", credMalformed
}

// addVary adds v to the Vary header unless it is there already.
func addVary(h http.Header, v string) {
	for _, line := range h.Values("Vary") {
		for f := range strings.SplitSeq(line, ",") {
			if strings.EqualFold(strings.TrimSpace(f), v) {
				return
			}
		}
	}
	h.Add("Vary", v)
}

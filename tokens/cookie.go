package tokens

import (
	"errors"
	"fmt"
	"math"
	"net"
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
	// "__Host-session". It must be an RFC 6265 cookie name starting with
	// "__Host-" or "__Secure-" (in any case), unless AcceptCookieTossing
	// is set. One starting with "__Host-" needs Path "/" and no Domain, as
	// browsers require, and no other page can set it. Browsers keep one
	// starting with "__Secure-" only from a secure origin, so no page on
	// plain HTTP (and no one on the network) can set it; but a page on a
	// sibling subdomain served over HTTPS can, for the parent domain: use
	// it with Domain, when the cookie must reach your subdomains and you
	// trust every page on them.
	Name string

	// AcceptCookieTossing allows a Name without the "__Host-" or
	// "__Secure-" prefix. Zero (false) refuses one: any page on a sibling
	// subdomain, or on plain HTTP on the same host, can set a cookie of
	// such a name for the browser to send to this server beside (or
	// instead of) the real one ("cookie tossing"), and so log the user in
	// to an account of its choosing. Set it only if no one but you serves
	// pages on the domain's subdomains, over HTTPS only. Whatever the
	// name, a request that carries the cookie more than once is refused
	// (see ErrDuplicateCookie).
	AcceptCookieTossing bool

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
	securePrefix := strings.HasPrefix(strings.ToLower(o.Name), "__secure-")
	switch {
	case !isHeaderName(o.Name):
		return bad("Name %q is not an RFC 6265 cookie name", o.Name)
	case !hostPrefix && !securePrefix && !o.AcceptCookieTossing:
		return bad("Name %q has neither the __Host- nor the __Secure- prefix, so pages on sibling subdomains can set it: "+
			"rename it, or set AcceptCookieTossing", o.Name)
	case !strings.HasPrefix(o.Path, "/") || strings.ContainsFunc(o.Path, badPathRune):
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

// badPathRune reports whether r may not appear in a cookie's Path: only
// printable ASCII but ';' may.
func badPathRune(r rune) bool { return r < 0x20 || r >= 0x7f || r == ';' }

// isDomain reports whether s is a host name, as a cookie's Domain takes
// it: dot-separated labels of letters, digits and '-', with an optional
// leading dot, and a letter somewhere; or an IPv4 address.
func isDomain(s string) bool {
	s = strings.TrimPrefix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	if ip := net.ParseIP(s); ip != nil {
		return ip.To4() != nil && !strings.Contains(s, ":")
	}
	if !strings.ContainsFunc(s, func(r rune) bool { return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' }) {
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
// including those a page on another origin makes it send. So the
// middleware refuses unsafe requests (any method but GET, HEAD and
// OPTIONS) from other origins that carry the cookie, with Go's
// http.CrossOriginProtection, which reads the browser's Sec-Fetch-Site
// header (or, from browsers before 2023, compares Origin with Host), and
// answers them 403; and Issue, Rotate and Revoke, which change the
// browser's session, refuse every request from another origin, whatever
// its method, with an error wrapping ErrCrossOrigin (see CheckOrigin): a
// link on another site must not log the browser in to an account of that
// site's choosing, nor log it out. Requests authenticated by a header need
// no such check: a page on another origin cannot add one without a CORS
// preflight that the server grants.
//
// A Cookies is safe for any number of goroutines.
type Cookies struct {
	m        *Manager
	opts     CookieOptions
	cop      *http.CrossOriginProtection
	defences cookieDefences // zero: every defence on; only export_test.go turns one off
}

// cookieDefences lists the defences of a cookie transport, each of which
// a test may switch off (export_test.go) to show that it fails without
// it; the zero value has every defence on.
type cookieDefences struct {
	// noCrossOriginCheck accepts the cookie on unsafe requests from any
	// origin, as a cookie session without a CSRF defence would.
	noCrossOriginCheck bool
	// unsafeMethodsOnly checks Issue, Rotate and Revoke as the middleware
	// checks requests, so that a GET from another site passes, as it
	// does with http.CrossOriginProtection alone.
	unsafeMethodsOnly bool
	// noDuplicateClear answers a request that carries the cookie more
	// than once as a malformed one, ending no session and deleting no
	// copy.
	noDuplicateClear bool
}

// NewCookies returns the cookie transport of m's tokens, configured by
// opts (the zero CookieOptions is a working configuration). The error
// wraps idtype.ErrInvalidOptions and names the bad field; m must not be
// nil.
func NewCookies(m *Manager, opts CookieOptions) (*Cookies, error) {
	return newCookies(m, opts, cookieDefences{})
}

// newCookies is NewCookies with the defences d.
func newCookies(m *Manager, opts CookieOptions, d cookieDefences) (*Cookies, error) {
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
	return &Cookies{m: m, opts: o, cop: cop, defences: d}, nil
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

// CheckOrigin returns an error wrapping ErrCrossOrigin if a page on
// another origin than the server's own, and not in
// CookieOptions.TrustedOrigins, made the browser send r, whatever its
// method: a link, a form, a script or an image on another site, or on
// another port or subdomain of this one; nil otherwise. A request passes
// whose Sec-Fetch-Site says same-origin, or none (the user typed the
// address, opened a bookmark, or followed a link from outside the
// browser, such as a mail program's); one from a trusted origin passes
// only with its Origin header, which browsers send with fetch and forms
// but not with a link that is followed. Requests that carry neither
// Sec-Fetch-Site nor Origin (any client but a browser, and browsers from
// before 2023) pass.
//
// Issue, Rotate and Revoke call it; a handler that changes the session
// by other means (RevokeSession and then Clear, say), or that changes
// anything on a GET, should too. The middleware checks unsafe requests
// only, so that links from other sites into the app keep working.
func (c *Cookies) CheckOrigin(r *http.Request) error {
	as := r
	if !c.defences.unsafeMethodsOnly {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			// CrossOriginProtection lets every safe method through; it
			// judges where r came from when asked as for a POST.
			post := *r
			post.Method = http.MethodPost
			as = &post
		}
	}
	return c.check(r, as)
}

// checkUnsafe is the middleware's check: CheckOrigin for unsafe methods,
// nil for GET, HEAD and OPTIONS.
func (c *Cookies) checkUnsafe(r *http.Request) error { return c.check(r, r) }

// check asks http.CrossOriginProtection about the request as, and names
// r in the error.
func (c *Cookies) check(r, as *http.Request) error {
	if c.defences.noCrossOriginCheck {
		return nil
	}
	if err := c.cop.Check(as); err != nil {
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
// It refuses a request that a page on another origin made the browser
// send, whatever its method (ErrCrossOrigin, see CheckOrigin), so that
// no page, link or form elsewhere can log the browser in to an account
// of its choosing; a login link sent by mail should open a page of yours
// that logs in from there. Its other errors are Manager.Issue's. On error
// no cookie is set. A request that carried the cookie more than once gets
// every copy deleted beside the new one set (see ErrDuplicateCookie).
func (c *Cookies) Issue(w http.ResponseWriter, r *http.Request, userID idtype.ID, meta Metadata) (Session, error) {
	if err := c.CheckOrigin(r); err != nil {
		return Session{}, err
	}
	tok, s, err := c.m.Issue(r.Context(), userID, meta)
	if err != nil {
		return Session{}, err
	}
	if _, res := c.fromRequest(r); res == credDuplicate && !c.defences.noDuplicateClear {
		c.clearCopies(w, r, false)
	}
	c.Set(w, tok, s)
	return s, nil
}

// Rotate replaces the token of the request's cookie by a new one for the
// same session, as Manager.Rotate does, and sets the cookie to it: call
// it after the user re-authenticates or gains privileges. A cookie whose
// token was rotated within Options.RotationGrace (a double click, a
// second tab) gets the token that rotation made, so the browser keeps one
// session whichever answer it reads last.
//
// Its errors are ErrCrossOrigin, for a request that a page on another
// origin made the browser send, whatever its method (see CheckOrigin);
// ErrDuplicateCookie; and those of Manager.Rotate. ErrInvalidToken (also
// for a request without the cookie) clears the cookie, an ErrUnavailable
// leaves it, so that the client can retry.
func (c *Cookies) Rotate(w http.ResponseWriter, r *http.Request) (Session, error) {
	if err := c.CheckOrigin(r); err != nil {
		return Session{}, err
	}
	tok, res := c.fromRequest(r)
	switch res {
	case credNone:
		c.Clear(w)
		return Session{}, ErrInvalidToken
	case credDuplicate:
		return Session{}, c.endCopies(w, r)
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
// without doing either for a request that a page on another origin made
// the browser send, whatever its method (see CheckOrigin), so that no
// page, link or image elsewhere can log the user out. ErrInvalidToken
// (the session had ended, or the request had no cookie) clears the cookie
// too, and a logout handler may ignore it; so is an ErrDuplicateCookie,
// which wraps ErrInvalidToken, after Revoke ended the session of every
// copy and deleted them all. An error wrapping ErrUnavailable leaves the
// cookie, so that the logout can be retried with it.
func (c *Cookies) Revoke(w http.ResponseWriter, r *http.Request) error {
	if err := c.CheckOrigin(r); err != nil {
		return err
	}
	tok, res := c.fromRequest(r)
	switch res {
	case credNone:
		c.Clear(w)
		return ErrInvalidToken
	case credDuplicate:
		return c.endCopies(w, r)
	}
	err := c.m.Revoke(r.Context(), tok)
	if err == nil || errors.Is(err, ErrInvalidToken) {
		c.Clear(w)
	}
	return err
}

// maxCopies bounds the copies of the cookie whose sessions endCopies
// ends: a browser holds one per Domain and Path of the name, so a few,
// and a request with more was not sent by one.
const maxCopies = 8

// endCopies answers a request that carries the cookie more than once,
// which a page on a sibling subdomain (or on plain HTTP, for a name
// without a prefix) can bring about by setting a cookie of the same name
// for other Domain and Path attributes. Which copy is the user's cannot
// be told, so it ends the session of every copy (of the first maxCopies)
// and deletes every copy the browser may hold, and returns an error
// wrapping ErrDuplicateCookie and ErrInvalidToken. If Redis fails, it
// returns that error and leaves the cookies, for the retry.
func (c *Cookies) endCopies(w http.ResponseWriter, r *http.Request) error {
	if c.defences.noDuplicateClear {
		c.Clear(w)
		return ErrInvalidToken
	}
	copies := r.CookiesNamed(c.opts.Name)
	for _, ck := range copies[:min(len(copies), maxCopies)] {
		if err := c.m.Revoke(r.Context(), ck.Value); err != nil && !errors.Is(err, ErrInvalidToken) {
			return err
		}
	}
	c.clearCopies(w, r, true)
	return fmt.Errorf("%w: %w: %d cookies named %s", ErrDuplicateCookie, ErrInvalidToken, len(copies), c.opts.Name)
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
// without the cookie (or with an empty one), credDuplicate when it is
// there more than once (set for other paths or domains, as a page on a
// sibling subdomain can do), in which case which one is the user's is
// unknowable.
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
	return "", credDuplicate
}

// Bounds on the copies of the cookie that clearCopies deletes: the
// domains from the request's host up, and the paths that match the
// request's: "/" and the longest others, two for each of its segments.
const (
	maxCopyDomains = 6
	maxCopyPaths   = 16
)

// clearCopies puts on w a deletion of every copy of the cookie that r may
// have carried: a browser sends a cookie whose Domain is the request's
// host or one of its parent domains (or that has none and was set by the
// host), and whose Path is a prefix of the request's path, so it deletes
// the name under each such Domain and Path, with the configured
// attributes (Secure, which browsers require to delete a "__Secure-"
// cookie, HttpOnly and SameSite). A "__Host-" name has one form only,
// the configured one. Unless own, it leaves out the configured Domain and
// Path, for a caller that sets the cookie right after.
func (c *Cookies) clearCopies(w http.ResponseWriter, r *http.Request, own bool) {
	type place struct{ domain, path string }
	done := map[place]bool{}
	del := func(p place) {
		if done[p] {
			return
		}
		done[p] = true
		ck := c.cookie("")
		ck.Domain, ck.Path = p.domain, p.path
		ck.MaxAge = -1
		ck.Expires = time.Unix(1, 0)
		c.write(w, ck)
	}
	configured := place{strings.TrimPrefix(strings.ToLower(c.opts.Domain), "."), c.opts.Path}
	if own {
		del(configured)
	} else {
		done[configured] = true
	}
	if strings.HasPrefix(strings.ToLower(c.opts.Name), "__host-") {
		return
	}
	host := strings.ToLower(r.Host)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	domains := []string{""} // a copy without Domain, set by this host
	switch {
	case net.ParseIP(host) != nil:
		if isDomain(host) { // IPv4; an IPv6 address cannot be a Domain
			domains = append(domains, host)
		}
	case isDomain(host):
		for d := host; len(domains) <= maxCopyDomains; {
			domains = append(domains, d)
			i := strings.IndexByte(d, '.')
			if i < 0 || !strings.Contains(d[i+1:], ".") {
				break // browsers refuse a Domain that is a top-level domain
			}
			d = d[i+1:]
		}
	}
	path := r.URL.Path
	if !strings.HasPrefix(path, "/") || strings.ContainsFunc(path, badPathRune) {
		path = "/" // a Path a cookie cannot have
	}
	var paths []string
	for i := 1; i <= len(path); i++ {
		// A cookie's Path matches the request's when it is a prefix
		// that ends with '/' or at a '/' of the request's path.
		if i == len(path) || path[i-1] == '/' || path[i] == '/' {
			paths = append(paths, path[:i])
		}
	}
	if len(paths) > maxCopyPaths {
		paths = append(paths[:1], paths[len(paths)-maxCopyPaths+1:]...)
	}
	for _, d := range domains {
		for _, p := range paths {
			del(place{d, p})
		}
	}
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

package tokens_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/snowkeyhq/snowkey/tokens"
)

// A browser keeps its token in an HttpOnly cookie instead of script's
// storage: the login handler sets it with Cookies.Issue, the middleware
// reads it, and the logout handler clears it with Cookies.Revoke. Unsafe
// requests that a page on another origin makes the browser send are
// refused.
func ExampleNewCookies() {
	m, done := newManager()
	defer done()
	cookies, err := tokens.NewCookies(m, tokens.CookieOptions{})
	if err != nil {
		log.Fatal(err)
	}
	auth, err := tokens.NewMiddleware(m, tokens.MiddlewareOptions{Cookies: cookies})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		// … once the password checked out:
		s, err := cookies.Issue(w, r, 42, tokens.Metadata{UserAgent: r.UserAgent()})
		if errors.Is(err, tokens.ErrCrossOrigin) {
			http.Error(w, "cross-origin login", http.StatusForbidden)
			return
		}
		if err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "logged in, session of user %d", s.UserID) // the token is in the cookie only
	})
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		if err := cookies.Revoke(w, r); err != nil && !errors.Is(err, tokens.ErrInvalidToken) {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "logged out")
	})
	mux.Handle("/api/", auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _ := tokens.FromContext(r.Context())
		fmt.Fprintf(w, "hello, user %d", s.UserID)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// send makes a request as a browser would, with the cookie it holds
	// and the Sec-Fetch-Site header it adds, and keeps the cookie the
	// answer sets (a browser sends a Secure cookie to http://127.0.0.1,
	// which it counts as secure; Go's cookie jar does not).
	var jar *http.Cookie
	send := func(method, path, site string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.Header.Set("Sec-Fetch-Site", site)
		if jar != nil {
			req.AddCookie(jar)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, c := range resp.Cookies() {
			if c.MaxAge < 0 {
				jar = nil
				fmt.Printf("  (cookie %s deleted)\n", c.Name)
				continue
			}
			jar = c
			fmt.Printf("  (cookie %s set: HttpOnly %v, Secure %v, SameSite %v)\n", c.Name, c.HttpOnly, c.Secure, c.SameSite == http.SameSiteLaxMode)
		}
		fmt.Printf("%s %s from %s: %d %s\n", method, path, site, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	send("POST", "/login", "same-origin")
	send("GET", "/api/me", "same-origin")
	send("POST", "/api/posts", "cross-site") // a form on another site posting with the cookie
	send("POST", "/logout", "same-origin")
	send("GET", "/api/me", "same-origin")
	// Output:
	//   (cookie __Host-session set: HttpOnly true, Secure true, SameSite true)
	// POST /login from same-origin: 200 logged in, session of user 42
	// GET /api/me from same-origin: 200 hello, user 42
	// POST /api/posts from cross-site: 403 Forbidden: cross-origin request
	//   (cookie __Host-session deleted)
	// POST /logout from same-origin: 200 logged out
	// GET /api/me from same-origin: 401 Unauthorized
}

package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestNosniff asks every kind of answer of the public and the operators'
// handlers, from the API, the tokens middleware, the mux and the page's
// files, and wants X-Content-Type-Options: nosniff on each. In the
// control run the server sends none, and the test sees each answer it
// writes itself without it (Go's http.Error, which writes the tokens
// middleware's refusals and the mux's 404 and 405, sends its own): the
// control serves the App's routes and operators' routes as they are,
// without the nosniff that Open puts in front of each.
func TestNosniff(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "every answer", true: "control"}[control], func(t *testing.T) {
			testenv.Deadline(t, time.Minute)
			var bare func(*App) http.Handler
			if control {
				bare = func(app *App) http.Handler { return app.routes() }
			}
			app, srv := startAppBehind(t, Config{Throttle: generous(), Argon2: cheapArgon2}, bare)
			opsHandler := app.OpsHandler()
			if control {
				opsHandler = app.opsRoutes()
			}
			ops := startHandler(t, opsHandler)
			_, tok := signupLogin(t, srv, "sniff@example.com", goodPassword)
			type ask struct {
				method, url, body, contentType string
				header                         map[string]string
				status                         int
				// httpError: the answer passes through Go's http.Error
				// (the tokens middleware's refusals, the mux's 404 and
				// 405), which sends nosniff itself.
				httpError bool
			}
			asks := []ask{
				{method: "GET", url: srv.URL + "/", status: 200},
				{method: "GET", url: srv.URL + "/app.js", status: 200},
				{method: "GET", url: srv.URL + "/style.css", status: 200},
				{method: "GET", url: srv.URL + "/favicon.svg", status: 200},
				{method: "GET", url: srv.URL + "/api/layout", status: 200},
				{method: "GET", url: srv.URL + "/api/dev/outbox", status: 200},
				{method: "GET", url: srv.URL + "/api/me", header: map[string]string{"Authorization": "Bearer " + tok}, status: 200},
				{method: "GET", url: srv.URL + "/api/me", status: 401, httpError: true},
				{method: "GET", url: srv.URL + "/api/me", header: map[string]string{"Authorization": "Bearer nonsense"}, status: 401, httpError: true},
				{method: "POST", url: srv.URL + "/api/logout-all", header: map[string]string{"Cookie": "__Host-session=" + tok, "Sec-Fetch-Site": "cross-site"}, status: 403, httpError: true},
				{method: "POST", url: srv.URL + "/api/login", body: "x", contentType: "text/plain", status: 415},
				{method: "POST", url: srv.URL + "/api/login", body: `{"email":"sniff@example.com","password":"wrong-password-1"}`, contentType: "application/json", status: 401},
				{method: "GET", url: srv.URL + "/api/nothing", status: 404, httpError: true},
				{method: "DELETE", url: srv.URL + "/api/layout", status: 405, httpError: true},
				{method: "GET", url: srv.URL + "/nothing", status: 404, httpError: true},
				{method: "GET", url: srv.URL + "/healthz", status: 200},
				{method: "GET", url: srv.URL + "/readyz", status: 200},
				{method: "GET", url: ops + "/metrics", status: 200},
				{method: "GET", url: ops + "/readyz", status: 200},
				{method: "GET", url: ops + "/healthz", status: 200},
			}
			without, own := 0, 0
			for _, a := range asks {
				req, err := http.NewRequestWithContext(t.Context(), a.method, a.url, strings.NewReader(a.body))
				if err != nil {
					t.Fatal(err)
				}
				if a.contentType != "" {
					req.Header.Set("Content-Type", a.contentType)
				}
				for k, v := range a.header {
					req.Header.Set(k, v)
				}
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", a.method, a.url, err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != a.status {
					t.Errorf("%s %s: %d, want %d", a.method, a.url, res.StatusCode, a.status)
				}
				if !a.httpError {
					own++
				}
				if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
					without++
					if !control {
						t.Errorf("%s %s (%d): X-Content-Type-Options %q, want nosniff", a.method, a.url, res.StatusCode, got)
					}
				} else if control && !a.httpError {
					t.Errorf("control: %s %s (%d) has nosniff, which the control sends nowhere", a.method, a.url, res.StatusCode)
				}
			}
			if control && without != own {
				t.Errorf("control: %d answers without nosniff; want the %d the server writes itself", without, own)
			}
		})
	}
}

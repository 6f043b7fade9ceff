package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestOutboxHost reads the development outbox, which holds a sign-up's
// link, over TCP from this machine, naming each Host a browser could
// send. Before any mail it answers an empty list. It answers the names
// and addresses of this machine and the public URL's host, and refuses
// the rest with 403 and no mail: a name that a page's site made resolve
// to 127.0.0.1 (DNS rebinding) is one of them; so is a request that
// came through a proxy. In the control run the outbox answers any Host
// and any proxy (see outboxAnyHost), and the test sees the link go to the
// rebound name.
func TestOutboxHost(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "own names only", true: "control"}[control], func(t *testing.T) {
			testenv.Deadline(t, time.Minute)
			cfg := Config{Throttle: generous(), Argon2: cheapArgon2, PublicURL: "http://dev.example.test:8080/"}
			var front func(*App) http.Handler
			if control {
				front = outboxAnyHost
			}
			_, srv := startAppBehind(t, cfg, front)
			get := func(host string, header ...string) response {
				t.Helper()
				req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/api/dev/outbox", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Host = host
				for i := 0; i+1 < len(header); i += 2 {
					req.Header.Set(header[i], header[i+1])
				}
				res, err := srv.Client().Do(req)
				if err != nil {
					t.Fatalf("GET the outbox as %q: %v", host, err)
				}
				defer res.Body.Close()
				b, err := io.ReadAll(res.Body)
				if err != nil {
					t.Fatalf("GET the outbox as %q: %v", host, err)
				}
				return response{res.StatusCode, res.Header, b}
			}
			if r := get("localhost"); r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"messages":[]}` {
				t.Fatalf("the outbox before any mail: %d %s; want 200 and an empty list", r.status, r.body)
			}
			if r := call(t, srv, "POST", "/api/signup", "", `{"email":"new@example.com","password":"`+goodPassword+`","name":"N"}`); r.status != http.StatusAccepted {
				t.Fatalf("signup: %d %s", r.status, r.body)
			}
			port := srv.Listener.Addr().String()[strings.LastIndex(srv.Listener.Addr().String(), ":"):]
			for _, host := range []string{"localhost" + port, "LocalHost.", "app.localhost" + port, "127.0.0.1" + port, "127.9.9.9", "[::1]" + port, "dev.example.test:8080"} {
				if r := get(host); r.status != http.StatusOK || !strings.Contains(string(r.body), "#verify=") {
					t.Errorf("the outbox as Host %q: %d %s; want 200 and the sign-up's link", host, r.status, r.body)
				}
			}
			foreign := []struct{ host, header, value string }{
				{"rebound.attacker.example" + port, "", ""},
				{"127.0.0.1.nip.io" + port, "", ""},
				{"localhost.attacker.example", "", ""},
				{"dev.example.test.attacker.example", "", ""},
				{"localhost" + port, "X-Forwarded-For", "203.0.113.9"},
				{"localhost" + port, "Forwarded", "for=203.0.113.9"},
				{"localhost" + port, "Via", "1.1 proxy"},
			}
			for _, f := range foreign {
				var r response
				if f.header != "" {
					r = get(f.host, f.header, f.value)
				} else {
					r = get(f.host)
				}
				leaked := strings.Contains(string(r.body), "#verify=")
				switch {
				case control && f.host == foreign[0].host && (r.status != http.StatusOK || !leaked):
					t.Fatalf("control: the outbox as Host %q: %d %s; want the link, as a rebound name would read it", f.host, r.status, r.body)
				case !control && (r.status != http.StatusForbidden || leaked):
					t.Errorf("the outbox as Host %q (%s %s): %d %s; want 403 and no mail", f.host, f.header, f.value, r.status, r.body)
				}
			}
		})
	}
}

// outboxAnyHost serves the App's Handler, but shows it every request as
// one for localhost that came straight from its client, as a proxy on
// this machine that sets the Host and drops the forwarding headers would:
// the development outbox then answers whatever Host and proxy a request
// came with. The control of TestOutboxHost.
func outboxAnyHost(app *App) http.Handler {
	h := app.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.Clone(r.Context())
		r.Host = "localhost"
		for _, k := range []string{"Forwarded", "X-Forwarded-For", "X-Real-Ip", "Via"} {
			r.Header.Del(k)
		}
		h.ServeHTTP(w, r)
	})
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/tokens"
)

// TestPasswordChange changes a password from one of three sessions: the
// new password works, the old one does not, and the other two sessions
// end while the one that changed it stays (ASVS 4.0.3 V3.3.3). In the
// control run the change skips the step that ends them (see
// keepOtherSessions); the other sessions survive, and the test sees them.
func TestPasswordChange(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "others end", true: "control"}[control], func(t *testing.T) {
			testenv.Deadline(t, time.Minute)
			cfg := Config{Throttle: generous()}
			var front func(*App) http.Handler
			if control {
				front = keepOtherSessions
			}
			_, srv := startAppBehind(t, cfg, front)
			const email = "pat@example.com"
			_, phone := signupLogin(t, srv, email, goodPassword)
			_, laptop := signupLoginExisting(t, srv, email, goodPassword)
			_, tablet := signupLoginExisting(t, srv, email, goodPassword)

			for _, tc := range []struct {
				body   string
				status int
				msg    string
			}{
				{`{"current_password":"` + otherPassword + `","new_password":"` + attackerPassword + `"}`, 403, "current_password is wrong"},
				{`{"current_password":"` + goodPassword + `","new_password":"password1"}`, 400, "too easy to guess"},
				{`{"current_password":"` + goodPassword + `","new_password":"short"}`, 400, "new_password is shorter"},
				{`{"current_password":"` + goodPassword + `"}`, 400, "new_password is required"},
			} {
				r := call(t, srv, "POST", "/api/password", laptop, tc.body)
				if r.status != tc.status || !strings.Contains(r.errorMsg(t), tc.msg) {
					t.Errorf("password change %s: %d %s; want %d %q", tc.body, r.status, r.body, tc.status, tc.msg)
				}
			}
			if r := call(t, srv, "GET", "/api/me", phone, ""); r.status != 200 {
				t.Fatalf("a refused change ended a session: %d", r.status)
			}

			r := call(t, srv, "POST", "/api/password", laptop, `{"current_password":"`+goodPassword+`","new_password":"`+otherPassword+`"}`)
			var out struct{ Revoked int }
			r.json(t, &out)
			if r.status != 200 {
				t.Fatalf("password change: %d %s", r.status, r.body)
			}
			for name, tok := range map[string]string{"phone": phone, "tablet": tablet} {
				st := call(t, srv, "GET", "/api/me", tok, "").status
				switch {
				case control && st != 200:
					t.Errorf("control: the %s's session after the change: %d; want it kept, as the control keeps it", name, st)
				case !control && st != 401:
					t.Errorf("the %s's session after the change: %d, want 401", name, st)
				}
			}
			if control {
				return
			}
			if out.Revoked != 2 {
				t.Errorf("revoked %d, want the 2 other sessions", out.Revoked)
			}
			if st := call(t, srv, "GET", "/api/me", laptop, "").status; st != 200 {
				t.Errorf("the session that changed the password: %d, want 200", st)
			}
			if st := call(t, srv, "POST", "/api/login", "", `{"email":"`+email+`","password":"`+goodPassword+`"}`).status; st != 401 {
				t.Errorf("login with the old password: %d, want 401", st)
			}
			if st := call(t, srv, "POST", "/api/login", "", `{"email":"`+email+`","password":"`+otherPassword+`"}`).status; st != 200 {
				t.Errorf("login with the new password: %d, want 200", st)
			}
		})
	}
}

// keepOtherSessions serves the App's Handler, but answers POST
// /api/password with the App's own steps of a password change less the
// one that ends the user's other sessions, as a server that left them
// alive would: the control of TestPasswordChange.
func keepOtherSessions(app *App) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", app.Handler())
	mux.Handle("POST /api/password", app.auth(apiHandler(func(w http.ResponseWriter, r *http.Request) *apiError {
		s, ok := tokens.FromContext(r.Context())
		if !ok {
			return &apiError{status: http.StatusUnauthorized, msg: "not logged in"}
		}
		u, device, e := app.replacePassword(w, r, s)
		if e != nil {
			return e
		}
		return app.passwordReplaced(w, r, u, device, 0)
	})))
	return mux
}

// TestSessionLifetimes checks the example's session lifetimes: OWASP ASVS
// 4.0.3 level 2's 30 minutes idle and 12 hours in all, unless the Config
// sets others.
func TestSessionLifetimes(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 2*time.Minute)
	app, srv := startApp(t, embedded())
	o := app.tokens.Options()
	if o.IdleTimeout != 30*time.Minute || o.AbsoluteLifetime != 12*time.Hour || o.RefreshInterval != time.Minute {
		t.Errorf("idle %v, absolute %v, refresh %v; want 30m, 12h, 1m", o.IdleTimeout, o.AbsoluteLifetime, o.RefreshInterval)
	}
	_, tok := signupLogin(t, srv, "life@example.com", goodPassword)
	var me struct {
		Session struct {
			LoginAt           time.Time `json:"login_at"`
			ExpiresAt         time.Time `json:"expires_at"`
			AbsoluteExpiresAt time.Time `json:"absolute_expires_at"`
		}
	}
	call(t, srv, "GET", "/api/me", tok, "").json(t, &me)
	if s := me.Session; s.ExpiresAt.Sub(s.LoginAt) > 30*time.Minute || s.AbsoluteExpiresAt.Sub(s.LoginAt) != 12*time.Hour {
		t.Errorf("a new session: %+v; want it to end 30 minutes after its last use and 12 hours after login", s)
	}
	cfg := embedded().config(t)
	cfg.Tokens.IdleTimeout, cfg.Tokens.AbsoluteLifetime = time.Hour, 24*time.Hour
	app2, _ := startAppConfig(t, cfg)
	if o := app2.tokens.Options(); o.IdleTimeout != time.Hour || o.AbsoluteLifetime != 24*time.Hour || o.RefreshInterval != 30*time.Minute {
		t.Errorf("with lifetimes set: %v, %v, %v; want them, and the library's refresh", o.IdleTimeout, o.AbsoluteLifetime, o.RefreshInterval)
	}
}

// TestPasswordChangeInFlightLogin races logins with the old password
// against a password change: 10 logins whose password checked out are
// held at a step of startSession while the owner changes the password,
// then let go. At either step, before their sessions are issued or
// after, every one is refused, the user is left with the session that
// made the change alone, and no login set a cookie. In the control run,
// which hands a login's session out without reading the credential
// epoch again, the 10 logins held before their sessions were issued get
// sessions that outlive the change, and the test sees them; the device
// cookies those logins got name the old epoch, and are stale.
func TestPasswordChangeInFlightLogin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		step    string
		control bool
	}{
		{"held before issue", "checked", false},
		{"held after issue", "issued", false},
		{"control: held before issue", "checked", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testenv.Deadline(t, 2*time.Minute)
			const inFlight = 10
			held := make(chan struct{}, inFlight)
			resume := make(chan struct{})
			var armed atomic.Bool
			d := defences{inFlightLoginSurvives: tc.control, loginStep: func(step string) {
				if step == tc.step && armed.Load() {
					held <- struct{}{}
					<-resume
				}
			}}
			app, srv := startAppWithout(t, Config{Throttle: generous(), Argon2: cheapArgon2}, d)
			// Let held logins go however the test ends, before the server
			// closes (cleanups run last in, first out).
			release := sync.OnceFunc(func() { close(resume) })
			t.Cleanup(release)
			const email = "racer@example.com"
			userID, owner := signupLogin(t, srv, email, goodPassword)

			armed.Store(true)
			type answer struct {
				status int
				header http.Header
				body   string
			}
			answers := make(chan answer, inFlight)
			for range inFlight {
				go func() {
					res, body, err := callRaw(srv, "POST", "/api/login", "", `{"email":"`+email+`","password":"`+goodPassword+`"}`)
					if err != nil {
						answers <- answer{status: -1, body: err.Error()}
						return
					}
					answers <- answer{res.StatusCode, res.Header, body}
				}()
			}
			for range inFlight {
				select {
				case <-held:
				case a := <-answers:
					t.Fatalf("a login was answered before it reached step %q: %d %s", tc.step, a.status, a.body)
				case <-ctx.Done():
					t.Fatalf("the logins never reached step %q: %v", tc.step, ctx.Err())
				}
			}
			armed.Store(false)
			r := call(t, srv, "POST", "/api/password", owner, `{"current_password":"`+goodPassword+`","new_password":"`+otherPassword+`"}`)
			if r.status != http.StatusOK {
				t.Fatalf("password change: %d %s", r.status, r.body)
			}
			release()

			survivors, refused := 0, 0
			var staleDevices []*http.Cookie
			for range inFlight {
				a := <-answers
				switch a.status {
				case http.StatusOK:
					var l struct{ Token string }
					if err := json.Unmarshal([]byte(a.body), &l); err != nil {
						t.Fatalf("login answer %q: %v", a.body, err)
					}
					if call(t, srv, "GET", "/api/me", l.Token, "").status == http.StatusOK {
						survivors++
					}
					staleDevices = append(staleDevices, responseCookie(t, response{a.status, a.header, nil}, deviceCookieName))
				case http.StatusUnauthorized:
					refused++
					if c := a.header.Values("Set-Cookie"); len(c) != 0 {
						t.Errorf("a refused login set cookies: %q", c)
					}
				default:
					t.Fatalf("a login in flight: %d %s", a.status, a.body)
				}
			}
			t.Logf("%d of %d logins in flight outlived the change; %d refused", survivors, inFlight, refused)
			if tc.control {
				if survivors != inFlight {
					t.Fatalf("control: %d of %d logins held before issue outlived the change; the test proves nothing", survivors, inFlight)
				}
				// Their device cookies name the epoch their password was
				// checked against: no device of the account now.
				var u User
				if err := app.db.Take(&u, "email = ?", email).Error; err != nil {
					t.Fatal(err)
				}
				for _, c := range staleDevices {
					req := httptest.NewRequestWithContext(ctx, "POST", "/api/login", nil)
					req.AddCookie(c)
					if _, err := app.devices.recognize(ctx, req, email, u.CredentialEpoch); !errors.Is(err, errNoDevice) {
						t.Errorf("the device cookie of a login the change overtook: %v, want errNoDevice", err)
					}
				}
				return
			}
			if survivors != 0 || refused != inFlight {
				t.Errorf("%d logins in flight outlived the change, %d were refused; want all %d refused", survivors, refused, inFlight)
			}
			id, err := idtype.Parse(userID)
			if err != nil {
				t.Fatal(err)
			}
			if live, err := app.tokens.List(ctx, id); err != nil || len(live) != 1 {
				t.Errorf("the user's live sessions after the change: %d (%v); want the one that made it", len(live), err)
			}
			if st := call(t, srv, "GET", "/api/me", owner, "").status; st != http.StatusOK {
				t.Errorf("the session that made the change: %d, want 200", st)
			}
		})
	}
}

// TestPasswordChangeGuesses is a stolen session that guesses the user's
// password through POST /api/password (as the current password) and
// POST /api/reauth, one guess from each of 100 addresses. The guesses
// count against the account's bound on every address together, as
// logins do: no more than its burst reach the password check, and the
// right guess after them is refused, while the owner, from their known
// device, changes the password. In the control run the account's bound
// on every address together is set out of reach, which leaves the
// guesses counted per account and address alone: all 100 are checked and
// the right guess is taken: the password changed, or the session's token
// rotated to the thief's new one.
func TestPasswordChangeGuesses(t *testing.T) {
	t.Parallel()
	endpoints := []struct {
		path  string
		guess func(password string) string
	}{
		{"/api/password", func(p string) string {
			return `{"current_password":"` + p + `","new_password":"` + attackerPassword + `"}`
		}},
		{"/api/reauth", func(p string) string { return `{"password":"` + p + `"}` }},
	}
	for _, ep := range endpoints {
		for _, control := range []bool{false, true} {
			t.Run(strings.TrimPrefix(ep.path, "/api/")+map[bool]string{false: " account-wide", true: " control"}[control], func(t *testing.T) {
				t.Parallel()
				testenv.Deadline(t, 3*time.Minute)
				cfg := Config{KeyPrefix: testenv.KeyPrefix(t), Throttle: defaultBursts(t), Argon2: cheapArgon2}
				if control {
					cfg.Throttle.LoginPerAccount = generous().LoginPerAccount
				}
				app, _ := startAppConfig(t, cfg)
				const owner, ownerIP = "owner@example.com", "198.51.100.7:1"
				verified, device := signupVerified(t, app, ownerIP, owner, goodPassword)
				var l struct{ Token string }
				verified.json(t, &l)
				stolen := l.Token

				checked, refused := 0, 0
				for a := range 100 {
					r := fromToken(t, app, fmt.Sprintf("203.0.113.%d:1", a+1), "POST", ep.path, stolen,
						ep.guess(fmt.Sprintf("guess-%d-xyz", a)))
					switch r.status {
					case http.StatusForbidden:
						checked++
					case http.StatusTooManyRequests:
						refused++
					default:
						t.Fatalf("guess %d: %d %s", a, r.status, r.body)
					}
				}
				t.Logf("of 100 guesses through %s from 100 addresses, %d reached the password check, %d refused", ep.path, checked, refused)
				right := fromToken(t, app, "203.0.113.200:1", "POST", ep.path, stolen, ep.guess(goodPassword))
				if control {
					if checked != 100 || right.status != http.StatusOK {
						t.Fatalf("control: %d guesses checked, then the right one: %d; want all 100 and the right one taken", checked, right.status)
					}
					return
				}
				if burst := cfg.Throttle.LoginPerAccount.Burst; checked >= burst || right.status != http.StatusTooManyRequests {
					t.Errorf("%d guesses checked (the account's burst is %d), then the right one: %d %s; want fewer than the burst, and a 429",
						checked, burst, right.status, right.body)
				}
				if r := fromToken(t, app, ownerIP, "POST", "/api/password", stolen,
					`{"current_password":"`+goodPassword+`","new_password":"`+otherPassword+`"}`, device); r.status != http.StatusOK {
					t.Errorf("the owner's change from their known device: %d %s; want 200", r.status, r.body)
				}
			})
		}
	}
}

// callRaw is call for many goroutines: no t; the answer and its body.
func callRaw(srv *httptest.Server, method, path, token, body string) (*http.Response, string, error) {
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, string(b), err
}

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testenv"
)

// TestPasswordChange changes a password from one of three sessions: the
// new password works, the old one does not, and the other two sessions
// end while the one that changed it stays (ASVS 4.0.3 V3.3.3). In the
// control run the other sessions survive, and the test sees them.
func TestPasswordChange(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "others end", true: "control"}[control], func(t *testing.T) {
			testenv.Deadline(t, time.Minute)
			cfg := Config{Throttle: generous()}
			_, srv := startAppWithout(t, cfg, defences{keepOtherSessions: control})
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

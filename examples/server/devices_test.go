package main

import (
	"crypto/hmac"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testenv"
)

// fromWith is from with cookies.
func fromWith(t *testing.T, app *App, ip, method, path, body string, cookies ...*http.Cookie) response {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
	req.RemoteAddr = ip
	req.Header.Set("Content-Type", "application/json")
	for _, c := range cookies {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	rec := httptest.NewRecorder()
	app.Handler().ServeHTTP(rec, req)
	return response{rec.Code, rec.Result().Header, rec.Body.Bytes()}
}

// TestDeviceLockout is a lockout by strangers: 10 addresses guess at one
// account until each is refused, with the default limits' bursts. That
// locks the account for every device its owner never logged in from (a
// fresh address with the right password gets 429), and the owner's own
// device, which holds the device cookie of an earlier login, still logs
// in, from its old address and from a new one. In the control run the
// server recognizes no device cookie, and the owner is locked out with
// the rest.
func TestDeviceLockout(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "device cookies", true: "control"}[control], func(t *testing.T) {
			testenv.Deadline(t, 2*time.Minute)
			cfg := Config{KeyPrefix: testenv.KeyPrefix(t), Throttle: defaultBursts(t)}
			cfg.Argon2 = Argon2Params{Memory: 1024, Time: 1, Threads: 1} // the counts are under test, not the cost
			app, _ := startAppWithout(t, cfg, defences{noDeviceCookies: control})
			const owner = "owner@example.com"
			_, device := signupVerified(t, app, "198.51.100.7:1", owner, goodPassword)
			login := func(ip, password string, cookies ...*http.Cookie) response {
				return fromWith(t, app, ip, "POST", "/api/login", `{"email":"`+owner+`","password":"`+password+`"}`, cookies...)
			}

			guesses, refused := 0, 0
			for a := range 10 {
				ip := fmt.Sprintf("203.0.113.%d:1", a+1)
				for range 10 { // at most; each address is refused after 5
					r := login(ip, fmt.Sprintf("guess-%d-%d-xyz", a, guesses))
					if r.status == http.StatusTooManyRequests {
						refused++
						break
					}
					if r.status != http.StatusUnauthorized {
						t.Fatalf("guess from %s: %d %s", ip, r.status, r.body)
					}
					guesses++
				}
			}
			// The attack met its fault: the account is locked for devices
			// its owner never used, the right password included.
			if r := login("198.51.100.50:1", goodPassword); r.status != http.StatusTooManyRequests || !strings.Contains(r.errorMsg(t), "for this account;") {
				t.Fatalf("after %d guesses from 10 addresses (%d refused), a new device with the right password: %d %s; want the account's 429",
					guesses, refused, r.status, r.body)
			}
			t.Logf("%d wrong guesses from 10 addresses before each was refused", guesses)

			for _, ip := range []string{"198.51.100.7:1", "198.51.100.8:1"} {
				r := login(ip, goodPassword, device)
				switch {
				case control && r.status != http.StatusTooManyRequests:
					t.Errorf("control: the owner's device from %s: %d %s; want locked out with the rest", ip, r.status, r.body)
				case !control && r.status != http.StatusOK:
					t.Errorf("the owner's known device from %s during the attack: %d %s; want 200", ip, r.status, r.body)
				}
			}
			if control {
				return
			}
			// A device cookie is the owner's only for their account, and
			// only as the server signed it.
			forged := *device
			forged.Value = strings.ToUpper(forged.Value[:1]) + forged.Value[1:]
			if forged.Value == device.Value {
				forged.Value = strings.ToLower(forged.Value[:1]) + forged.Value[1:]
			}
			if r := login("198.51.100.9:1", goodPassword, &forged); r.status != http.StatusTooManyRequests {
				t.Errorf("an altered device cookie: %d, want the account's 429", r.status)
			}
			_, other := signupVerified(t, app, "198.51.100.10:1", "other@example.com", goodPassword)
			if r := login("198.51.100.10:1", goodPassword, other); r.status != http.StatusTooManyRequests {
				t.Errorf("another account's device cookie: %d, want the account's 429", r.status)
			}
			// The device has a limit of its own: a stolen cookie is worth a
			// handful of guesses.
			var last response
			for range 10 {
				if last = login("198.51.100.11:1", "stolen-cookie-guess", device); last.status == http.StatusTooManyRequests {
					break
				}
			}
			if last.status != http.StatusTooManyRequests || !strings.Contains(last.errorMsg(t), "from this device") {
				t.Errorf("guesses with the owner's device cookie: %d %s; want the device's 429", last.status, last.body)
			}
		})
	}
}

// FuzzDeviceCookie feeds the device cookie's reader any value: it never
// panics, recognizes a value only if it carries the key's MAC of the rest
// for the account, and never for another account.
func FuzzDeviceCookie(f *testing.F) {
	d := &devices{key: []byte("0123456789abcdef0123456789abcdef")}
	rec := httptest.NewRecorder()
	d.issue(rec, "owner@example.com")
	signed := rec.Result().Cookies()[0].Value
	f.Add(signed)
	f.Add("")
	f.Add(strings.Repeat("A", 96))
	f.Add(signed[:len(signed)-1] + "B")
	f.Fuzz(func(t *testing.T, v string) {
		r := httptest.NewRequest("POST", "/api/login", nil)
		r.Header.Set("Cookie", deviceCookieName+"="+v)
		if _, err := d.recognize(r, "owner@example.com"); err == nil {
			b, derr := base64.RawURLEncoding.Strict().DecodeString(v)
			acct := accountDigest("owner@example.com")
			if derr != nil || len(b) != deviceValueLen || !hmac.Equal(b[len(b)-deviceMACLen:], d.mac(b[:len(b)-deviceMACLen])) ||
				!hmac.Equal(b[:deviceAccountLen], acct[:]) {
				t.Errorf("recognized %q, which is not signed for the account", v)
			}
		}
		if _, err := d.recognize(r, "other@example.com"); err == nil {
			t.Errorf("recognized %q for another account", v)
		}
	})
}

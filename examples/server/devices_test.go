package main

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// fromWith is from with cookies.
func fromWith(t *testing.T, app *App, ip, method, path, body string, cookies ...*http.Cookie) response {
	t.Helper()
	return fromToken(t, app, ip, method, path, "", body, cookies...)
}

// fromToken is fromWith with a bearer token, unless it is "".
func fromToken(t *testing.T, app *App, ip, method, path, token, body string, cookies ...*http.Cookie) response {
	t.Helper()
	return fromHandler(t, app.Handler(), ip, method, path, token, body, cookies...)
}

// fromHandler is fromToken served by h.
func fromHandler(t *testing.T, h http.Handler, ip, method, path, token, body string, cookies ...*http.Cookie) response {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
	req.RemoteAddr = ip
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for _, c := range cookies {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{rec.Code, rec.Result().Header, rec.Body.Bytes()}
}

// cheapArgon2 is the hash cost of the tests' Apps (serveApp) unless a
// test sets one: their subject is what is checked and counted, not the
// cost.
var cheapArgon2 = Argon2Params{Memory: 1024, Time: 1, Threads: 1}

// TestDeviceLockout is a lockout by strangers: 10 addresses guess at one
// account until each is refused, with the default limits' bursts. That
// locks the account for every device its owner never logged in from (a
// fresh address with the right password gets 429), and the owner's own
// device, which holds the device cookie of an earlier login, still logs
// in, from its old address and from a new one. In the control run the
// owner's device logs in without its cookie, as it would to a server that
// recognized none, and the owner is locked out with the rest.
func TestDeviceLockout(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "device cookies", true: "control"}[control], func(t *testing.T) {
			testenv.Deadline(t, 2*time.Minute)
			cfg := Config{KeyPrefix: testenv.KeyPrefix(t), Throttle: defaultBursts(t)}
			cfg.Argon2 = cheapArgon2
			app, _ := startAppConfig(t, cfg)
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

			var owners []*http.Cookie // the control's device brings none
			if !control {
				owners = append(owners, device)
			}
			for _, ip := range []string{"198.51.100.7:1", "198.51.100.8:1"} {
				r := login(ip, goodPassword, owners...)
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

// lockAccount guesses wrong passwords at email from fresh addresses of
// 192.0.2.0/24 until a device its owner never used is refused by the
// account's own limit, and fails the test if that never comes.
func lockAccount(t *testing.T, app *App, email string) {
	t.Helper()
	for a := range 250 {
		ip := fmt.Sprintf("192.0.2.%d:1", a+1)
		for range 10 {
			r := fromWith(t, app, ip, "POST", "/api/login", `{"email":"`+email+`","password":"lock-guess-xyz-1"}`)
			if r.status == http.StatusTooManyRequests {
				if strings.Contains(r.errorMsg(t), "for this account;") {
					return
				}
				break // this address's limit: on to the next
			}
			if r.status != http.StatusUnauthorized {
				t.Fatalf("a guess to lock the account: %d %s", r.status, r.body)
			}
		}
	}
	t.Fatalf("250 addresses guessed at %s and the account's limit never answered", email)
}

// guessesWith sends wrong-password logins to email with the device cookie
// c from the address ip until one is refused (at most 10), and returns
// how many reached the password check (401).
func guessesWith(t *testing.T, app *App, ip, email string, c *http.Cookie) int {
	t.Helper()
	n := 0
	for range 10 {
		r := fromWith(t, app, ip, "POST", "/api/login", `{"email":"`+email+`","password":"guess-with-a-cookie-1"}`, c)
		if r.status == http.StatusTooManyRequests {
			return n
		}
		if r.status != http.StatusUnauthorized {
			t.Fatalf("a guess with a device cookie: %d %s", r.status, r.body)
		}
		n++
	}
	return n
}

// mintDevices logs in to email n times with its password, each from an
// address of its own (198.18.0.0/24, not counted by the addresses'
// limits the tests reach), as one who knows the password can, and
// returns the device cookies the logins set, oldest first.
func mintDevices(t *testing.T, app *App, email, password string, n int) []*http.Cookie {
	t.Helper()
	var out []*http.Cookie
	for i := range n {
		r := fromWith(t, app, fmt.Sprintf("198.18.0.%d:1", i+1), "POST", "/api/login", `{"email":"`+email+`","password":"`+password+`"}`)
		if r.status != http.StatusOK {
			t.Fatalf("login %d of %d: %d %s", i+1, n, r.status, r.body)
		}
		out = append(out, responseCookie(t, r, deviceCookieName))
	}
	return out
}

// TestDeviceCookiesAfterPasswordChange is a guessing attack by one who
// knew the password: 40 logins earned 40 device cookies; the owner
// changes the password, strangers lock the account for new devices, and
// the 40 cookies guess, each from its own address, until each is
// refused. None of their guesses reaches a password check: the cookies
// name the old credential epoch, so each counts as no device, against
// the locked account. The owner's device, given a cookie of the new
// epoch by the change, logs in with the new password. In the control
// run a cookie is valid whatever its epoch, and the test sees the
// guesses of the cookies the account's registry kept.
func TestDeviceCookiesAfterPasswordChange(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "bound to the epoch", true: "control"}[control], func(t *testing.T) {
			testenv.Deadline(t, 3*time.Minute)
			cfg := Config{KeyPrefix: testenv.KeyPrefix(t), Throttle: defaultBursts(t), Argon2: cheapArgon2}
			app, _ := startAppWithout(t, cfg, defences{devicesAnyEpoch: control})
			const owner, ownerIP = "owner@example.com", "198.51.100.7:1"
			verified, _ := signupVerified(t, app, ownerIP, owner, goodPassword)
			var l struct{ Token string }
			verified.json(t, &l)
			minted := mintDevices(t, app, owner, goodPassword, 40)
			// The owner changes the password from their newest device.
			device := minted[len(minted)-1]
			r := fromToken(t, app, ownerIP, "POST", "/api/password", l.Token,
				`{"current_password":"`+goodPassword+`","new_password":"`+otherPassword+`"}`, device)
			if r.status != http.StatusOK {
				t.Fatalf("password change: %d %s", r.status, r.body)
			}
			renewed := responseCookie(t, r, deviceCookieName)
			lockAccount(t, app, owner)

			checked := 0
			for i, c := range minted {
				checked += guessesWith(t, app, fmt.Sprintf("198.18.1.%d:1", i+1), owner, c)
			}
			t.Logf("%d guesses of 40 device cookies from before the change reached a password check", checked)
			if control {
				if checked == 0 {
					t.Fatal("control: no guess with the old cookies reached a password check; the test proves nothing")
				}
				return
			}
			if checked != 0 {
				t.Errorf("%d guesses with device cookies from before the password change reached a password check, want 0", checked)
			}
			if r := fromWith(t, app, "198.51.100.8:1", "POST", "/api/login", `{"email":"`+owner+`","password":"`+otherPassword+`"}`, renewed); r.status != http.StatusOK {
				t.Errorf("the owner's device, with the cookie the change gave it, during the lock: %d %s; want 200", r.status, r.body)
			}
		})
	}
}

// TestDeviceCap logs in to one account 40 times with its password, each
// login a new device, then locks the account for new devices and sends
// one wrong guess with each of the 40 cookies: only the maxDevices
// newest are recognized (their guesses reach the password check), the
// others count against the locked account. In the control run the test
// writes all 40 device numbers back into the account's registry, as a
// registry with no cap would hold them, and all 40 guesses are checked.
func TestDeviceCap(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "capped", true: "control"}[control], func(t *testing.T) {
			testenv.Deadline(t, 3*time.Minute)
			cfg := Config{KeyPrefix: testenv.KeyPrefix(t), Throttle: defaultBursts(t), Argon2: cheapArgon2}
			app, _ := startAppConfig(t, cfg)
			const owner = "owner@example.com"
			signupVerified(t, app, "198.51.100.7:1", owner, goodPassword)
			minted := mintDevices(t, app, owner, goodPassword, 40)
			if control {
				for _, c := range minted {
					d, err := app.devices.parse(c.Value, owner, time.Now())
					if err != nil {
						t.Fatalf("a device cookie the server set: %v", err)
					}
					if err := app.rdb.ZAdd(t.Context(), app.devices.registry(owner, d.epoch), redis.Z{Score: float64(d.issued.Unix()), Member: d.number}).Err(); err != nil {
						t.Fatalf("control: write the device number back: %v", err)
					}
				}
			}
			lockAccount(t, app, owner)
			var recognized []int
			for i, c := range minted {
				r := fromWith(t, app, fmt.Sprintf("198.18.1.%d:1", i+1), "POST", "/api/login", `{"email":"`+owner+`","password":"guess-with-a-cookie-1"}`, c)
				switch r.status {
				case http.StatusUnauthorized:
					recognized = append(recognized, i)
				case http.StatusTooManyRequests:
				default:
					t.Fatalf("a guess with cookie %d: %d %s", i, r.status, r.body)
				}
			}
			t.Logf("device cookies recognized: %v", recognized)
			if control {
				if len(recognized) != len(minted) {
					t.Fatalf("control: %d of %d cookies recognized, want all", len(recognized), len(minted))
				}
				return
			}
			if len(recognized) != maxDevices || recognized[0] != len(minted)-maxDevices {
				t.Errorf("cookies recognized: %v; want the %d newest", recognized, maxDevices)
			}
		})
	}
}

// TestDeviceNumberReuse logs the owner in from two devices, A and B, then
// 12 more times from A with A's cookie: A keeps its device number, so
// the account's registry holds two, and B is still recognized. In the
// control run A logs in without its cookie, so that every login gets a
// new number, as a server that ignored the cookie would give it, and A's
// logins push B out of the registry.
func TestDeviceNumberReuse(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "reused", true: "control"}[control], func(t *testing.T) {
			ctx := testenv.Deadline(t, 2*time.Minute)
			cfg := Config{KeyPrefix: testenv.KeyPrefix(t), Throttle: generous(), Argon2: cheapArgon2}
			cfg.Throttle.LoginPerDevice = cfg.Throttle.LoginPerIP
			app, _ := startAppConfig(t, cfg)
			const owner = "owner@example.com"
			_, a := signupVerified(t, app, "198.51.100.7:1", owner, goodPassword)
			b := mintDevices(t, app, owner, goodPassword, 1)[0]
			number := func(c *http.Cookie) string {
				d, err := app.devices.parse(c.Value, owner, time.Now())
				if err != nil {
					t.Fatalf("a device cookie the server set: %v", err)
				}
				return d.number
			}
			first, numbers := number(a), map[string]bool{}
			for range 12 {
				var brought []*http.Cookie // the control's A brings none
				if !control {
					brought = append(brought, a)
				}
				r := fromWith(t, app, "198.51.100.7:1", "POST", "/api/login", `{"email":"`+owner+`","password":"`+goodPassword+`"}`, brought...)
				if r.status != http.StatusOK {
					t.Fatalf("login from A: %d %s", r.status, r.body)
				}
				a = responseCookie(t, r, deviceCookieName)
				numbers[number(a)] = true
			}
			req := httptest.NewRequestWithContext(ctx, "POST", "/api/login", nil)
			req.AddCookie(b)
			_, err := app.devices.recognize(ctx, req, owner, 0)
			if control {
				if len(numbers) != 12 || !errors.Is(err, errNoDevice) {
					t.Fatalf("control: A had %d numbers in 12 logins, B recognized: %v; want 12 numbers and B pushed out", len(numbers), err)
				}
				return
			}
			if len(numbers) != 1 || !numbers[first] {
				t.Errorf("A's numbers over 12 logins with its cookie: %v, want its first, %s, alone", numbers, first)
			}
			if err != nil {
				t.Errorf("B after 12 logins from A: %v, want it recognized", err)
			}
		})
	}
}

// FuzzDeviceCookie feeds the device cookie's parser any value: it never
// panics, accepts a value only if it carries the key's MAC of the rest
// for the account, and never for another account.
func FuzzDeviceCookie(f *testing.F) {
	d := &devices{key: []byte("0123456789abcdef0123456789abcdef")}
	now := time.Now()
	signed := d.sign("owner@example.com", deviceCookie{number: "ABCDEFGHIJKLMNOP", epoch: 3, issued: now})
	f.Add(signed)
	f.Add("")
	f.Add(strings.Repeat("A", deviceValueLen*4/3))
	f.Add(signed[:len(signed)-1] + "B")
	f.Fuzz(func(t *testing.T, v string) {
		if _, err := d.parse(v, "owner@example.com", now); err == nil {
			b, derr := base64.RawURLEncoding.Strict().DecodeString(v)
			acct := accountDigest("owner@example.com")
			if derr != nil || len(b) != deviceValueLen || !hmac.Equal(b[deviceBodyLen:], d.mac(b[:deviceBodyLen])) ||
				!hmac.Equal(b[:deviceAccountLen], acct[:]) {
				t.Errorf("accepted %q, which is not signed for the account", v)
			}
		}
		if _, err := d.parse(v, "other@example.com", now); err == nil {
			t.Errorf("accepted %q for another account", v)
		}
	})
}

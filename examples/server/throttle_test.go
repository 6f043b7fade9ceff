package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// from sends a JSON request straight to the App's handler as if from the
// client address ip, so that one test can be many clients.
func from(t *testing.T, app *App, ip, method, path, body string) response {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
	req.RemoteAddr = ip
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	app.Handler().ServeHTTP(rec, req)
	return response{rec.Code, rec.Result().Header, rec.Body.Bytes()}
}

// strictLimits are small limits, with a slow refill, so that a test sees
// each one reached after a few requests and never refilled during it.
func strictLimits() ThrottleOptions {
	l := func(burst int) redis_rate.Limit { return redis_rate.Limit{Rate: 1, Period: time.Hour, Burst: burst} }
	return ThrottleOptions{LoginPerIP: l(6), LoginPerAccountPerIP: l(2), LoginPerAccount: l(4), SignupPerIP: l(3), SignupPerAccount: l(2)}
}

// defaultBursts returns login limits with the bursts of the default
// limits (see ThrottleOptions), what an attack spends before it is
// refused, that refill one request a day: a test of what the bursts let
// through sees the same counts however long a busy machine takes to run
// it, since nothing refills meanwhile. Signups stay generous.
func defaultBursts(t *testing.T) ThrottleOptions {
	t.Helper()
	def, err := newThrottle(ThrottleOptions{}, "")
	if err != nil {
		t.Fatal(err)
	}
	l := func(r rule) redis_rate.Limit {
		return redis_rate.Limit{Rate: 1, Period: 24 * time.Hour, Burst: def.limits[r].Burst}
	}
	o := generous()
	o.LoginPerIP, o.LoginPerAccountPerIP, o.LoginPerAccount, o.LoginPerDevice = l(loginIP), l(loginAccountIP), l(loginAccount), l(loginDevice)
	return o
}

// want429 fails unless r is a 429 whose Retry-After is whole seconds
// between 1 and limit's period, and whose message holds msg and the same
// wait.
func want429(t *testing.T, r response, msg string, period time.Duration) {
	t.Helper()
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("status %d (%s), want 429", r.status, r.body)
	}
	wait, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || wait < 1 || wait > int(period.Seconds()) {
		t.Fatalf("Retry-After %q, want whole seconds from 1 to %v", r.header.Get("Retry-After"), period)
	}
	if got := r.errorMsg(t); !strings.Contains(got, msg) || !strings.Contains(got, fmt.Sprintf("try again in %d s", wait)) {
		t.Fatalf("429 says %q; want %q and the wait of Retry-After, %d s", got, msg, wait)
	}
}

// TestThrottle reaches each rate limit of login and signup on the embedded
// miniredis, a real Redis and a Redis Cluster, and, in the control run
// with limits that no test reaches (generous), sees every request reach
// the password check.
func TestThrottle(t *testing.T) {
	t.Parallel()
	for _, b := range []backend{embedded(), realServers(), cluster()} {
		t.Run(b.name, func(t *testing.T) {
			testenv.Deadline(t, 2*time.Minute)
			cfg := b.config(t)
			cfg.Throttle = strictLimits()
			testThrottle(t, cfg, false)
		})
	}
	t.Run("control", func(t *testing.T) {
		testenv.Deadline(t, 2*time.Minute)
		cfg := embedded().config(t)
		cfg.Throttle = generous()
		testThrottle(t, cfg, true)
	})
}

func testThrottle(t *testing.T, cfg Config, control bool) {
	app, _ := startAppConfig(t, cfg)
	// The account exists: one signup and its verification, from its own
	// address; the verification's password check counts against the
	// account's login limits.
	signupVerified(t, app, "192.0.2.99:1", "vic@example.com", goodPassword)
	login := func(ip, email, password string) response {
		return from(t, app, ip, "POST", "/api/login", `{"email":"`+email+`","password":"`+password+`"}`)
	}
	hashes := app.hashes.hashes.Load()
	var statuses []int
	check := func(r response, want int, msg string) {
		t.Helper()
		statuses = append(statuses, r.status)
		switch {
		case control:
			if r.status == 429 {
				t.Fatalf("control run (no limits) answered 429: %s", r.body)
			}
		case want == 429:
			want429(t, r, msg, time.Hour)
		case r.status != want:
			t.Fatalf("status %d (%s), want %d", r.status, r.body, want)
		}
	}

	// Per account and address: 2 guesses from 192.0.2.1, then 429, for a
	// registered and an unknown email alike.
	for _, email := range []string{"vic@example.com", "nobody@example.com"} {
		check(login("192.0.2.1:1", email, otherPassword), 401, "")
		check(login("192.0.2.1:1", email, otherPassword), 401, "")
		check(login("192.0.2.1:1", email, goodPassword), 429, "for this account from your address")
	}
	// The owner, from another address, still gets in.
	check(login("192.0.2.2:1", "vic@example.com", goodPassword), 200, "")
	// Per address: 192.0.2.1 has spent 6 (two 429s counted too): any
	// account now gets 429.
	check(login("192.0.2.1:1", "other@example.com", otherPassword), 429, "from your address")
	// An IPv6 client is its /64: ::1 and ::2 share a budget, another /64
	// has its own.
	for i := range 6 {
		check(login(fmt.Sprintf("[2001:db8::%d]:1", i+1), fmt.Sprintf("v6-%d@example.com", i), otherPassword), 401, "")
	}
	check(login("[2001:db8::77]:1", "v6-x@example.com", otherPassword), 429, "from your address")
	check(login("[2001:db8:0:1::1]:1", "v6-y@example.com", otherPassword), 401, "")
	// Per account from all addresses: vic has had 1 (the verification,
	// from 192.0.2.99) + 2 (192.0.2.1) + 1 (192.0.2.2) of 4: from fresh
	// addresses, 429, for the owner too on a device they never logged in
	// from (TestDeviceLockout shows their known devices).
	check(login("192.0.2.3:1", "vic@example.com", otherPassword), 429, "for this account;")
	check(login("192.0.2.4:1", "vic@example.com", goodPassword), 429, "for this account;")

	// Signup: per account (any address), then per address.
	signup := func(ip, email string) response {
		return from(t, app, ip, "POST", "/api/signup", `{"email":"`+email+`","password":"`+goodPassword+`","name":"S"}`)
	}
	check(signup("198.51.100.1:1", "squat@example.com"), 202, "")
	check(signup("198.51.100.2:1", "squat@example.com"), 202, "")
	check(signup("198.51.100.3:1", "squat@example.com"), 429, "signups for this address")
	check(signup("198.51.100.4:1", "a@example.com"), 202, "")
	check(signup("198.51.100.4:1", "b@example.com"), 202, "")
	check(signup("198.51.100.4:1", "c@example.com"), 202, "")
	check(signup("198.51.100.4:1", "d@example.com"), 429, "signups from your address")

	// A 429 costs no password hash: only the others reached the pool.
	reached := 0
	for _, s := range statuses {
		if s != 429 {
			reached++
		}
	}
	if got := int(app.hashes.hashes.Load() - hashes); got != reached {
		t.Errorf("%d hashes for %d requests that were not throttled", got, reached)
	}
	if control {
		return
	}
	var denied uint64
	for r := range numRules {
		denied += app.limits.denied[r].Load()
	}
	if want := uint64(len(statuses) - reached); denied != want {
		t.Errorf("throttled counters say %d, the answers %d", denied, want)
	}
}

// TestLoginFlood is a guessing flood: 300 wrong-password logins at 60-way
// concurrency from one address, against one account, with the default
// limits' bursts (refilling nothing during the test). Only the per-account-and-address burst (5) may reach the
// password hashes, and a bystander's login from another address goes
// through; in the control run every guess is hashed. (The flood's
// latencies are measured by the loginflood command, not here: a test on a
// shared machine counts, it does not time.)
func TestLoginFlood(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "defended", true: "control"}[control], func(t *testing.T) {
			testenv.Deadline(t, 3*time.Minute)
			// The limiter's Redis client does not retry. go-redis sends a
			// call that timed out again, up to 3 times by default, and a
			// call that ran but answered late has spent a token of the
			// burst that no guess got: under two stressed make tests at
			// once, only 1 guess of the burst of 5 reached the hashes.
			// Without retries, such a call is answered "rate limiter
			// unavailable", which the flood sends again and counts. An
			// in-process Redis, as the embedded default's, and a fixed
			// worker, as the embedded default has.
			const n, conc = 300, 60
			mr := miniredis.RunT(t)
			rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			cfg := Config{KeyPrefix: testenv.KeyPrefix(t), Throttle: defaultBursts(t), Redis: rdb, Worker: 1}
			// The control sets limits that the flood does not reach, and a
			// hash queue that holds the whole flood: the default queue
			// alone answers part of it 503.
			if control {
				cfg.Throttle = generous()
				cfg.Throttle.HashQueue = n
			}
			cfg.Argon2 = Argon2Params{Memory: 1024, Time: 1, Threads: 1} // the count is under test, not the cost
			app, srv := startAppConfig(t, cfg)
			signupVerified(t, app, "203.0.113.1:1", "victim@example.com", goodPassword)
			hashes := app.hashes.hashes.Load()

			var mu sync.Mutex
			counts := map[int]int{}
			// unavailable counts the answers "rate limiter unavailable":
			// the limiter's Redis did not answer in time (seen under
			// stress-ng --cpu 8), and the login failed closed, unhashed.
			// Such a guess is sent again, up to 5 times: the flood is
			// about what the limits decide. Its call may still have
			// spent a token of the burst.
			unavailable := 0
			jobs := make(chan int)
			var wg sync.WaitGroup
			for range conc {
				wg.Go(func() {
					for range jobs {
						var r int
						for try := 0; try < 5; try++ {
							var body string
							r, body = callBody(srv, "POST", "/api/login", `{"email":"victim@example.com","password":"`+otherPassword+`"}`)
							if r != http.StatusServiceUnavailable || !strings.Contains(body, "rate limiter unavailable") {
								break
							}
							mu.Lock()
							unavailable++
							mu.Unlock()
						}
						mu.Lock()
						counts[r]++
						mu.Unlock()
					}
				})
			}
			for i := range n {
				jobs <- i
			}
			close(jobs)
			wg.Wait()
			reached := app.hashes.hashes.Load() - hashes
			t.Logf("flood answers %v; %d reached the password hashes; %d answers were \"rate limiter unavailable\", sent again", counts, reached, unavailable)
			if control {
				if counts[401] != n || reached != n {
					t.Errorf("control: %v, %d hashed; want all %d answered 401 after a hash", counts, reached, n)
				}
				return
			}
			if counts[401] != int(reached) || counts[401]+counts[429] != n {
				t.Errorf("answers %v with %d hashed: want only 401 and 429, one hash per 401", counts, reached)
			}
			// The burst, less what unanswered calls may have spent of it.
			if burst := uint64(cfg.Throttle.LoginPerAccountPerIP.Burst); reached > burst || reached+uint64(unavailable) < burst {
				t.Errorf("%d guesses reached the hashes, want the per-account-and-address burst of %d (less up to %d calls the limiter did not answer)",
					reached, burst, unavailable)
			}
			// The owner and a bystander log in from other addresses.
			r := from(t, app, "203.0.113.7:1", "POST", "/api/login", `{"email":"victim@example.com","password":"`+goodPassword+`"}`)
			if r.status != 200 {
				t.Errorf("the owner's login from another address during the flood: %d %s", r.status, r.body)
			}
		})
	}
}

// signupVerified signs up email from the address ip and follows the link
// of its mail, straight through the App's handler, and returns the
// verification's answer (a login's) and the device cookie it set.
func signupVerified(t *testing.T, app *App, ip, email, password string) (response, *http.Cookie) {
	t.Helper()
	if r := from(t, app, ip, "POST", "/api/signup", `{"email":"`+email+`","password":"`+password+`","name":"S"}`); r.status != 202 {
		t.Fatalf("signup %s: %d %s", email, r.status, r.body)
	}
	r := from(t, app, ip, "POST", "/api/verify", mustJSON(t, map[string]string{"token": appOutboxToken(t, app, email), "password": password}))
	if r.status != 200 {
		t.Fatalf("verify %s: %d %s", email, r.status, r.body)
	}
	return r, responseCookie(t, r, deviceCookieName)
}

// appOutboxToken is outboxToken read from the App itself.
func appOutboxToken(t *testing.T, app *App, email string) string {
	t.Helper()
	mails, _ := app.outbox.messages()
	for _, m := range mails {
		if tok := verifyTokenRE.FindStringSubmatch(m.Body); m.To == email && tok != nil {
			return tok[1]
		}
	}
	t.Fatalf("no sign-up link to %s in the outbox", email)
	return ""
}

// responseCookie returns the cookie named name that r sets, or fails.
func responseCookie(t *testing.T, r response, name string) *http.Cookie {
	t.Helper()
	for _, line := range r.header.Values("Set-Cookie") {
		if c, err := http.ParseSetCookie(line); err == nil && c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s cookie in %q", name, r.header.Values("Set-Cookie"))
	return nil
}

// callBody is call for many goroutines: no t, just the status (-1 for a
// transport error) and the body.
func callBody(srv *httptest.Server, method, path, body string) (int, string) {
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		return -1, ""
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := srv.Client().Do(req)
	if err != nil {
		return -1, ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestBlockList checks that a key Redis refused is answered from memory
// until the moment Redis named, with the wait counting down, and asked of
// Redis again after it; and that the list stays bounded.
func TestBlockList(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 30*time.Second)
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	th, err := newThrottle(ThrottleOptions{LoginPerIP: redis_rate.Limit{Rate: 1, Period: 2 * time.Second, Burst: 1}}, "")
	if err != nil {
		t.Fatal(err)
	}
	th.bind(rdb)
	if e, err := th.allow(ctx, loginIP, "a"); e != nil || err != nil {
		t.Fatalf("first request: %v, %v", e, err)
	}
	e, err := th.allow(ctx, loginIP, "a")
	if err != nil || e == nil || e.status != 429 || e.retryAfter != 2 {
		t.Fatalf("second request: %+v, %v; want 429 with a 2 s wait", e, err)
	}
	calls := m.CommandCount()
	for range 100 {
		if e, _ := th.allow(ctx, loginIP, "a"); e == nil || e.status != 429 {
			t.Fatalf("a refused key let through before its moment: %+v", e)
		}
	}
	if got := m.CommandCount(); got != calls {
		t.Errorf("100 refusals from memory sent %d Redis commands", got-calls)
	}
	if got := th.denied[loginIP].Load(); got != 101 {
		t.Errorf("denied counter %d, want 101", got)
	}
	// Past the moment, Redis decides again, and lets one through.
	th.blocked.mu.Lock()
	th.blocked.until[th.prefix+loginIP.name()+":a"] = time.Now().Add(-time.Millisecond)
	th.blocked.mu.Unlock()
	time.Sleep(2100 * time.Millisecond) // Redis's own clock: one emission interval
	if e, err := th.allow(ctx, loginIP, "a"); e != nil || err != nil {
		t.Fatalf("after the wait: %+v, %v", e, err)
	}

	var b blockList
	now := time.Now()
	for i := range maxBlocked + 10 {
		b.block(strconv.Itoa(i), now.Add(time.Minute), now)
	}
	if len(b.until) != maxBlocked {
		t.Errorf("%d keys remembered, want at most %d", len(b.until), maxBlocked)
	}
	b.block("late", now.Add(time.Minute), now.Add(2*time.Minute)) // every entry has expired by then
	if _, ok := b.wait("late", now); !ok || len(b.until) != 1 {
		t.Errorf("a full list of expired keys was not cleared: %d keys", len(b.until))
	}
}

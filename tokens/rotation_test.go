package tokens

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestRotationGrace: within Options.RotationGrace, the token that Rotate
// replaced validates as the new session, and Rotate of it returns the
// new token again, so that requests a client sent before the rotation's
// answer came back are served and a second rotation agrees with the
// first. The control, without the grace window, refuses both.
func TestRotationGrace(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		for _, control := range []bool{false, true} {
			t.Run(map[bool]string{false: "grace", true: "control"}[control], func(t *testing.T) {
				ctx := t.Context()
				gen := newGen(t)
				m := openManagerWithout(t, b.client(t), gen, Options{RotationGrace: MaxRotationGrace}, defences{noRotationGrace: control})
				user := userID(t, gen)
				old, first := issue(t, m, user, Metadata{Device: "phone"})
				tok, s, err := m.Rotate(ctx, old)
				if err != nil {
					t.Fatalf("Rotate: %v", err)
				}

				got, next, err := m.validate(ctx, old)
				switch {
				case control:
					if !errors.Is(err, ErrInvalidToken) {
						t.Errorf("control: the rotated-out token validates (%+v, %v) without the grace window", got, err)
					}
				case err != nil || got != s || next != tok:
					t.Errorf("the rotated-out token validates as %+v (next %q), %v; want the new session %+v and its token", got, next, err, s)
				}

				again, s2, err := m.Rotate(ctx, old)
				switch {
				case control:
					if !errors.Is(err, ErrInvalidToken) {
						t.Errorf("control: a second Rotate of the old token = %v, want ErrInvalidToken", err)
					}
				case err != nil || again != tok || s2 != s:
					t.Errorf("a second Rotate of the old token = %+v, %v; want the first rotation's token and session", s2, err)
				}
				if list, err := m.List(ctx, user); err != nil || len(list) != 1 || list[0].ID != s.ID || list[0].ID == first.ID {
					t.Errorf("List = %+v, %v; want the new session alone", list, err)
				}
				if got, err := m.Validate(ctx, tok); err != nil || got != s {
					t.Errorf("the new token: %+v, %v", got, err)
				}
			})
		}
	})
}

// TestRotationGraceEnds: the rotated-out token stops working once the
// grace window has passed, for Validate, Rotate and Revoke alike, and
// the new session lives on. Before the window ends the same token is
// seen to work, so the test meets the window it checks.
func TestRotationGraceEnds(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, realBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		const grace = time.Second
		m := openManager(t, b.client(t), gen, Options{RotationGrace: grace})
		old, _ := issue(t, m, userID(t, gen), Metadata{})
		tok, s, err := m.Rotate(ctx, old)
		rotated := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Validate(ctx, old); err != nil && time.Since(rotated) < grace {
			t.Fatalf("the rotated-out token within the window: %v", err)
		}
		// Redis expires the stub by its own clock, the machine's: past
		// the window by this process's clock, it is gone.
		time.Sleep(grace - time.Since(rotated) + 10*time.Millisecond)
		if _, err := m.Validate(ctx, old); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("Validate of the rotated-out token after the window: %v", err)
		}
		if _, _, err := m.Rotate(ctx, old); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("Rotate of the rotated-out token after the window: %v", err)
		}
		if err := m.Revoke(ctx, old); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("Revoke of the rotated-out token after the window: %v", err)
		}
		if got, err := m.Validate(ctx, tok); err != nil || got.ID != s.ID {
			t.Errorf("the new token after the window: %+v, %v", got, err)
		}
	})
}

// TestRotationGraceRevocation: a revocation ends the rotated-out token
// at once, grace or not. Each case first sees the old token served
// within the window, then revokes, then finds both tokens refused and
// nothing listed. Revoke of the old token and RevokeSession of the old
// session's ID end the new session too; their control, which ends only
// the stub's own token, leaves the new session live and listed, held by
// nobody once the logout has deleted the cookie.
func TestRotationGraceRevocation(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		c := b.client(t)
		revocations := []struct {
			name    string
			control bool // has a control run, with noGraceRevoke
			revoke  func(m *Manager, user idtype.ID, old string, oldS Session, tok string, s Session) error
		}{
			{"Revoke of the old token", true, func(m *Manager, _ idtype.ID, old string, _ Session, _ string, _ Session) error {
				return m.Revoke(ctx, old)
			}},
			{"RevokeSession of the old session", true, func(m *Manager, user idtype.ID, _ string, oldS Session, _ string, _ Session) error {
				if ok, err := m.RevokeSession(ctx, user, oldS.ID); err != nil || !ok {
					return fmt.Errorf("RevokeSession = %v, %v; want true", ok, err)
				}
				return nil
			}},
			{"Revoke of the new token", false, func(m *Manager, _ idtype.ID, _ string, _ Session, tok string, _ Session) error {
				return m.Revoke(ctx, tok)
			}},
			{"RevokeSession of the new session", false, func(m *Manager, user idtype.ID, _ string, _ Session, _ string, s Session) error {
				if ok, err := m.RevokeSession(ctx, user, s.ID); err != nil || !ok {
					return fmt.Errorf("RevokeSession = %v, %v; want true", ok, err)
				}
				return nil
			}},
			{"RevokeAll", false, func(m *Manager, user idtype.ID, _ string, _ Session, _ string, _ Session) error {
				n, err := m.RevokeAll(ctx, user)
				if err == nil && n != 1 {
					err = fmt.Errorf("RevokeAll ended %d sessions, want 1", n)
				}
				return err
			}},
			{"MaxSessions", false, func(m *Manager, user idtype.ID, _ string, _ Session, _ string, _ Session) error {
				_, _, err := m.Issue(ctx, user, Metadata{})
				return err
			}},
			{"a second rotation, then Revoke of its token", false, func(m *Manager, _ idtype.ID, _ string, _ Session, tok string, _ Session) error {
				third, _, err := m.Rotate(ctx, tok)
				if err != nil {
					return err
				}
				return m.Revoke(ctx, third)
			}},
		}
		for _, rv := range revocations {
			for _, control := range []bool{false, true} {
				if control && !rv.control {
					continue
				}
				name := rv.name
				if control {
					name = "control: " + name
				}
				t.Run(name, func(t *testing.T) {
					m := openManagerWithout(t, c, gen, Options{RotationGrace: MaxRotationGrace, MaxSessions: 1, CacheTTL: time.Minute},
						defences{noGraceRevoke: control})
					user := userID(t, gen)
					old, oldS := issue(t, m, user, Metadata{})
					tok, s, err := m.Rotate(ctx, old)
					if err != nil {
						t.Fatal(err)
					}
					if got, err := m.Validate(ctx, old); err != nil || got.ID != s.ID {
						t.Fatalf("the rotated-out token before the revocation: %+v, %v; want it served as the new session", got, err)
					}
					err = rv.revoke(m, user, old, oldS, tok, s)
					if control {
						// Without following the stub, the logout ends
						// nothing: the new session lives on, listed.
						list, _ := m.List(ctx, user)
						if _, verr := m.Validate(ctx, tok); verr != nil || len(list) != 1 {
							t.Errorf("control: %s (%v) left the new session %v, listed %d; want it live and listed: the test does not reach the fault",
								rv.name, err, verr, len(list))
						}
						return
					}
					if err != nil {
						t.Fatalf("%s: %v", rv.name, err)
					}
					for what, tk := range map[string]string{"old": old, "new": tok} {
						if got, err := m.Validate(ctx, tk); !errors.Is(err, ErrInvalidToken) {
							t.Errorf("after %s, the %s token validates: %+v, %v", rv.name, what, got, err)
						}
					}
					if list, err := m.List(ctx, user); err != nil || slices.ContainsFunc(list, func(x Session) bool { return x.ID == s.ID || x.ID == oldS.ID }) {
						t.Errorf("after %s, List = %+v, %v", rv.name, list, err)
					}
				})
			}
		}
	})
}

// TestRotationChain: a token rotated out, whose successor was rotated in
// turn within the window, leads to the newest session; past maxGraceHops
// rotations it is refused.
func TestRotationChain(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		m := openManager(t, b.client(t), gen, Options{RotationGrace: MaxRotationGrace})
		tok, _ := issue(t, m, userID(t, gen), Metadata{})
		toks := []string{tok}
		var s Session
		for range maxGraceHops + 1 {
			next, ns, err := m.Rotate(ctx, toks[len(toks)-1])
			if err != nil {
				t.Fatal(err)
			}
			toks, s = append(toks, next), ns
		}
		newest := toks[len(toks)-1]
		for i, tok := range toks {
			got, next, err := m.validate(ctx, tok)
			hops := len(toks) - 1 - i
			switch {
			case hops > maxGraceHops:
				if !errors.Is(err, ErrInvalidToken) {
					t.Errorf("a token %d rotations old validates: %v", hops, err)
				}
			case err != nil || got.ID != s.ID || (hops > 0 && next != newest):
				t.Errorf("a token %d rotations old: %+v (next %q), %v; want the newest session", hops, got, next, err)
			}
		}
		// Rotate of an old one returns the newest.
		if got, gs, err := m.Rotate(ctx, toks[1]); err != nil || got != newest || gs.ID != s.ID {
			t.Errorf("Rotate of a token rotated %d times since: %v, session %d; want the newest", len(toks)-2, err, gs.ID)
		}
	})
}

// browser is what a browser keeps of the server's cookies, by RFC 6265
// (Go's cookie jar): a page on https://app.example.com.
type browser struct {
	t   *testing.T
	jar *cookiejar.Jar
	url *url.URL
}

func newBrowser(t *testing.T) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("https://app.example.com/api/posts")
	return &browser{t: t, jar: jar, url: u}
}

// request makes a same-origin request to path that carries the cookies
// the browser holds now, as a request leaves the browser.
func (b *browser) request(method, path string) *http.Request {
	r := httptest.NewRequest(method, "https://app.example.com"+path, nil)
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	for _, c := range b.jar.Cookies(r.URL) {
		r.AddCookie(c)
	}
	return r
}

// answer takes the cookies of an answer, as the browser does when it
// arrives.
func (b *browser) answer(w *httptest.ResponseRecorder) {
	b.jar.SetCookies(b.url, (&http.Response{Header: w.Header()}).Cookies())
}

// held returns the values of the cookie named name that the browser sends
// to the API.
func (b *browser) held(name string) []string {
	var out []string
	for _, c := range b.jar.Cookies(b.url) {
		if c.Name == name {
			out = append(out, c.Value)
		}
	}
	return out
}

// TestCookieRotationGrace is the browser's side: requests that left with
// the old cookie while the rotation ran (another tab's or a background
// fetch, a second click that rotates again) are answered, in every order
// of arrival, without logging the browser out: it ends holding the new
// session's token, the user's one live session. An answer lost on the
// way (the rotation's) is made up for by the next one. The control,
// without the grace window, sees the browser logged out in some order,
// with the rotated session live and listed, held by nobody.
func TestCookieRotationGrace(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		for _, control := range []bool{false, true} {
			t.Run(map[bool]string{false: "grace", true: "control"}[control], func(t *testing.T) {
				rig := newCookieRigWith(t, b, Options{RotationGrace: MaxRotationGrace}, defences{noRotationGrace: control},
					CookieOptions{}, cookieDefences{})
				gen := newGen(t)
				// Three requests leave with the old cookie: the rotation
				// (a re-authentication), a background fetch, and the
				// rotation again (a double click); the server answers
				// them in that order, and the answers reach the browser
				// in any order.
				orders := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
				loggedOut := 0
				for _, order := range orders {
					user := userID(t, gen)
					br := newBrowser(t)
					w := httptest.NewRecorder()
					if _, err := rig.c.Issue(w, br.request("POST", "/login"), user, Metadata{}); err != nil {
						t.Fatal(err)
					}
					br.answer(w)
					reqs := []*http.Request{br.request("POST", "/reauth"), br.request("GET", "/api/posts"), br.request("POST", "/reauth")}
					answers := make([]*httptest.ResponseRecorder, 3)
					answers[0] = httptest.NewRecorder()
					_, rotateErr := rig.c.Rotate(answers[0], reqs[0])
					if rotateErr != nil {
						t.Fatalf("the rotation: %v", rotateErr)
					}
					answers[1] = rig.serve(reqs[1])
					answers[2] = httptest.NewRecorder()
					_, againErr := rig.c.Rotate(answers[2], reqs[2])
					for _, i := range order {
						br.answer(answers[i])
					}
					held := br.held(DefaultCookieName)
					list, err := rig.m.List(t.Context(), user)
					if err != nil || len(list) != 1 {
						t.Fatalf("order %v: List = %+v, %v; want one session", order, list, err)
					}
					var heldS Session
					var heldErr error = ErrInvalidToken
					if len(held) == 1 {
						heldS, heldErr = rig.m.Validate(t.Context(), held[0])
					}
					if control {
						if heldErr != nil {
							loggedOut++
						}
						continue
					}
					if answers[1].Code != 200 || againErr != nil {
						t.Errorf("order %v: the fetch got %d, the second rotation %v; want both served", order, answers[1].Code, againErr)
					}
					if heldErr != nil || heldS.ID != list[0].ID {
						t.Errorf("order %v: the browser holds %d cookies, whose session is %d (%v); the live session is %d",
							order, len(held), heldS.ID, heldErr, list[0].ID)
					}
				}
				if control && loggedOut == 0 {
					t.Errorf("control: without the grace window no order of answers logged the browser out: the test does not reach the fault")
				}

				// The rotation's answer is lost (the tab was closed, the
				// connection cut): the next request, with the old
				// cookie, brings the new one.
				user := userID(t, gen)
				br := newBrowser(t)
				w := httptest.NewRecorder()
				if _, err := rig.c.Issue(w, br.request("POST", "/login"), user, Metadata{}); err != nil {
					t.Fatal(err)
				}
				br.answer(w)
				if _, err := rig.c.Rotate(httptest.NewRecorder(), br.request("POST", "/reauth")); err != nil {
					t.Fatal(err)
				}
				w = rig.serve(br.request("GET", "/api/posts"))
				br.answer(w)
				held := br.held(DefaultCookieName)
				list, _ := rig.m.List(t.Context(), user)
				if len(list) != 1 {
					t.Fatalf("after the lost answer the user has %d sessions, want 1", len(list))
				}
				var heldErr error = ErrInvalidToken
				if len(held) == 1 {
					var s Session
					if s, heldErr = rig.m.Validate(t.Context(), held[0]); heldErr == nil && s.ID != list[0].ID {
						heldErr = fmt.Errorf("session %d, not the live one", s.ID)
					}
				}
				switch {
				case control && heldErr == nil:
					t.Errorf("control: the browser still holds the live session after the lost answer: the test does not reach the fault")
				case !control && (w.Code != 200 || heldErr != nil):
					t.Errorf("after the lost answer: the next request got %d and the browser holds %d cookies (%v)", w.Code, len(held), heldErr)
				}
			})
		}
	})
}

// TestRotationRace: concurrent rotations of one token, as a double click
// sends them, all answer with one token, and the browser ends holding
// the one live session, whichever answer it reads last. The control,
// without the grace window, lets one win: the losers' answers delete the
// cookie, and the winner's session lives on, held by nobody.
func TestRotationRace(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, realBackends(), func(t *testing.T, b backend) {
		for _, control := range []bool{false, true} {
			t.Run(map[bool]string{false: "grace", true: "control"}[control], func(t *testing.T) {
				rig := newCookieRigWith(t, b, Options{RotationGrace: MaxRotationGrace}, defences{noRotationGrace: control},
					CookieOptions{}, cookieDefences{})
				user := userID(t, newGen(t))
				br := newBrowser(t)
				w := httptest.NewRecorder()
				if _, err := rig.c.Issue(w, br.request("POST", "/login"), user, Metadata{}); err != nil {
					t.Fatal(err)
				}
				br.answer(w)
				const clicks = 8
				reqs := make([]*http.Request, clicks)
				for i := range reqs {
					reqs[i] = br.request("POST", "/reauth")
				}
				answers := make([]*httptest.ResponseRecorder, clicks)
				errs := make([]error, clicks)
				var wg sync.WaitGroup
				for i := range clicks {
					answers[i] = httptest.NewRecorder()
					wg.Go(func() { _, errs[i] = rig.c.Rotate(answers[i], reqs[i]) })
				}
				wg.Wait()
				// The browser reads the answers that failed last: the
				// order that logs it out if any can.
				deletes := func(w *httptest.ResponseRecorder) int {
					if c := setCookie(t, w, DefaultCookieName); c != nil && c.MaxAge < 0 {
						return 1
					}
					return 0
				}
				slices.SortStableFunc(answers, func(a, b *httptest.ResponseRecorder) int { return deletes(a) - deletes(b) })
				for _, a := range answers {
					br.answer(a)
				}
				failed := 0
				for _, err := range errs {
					if err != nil {
						failed++
					}
				}
				list, err := rig.m.List(t.Context(), user)
				if err != nil || len(list) != 1 {
					t.Fatalf("List = %+v, %v; want one session", list, err)
				}
				held := br.held(DefaultCookieName)
				var heldErr error = ErrInvalidToken
				if len(held) == 1 {
					_, heldErr = rig.m.Validate(t.Context(), held[0])
				}
				if control {
					if failed == 0 || heldErr == nil {
						t.Errorf("control: %d of %d rotations failed, and the browser holds a live session (%v): the test does not reach the fault",
							failed, clicks, heldErr)
					}
					return
				}
				if failed > 0 || heldErr != nil {
					t.Errorf("%d of %d concurrent rotations failed (%v); the browser's cookie: %v", failed, clicks, errs, heldErr)
				}
			})
		}
	})
}

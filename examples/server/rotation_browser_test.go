package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/tokens"
)

// gateHeader marks a request of the page that the test's gate holds.
const gateHeader = "X-Test-Gate"

// gate holds each request that carries gateHeader until the test lets it
// through, and tells the test the session cookie it left the browser
// with: the test's way to have a request leave with the old cookie and
// reach the server after a rotation, whatever the machine's speed.
type gate struct {
	arrived chan *held
}

// held is a request the gate holds.
type held struct {
	cookie  string        // the session cookie it carried
	release chan struct{} // closed by the test to let it through
	done    chan struct{} // closed once the server has answered it
}

func newGate() *gate { return &gate{arrived: make(chan *held, 8)} }

func (g *gate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(gateHeader) == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := &held{release: make(chan struct{}), done: make(chan struct{})}
		defer close(h.done)
		if c, err := r.Cookie("__Host-session"); err == nil {
			h.cookie = c.Value
		}
		g.arrived <- h
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
		next.ServeHTTP(w, r)
	})
}

// wait returns the next request the gate holds.
func (g *gate) wait(ctx context.Context, t *testing.T, what string) *held {
	t.Helper()
	select {
	case h := <-g.arrived:
		return h
	case <-ctx.Done():
		t.Fatalf("%s never reached the server: %v", what, ctx.Err())
		return nil
	}
}

// through lets h through and waits for the server's answer.
func (h *held) through(ctx context.Context, t *testing.T) {
	t.Helper()
	close(h.release)
	select {
	case <-h.done:
	case <-ctx.Done():
		t.Fatalf("a held request was never answered: %v", ctx.Err())
	}
}

// startGatedApp is startAppConfig with the gate in front of the App's
// handler.
func startGatedApp(t *testing.T, cfg Config, g *gate) (*App, *httptest.Server) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv := httptest.NewUnstartedServer(nil)
	cfg.PublicURL = "http://" + srv.Listener.Addr().String() + "/"
	app, err := Open(ctx, cfg)
	if err != nil {
		srv.Close()
		t.Fatalf("Open: %v", err)
	}
	srv.Config.Handler = g.wrap(app.Handler())
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := app.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return app, srv
}

// rotationRun is a side of TestBrowserRotation: the grace window, or the
// control, whose window of 1 ms has passed before the requests that left
// with the old cookie arrive, as if there were none.
type rotationRun struct {
	name    string
	grace   time.Duration
	control bool
}

var rotationRuns = []rotationRun{
	{"grace window", tokens.MaxRotationGrace, false},
	{"control: a window of 1 ms", time.Millisecond, true},
}

// TestBrowserRotation drives the page in Chromium while its session's
// token is rotated (POST /api/reauth, which tokens.Cookies.Rotate serves)
// with requests of the same browser on the way, each held by the test
// until the rotation has answered, and each seen to leave with the old
// cookie:
//
//   - two tabs: the second tab's background fetch left before the first
//     tab's re-authentication, and arrives after it;
//   - a double-clicked re-authentication button: two rotations with the
//     old cookie, answered one after the other.
//
// Within the grace window the late requests are served, the browser keeps
// a cookie of the one live session, and both tabs stay logged in. The
// control, with a window of 1 ms, sees what the window prevents: the late
// answer deletes the cookie, the tabs are logged out, and the rotated
// session lives on, listed, held by nobody.
func TestBrowserRotation(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 6*time.Minute)
	browser := startBrowser(t)
	for i, run := range rotationRuns {
		t.Run(run.name, func(t *testing.T) {
			ctx := testenv.Deadline(t, 3*time.Minute)
			g := newGate()
			cfg := realServers().config(t)
			cfg.Throttle = generous()
			cfg.Tokens.RotationGrace = run.grace
			app, srv := startGatedApp(t, cfg, g)
			tab := pageDriver{t: t, ctx: browser, shot: screenshotter(t, browser)}

			// Two tabs and a background fetch.
			email := fmt.Sprintf("tabs%d@example.com", i)
			user := browserLogin(t, srv, tab, email)
			old := tab.sessionCookie(srv.URL)
			tab2ctx, cancel := chromedp.NewContext(browser)
			defer cancel()
			tab2 := pageDriver{t: t, ctx: tab2ctx, shot: screenshotter(t, tab2ctx)}
			tab2.do("open the page in a second tab", chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.CSS("#app")))
			tab2.eval(`(window.late = fetch("/api/me", {headers: {"` + gateHeader + `": "1"}}).then(r => String(r.status)), "sent")`)
			late := g.wait(ctx, t, "the second tab's fetch")
			if late.cookie != old.Value {
				t.Fatalf("the second tab's fetch left without the session's cookie")
			}
			if got := tab.eval(reauthJS(false)); got != "200" {
				t.Fatalf("the re-authentication answered %s", got)
			}
			if now := tab.sessionCookie(srv.URL); now == nil || now.Value == old.Value {
				t.Fatalf("the re-authentication did not set a new cookie")
			}
			passWindow(run)
			late.through(ctx, t)
			lateStatus := tab2.eval(`window.late`)
			checkRotated(t, app, tab, tab2, srv, user, run, "two tabs", lateStatus, "200")

			// A double-clicked re-authentication.
			email = fmt.Sprintf("double%d@example.com", i)
			user = browserLogin(t, srv, tab, email)
			old = tab.sessionCookie(srv.URL)
			tab.eval(`(() => {
				window.clicks = [];
				const b = document.createElement("button");
				b.id = "confirm-password";
				b.textContent = "Confirm your password";
				b.addEventListener("click", () => window.clicks.push(` + reauthJS(true) + `));
				document.body.prepend(b);
				return "ready";
			})()`)
			tab.doubleClick("#confirm-password")
			first := g.wait(ctx, t, "the first click's rotation")
			second := g.wait(ctx, t, "the second click's rotation")
			if first.cookie != old.Value || second.cookie != old.Value {
				t.Fatalf("the two clicks' requests did not both leave with the session's cookie")
			}
			first.through(ctx, t)
			passWindow(run)
			second.through(ctx, t)
			statuses := tab.eval(`Promise.all(window.clicks).then(s => s.join(","))`)
			checkRotated(t, app, tab, tab2, srv, user, run, "double click", statuses, "200,200")
		})
	}
}

// reauthJS is an expression that confirms the password of the page's
// user (goodPassword) with POST /api/reauth and gives the answer's status;
// held, the test's gate holds the request.
func reauthJS(held bool) string {
	gateLine := ""
	if held {
		gateLine = `"` + gateHeader + `": "1", `
	}
	return `fetch("/api/reauth", {method: "POST", headers: {` + gateLine + `"Content-Type": "application/json"},
		body: JSON.stringify({password: ` + strconv.Quote(goodPassword) + `})}).then(r => String(r.status))`
}

// passWindow lets the control's window of 1 ms pass, after the rotation
// answered and before the late requests reach the server. Sleeping longer
// than the window is all it takes: Redis expires the rotated-out token's
// stub by its clock, the machine's.
func passWindow(run rotationRun) {
	if run.control {
		time.Sleep(10 * run.grace)
	}
}

// browserLogin logs the page out, signs a user up and logs the page in
// with the cookie, and returns the user's ID; the sign-up's own session,
// by header, is logged out, so that the page's is the user's one
// session.
func browserLogin(t *testing.T, srv *httptest.Server, tab pageDriver, email string) idtype.ID {
	t.Helper()
	tab.do("open the page", chromedp.Navigate(srv.URL), chromedp.WaitReady(chromedp.CSS("body")))
	tab.eval(`fetch("/api/logout", {method: "POST"}).then(r => String(r.status))`)
	id, apiTok := signupLogin(t, srv, email, goodPassword)
	if r := call(t, srv, "POST", "/api/logout", apiTok, ""); r.status != http.StatusNoContent {
		t.Fatalf("logout of the sign-up's session: %d %s", r.status, r.body)
	}
	tab.do("open the page", chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.CSS("#auth-form")))
	tab.do("log in", chromedp.SendKeys(chromedp.CSS("#email"), email), chromedp.SendKeys(chromedp.CSS("#password"), goodPassword),
		chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#app")))
	if tab.sessionCookie(srv.URL) == nil {
		t.Fatal("no session cookie after the page's login")
	}
	user, err := idtype.Parse(id)
	if err != nil {
		t.Fatalf("user ID %q: %v", id, err)
	}
	return user
}

// checkRotated checks what the late requests left behind: with the grace
// window, they were served (late is the statuses the page saw, want
// what they must be), the browser holds a cookie of the user's one live
// session, and both tabs are logged in; in the control, the browser
// holds no cookie, the tabs are logged out, and the rotated session is
// live and listed, held by nobody.
func checkRotated(t *testing.T, app *App, tab, tab2 pageDriver, srv *httptest.Server, user idtype.ID, run rotationRun, what, late, want string) {
	t.Helper()
	list, err := app.tokens.List(t.Context(), user)
	if err != nil || len(list) != 1 {
		t.Fatalf("%s: the user's sessions: %+v, %v; want one", what, list, err)
	}
	held := tab.sessionCookie(srv.URL)
	var heldS tokens.Session
	heldErr := tokens.ErrInvalidToken
	if held != nil {
		heldS, heldErr = app.tokens.Validate(t.Context(), held.Value)
	}
	me1 := tab.eval(`fetch("/api/me").then(r => String(r.status))`)
	me2 := tab2.eval(`fetch("/api/me").then(r => String(r.status))`)
	t.Logf("%s: the late requests got %s; the browser holds a cookie: %v; the tabs get %s and %s; live sessions: %d",
		what, late, held != nil, me1, me2, len(list))
	if run.control {
		if held != nil || me1 != "401" || me2 != "401" {
			t.Errorf("control, %s: the late answers %s; the browser holds a cookie %v, the tabs get %s and %s: the test does not reach the fault",
				what, late, held != nil, me1, me2)
		}
		return
	}
	switch {
	case late != want:
		t.Errorf("%s: the requests that left with the old cookie got %s, want %s", what, late, want)
	case heldErr != nil || heldS.ID != list[0].ID:
		t.Errorf("%s: the browser's cookie: session %d, %v; the one live session is %d", what, heldS.ID, heldErr, list[0].ID)
	case me1 != "200" || me2 != "200":
		t.Errorf("%s: after the rotation the tabs get %s and %s, want both logged in", what, me1, me2)
	}
	tab.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#app")))
}

// doubleClick double-clicks the element sel finds, as a mouse does: two
// presses and releases, the second with a click count of 2, so that the
// page gets two click events and a dblclick.
func (b pageDriver) doubleClick(sel string) {
	b.t.Helper()
	x, _ := strconv.ParseFloat(b.eval(fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect(); return String(r.x + r.width / 2); })()`, sel)), 64)
	y, _ := strconv.ParseFloat(b.eval(fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect(); return String(r.y + r.height / 2); })()`, sel)), 64)
	b.do("double-click "+sel, chromedp.MouseClickXY(x, y, chromedp.ClickCount(1)), chromedp.MouseClickXY(x, y, chromedp.ClickCount(2)))
}

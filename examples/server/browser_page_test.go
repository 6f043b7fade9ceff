package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// consoleLog collects what a page writes to the console, from the moment
// it is made: calls of the console API, uncaught exceptions and unhandled
// rejections, and the browser's own log (network failures among them).
type consoleLog struct {
	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
	read int // msgs before it were judged already
}

func watchConsole(ctx context.Context) *consoleLog {
	l := &consoleLog{}
	msgs := chromedp.Console(ctx) // subscribes now, before any page loads
	go func() {
		for m, err := range msgs {
			if err != nil {
				return // the browser is gone: the test has ended
			}
			l.mu.Lock()
			l.msgs = append(l.msgs, m)
			l.mu.Unlock()
		}
	}()
	return l
}

// fresh returns the messages since the last call.
func (l *consoleLog) fresh() []chromedp.ConsoleMessage {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.msgs[l.read:]
	l.read = len(l.msgs)
	return out
}

// pageState is a state of the page: how to reach it from the one before,
// and what shows it has settled, in the page's own terms.
type pageState struct {
	name string
	// act brings the page to this state; nil for the first state, which
	// is a navigation.
	act func(b pageDriver)
	// settled is a JavaScript expression that is true once the page has
	// done all it does in this state, after an action or a load.
	settled string
}

// pageReady is true once the page has done what it does on load: read
// the layout, set its handlers up, shown the outbox and asked who is
// logged in (and shown the answer), or shown why it could not.
const pageReady = `document.body.dataset.ready === "true"`

// pageProblems returns what the page did wrong since the last call: an
// uncaught exception or rejection, an error on the console or in the
// browser's log, or an error shown in the status line. The one error it
// forgives is the browser's log line for a 401 of GET /api/me: that is
// how the page, on load, learns it is logged out (the line may come
// after the page is ready, so it is forgiven in every state). A state
// that should be logged in and got that 401 does not settle, and fails
// there.
func pageProblems(b pageDriver, log *consoleLog, base string) []string {
	var out []string
	for _, m := range log.fresh() {
		if m.Type != chromedp.ConsoleException && m.Type != chromedp.ConsoleError {
			continue
		}
		if m.Source == "network" && m.URL == base+"/api/me" && strings.Contains(m.Text, "status of 401") {
			continue
		}
		where := m.Source
		if where == "" {
			where = "script"
		}
		out = append(out, fmt.Sprintf("%s (%s) at %s: %s", m.Type, where, m.URL, m.Text))
	}
	if shown := b.eval(`(() => { const s = document.getElementById("status"); return s.className === "error" ? s.textContent : ""; })()`); shown != "" {
		out = append(out, "the page shows the error "+shown)
	}
	return out
}

// TestBrowserPageStates loads the page in every state a user meets it in,
// as a newcomer does, on a fresh server: before any mail was sent, after
// a sign-up, on the verification link, logged in, logged out, logged in
// again and after a password change. In each it acts as the user, then
// loads the page anew, and fails on any uncaught exception or rejection,
// any error on the console or in the browser's log, and any error the
// page shows. In the control run the server answers the empty outbox
// with {"messages": null} (see nullEmptyOutbox), and the test sees the
// page fail on its first screen.
func TestBrowserPageStates(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 8*time.Minute)
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "every state", true: "control: null outbox"}[control], func(t *testing.T) {
			ctx := startBrowser(t)
			log := watchConsole(ctx)
			shot := screenshotter(t, ctx)
			b := pageDriver{t: t, ctx: ctx, shot: shot}
			var front func(*App) http.Handler
			if control {
				front = nullEmptyOutbox
			}
			_, srv := startAppBehind(t, Config{Throttle: generous()}, front)

			const email = "newcomer@example.com"
			loggedOutLoad := pageReady + ` && !document.getElementById("outbox").hidden && document.getElementById("app").hidden`
			loggedInLoad := pageReady + ` && !document.getElementById("app").hidden && document.querySelectorAll("#sessions tr").length > 0`
			states := []pageState{
				{name: "fresh server", settled: loggedOutLoad},
				{name: "signed up", act: func(b pageDriver) {
					b.do("sign up",
						chromedp.SetValue(chromedp.CSS("#email"), email),
						chromedp.SetValue(chromedp.CSS("#password"), goodPassword),
						chromedp.SetValue(chromedp.CSS("#name"), "Newcomer"),
						chromedp.Click(chromedp.CSS("#signup")))
					b.waitStatus("Check your mailbox")
					b.poll("the mail listed", `document.querySelectorAll("#outbox-mail li").length === 1`)
				}, settled: loggedOutLoad + ` && document.querySelectorAll("#outbox-mail li").length === 1`},
				{name: "on the verification link", act: func(b pageDriver) {
					link := `#outbox-mail a[href*="#verify="]`
					b.do("follow the link", chromedp.Click(chromedp.CSS(link)), chromedp.WaitVisible(chromedp.CSS("#verify-form")))
				}, settled: loggedOutLoad + ` && !document.getElementById("verify").hidden`},
				{name: "verified and logged in", act: func(b pageDriver) {
					b.do("confirm the password", chromedp.SetValue(chromedp.CSS("#verify-password"), goodPassword),
						chromedp.Click(chromedp.CSS("#verify-submit")), chromedp.WaitVisible(chromedp.CSS("#app")))
					b.waitStatus("Signed up and logged in")
				}, settled: loggedInLoad},
				{name: "logged out", act: func(b pageDriver) {
					b.do("log out", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#auth-form")))
					b.waitStatus("Logged out.")
				}, settled: loggedOutLoad},
				{name: "logged in", act: func(b pageDriver) {
					b.do("log in", chromedp.SetValue(chromedp.CSS("#email"), email), chromedp.SetValue(chromedp.CSS("#password"), goodPassword),
						chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#app")))
					b.waitStatus("Logged in: session ")
				}, settled: loggedInLoad},
				{name: "after a password change", act: func(b pageDriver) {
					b.do("change the password", chromedp.SetValue(chromedp.CSS("#current-password"), goodPassword),
						chromedp.SetValue(chromedp.CSS("#new-password"), otherPassword), chromedp.Click(chromedp.CSS("#password-submit")))
					b.waitStatus("Password changed")
				}, settled: loggedInLoad},
			}
			// An error shown ends a state's wait too, once the page is
			// ready: the control's page stops there.
			failed := pageReady + ` && document.getElementById("status").className === "error"`
			var seen []string
			for i, s := range states {
				if s.act == nil {
					b.do("open the page", chromedp.Navigate(srv.URL))
				} else {
					s.act(b)
				}
				b.poll(s.name+": the page settled", failed+" || ("+s.settled+")")
				problems := pageProblems(b, log, srv.URL)
				shot(fmt.Sprintf("%d-%s", i, strings.ReplaceAll(s.name, " ", "-")))
				// The same state, loaded anew.
				b.do(s.name+": reload", chromedp.Reload())
				b.poll(s.name+", reloaded: the page settled", failed+" || ("+s.settled+")")
				problems = append(problems, pageProblems(b, log, srv.URL)...)
				for _, p := range problems {
					seen = append(seen, s.name+": "+p)
				}
				if control {
					break // the fresh server's page is the control's fault
				}
			}
			if control {
				if len(seen) == 0 {
					t.Fatal("control: the page showed no error on a fresh server whose outbox answers null; the test proves nothing")
				}
				t.Logf("control: the test sees %q", seen)
				return
			}
			for _, p := range seen {
				t.Error(p)
			}
		})
	}
}

// nullEmptyOutbox serves the App's Handler, but answers the empty
// development outbox with {"messages": null}, as a Go server answers a
// nil slice: the control of TestBrowserPageStates.
func nullEmptyOutbox(app *App) http.Handler {
	return editAnswer(app, http.MethodGet, "/api/dev/outbox", func(rec *httptest.ResponseRecorder) []byte {
		if rec.Code == http.StatusOK && strings.TrimSpace(rec.Body.String()) == `{"messages":[]}` {
			return []byte(`{"messages":null}` + "\n")
		}
		return rec.Body.Bytes()
	})
}

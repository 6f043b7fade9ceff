package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testenv"
)

// envChromium names a Chromium or Chrome binary for the browser test;
// unset, it looks for Debian's chromium (which `make test` installs).
const envChromium = "SNOWKEY_TEST_CHROMIUM"

// envScreenshots names a folder where the browser test leaves PNG
// screenshots of the page, to look at.
const envScreenshots = "SNOWKEY_TEST_SCREENSHOTS"

// findChromium returns the browser to drive, or skips the test (fails it
// when CI is set).
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envChromium); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium in PATH: run `make test`, which installs Debian's chromium, or set " + envChromium
	if testenv.InCI() {
		t.Fatal(msg + " (CI is set, so a missing browser fails the test instead of skipping it)")
	}
	t.Skip(msg)
	return ""
}

// startBrowser starts a headless Chromium with a fresh profile and no
// network but loopback, and returns a tab's context. The browser is
// stopped when the test ends.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	profile := t.TempDir() // made before the browser's cleanup, so removed after it
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(findChromium(t)),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1000),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true), // containers have a small /dev/shm
	}
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium's sandbox refuses root
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		bcancel()
		acancel() // waits for the browser to exit
		cancel()
	})
	// Start it now, so that a browser that cannot start fails here.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", findChromium(t), err)
	}
	return bctx
}

// TestBrowser drives the web page in headless Chromium against the server
// on real PostgreSQL and Redis: sign up, log in, post, read the IDs the
// page shows and compare them with the database's, list the sessions and
// log another device out, log out, and see the API refuse the old token.
func TestBrowser(t *testing.T) {
	app, srv := startApp(t, realServers())
	ctx := startBrowser(t)
	shot := screenshotter(t, ctx)

	const email, password = "browser@example.com", goodPassword
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			shot("failed")
			t.Fatalf("%s: %v", what, err)
		}
	}
	// eval runs an expression in the page and returns its string value.
	eval := func(expr string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
		if err != nil {
			shot("failed")
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return s
	}
	// waitStatus waits for the status line to start with prefix.
	waitStatus := func(prefix string) string {
		t.Helper()
		expr := fmt.Sprintf(`document.getElementById("status").textContent.startsWith(%q)`, prefix)
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			shot("failed")
			t.Fatalf("status %q never came; it is %q", prefix, eval(`document.getElementById("status").textContent`))
		}
		return eval(`document.getElementById("status").textContent`)
	}

	do("open the page", chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.CSS("#auth-form")))
	do("sign up",
		chromedp.SendKeys(chromedp.CSS("#email"), email),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.SendKeys(chromedp.CSS("#name"), "Headless Hal"),
		chromedp.Click(chromedp.CSS("#signup")))
	waitStatus("Signed up")
	do("log in", chromedp.SendKeys(chromedp.CSS("#device"), "headless chromium"), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#app")))
	waitStatus("Logged in")

	var user User
	if err := app.db.Take(&user, "email = ?", email).Error; err != nil {
		t.Fatalf("the user is not in the database: %v", err)
	}
	if got := eval(`document.getElementById("me-id").textContent`); got != user.ID.String() {
		t.Errorf("page shows user ID %s, the database has %s", got, user.ID)
	}

	// A post written by another service, with an ID a JS number rounds.
	seeded := seedPost(t, app, user.ID.String(), "written elsewhere")

	do("post",
		chromedp.SendKeys(chromedp.CSS("#post-title"), "hello from chromium"),
		chromedp.SendKeys(chromedp.CSS("#post-body"), "exact IDs"),
		chromedp.Click(chromedp.CSS("#post-submit")))
	status := waitStatus("Posted: ID ")
	var post Post
	if err := app.db.Take(&post, "title = ?", "hello from chromium").Error; err != nil {
		t.Fatalf("the post is not in the database: %v", err)
	}
	if want := "Posted: ID " + post.ID.String() + "."; status != want {
		t.Errorf("status %q, want %q", status, want)
	}
	shot("posted")

	// Every row shows the ID exactly and the time decoded from it.
	for _, id := range []idtype.ID{post.ID, seeded} {
		if id <= twoTo53 {
			t.Errorf("ID %s is not above 2^53", id)
		}
		row := fmt.Sprintf(`document.querySelector('#posts tr[data-id="%s"]')`, id)
		if got := eval(row + `?.querySelector(".id")?.textContent ?? "missing"`); got != id.String() {
			t.Errorf("page shows ID %q, the database has %s", got, id)
		}
		wantTime := id.Time().UTC().Format("2006-01-02T15:04:05.000Z")
		if got := eval(row + `?.querySelector(".time")?.textContent ?? "missing"`); got != wantTime {
			t.Errorf("page shows time %q for ID %s, want %s", got, id, wantTime)
		}
	}
	// The page had to keep the ID a string: as a number it rounds.
	if got := eval(fmt.Sprintf(`String(Number(%q))`, seeded.String())); got == seeded.String() {
		t.Errorf("the seeded ID %s survives a JS number; the test proves nothing", seeded)
	}

	// Another device logs in; the page lists it and logs it out.
	_, other := signupLoginExisting(t, srv, email, password)
	do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#app")))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll("#sessions tr").length === 2`,
		chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		shot("failed")
		t.Fatalf("the page does not list 2 sessions: %v", err)
	}
	shot("sessions")
	do("log the other device out", chromedp.Click(chromedp.CSS("#sessions tr:not(.current) button")))
	waitStatus("Logged out session ")
	if r := call(t, srv, "GET", "/api/me", other, ""); r.status != 401 {
		t.Errorf("the other device's token after its logout: %d, want 401", r.status)
	}

	// Log out; the token the page held no longer works.
	tok := eval(`sessionStorage.getItem("snowkey-example.token")`)
	if !strings.HasPrefix(tok, "snk_") {
		t.Fatalf("token in sessionStorage: %q", tok)
	}
	do("log out", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#auth-form")))
	waitStatus("Logged out.")
	if got := eval(`sessionStorage.getItem("snowkey-example.token") ?? "none"`); got != "none" {
		t.Errorf("token still in sessionStorage after logout")
	}
	got := eval(fmt.Sprintf(`fetch("/api/me", {headers: {Authorization: "Bearer " + %q}}).then(r => r.status + " " + r.headers.get("WWW-Authenticate"))`, tok))
	if want := `401 Bearer realm="api", error="invalid_token"`; got != want {
		t.Errorf("the API after logout answers %q, want %q", got, want)
	}
	if r := call(t, srv, "GET", "/api/me", tok, ""); r.status != 401 {
		t.Errorf("the old token from Go: %d, want 401", r.status)
	}
	shot("logged-out")
}

// signupLoginExisting logs an existing user in once more, as another
// device, and returns the session ID and token.
func signupLoginExisting(t *testing.T, srv *httptest.Server, email, password string) (sid, token string) {
	t.Helper()
	r := call(t, srv, "POST", "/api/login", "", mustJSON(t, map[string]string{"email": email, "password": password, "device": "go client"}))
	var l struct {
		Token   string
		Session struct{ ID string }
	}
	r.json(t, &l)
	if r.status != 200 {
		t.Fatalf("login: %d %s", r.status, r.body)
	}
	return l.Session.ID, l.Token
}

// screenshotter returns a func that saves a screenshot of the page to the
// folder named by SNOWKEY_TEST_SCREENSHOTS, or does nothing without it.
func screenshotter(t *testing.T, ctx context.Context) func(name string) {
	dir := os.Getenv(envScreenshots)
	return func(name string) {
		if dir == "" {
			return
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Logf("screenshot %s: %v", name, err)
			return
		}
		p := filepath.Join(dir, t.Name()+"-"+name+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Logf("screenshot %s: %v", name, err)
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/go-redis/redis_rate/v10"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/gocmd"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
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
	testenv.Skip(t, "no chromium in PATH: run `make test`, which installs Debian's chromium, or set "+envChromium)
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
	// The browser lives as long as the test that started it: the test's
	// Deadline bounds it, stretched with the machine's load as a fixed
	// timer here would not be.
	ctx, cancel := context.WithCancel(context.Background())
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
// on real PostgreSQL and Redis: sign up, follow the link from the
// development outbox and confirm the password, post, read the IDs the page
// shows and compare them with the database's, list the sessions and log
// another device out, log out, and see the cookie gone and the API refuse
// its token.
func TestBrowser(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 6*time.Minute)
	app, srv := startApp(t, realServers())
	ctx := startBrowser(t)
	shot := screenshotter(t, ctx)
	b := pageDriver{t: t, ctx: ctx, shot: shot}

	const email, password = "browser@example.com", goodPassword
	b.do("open the page", chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.CSS("#auth-form")))
	b.do("sign up",
		chromedp.SendKeys(chromedp.CSS("#email"), email),
		chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.SendKeys(chromedp.CSS("#name"), "Headless Hal"),
		chromedp.SendKeys(chromedp.CSS("#device"), "headless chromium"),
		chromedp.Click(chromedp.CSS("#signup")))
	b.waitStatus("Check your mailbox")
	// No account yet: the link in the outbox makes it.
	var n int64
	if app.db.Model(&User{}).Where("email = ?", email).Count(&n); n != 0 {
		t.Errorf("%d accounts before the link was followed", n)
	}
	link := `#outbox-mail a[href*="#verify="]`
	b.do("follow the link in the outbox", chromedp.WaitVisible(chromedp.CSS(link)), chromedp.Click(chromedp.CSS(link)),
		chromedp.WaitVisible(chromedp.CSS("#verify-form")))
	shot("verify")
	b.do("confirm the password", chromedp.SendKeys(chromedp.CSS("#verify-password"), password), chromedp.Click(chromedp.CSS("#verify-submit")),
		chromedp.WaitVisible(chromedp.CSS("#app")))
	b.waitStatus("Signed up and logged in")
	if got := b.eval(`location.hash`); got != "" {
		t.Errorf("the link's token stays in the address bar: %q", got)
	}

	var user User
	if err := app.db.Take(&user, "email = ?", email).Error; err != nil {
		t.Fatalf("the user is not in the database: %v", err)
	}
	if got := b.text("#me-id"); got != user.ID.String() {
		t.Errorf("page shows user ID %s, the database has %s", got, user.ID)
	}

	// A post written by another service, with an ID a JS number rounds.
	seeded := seedPost(t, app, user.ID.String(), "written elsewhere")

	b.do("post",
		chromedp.SendKeys(chromedp.CSS("#post-title"), "hello from chromium"),
		chromedp.SendKeys(chromedp.CSS("#post-body"), "exact IDs"),
		chromedp.Click(chromedp.CSS("#post-submit")))
	status := b.waitStatus("Posted: ID ")
	var post Post
	if err := app.db.Take(&post, "title = ?", "hello from chromium").Error; err != nil {
		t.Fatalf("the post is not in the database: %v", err)
	}
	if want := "Posted: ID " + post.ID.String() + "."; status != want {
		t.Errorf("status %q, want %q", status, want)
	}
	shot("posted")

	// Every row shows the ID exactly and the time decoded from it.
	rows := fmt.Sprintf(`document.querySelector('#posts tr[data-id="%s"]') !== null && document.querySelector('#posts tr[data-id="%s"]') !== null`, post.ID, seeded)
	b.poll("the posts listed", rows)
	for _, id := range []idtype.ID{post.ID, seeded} {
		if id <= twoTo53 {
			t.Errorf("ID %s is not above 2^53", id)
		}
		row := fmt.Sprintf(`document.querySelector('#posts tr[data-id="%s"]')`, id)
		if got := b.eval(row + `?.querySelector(".id")?.textContent ?? "missing"`); got != id.String() {
			t.Errorf("page shows ID %q, the database has %s", got, id)
		}
		wantTime := id.Time().UTC().Format("2006-01-02T15:04:05.000Z")
		if got := b.eval(row + `?.querySelector(".time")?.textContent ?? "missing"`); got != wantTime {
			t.Errorf("page shows time %q for ID %s, want %s", got, id, wantTime)
		}
	}
	// The page had to keep the ID a string: as a number it rounds.
	if got := b.eval(fmt.Sprintf(`String(Number(%q))`, seeded.String())); got == seeded.String() {
		t.Errorf("the seeded ID %s survives a JS number; the test proves nothing", seeded)
	}

	// Another device logs in; the page lists it and logs it out.
	_, other := signupLoginExisting(t, srv, email, password)
	b.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#app")))
	b.poll("2 sessions listed", `document.querySelectorAll("#sessions tr").length === 2`)
	shot("sessions")
	b.do("log the other device out", chromedp.Click(chromedp.CSS("#sessions tr:not(.current) button")))
	b.waitStatus("Logged out session ")
	if r := call(t, srv, "GET", "/api/me", other, ""); r.status != 401 {
		t.Errorf("the other device's token after its logout: %d, want 401", r.status)
	}

	// Log out: the cookie is gone, and its token no longer works.
	held := b.sessionCookie(srv.URL)
	if held == nil {
		t.Fatal("no session cookie while logged in")
	}
	b.do("log out", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#auth-form")))
	b.waitStatus("Logged out.")
	if c := b.sessionCookie(srv.URL); c != nil {
		t.Errorf("the session cookie is still there after logout: %+v", c)
	}
	if r := call(t, srv, "GET", "/api/me", held.Value, ""); r.status != 401 {
		t.Errorf("the logged-out cookie's token from Go: %d, want 401", r.status)
	}
	if got := b.eval(`fetch("/api/me").then(r => String(r.status))`); got != "401" {
		t.Errorf("the page's own request after logout: %s, want 401", got)
	}
	shot("logged-out")
}

// TestBrowserCookie checks the cookie transport in Chromium, each promise
// with a control run that shows the check would see it broken:
//
//   - the token is not readable from script: not in document.cookie, not
//     in storage, not in the body of the login answer (control: a server
//     that also sends it in the body, which the same probe finds);
//   - a form on another origin of the same site (another port of
//     127.0.0.1: SameSite lets the cookie go along) that posts to "log
//     out everywhere" is refused 403, and the sessions live on (control:
//     the attacker's origin trusted, and the post ends them);
//   - the header path keeps working for apps: a token in Authorization is
//     served in the browser, and decides alone when a cookie comes along.
func TestBrowserCookie(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 6*time.Minute)
	ctx := startBrowser(t)
	shot := screenshotter(t, ctx)
	b := pageDriver{t: t, ctx: ctx, shot: shot}

	// The attacker's page, on its own port: it posts a form to the target
	// as soon as it loads.
	var target string
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><form method="POST" action="%s/api/logout-all"></form><script>document.forms[0].submit()</script>`, target)
	}))
	t.Cleanup(attacker.Close)

	for i, run := range []struct {
		name        string
		tokenInBody bool // the control serves the App behind tokenInBody
		trusted     bool // the control trusts the attacker's origin
	}{
		{name: "defended"},
		{name: "control: token in the body", tokenInBody: true},
		{name: "control: the attacker's origin trusted", trusted: true},
	} {
		t.Run(run.name, func(t *testing.T) {
			b.t = t
			cfg := Config{Throttle: generous()}
			if run.trusted {
				cfg.Cookie.TrustedOrigins = []string{attacker.URL}
			}
			var front func(*App) http.Handler
			if run.tokenInBody {
				front = tokenInBody
			}
			_, srv := startAppBehind(t, cfg, front)
			target = srv.URL
			email := fmt.Sprintf("cookie%d@example.com", i)
			_, phone := signupLogin(t, srv, email, goodPassword) // another device, by header

			b.do("open the page", chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.CSS("#auth-form")))
			b.do("log in", chromedp.SendKeys(chromedp.CSS("#email"), email), chromedp.SendKeys(chromedp.CSS("#password"), goodPassword),
				chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#app")))
			c := b.sessionCookie(srv.URL)
			switch {
			case c == nil:
				t.Fatal("no __Host-session cookie after the page's login")
			case !c.HTTPOnly || !c.Secure || c.SameSite != network.CookieSameSiteLax || c.Path != "/" || !c.Session || !strings.HasPrefix(c.Value, "snk_"):
				t.Errorf("the cookie: %+v; want HttpOnly, Secure, SameSite=Lax, Path=/, a session cookie holding a token", c)
			}

			// What script can reach.
			probe := b.eval(`(async () => {
				const found = [];
				if (document.cookie.includes("snk_")) found.push("document.cookie");
				for (const s of [sessionStorage, localStorage]) {
					for (let i = 0; i < s.length; i++) if ((s.getItem(s.key(i)) || "").includes("snk_")) found.push("storage");
				}
				const res = await fetch("/api/login", {method: "POST", headers: {"Content-Type": "application/json"},
					body: JSON.stringify({email: ` + strconv.Quote(email) + `, password: ` + strconv.Quote(goodPassword) + `, cookie: true})});
				if ((await res.text()).includes("snk_")) found.push("login body");
				return found.join(",") || "none";
			})()`)
			if run.tokenInBody {
				if probe == "none" {
					t.Errorf("control: the probe found no token, though the login answer's body held one")
				}
			} else if probe != "none" {
				t.Errorf("script reads the token from: %s", probe)
			}
			if run.tokenInBody {
				return
			}

			// The forgery: the browser, logged in, visits the attacker's
			// page, which posts to /api/logout-all.
			before := b.sessionCookie(srv.URL)
			b.do("visit the attacker's page", chromedp.Navigate(attacker.URL))
			b.poll("the forged post answered", `location.href.endsWith("/api/logout-all") && document.readyState === "complete"`)
			answer := b.eval(`document.body.innerText.trim()`)
			shot("forged-post")
			mine := call(t, srv, "GET", "/api/me", before.Value, "").status
			phoneSt := call(t, srv, "GET", "/api/me", phone, "").status
			if len(cfg.Cookie.TrustedOrigins) > 0 {
				// The forgery met no check: the cookie went along and the
				// sessions ended.
				if !strings.Contains(answer, `"revoked"`) || mine != 401 || phoneSt != 401 {
					t.Errorf("control: the forged post answered %q; sessions %d and %d; want them ended", answer, mine, phoneSt)
				}
				return
			}
			if answer != "Forbidden: cross-origin request" || mine != 200 || phoneSt != 200 {
				t.Errorf("the forged post answered %q; the page's session %d, the phone's %d; want the cross-origin 403 and both alive", answer, mine, phoneSt)
			}

			// Apps keep the header: in the browser too, and it decides
			// over the cookie the browser adds.
			b.do("back to the page", chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.CSS("#app")))
			_, otherTok := signupLogin(t, srv, "header-"+email, goodPassword)
			got := b.eval(fmt.Sprintf(`fetch("/api/me", {headers: {Authorization: "Bearer " + %q}}).then(r => r.json()).then(m => m.email)`, otherTok))
			if got != "header-"+email {
				t.Errorf("GET /api/me with a bearer token beside the cookie answered for %q, want the header's user", got)
			}
			if got := b.eval(`fetch("/api/me").then(r => r.json()).then(m => m.email)`); got != email {
				t.Errorf("GET /api/me with the cookie alone answered for %q, want %q", got, email)
			}
		})
	}
}

// TestBrowserInspector drives the ID inspector: clicking an ID on the page
// opens it, and on IDs with every field at its maximum, in the default
// layout and in another that the server reports, the page's BigInt
// decoding and its 64 coloured bits agree with `snowkey decode`. Then it
// guesses a password on the page until the rate limit answers 429, and
// sees the page show the wait the server asked for.
func TestBrowserInspector(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 6*time.Minute)
	ctx := startBrowser(t)
	shot := screenshotter(t, ctx)
	cli := buildSnowkey(t)
	b := pageDriver{t: t, ctx: ctx, shot: shot}

	// The default layout, on the real servers, with a post to click.
	app, srv := startApp(t, realServers())
	_, tok := signupLogin(t, srv, "inspect@example.com", goodPassword)
	var post postJSON
	call(t, srv, "POST", "/api/posts", tok, `{"title":"click my ID"}`).json(t, &post)
	b.do("open the page", chromedp.Navigate(srv.URL), chromedp.WaitVisible(chromedp.CSS("#inspector")))
	b.do("log in", chromedp.SendKeys(chromedp.CSS("#email"), "inspect@example.com"), chromedp.SendKeys(chromedp.CSS("#password"), goodPassword),
		chromedp.Click(chromedp.CSS("#login")), chromedp.WaitVisible(chromedp.CSS("#app")))
	row := fmt.Sprintf(`#posts tr[data-id="%s"] td.id`, post.ID)
	b.do("click the post's ID", chromedp.WaitVisible(chromedp.CSS(row)), chromedp.Click(chromedp.CSS(row)), chromedp.WaitVisible(chromedp.CSS("#inspect-out")))
	if got := b.text("#inspect-decimal"); got != post.ID.String() {
		t.Errorf("clicking post %s opened %q in the inspector", post.ID, got)
	}
	shot("inspector")
	checkInspector(t, b, cli, app.layout, nil, post.ID)

	// Bad input gets a message, not a decoding.
	for in, want := range map[string]string{
		"12a":                 "only the digits",
		"-5":                  "only the digits",
		"9223372036854775808": "at most 2^63-1",
		" ":                   "type an ID",
	} {
		b.inspect(in)
		if got := b.text("#inspect-error"); !strings.Contains(got, want) || b.eval(`String(document.getElementById("inspect-out").hidden)`) != "true" {
			t.Errorf("inspecting %q: error %q (want %q), output hidden %s", in, got, want, b.eval(`String(document.getElementById("inspect-out").hidden)`))
		}
	}

	// Another layout, which the page learns from GET /api/layout; strict
	// login limits.
	narrow := idtype.Layout{Epoch: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), WorkerBits: 5, SequenceBits: 13}
	cfg := Config{Layout: narrow, Worker: 20, Throttle: ThrottleOptions{LoginPerAccountPerIP: redis_rate.Limit{Rate: 1, Period: time.Hour, Burst: 2}}}
	app2, srv2 := startAppConfig(t, cfg)
	id2, err := app2.gen.Next()
	if err != nil {
		t.Fatal(err)
	}
	b.do("open the other server's page", chromedp.Navigate(srv2.URL), chromedp.WaitVisible(chromedp.CSS("#inspector")))
	// The inspector works once the page has read the layout and set its
	// handlers up.
	b.poll("the page set up", pageReady)
	checkInspector(t, b, cli, narrow, []string{"--epoch", narrow.Epoch.Format(time.RFC3339), "--worker-bits", "5", "--sequence-bits", "13"}, id2)

	// Guess a password on the page until the limit answers.
	b.do("type credentials", chromedp.SendKeys(chromedp.CSS("#email"), "guessed@example.com"), chromedp.SendKeys(chromedp.CSS("#password"), "wrong-guess-1"))
	for range 2 {
		b.do("guess", chromedp.Click(chromedp.CSS("#login")))
		b.waitStatus("wrong email or password")
		b.eval(`document.getElementById("status").textContent = ""`)
	}
	b.do("guess once more", chromedp.Click(chromedp.CSS("#login")))
	status := b.waitStatus("Too many login attempts")
	button := b.eval(`String(document.getElementById("login").disabled) + " " + document.getElementById("login").textContent`)
	shot("throttled")
	m := regexp.MustCompile(`^Too many login attempts for this account from your address; try again in (\d+) s\.$`).FindStringSubmatch(status)
	if m == nil {
		t.Fatalf("status after the 429: %q", status)
	}
	wait, _ := strconv.Atoi(m[1])
	if wait < 1 || wait > 3600 {
		t.Errorf("the page says wait %d s; the limit refills one an hour", wait)
	}
	// The button counts the Retry-After down: a second may have passed.
	if b := regexp.MustCompile(`^true Log in \((\d+) s\)$`).FindStringSubmatch(button); b == nil || (b[1] != m[1] && b[1] != strconv.Itoa(wait-1)) {
		t.Errorf("the login button during the wait: %q; the status says %d s", button, wait)
	}
	// The server's own answer to the next guess asks for the same wait,
	// give or take the seconds that passed.
	r := call(t, srv2, "POST", "/api/login", "", `{"email":"guessed@example.com","password":"wrong-guess-2"}`)
	if got, _ := strconv.Atoi(r.header.Get("Retry-After")); r.status != 429 || got > wait || got < wait-5 {
		t.Errorf("the server's next answer: %d, Retry-After %q; the page showed %d s", r.status, r.header.Get("Retry-After"), wait)
	}
}

// checkInspector inspects, on the page, ids and the IDs with each field of
// layout l at its maximum, and compares each with `snowkey decode --json`
// run with layoutFlags.
func checkInspector(t *testing.T, b pageDriver, cli string, l idtype.Layout, layoutFlags []string, ids ...idtype.ID) {
	t.Helper()
	maxTime := idtype.ID((int64(1)<<l.TimeBits() - 1) << (l.WorkerBits + l.SequenceBits))
	maxWorker := idtype.ID(l.MaxWorker() << l.SequenceBits)
	maxSeq := idtype.ID(l.MaxSequence())
	ids = append(ids, idtype.MaxID, maxTime, maxWorker, maxSeq, maxTime|maxSeq, 0)
	args := append(append([]string{"decode", "--json"}, layoutFlags...), "--")
	for _, id := range ids {
		args = append(args, id.String())
	}
	out, err := exec.Command(cli, args...).Output()
	if err != nil {
		t.Fatalf("snowkey %v: %v", args, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(ids) {
		t.Fatalf("snowkey decode printed %d lines for %d IDs", len(lines), len(ids))
	}
	widths := map[string]int{"sign": 1, "time": int(l.TimeBits()), "worker": int(l.WorkerBits), "sequence": int(l.SequenceBits)}
	for i, id := range ids {
		var want struct {
			ID       string    `json:"id"`
			Time     time.Time `json:"time"`
			Worker   int64     `json:"worker"`
			Sequence int64     `json:"sequence"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &want); err != nil {
			t.Fatalf("snowkey decode: %q: %v", lines[i], err)
		}
		b.inspect(id.String())
		got, err := time.Parse(time.RFC3339Nano, b.text("#inspect-time"))
		if err != nil || !got.Equal(want.Time) {
			t.Errorf("ID %s: the page says time %q, snowkey decode %v", id, b.text("#inspect-time"), want.Time)
		}
		if w, s := b.text("#inspect-worker"), b.text("#inspect-sequence"); w != strconv.FormatInt(want.Worker, 10) || s != strconv.FormatInt(want.Sequence, 10) {
			t.Errorf("ID %s: the page says worker %s, sequence %s; snowkey decode %d, %d", id, w, s, want.Worker, want.Sequence)
		}
		if got := b.eval(`Array.from(document.querySelectorAll("#inspect-bits .bit")).map((e) => e.textContent).join("")`); got != fmt.Sprintf("%064b", uint64(id)) {
			t.Errorf("ID %s: the page draws bits %s, want %064b", id, got, uint64(id))
		}
		for field, n := range widths {
			if got := b.eval(fmt.Sprintf(`String(document.querySelectorAll("#inspect-bits .field.f-%s .bit").length)`, field)); got != strconv.Itoa(n) {
				t.Errorf("ID %s: %s bits drawn %s, the layout has %d", id, field, got, n)
			}
		}
	}
}

// buildSnowkey builds the snowkey command of the repository.
func buildSnowkey(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command in PATH to build snowkey with: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "snowkey")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, goBin, "build", "-o", bin, "github.com/snowkeyhq/snowkey/cmd/snowkey")
	build.Env = gocmd.Env() // as this binary was built: its packages are in the build cache
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build snowkey: %v\n%s", err, out)
	}
	return bin
}

// pageDriver runs steps on a page and fails the test, with a screenshot,
// when one fails.
type pageDriver struct {
	t    *testing.T
	ctx  context.Context
	shot func(string)
}

func (b pageDriver) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.shot("failed")
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval runs an expression in the page and returns its string value.
func (b pageDriver) eval(expr string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.shot("failed")
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return s
}

// text returns the text of the element the CSS selector finds.
func (b pageDriver) text(sel string) string {
	b.t.Helper()
	return b.eval(fmt.Sprintf(`document.querySelector(%q)?.textContent ?? "missing"`, sel))
}

// inspect types id into the inspector and submits it.
func (b pageDriver) inspect(id string) {
	b.t.Helper()
	b.do("inspect "+id, chromedp.SetValue(chromedp.CSS("#inspect-id"), id), chromedp.Click(chromedp.CSS("#inspect")))
}

// waitStatus waits for the status line to contain s and returns it.
func (b pageDriver) waitStatus(s string) string {
	b.t.Helper()
	expr := fmt.Sprintf(`document.getElementById("status").textContent.includes(%q)`, s)
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.shot("failed")
		b.t.Fatalf("status %q never came; it is %q", s, b.text("#status"))
	}
	return b.text("#status")
}

// poll waits for the expression to be true.
func (b pageDriver) poll(what, expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.shot("failed")
		b.t.Fatalf("%s never came: %v", what, err)
	}
}

// sessionCookie returns the browser's __Host-session cookie for the URL,
// as the browser keeps it (attributes and all), or nil.
func (b pageDriver) sessionCookie(u string) *network.Cookie {
	b.t.Helper()
	cookies, err := chromedp.Run(b.ctx, func(ctx context.Context, t *chromedp.Target) ([]*network.Cookie, error) {
		res, err := cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{URLs: []string{u}})
		return res.Cookies, err
	})
	if err != nil {
		b.t.Fatalf("read the browser's cookies: %v", err)
	}
	for _, c := range cookies {
		if c.Name == "__Host-session" {
			return c
		}
	}
	return nil
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

// tokenInBody serves the App's Handler, but adds to the body of each
// login answer that sets the session cookie the token it holds, as a
// server that also sent a cookie login's token in the body would: the
// control of TestBrowserCookie.
func tokenInBody(app *App) http.Handler {
	name := app.cookies.Options().Name
	return editAnswer(app, http.MethodPost, "/api/login", func(rec *httptest.ResponseRecorder) []byte {
		body := rec.Body.Bytes()
		var token string
		for _, line := range rec.Header().Values("Set-Cookie") {
			if c, err := http.ParseSetCookie(line); err == nil && c.Name == name {
				token = c.Value
			}
		}
		var answer map[string]any
		if token != "" && json.Unmarshal(body, &answer) == nil {
			answer["token"] = token
			if b, err := json.Marshal(answer); err == nil {
				body = b
			}
		}
		return body
	})
}

// editAnswer serves the App's Handler, but passes its answers to method
// path through edit, which gets the recorded answer and returns the body
// to send in its place, with the answer's status and headers: the shape
// of the browser tests' control fronts.
func editAnswer(app *App, method, path string, edit func(rec *httptest.ResponseRecorder) []byte) http.Handler {
	h := app.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method || r.URL.Path != path {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := edit(rec)
		maps.Copy(w.Header(), rec.Header())
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

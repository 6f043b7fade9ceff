package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-redis/redis_rate/v10"

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
	testenv.Deadline(t, 6*time.Minute)
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
	rows := fmt.Sprintf(`document.querySelector('#posts tr[data-id="%s"]') !== null && document.querySelector('#posts tr[data-id="%s"]') !== null`, post.ID, seeded)
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](rows, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		shot("failed")
		t.Fatalf("the page never listed posts %s and %s: %v", post.ID, seeded, err)
	}
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

// TestBrowserInspector drives the ID inspector: clicking an ID on the page
// opens it, and on IDs with every field at its maximum, in the default
// layout and in another that the server reports, the page's BigInt
// decoding and its 64 coloured bits agree with `snowkey decode`. Then it
// guesses a password on the page until the rate limit answers 429, and
// sees the page show the wait the server asked for.
func TestBrowserInspector(t *testing.T) {
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
	if out, err := exec.CommandContext(ctx, goBin, "build", "-o", bin, "github.com/snowkeyhq/snowkey/cmd/snowkey").CombinedOutput(); err != nil {
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

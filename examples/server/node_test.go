package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// findNode returns the node binary, 18 or later (built-in fetch), or
// skips the test (fails it when CI is set).
func findNode(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("node")
	if err == nil {
		out, verr := exec.Command(p, "--version").Output()
		major, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".")
		if n, _ := strconv.Atoi(major); verr == nil && n >= 18 {
			return p
		}
		err = &exec.Error{Name: p, Err: exec.ErrNotFound}
		t.Logf("node %s is older than 18, which brought fetch", strings.TrimSpace(string(out)))
	}
	testenv.Skip(t, "no node 18+ in PATH ("+err.Error()+"); install Node.js to run the JS client test")
	return ""
}

// TestNode runs the API flow of testdata/e2e.mjs in Node, with fetch and
// BigInt, against the server on real PostgreSQL and Redis, and checks that
// every ID Node saw equals the database's exactly.
func TestNode(t *testing.T) {
	t.Parallel()
	testenv.Deadline(t, 3*time.Minute)
	node := findNode(t)
	app, srv := startApp(t, realServers())
	// A post with an ID that a JS number rounds, by another user.
	otherID, _ := signupLogin(t, srv, "other@example.com", goodPassword)
	seeded := seedPost(t, app, otherID, "written elsewhere")

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "testdata/e2e.mjs", srv.URL, "node@example.com", goodPassword)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node testdata/e2e.mjs: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	var out struct {
		UserID          string `json:"user_id"`
		SessionID       string `json:"session_id"`
		PostID          string `json:"post_id"`
		AfterLogout     int    `json:"after_logout"`
		WWWAuthenticate string `json:"www_authenticate"`
		Posts           []struct {
			ID       string `json:"id"`
			Time     string `json:"time"`
			AsNumber string `json:"as_number"`
		} `json:"posts"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("node's output %q: %v", stdout.String(), err)
	}

	var user User
	if err := app.db.Take(&user, "email = ?", "node@example.com").Error; err != nil {
		t.Fatalf("node's user is not in the database: %v", err)
	}
	var post Post
	if err := app.db.Take(&post, "title = ?", "hello from node").Error; err != nil {
		t.Fatalf("node's post is not in the database: %v", err)
	}
	if out.UserID != user.ID.String() || out.PostID != post.ID.String() {
		t.Errorf("node saw user %s and post %s; the database has %s and %s", out.UserID, out.PostID, user.ID, post.ID)
	}
	checkID(t, "session id", out.SessionID)
	if out.AfterLogout != 401 || out.WWWAuthenticate != `Bearer realm="api", error="invalid_token"` {
		t.Errorf("after logout: %d %q, want 401 with error=invalid_token", out.AfterLogout, out.WWWAuthenticate)
	}
	found := map[idtype.ID]bool{}
	for _, p := range out.Posts {
		id := checkID(t, "post id", p.ID)
		found[id] = true
		if want := id.Time().UTC().Format("2006-01-02T15:04:05.000Z"); p.Time != want {
			t.Errorf("node decoded %s to %s, want %s", p.ID, p.Time, want)
		}
		if id == seeded && p.AsNumber == p.ID {
			t.Errorf("seeded ID %s survived a JS number; the test proves nothing", p.ID)
		}
	}
	if !found[post.ID] || !found[seeded] {
		t.Errorf("node listed %v; want %s and %s among them", out.Posts, post.ID, seeded)
	}
}

// TestNodeLimits runs testdata/limits.mjs in Node against the server on
// real PostgreSQL and Redis with a login limit of 3 guesses per account
// and address: every non-JSON body gets 415, and of 20 simultaneous
// wrong guesses 3 get 401 and 17 get 429 with a Retry-After.
//
// The limit is the point here, not the hash queue's bound (TestHashPool
// drives the queue to that): the test holds every hash slot until the 3
// guesses the limit let through are all waiting for one, and the wait
// for a slot is longer than the test, so that how fast the machine hashes
// decides nothing.
func TestNodeLimits(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 3*time.Minute)
	node := findNode(t)
	cfg := realServers().config(t)
	cfg.Throttle = generous()
	cfg.Throttle.LoginPerAccountPerIP = redis_rate.Limit{Rate: 1, Period: time.Hour, Burst: 3}
	cfg.Throttle.HashWait = time.Hour
	app, srv := startAppConfig(t, cfg)
	release := app.hashes.occupy(app.hashes.slots)
	defer release()

	cmd := exec.CommandContext(ctx, node, "testdata/limits.mjs", srv.URL, "target@example.com", "20")
	var stdout, stderr testenv.LogBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	for waiting := true; waiting; {
		select {
		case err = <-exited:
			t.Fatalf("node testdata/limits.mjs ended (%v) with %d guesses waiting for a hash slot, not 3\nstderr:\n%s\nstdout:\n%s",
				err, app.hashes.pending.Load(), stderr.String(), stdout.String())
		case <-ctx.Done():
			t.Fatalf("%d guesses waiting for a hash slot, not 3: %v", app.hashes.pending.Load(), ctx.Err())
		case <-time.After(time.Millisecond):
			waiting = app.hashes.pending.Load() < 3
		}
	}
	release()
	if err = <-exited; err != nil {
		t.Fatalf("node testdata/limits.mjs: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	if n, r := app.hashes.hashes.Load(), app.hashes.rejected.Load(); n != 3 || r != 0 {
		t.Errorf("%d password hashes, %d refused by the hash pool; want the 3 guesses the limit let through, none refused", n, r)
	}
	var out struct {
		Unsupported map[string]int `json:"unsupported"`
		Counts      map[string]int `json:"counts"`
		Waits       []int          `json:"waits"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &out); err != nil {
		t.Fatalf("node's output %q: %v", stdout.String(), err)
	}
	if len(out.Unsupported) != 5 {
		t.Errorf("415 cases: %v, want 5", out.Unsupported)
	}
	if out.Counts["401"] != 3 || out.Counts["429"] != 17 || len(out.Counts) != 2 {
		t.Errorf("20 guesses got %v, want 3 401s and 17 429s", out.Counts)
	}
	for _, w := range out.Waits {
		if w < 1 || w > 3600 {
			t.Errorf("Retry-After %d outside 1 s to the hour the limit refills in", w)
		}
	}
}

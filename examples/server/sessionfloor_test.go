package main

import (
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
	"github.com/snowkeyhq/snowkey/tokens"
)

// restartClock is the clock of a host set back before a restart: when the
// server first reads it, it reads at, and from then on it runs with real
// time, or stands still when still is set. Anchored at the first reading,
// it is behind by the same amount however long the server took to start.
type restartClock struct {
	at    int64 // Unix ns at the first reading
	still bool
	once  sync.Once
	first time.Time
}

func (c *restartClock) UnixNano() int64 {
	c.once.Do(func() { c.first = time.Now() })
	if c.still {
		return c.at
	}
	return c.at + int64(time.Since(c.first))
}

func (c *restartClock) Sleep(d time.Duration) { time.Sleep(d) }

// TestSessionFloor restarts a fixed worker whose sessions live in a real
// Redis, with an empty database (nothing in any table to start after) and
// its clock 2 s behind the last session when it starts: its first session
// ID after the restart must still come after the last one before it, and
// the server must have waited for its clock to pass the floor (the proof
// that the run met a clock set back). In the control run the floor's
// record is deleted before the restart, so that the restarted server
// knows of no session, as one whose restart floor ignored them would:
// its first session ID comes before; its clock stands still at 2 s
// behind, so that how long the sign-up and login take decides nothing.
func TestSessionFloor(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "floor", true: "control"}[control], func(t *testing.T) {
			testenv.Deadline(t, 2*time.Minute)
			prefix := testenv.KeyPrefix(t)
			rdb := testenv.RedisClient(t)
			cfg := Config{Redis: rdb, Worker: 9, KeyPrefix: prefix + "ex:", Tokens: tokens.Options{KeyPrefix: prefix + "tok:"},
				Throttle: generous(), Argon2: Argon2Params{Memory: 1024, Time: 1, Threads: 1}}
			sessionOf := func(srv string, login response) idtype.ID {
				t.Helper()
				var l struct{ Session struct{ ID string } }
				login.json(t, &l)
				return checkID(t, srv+" session ID", l.Session.ID)
			}

			app1, srv1 := startAppConfig(t, cfg)
			signupLogin(t, srv1, "floor@example.com", goodPassword)
			s1 := sessionOf("first", call(t, srv1, "POST", "/api/login", "", `{"email":"floor@example.com","password":"`+goodPassword+`"}`))
			srv1.Close()
			if err := app1.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			// A clean Close leaves the floor at the newest session.
			floorKey := prefix + "ex:session-floor:9"
			v, err := rdb.Get(t.Context(), floorKey).Int64()
			if err != nil || v != s1.Time().UnixMilli() {
				t.Errorf("floor after Close: %d (%v), want the last session's ms %d", v, err, s1.Time().UnixMilli())
			}
			if control {
				if n, err := rdb.Del(t.Context(), floorKey).Result(); err != nil || n != 1 {
					t.Fatalf("control: delete the floor's record: %d deleted, %v", n, err)
				}
			}

			// The restart: a fresh database, the clock 2 s behind.
			var log testenv.LogBuffer
			cfg.Logger = slog.New(slog.NewTextHandler(io.MultiWriter(&log, tWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
			cfg.Clock = &restartClock{at: s1.Time().Add(-2 * time.Second).UnixNano(), still: control}
			_, srv2 := startAppConfig(t, cfg)
			signupLogin(t, srv2, "floor@example.com", goodPassword)
			s2 := sessionOf("second", call(t, srv2, "POST", "/api/login", "", `{"email":"floor@example.com","password":"`+goodPassword+`"}`))
			t.Logf("session before the restart %s (%v), after %s (%v)", s1, s1.Time(), s2, s2.Time())
			waited := strings.Contains(log.String(), "waiting for the clock to pass the restart floor")
			if control {
				if s2 > s1 {
					t.Errorf("control: session %s after the restart is above %s; the clock set back proves nothing", s2, s1)
				}
				if waited {
					t.Error("control: the server waited for a floor it should not know")
				}
				return
			}
			if !waited {
				t.Errorf("the restarted server did not wait for its clock to pass the floor: it did not meet a clock set back\n%s", log.String())
			}
			if s2 <= s1 {
				t.Errorf("session %s after the restart is not above %s before it", s2, s1)
			}
		})
	}
}

// TestSessionFloorRecord checks the record itself on miniredis: raised
// ahead of the clock only when its margin runs short, lowered by close to
// the newest session, and left alone by a close if another writer
// raised it since.
func TestSessionFloorRecord(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 30*time.Second)
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	clock := idtype.SystemClock()
	f := newSessionFloor(rdb, "p:", 3, clock)
	if got, err := f.load(ctx); err != nil || !got.IsZero() {
		t.Fatalf("load of no record: %v, %v", got, err)
	}
	if err := f.cover(ctx); err != nil {
		t.Fatal(err)
	}
	stored := func() int64 {
		s, _ := m.Get("p:session-floor:3")
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("record %q: %v", s, err)
		}
		return v
	}
	first := stored()
	now := time.Now().UnixMilli()
	if first < now+sessionFloorMargin.Milliseconds() || first > now+sessionFloorAhead.Milliseconds()+1000 {
		t.Errorf("record %d is not about %v ahead of %d", first, sessionFloorAhead, now)
	}
	if err := f.cover(ctx); err != nil || stored() != first {
		t.Errorf("a second cover within the margin rewrote the record: %d -> %d (%v)", first, stored(), err)
	}
	f.issued(time.UnixMilli(now))
	if err := f.close(ctx); err != nil || stored() != now {
		t.Errorf("after close the record is %d (%v), want the newest session's %d", stored(), err, now)
	}

	g := newSessionFloor(rdb, "p:", 3, clock)
	if got, err := g.load(ctx); err != nil || got.UnixMilli() != now {
		t.Fatalf("load: %v, %v; want %d", got, err, now)
	}
	if err := g.cover(ctx); err != nil {
		t.Fatal(err)
	}
	m.Set("p:session-floor:3", strconv.FormatInt(stored()+60000, 10)) // another writer
	raised := stored()
	if err := g.close(ctx); err != nil || stored() != raised {
		t.Errorf("close lowered a record another writer raised: %d -> %d (%v)", raised, stored(), err)
	}
	m.Set("p:session-floor:3", "junk")
	if _, err := newSessionFloor(rdb, "p:", 3, clock).load(ctx); err == nil {
		t.Error("load of a junk record succeeded")
	}
}

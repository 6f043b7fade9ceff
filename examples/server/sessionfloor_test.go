package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testenv"
	"github.com/snowkeyhq/snowkey/tokens"
)

// shiftedClock is the system clock set back by a fixed amount, as after a
// restart on a host whose clock was corrected backwards.
type shiftedClock struct {
	idtype.Clock
	by time.Duration
}

func (c shiftedClock) UnixNano() int64 { return c.Clock.UnixNano() - int64(c.by) }

// TestSessionFloor restarts a fixed worker whose sessions live in a real
// Redis, with an empty database (nothing in any table to start after) and
// its clock set back: its first session ID after the restart must still
// come after the last one before it. In the control run, whose restart
// floor ignores the sessions, it comes before.
func TestSessionFloor(t *testing.T) {
	for _, control := range []bool{false, true} {
		t.Run(map[bool]string{false: "floor", true: "control"}[control], func(t *testing.T) {
			testenv.Deadline(t, 2*time.Minute)
			prefix := testenv.KeyPrefix(t)
			rdb := testenv.RedisClient(t)
			config := func(clock idtype.Clock) Config {
				cfg := Config{Redis: rdb, Worker: 9, KeyPrefix: prefix + "ex:", Tokens: tokens.Options{KeyPrefix: prefix + "tok:"},
					Throttle: generous(), Argon2: Argon2Params{Memory: 1024, Time: 1, Threads: 1}}
				cfg.clock, cfg.noSessionFloor = clock, control
				return cfg
			}
			sessionOf := func(srv string, login response) idtype.ID {
				t.Helper()
				var l struct{ Session struct{ ID string } }
				login.json(t, &l)
				return checkID(t, srv+" session ID", l.Session.ID)
			}

			app1, srv1 := startAppConfig(t, config(nil))
			signupLogin(t, srv1, "floor@example.com", goodPassword)
			s1 := sessionOf("first", call(t, srv1, "POST", "/api/login", "", `{"email":"floor@example.com","password":"`+goodPassword+`"}`))
			srv1.Close()
			if err := app1.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			if !control {
				// A clean Close leaves the floor at the newest session.
				v, err := rdb.Get(t.Context(), prefix+"ex:session-floor:9").Int64()
				if err != nil || v != s1.Time().UnixMilli() {
					t.Errorf("floor after Close: %d (%v), want the last session's ms %d", v, err, s1.Time().UnixMilli())
				}
			}

			// The restart: a fresh database, the clock 6 s behind.
			_, srv2 := startAppConfig(t, config(shiftedClock{idtype.SystemClock(), 6 * time.Second}))
			signupLogin(t, srv2, "floor@example.com", goodPassword)
			s2 := sessionOf("second", call(t, srv2, "POST", "/api/login", "", `{"email":"floor@example.com","password":"`+goodPassword+`"}`))
			t.Logf("session before the restart %s (%v), after %s (%v)", s1, s1.Time(), s2, s2.Time())
			if control {
				if s2 > s1 {
					t.Errorf("control: session %s after the restart is above %s; the clock shift proves nothing", s2, s1)
				}
				return
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

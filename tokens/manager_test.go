package tokens

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

func TestIssueValidate(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		m := openManager(t, b.client(t), gen, Options{})
		user := userID(t, gen)
		meta := Metadata{Device: "Anna's phone", UserAgent: "Snow/1.0 (iOS 18)", IP: "203.0.113.7"}
		before := time.Now()
		tok, s, err := m.Issue(ctx, user, meta)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tok, "snk_") || len(tok) != tokenLen("snk") {
			t.Errorf("token %q: want snk_ and %d bytes", tok, tokenLen("snk"))
		}
		if s.UserID != user || s.Metadata != meta || s.ID <= 0 {
			t.Errorf("Issue session = %+v", s)
		}
		if d := s.IssuedAt.Sub(before); d < -time.Millisecond || d > time.Second {
			t.Errorf("IssuedAt %v is %v after the call began", s.IssuedAt, d)
		}
		if !s.LoginAt.Equal(s.IssuedAt) || !s.LastSeenAt.Equal(s.IssuedAt) {
			t.Errorf("LoginAt %v, LastSeenAt %v, want IssuedAt %v", s.LoginAt, s.LastSeenAt, s.IssuedAt)
		}
		if want := s.IssuedAt.Add(DefaultIdleTimeout); !s.ExpiresAt.Equal(want) {
			t.Errorf("ExpiresAt %v, want %v", s.ExpiresAt, want)
		}
		if want := s.IssuedAt.Add(DefaultAbsoluteLifetime); !s.AbsoluteExpiresAt.Equal(want) {
			t.Errorf("AbsoluteExpiresAt %v, want %v", s.AbsoluteExpiresAt, want)
		}
		got, err := m.Validate(ctx, tok)
		if err != nil {
			t.Fatalf("Validate: %v", err)
		}
		if got != s {
			t.Errorf("Validate = %+v\nIssue    = %+v", got, s)
		}
		if strings.Contains(tok, user.String()) {
			t.Errorf("token %q holds the user ID %d", tok, user)
		}
	})
}

func TestValidateRejects(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		m := openManager(t, b.client(t), gen, Options{})
		user := userID(t, gen)
		tok, _ := issue(t, m, user, Metadata{})
		parsed, _ := parseToken("snk", tok)

		wrongSecret := parsed
		wrongSecret.secret[0] ^= 1
		unknown := parsed
		unknown.session++
		otherTag := parsed
		otherTag.tag = (parsed.tag + 1) % numSlotTags
		revoked, _ := issue(t, m, user, Metadata{})
		if err := m.Revoke(ctx, revoked); err != nil {
			t.Fatal(err)
		}
		other := openManager(t, b.client(t), gen, Options{TokenPrefix: "other"})
		otherTok, _ := issue(t, other, user, Metadata{})

		for _, tc := range []struct{ name, tok string }{
			{"empty", ""},
			{"garbage", "hello"},
			{"flipped character", tok[:10] + string(tok[10]^1) + tok[11:]},
			{"cut short", tok[:len(tok)-1]},
			{"other prefix", "abc" + tok[3:]},
			{"other manager's prefix", otherTok},
			{"wrong secret", wrongSecret.format("snk")},
			{"unknown session", unknown.format("snk")},
			{"wrong slot tag", otherTag.format("snk")},
			{"revoked", revoked},
		} {
			_, err := m.Validate(ctx, tc.tok)
			if err != ErrInvalidToken {
				t.Errorf("%s: Validate = %v, want exactly ErrInvalidToken", tc.name, err)
			}
		}
		if _, err := m.Validate(ctx, tok); err != nil {
			t.Errorf("the original token after all that: %v", err)
		}
	})
}

func TestRevoke(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		m := openManager(t, b.client(t), gen, Options{})
		user := userID(t, gen)
		tok, _ := issue(t, m, user, Metadata{})
		keep, _ := issue(t, m, user, Metadata{})
		parsed, _ := parseToken("snk", tok)
		forged := parsed
		forged.secret[31] ^= 0x80
		if err := m.Revoke(ctx, forged.format("snk")); err != ErrInvalidToken {
			t.Errorf("Revoke with a wrong secret = %v, want ErrInvalidToken", err)
		}
		if _, err := m.Validate(ctx, tok); err != nil {
			t.Fatalf("a wrong secret revoked the session: %v", err)
		}
		if err := m.Revoke(ctx, tok); err != nil {
			t.Fatalf("Revoke: %v", err)
		}
		if _, err := m.Validate(ctx, tok); err != ErrInvalidToken {
			t.Errorf("Validate after Revoke = %v, want ErrInvalidToken", err)
		}
		if err := m.Revoke(ctx, tok); err != ErrInvalidToken {
			t.Errorf("second Revoke = %v, want ErrInvalidToken", err)
		}
		if _, err := m.Validate(ctx, keep); err != nil {
			t.Errorf("the user's other session: %v", err)
		}
		list, err := m.List(ctx, user)
		if err != nil || len(list) != 1 {
			t.Errorf("List after Revoke = %d sessions, %v; want 1", len(list), err)
		}
	})
}

func TestRevokeSession(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		m := openManager(t, b.client(t), gen, Options{})
		anna, ben := userID(t, gen), userID(t, gen)
		annaTok, annaS := issue(t, m, anna, Metadata{Device: "phone"})
		annaTok2, _ := issue(t, m, anna, Metadata{Device: "laptop"})
		benTok, benS := issue(t, m, ben, Metadata{})

		if ok, err := m.RevokeSession(ctx, anna, benS.ID); ok || err != nil {
			t.Errorf("Anna revoking Ben's session = %v, %v; want false, nil", ok, err)
		}
		if _, err := m.Validate(ctx, benTok); err != nil {
			t.Errorf("Ben's session after Anna tried to revoke it: %v", err)
		}
		if ok, err := m.RevokeSession(ctx, anna, annaS.ID); !ok || err != nil {
			t.Errorf("RevokeSession = %v, %v; want true, nil", ok, err)
		}
		if _, err := m.Validate(ctx, annaTok); err != ErrInvalidToken {
			t.Errorf("revoked session: Validate = %v", err)
		}
		if ok, err := m.RevokeSession(ctx, anna, annaS.ID); ok || err != nil {
			t.Errorf("second RevokeSession = %v, %v; want false, nil", ok, err)
		}
		if _, err := m.Validate(ctx, annaTok2); err != nil {
			t.Errorf("Anna's other session: %v", err)
		}
		if _, err := m.RevokeSession(ctx, 0, annaS.ID); !errors.Is(err, ErrInvalidUser) {
			t.Errorf("user 0: %v, want ErrInvalidUser", err)
		}
	})
}

func TestRevokeAll(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		c := b.client(t)
		m := openManager(t, c, gen, Options{})
		anna, ben := userID(t, gen), userID(t, gen)
		var annaToks []string
		var annaKeys []string
		for range 5 {
			tok, s := issue(t, m, anna, Metadata{})
			annaToks = append(annaToks, tok)
			annaKeys = append(annaKeys, m.keys.session(slotTag(anna), s.ID))
		}
		current, cur := issue(t, m, anna, Metadata{})
		benTok, _ := issue(t, m, ben, Metadata{})

		n, err := m.RevokeAll(ctx, anna, cur.ID)
		if err != nil || n != 5 {
			t.Fatalf("RevokeAll keeping the current session = %d, %v; want 5", n, err)
		}
		for i, tok := range annaToks {
			if _, err := m.Validate(ctx, tok); err != ErrInvalidToken {
				t.Errorf("token %d after RevokeAll: %v", i, err)
			}
		}
		// Their keys are gone with them, not left to expire.
		if n, err := c.Exists(ctx, annaKeys...).Result(); n != 0 || err != nil {
			t.Errorf("%d of the keys of the sessions RevokeAll ended exist (%v)", n, err)
		}
		if _, err := m.Validate(ctx, current); err != nil {
			t.Errorf("the kept session: %v", err)
		}
		if _, err := m.Validate(ctx, benTok); err != nil {
			t.Errorf("another user's session: %v", err)
		}
		if n, err := m.RevokeAll(ctx, anna); err != nil || n != 1 {
			t.Errorf("RevokeAll = %d, %v; want 1", n, err)
		}
		if _, err := m.Validate(ctx, current); err != ErrInvalidToken {
			t.Errorf("current after RevokeAll without keep: %v", err)
		}
		if list, err := m.List(ctx, anna); err != nil || len(list) != 0 {
			t.Errorf("List after RevokeAll = %v, %v", list, err)
		}
	})
}

func TestList(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		m := openManager(t, b.client(t), gen, Options{})
		user := userID(t, gen)
		if list, err := m.List(ctx, user); err != nil || len(list) != 0 {
			t.Fatalf("List of a user without sessions = %v, %v", list, err)
		}
		var toks []string
		var want []Session
		for i, dev := range []string{"phone", "laptop", "tablet"} {
			tok, s := issue(t, m, user, Metadata{Device: dev, IP: "192.0.2." + string(rune('1'+i))})
			toks = append(toks, tok)
			want = append([]Session{s}, want...) // newest first
		}
		issue(t, m, userID(t, gen), Metadata{Device: "someone else's"})
		got, err := m.List(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("List = %d sessions, want %d", len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("List[%d] = %+v\nwant      %+v", i, got[i], want[i])
			}
		}
		js, _ := json.Marshal(got)
		for _, tok := range toks {
			p, _ := parseToken("snk", tok)
			secret := tok[len("snk_")+sidDigits+tagDigits : len(tok)-sumDigits]
			if strings.Contains(string(js), secret) || strings.Contains(string(js), string(p.secret[:])) {
				t.Errorf("List's JSON holds a secret: %s", js)
			}
		}
	})
}

func TestRotate(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		m := openManager(t, b.client(t), gen, Options{})
		user := userID(t, gen)
		meta := Metadata{Device: "phone"}
		old, first := issue(t, m, user, meta)
		time.Sleep(5 * time.Millisecond)
		tok, s, err := m.Rotate(ctx, old)
		if err != nil {
			t.Fatalf("Rotate: %v", err)
		}
		if s.ID <= first.ID || s.UserID != user || s.Metadata != meta {
			t.Errorf("rotated session %+v from %+v", s, first)
		}
		if !s.LoginAt.Equal(first.LoginAt) || !s.AbsoluteExpiresAt.Equal(first.AbsoluteExpiresAt) {
			t.Errorf("rotation moved LoginAt %v→%v or AbsoluteExpiresAt %v→%v",
				first.LoginAt, s.LoginAt, first.AbsoluteExpiresAt, s.AbsoluteExpiresAt)
		}
		got, err := m.Validate(ctx, tok)
		if err != nil || got != s {
			t.Errorf("Validate(new) = %+v, %v\nwant %+v", got, err, s)
		}
		list, err := m.List(ctx, user)
		if err != nil || len(list) != 1 || list[0].ID != s.ID {
			t.Errorf("List after Rotate = %+v, %v; want only the new session", list, err)
		}

		// Concurrent rotations of one token all get the one successor
		// (see TestRotationGrace). It is the second rotation of the
		// session, which carries LoginAt from the first's record.
		var wg sync.WaitGroup
		type win struct {
			tok string
			s   Session
		}
		wins := make(chan win, 8)
		for range 8 {
			wg.Go(func() {
				if tok, s, err := m.Rotate(ctx, tok); err == nil {
					wins <- win{tok, s}
				} else {
					t.Errorf("concurrent Rotate: %v", err)
				}
			})
		}
		wg.Wait()
		close(wins)
		var second win
		for w := range wins {
			if second.tok == "" {
				second = w
			}
			if w.tok != second.tok || w.s != second.s {
				t.Errorf("concurrent rotations of one token disagree: %+v and %+v", w.s, second.s)
			}
		}
		if s := second.s; !s.LoginAt.Equal(first.LoginAt) || !s.AbsoluteExpiresAt.Equal(first.AbsoluteExpiresAt) || s.Metadata != meta || s.UserID != user {
			t.Errorf("second rotation: %+v, from %+v", s, first)
		}
		if list, _ := m.List(ctx, user); len(list) != 1 || list[0].ID != second.s.ID {
			t.Errorf("after concurrent rotations the user has sessions %+v, want the one they agreed on", list)
		}
	})
}

func TestMaxSessions(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		c := b.client(t)
		m := openManager(t, c, gen, Options{MaxSessions: 3})
		user := userID(t, gen)
		var toks, keys []string
		for range 5 {
			tok, s := issue(t, m, user, Metadata{})
			toks = append(toks, tok)
			keys = append(keys, m.keys.session(slotTag(user), s.ID))
		}
		if n, err := c.Exists(ctx, keys[:2]...).Result(); n != 0 || err != nil {
			t.Errorf("%d of the keys of the 2 sessions revoked past MaxSessions exist (%v)", n, err)
		}
		for i, tok := range toks {
			_, err := m.Validate(ctx, tok)
			if wantValid := i >= 2; (err == nil) != wantValid {
				t.Errorf("token %d of 5 with MaxSessions 3: Validate = %v", i, err)
			}
		}
		if list, err := m.List(ctx, user); err != nil || len(list) != 3 {
			t.Errorf("List = %d sessions, %v; want 3", len(list), err)
		}
	})
}

func TestBadUser(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	m := openManager(t, miniClient(t), newGen(t), Options{})
	ctx := t.Context()
	for _, u := range []idtype.ID{0, -1} {
		if _, _, err := m.Issue(ctx, u, Metadata{}); !errors.Is(err, ErrInvalidUser) {
			t.Errorf("Issue(%d) = %v", u, err)
		}
		if _, err := m.List(ctx, u); !errors.Is(err, ErrInvalidUser) {
			t.Errorf("List(%d) = %v", u, err)
		}
		if _, err := m.RevokeAll(ctx, u); !errors.Is(err, ErrInvalidUser) {
			t.Errorf("RevokeAll(%d) = %v", u, err)
		}
	}
}

// roundTrips counts the commands and pipelines a client sends.
type roundTrips struct {
	mu   sync.Mutex
	cmds []string
}

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.mu.Lock()
		h.cmds = append(h.cmds, cmd.Name())
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		h.cmds = append(h.cmds, "pipeline")
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (h *roundTrips) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.cmds
	h.cmds = nil
	return c
}

func TestRoundTrips(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	forEach(t, allBackends(), func(t *testing.T, b backend) {
		ctx := t.Context()
		gen := newGen(t)
		c := b.client(t)
		hook := &roundTrips{}
		c.AddHook(hook)
		m := openManager(t, c, gen, Options{IdleTimeout: 2 * time.Hour, RefreshInterval: time.Hour})
		// The same sessions, seen by a Manager that refreshes after 10 ms.
		eager := openManager(t, c, gen, Options{KeyPrefix: m.opts.KeyPrefix, IdleTimeout: time.Hour, RefreshInterval: 10 * time.Millisecond})
		user := userID(t, gen)
		if err := c.Ping(ctx).Err(); err != nil { // the connection's own handshake
			t.Fatal(err)
		}
		hook.take()

		// The first run of each script may load it: EVALSHA, then EVAL.
		tok, _ := issue(t, m, user, Metadata{})
		if got := hook.take(); len(got) > 2 {
			t.Errorf("first Issue sent %v, want at most EVALSHA and EVAL", got)
		}
		for i := range 3 {
			issue(t, m, user, Metadata{Device: "d"})
			if got := hook.take(); len(got) != 1 {
				t.Errorf("Issue %d sent %v, want one round trip", i+2, got)
			}
		}
		// Validate is one script (the session's GET and its user's field
		// of the index); its first run may load it.
		if _, err := m.Validate(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if got := hook.take(); len(got) > 2 {
			t.Errorf("first Validate sent %v, want at most EVALSHA and EVAL", got)
		}
		for range 3 {
			if _, err := m.Validate(ctx, tok); err != nil {
				t.Fatal(err)
			}
			if got := hook.take(); len(got) != 1 || got[0] != "evalsha" {
				t.Errorf("Validate sent %v, want one EVALSHA", got)
			}
		}
		// Each call below runs twice: the first may load its script.
		for i := range 2 {
			rotated, _, err := m.Rotate(ctx, tok)
			if err != nil {
				t.Fatal(err)
			}
			if got := hook.take(); i == 1 && len(got) != 1 {
				t.Errorf("Rotate sent %v, want one round trip", got)
			}
			if err := m.Revoke(ctx, rotated); err != nil {
				t.Fatal(err)
			}
			if got := hook.take(); i == 1 && len(got) != 1 {
				t.Errorf("Revoke sent %v, want one round trip", got)
			}
			_, s := issue(t, m, user, Metadata{})
			hook.take()
			if ok, err := m.RevokeSession(ctx, user, s.ID); !ok || err != nil {
				t.Fatal(ok, err)
			}
			if got := hook.take(); i == 1 && len(got) != 1 {
				t.Errorf("RevokeSession sent %v, want one round trip", got)
			}
			issue(t, m, user, Metadata{})
			hook.take()
			if _, err := m.List(ctx, user); err != nil {
				t.Fatal(err)
			}
			if got := hook.take(); i == 1 && len(got) != 2 {
				t.Errorf("List of a user with sessions sent %v, want two round trips (the index, then the sessions)", got)
			}
			if n, err := m.RevokeAll(ctx, user, s.ID); err != nil || n == 0 {
				t.Fatal(n, err)
			}
			if got := hook.take(); i == 1 && len(got) != 2 {
				t.Errorf("RevokeAll that ended sessions sent %v, want two round trips (the revocation, then the clean-up)", got)
			}
			if n, err := m.RevokeAll(ctx, user); err != nil || n != 0 {
				t.Fatal(n, err)
			}
			if got := hook.take(); len(got) != 1 {
				t.Errorf("RevokeAll that ended nothing sent %v, want one round trip", got)
			}
			if list, err := m.List(ctx, user); err != nil || len(list) != 0 {
				t.Fatal(list, err)
			}
			if got := hook.take(); len(got) != 1 {
				t.Errorf("List of a user without sessions sent %v, want one round trip", got)
			}
			tok, _ = issue(t, m, user, Metadata{})
			hook.take()
		}
		// Past MaxSessions, Issue revokes and then deletes the keys.
		few := openManager(t, c, gen, Options{KeyPrefix: m.opts.KeyPrefix, MaxSessions: 1})
		issue(t, few, user, Metadata{})
		hook.take()
		issue(t, few, user, Metadata{})
		if got := hook.take(); len(got) != 2 {
			t.Errorf("Issue past MaxSessions sent %v, want two round trips (the session, then the clean-up)", got)
		}
		tok, _ = issue(t, m, user, Metadata{})
		hook.take()
		time.Sleep(20 * time.Millisecond)
		if _, err := eager.Validate(ctx, tok); err != nil { // loads the refresh script
			t.Fatal(err)
		}
		hook.take()
		time.Sleep(20 * time.Millisecond)
		if _, err := eager.Validate(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if got := hook.take(); len(got) != 2 {
			t.Errorf("Validate due for a refresh sent %v, want two EVALSHAs", got)
		}
		if _, err := m.Validate(ctx, "snk_junk"); err != ErrInvalidToken {
			t.Fatal(err)
		}
		if got := hook.take(); len(got) != 0 {
			t.Errorf("Validate of a malformed token sent %v, want nothing", got)
		}
	})
}

package tokens

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestStats counts every kind of call through Stats, exactly, on each
// backend: every Validate lands in one of the three outcomes, the cache
// counts hits and misses, and revocations count the sessions they ended.
func TestStats(t *testing.T) {
	forEach(t, []backend{miniBackend, singleBackend, clusterBackend}, func(t *testing.T, b backend) {
		ctx := testenv.Deadline(t, time.Minute)
		c := b.client(t)
		gen := newGen(t)
		const refresh = 100 * time.Millisecond
		m := openManager(t, c, gen, Options{IdleTimeout: time.Hour, RefreshInterval: refresh})
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		want := Stats{}
		check := func(step string) {
			t.Helper()
			if got := m.Stats(); got != want {
				t.Fatalf("after %s: Stats\n%+v, want\n%+v", step, got, want)
			}
		}
		check("New")

		user, other := userID(t, gen), userID(t, gen)
		toks := make([]string, 3)
		sess := make([]Session, 3)
		for i := range toks {
			toks[i], sess[i] = issue(t, m, user, Metadata{})
		}
		otherTok, _ := issue(t, m, other, Metadata{})
		want.Issued = 4
		check("4 Issues")

		// On a slow machine a refresh may fall due already; it then shows
		// in the session, and counts.
		validate := func(tok string) Session {
			t.Helper()
			s := mustValidate(t, m, tok)
			want.ValidationsOK++
			if !s.LastSeenAt.Equal(s.IssuedAt) {
				want.Refreshes++
			}
			return s
		}
		validate(toks[0])
		check("a Validate")

		badSum := toks[0][:len(toks[0])-1] + string(toks[0][len(toks[0])-1]^1)
		for _, tok := range []string{"", "snk_junk", badSum} {
			if _, err := m.Validate(ctx, tok); err != ErrInvalidToken {
				t.Fatalf("Validate(%q) = %v, want ErrInvalidToken", tok, err)
			}
			want.ValidationsInvalid++
		}
		check("3 invalid tokens")

		if _, err := m.Validate(canceled, toks[1]); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Validate with a canceled context = %v, want ErrUnavailable", err)
		}
		want.ValidationsUnavailable++
		check("a Validate with a canceled context")

		time.Sleep(2 * refresh) // every session is due for a refresh
		if s := validate(toks[1]); s.LastSeenAt.Equal(s.IssuedAt) {
			t.Fatalf("a session due for a refresh was not refreshed: %+v", s)
		}
		check("a Validate that refreshed")

		rotated, _, err := m.Rotate(ctx, toks[2])
		if err != nil {
			t.Fatal(err)
		}
		want.Issued++
		want.Revocations++
		check("Rotate")

		if err := m.Revoke(ctx, toks[0]); err != nil {
			t.Fatal(err)
		}
		want.Revocations++
		if err := m.Revoke(ctx, toks[0]); err != ErrInvalidToken {
			t.Fatalf("second Revoke = %v, want ErrInvalidToken", err)
		}
		check("Revoke, twice")

		for i, wantOK := range []bool{true, false} {
			ok, err := m.RevokeSession(ctx, user, sess[1].ID)
			if err != nil || ok != wantOK {
				t.Fatalf("RevokeSession #%d = %v, %v; want %v", i+1, ok, err, wantOK)
			}
		}
		want.Revocations++
		check("RevokeSession, twice")

		validate(rotated)
		n, err := m.RevokeAll(ctx, user)
		if err != nil || n != 1 {
			t.Fatalf("RevokeAll = %d, %v; want the rotated session", n, err)
		}
		want.Revocations++
		check("RevokeAll")

		small := openManager(t, c, gen, Options{MaxSessions: 2})
		for range 3 {
			issue(t, small, other, Metadata{})
		}
		if got, want := small.Stats(), (Stats{Issued: 3, Revocations: 2}); got != want {
			// The user's first session, from m, and the first of small's.
			t.Errorf("MaxSessions 2, a user with 1 session and 3 Issues: Stats %+v, want %+v", got, want)
		}
		if _, err := m.Validate(ctx, otherTok); err != ErrInvalidToken {
			t.Errorf("the session MaxSessions ended: %v", err)
		}
		want.ValidationsInvalid++
		check("the other Manager's work")
	})
}

// TestStatsCache counts the cache's hits and misses, and checks that a hit
// counts as a validation.
func TestStatsCache(t *testing.T) {
	forEach(t, []backend{miniBackend, singleBackend}, func(t *testing.T, b backend) {
		ctx := testenv.Deadline(t, time.Minute)
		gen := newGen(t)
		m := openManager(t, b.client(t), gen, Options{CacheTTL: time.Minute})
		tok, _ := issue(t, m, userID(t, gen), Metadata{})
		want := Stats{Issued: 1}
		check := func(step string) {
			t.Helper()
			if got := m.Stats(); got != want {
				t.Fatalf("after %s: Stats\n%+v, want\n%+v", step, got, want)
			}
		}
		mustValidate(t, m, tok)
		want.CacheMisses++
		want.ValidationsOK++
		check("the first Validate")

		mustValidate(t, m, tok)
		want.CacheHits++
		want.ValidationsOK++
		check("a second Validate")

		canceled, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := m.Validate(canceled, tok); err != nil {
			t.Fatalf("a cached session with a canceled context: %v", err)
		}
		want.CacheHits++
		want.ValidationsOK++
		check("a hit with a canceled context")

		if _, err := m.Validate(ctx, "snk_junk"); err != ErrInvalidToken {
			t.Fatal(err)
		}
		want.ValidationsInvalid++
		check("a token too malformed to reach the cache")

		// Another base62 digit at the end (flipping a bit of 'z' would give
		// '{', which is not base62 and never reaches the cache).
		last := byte('0')
		if tok[len(tok)-1] == '0' {
			last = '1'
		}
		badSum := tok[:len(tok)-1] + string(last)
		if _, err := m.Validate(ctx, badSum); err != ErrInvalidToken {
			t.Fatal(err)
		}
		want.CacheMisses++
		want.ValidationsInvalid++
		check("a token with a wrong checksum")

		// Hits on many goroutines and sessions (so many shards) add up.
		toks := make([]string, 64)
		for i := range toks {
			toks[i], _ = issue(t, m, userID(t, gen), Metadata{})
			mustValidate(t, m, toks[i])
		}
		want.Issued += 64
		want.CacheMisses += 64
		want.ValidationsOK += 64
		const goroutines, each = 8, 200
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range each {
					if _, err := m.Validate(ctx, toks[(g*each+i)%len(toks)]); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		want.CacheHits += goroutines * each
		want.ValidationsOK += goroutines * each
		check("concurrent hits")
	})
}

func mustValidate(t *testing.T, m *Manager, tok string) Session {
	t.Helper()
	s, err := m.Validate(t.Context(), tok)
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return s
}

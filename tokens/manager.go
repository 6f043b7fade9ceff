package tokens

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Manager issues, validates and revokes login tokens, keeping sessions in
// Redis. It is safe for any number of goroutines; make one per
// application and share it. It starts no goroutines and holds nothing that
// needs closing: closing the Redis client is the caller's business.
//
// Every session of a user lives in the Redis Cluster slot picked by the
// user's slot tag (see the token layout in token.go), so each method is a
// single command or script in one slot: the same code works on a
// redis.Client, a redis.ClusterClient and a FailoverClient (Sentinel).
//
// Round trips: Issue, Revoke, RevokeSession, RevokeAll and List take one;
// Validate takes one, plus one when the session is due for a refresh (at
// most once per RefreshInterval), and none when served from the cache;
// Rotate takes two. A script's first run on a server takes one more, to
// load it (EVALSHA, then EVAL).
type Manager struct {
	rdb    redis.UniversalClient
	gen    *idtype.Generator
	layout idtype.Layout
	opts   Options
	keys   keys
	s      scripts
	cache  *cache // nil when Options.CacheTTL is zero
}

// New returns a Manager that keeps sessions in client and takes session IDs
// from gen. The zero Options is a working configuration (see Options). The
// error wraps ErrInvalidOptions and names the bad field. New does no I/O.
func New(client redis.UniversalClient, gen *idtype.Generator, opts Options) (*Manager, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: the Redis client is nil", ErrInvalidOptions)
	}
	if gen == nil {
		return nil, fmt.Errorf("%w: the generator is nil", ErrInvalidOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Manager{
		rdb:    client,
		gen:    gen,
		layout: gen.Layout(),
		opts:   o,
		keys:   keys{prefix: o.KeyPrefix},
		s:      newScripts(),
	}
	if o.CacheTTL > 0 {
		m.cache = newCache(o.CacheTTL, o.CacheSize)
	}
	return m, nil
}

// Options returns the options in force, with every default filled in.
func (m *Manager) Options() Options { return m.opts }

// Issue starts a session for the user and returns its token, the only copy
// of which goes to the client, and the session. meta is recorded for the
// user's session list; its zero value records nothing.
//
// It takes one round trip. If the user already has Options.MaxSessions
// live sessions, the oldest are revoked to make room. The error wraps
// ErrInvalidUser for a user ID that is not positive, ErrUnavailable when
// Redis fails, or the generator's error.
func (m *Manager) Issue(ctx context.Context, userID idtype.ID, meta Metadata) (string, Session, error) {
	if userID <= 0 {
		return "", Session{}, fmt.Errorf("%w: %d", ErrInvalidUser, userID)
	}
	t, r, err := m.newToken(userID, meta)
	if err != nil {
		return "", Session{}, err
	}
	s := m.sessionOf(t.session, &r)
	ttl, ok := m.ttl(s, time.Now())
	if !ok {
		return "", Session{}, fmt.Errorf("tokens: issue: session %d would expire at once (AbsoluteLifetime %v)",
			t.session, m.opts.AbsoluteLifetime)
	}
	revoked, err := m.s.issue.Run(ctx, m.rdb,
		[]string{m.keys.session(t.tag, t.session), m.keys.index(t.tag, userID)},
		r.encode(), ttl, strconv.FormatInt(int64(t.session), 10), m.keys.sessionPrefix(t.tag), m.opts.MaxSessions,
	).StringSlice()
	if err != nil {
		return "", Session{}, unavailable("issue", err)
	}
	m.forget(revoked)
	return t.format(m.opts.TokenPrefix), s, nil
}

// newToken makes a token with a new session ID and secret, and its record.
func (m *Manager) newToken(userID idtype.ID, meta Metadata) (token, record, error) {
	sid, err := m.gen.Next()
	if err != nil {
		return token{}, record{}, fmt.Errorf("tokens: new session ID: %w", err)
	}
	t := token{session: sid, tag: slotTag(userID)}
	_, _ = rand.Read(t.secret[:]) // never fails; it crashes the program instead
	d := sha256.Sum256(t.secret[:])
	r := record{user: userID, meta: Metadata{
		Device:    truncate(meta.Device, maxMetaLen),
		UserAgent: truncate(meta.UserAgent, maxMetaLen),
		IP:        truncate(meta.IP, maxMetaLen),
	}}
	copy(r.digest[:], d[:])
	return t, r, nil
}

// Validate returns the session a token stands for. The error is
// ErrInvalidToken if the token is malformed, unknown, expired or revoked,
// and wraps ErrUnavailable if Redis could not answer: fail closed on any
// error.
//
// A malformed token costs no round trip; a valid one costs one GET, plus a
// script that extends the idle timeout when the stored last-seen time is
// at least Options.RefreshInterval old. With Options.CacheTTL set, a
// session validated within CacheTTL is served from memory.
func (m *Manager) Validate(ctx context.Context, token string) (Session, error) {
	t, sum, ok := parseFields(m.opts.TokenPrefix, token)
	if !ok {
		return Session{}, ErrInvalidToken
	}
	var digest [sha256.Size]byte
	if m.cache != nil {
		digest = sha256.Sum256(t.secret[:])
		if s, ok := m.cache.get(&t, sum, &digest); ok {
			return s, nil
		}
	}
	if !sumOK(token, sum) {
		return Session{}, ErrInvalidToken
	}
	if m.cache == nil {
		digest = sha256.Sum256(t.secret[:])
	}
	// Read the clock before Redis answers: the cache's bound on staleness
	// runs from a moment no later than Redis's answer.
	now := time.Now()
	s, _, err := m.load(ctx, &t, &digest, now)
	if err != nil {
		return Session{}, err
	}
	if now.Sub(s.LastSeenAt) >= m.opts.RefreshInterval {
		if s, err = m.refresh(ctx, &t, &digest, s, now); err != nil {
			return Session{}, err
		}
	}
	m.cache.put(&t, sum, &digest, s, now)
	return s, nil
}

// load reads and checks the session of a parsed token.
func (m *Manager) load(ctx context.Context, t *token, digest *[sha256.Size]byte, now time.Time) (Session, record, error) {
	v, err := m.rdb.Get(ctx, m.keys.session(t.tag, t.session)).Result()
	if errors.Is(err, redis.Nil) {
		return Session{}, record{}, ErrInvalidToken
	}
	if err != nil {
		return Session{}, record{}, unavailable("validate", err)
	}
	r, err := decodeRecord(v, true)
	if err != nil || subtle.ConstantTimeCompare(r.digest[:], digest[:digestLen]) != 1 {
		return Session{}, record{}, ErrInvalidToken
	}
	s := m.sessionOf(t.session, &r)
	// Redis expires the key on time; this catches lowered timeouts and
	// the moment between Redis's clock and ours.
	if !now.Before(s.ExpiresAt) {
		return Session{}, record{}, ErrInvalidToken
	}
	return s, r, nil
}

// refresh writes a new last-seen time and extends the expiry.
func (m *Manager) refresh(ctx context.Context, t *token, digest *[sha256.Size]byte, s Session, now time.Time) (Session, error) {
	seen := steps(s.IssuedAt, now)
	s.LastSeenAt = s.IssuedAt.Add(time.Duration(seen) * timeUnit)
	s.ExpiresAt = minTime(s.LastSeenAt.Add(m.opts.IdleTimeout), s.AbsoluteExpiresAt)
	ttl, ok := m.ttl(s, now)
	if !ok {
		return Session{}, ErrInvalidToken
	}
	var buf [4]byte
	binary.BigEndian.PutUint32(buf[:], seen)
	n, err := m.s.refresh.Run(ctx, m.rdb,
		[]string{m.keys.session(t.tag, t.session), m.keys.index(t.tag, s.UserID)},
		// A copy of the digest, so that the caller's stays on its stack.
		append([]byte(nil), digest[:digestLen]...), buf[:], steps(s.IssuedAt, now.Add(-m.opts.RefreshInterval)), ttl,
	).Int()
	if err != nil {
		return Session{}, unavailable("refresh", err)
	}
	if n == 0 {
		return Session{}, ErrInvalidToken // revoked since load
	}
	return s, nil
}

// Rotate replaces a token by a new one for the same session: the old token
// stops working and the new one keeps the user, the metadata, LoginAt and
// AbsoluteExpiresAt, under a new session ID. Of two concurrent rotations of
// one token, one succeeds and the other gets ErrInvalidToken, and a
// rotation racing RevokeAll cannot outlive it. Errors are those of
// Validate. It takes two round trips.
func (m *Manager) Rotate(ctx context.Context, token string) (string, Session, error) {
	t, ok := parseToken(m.opts.TokenPrefix, token)
	if !ok {
		return "", Session{}, ErrInvalidToken
	}
	digest := sha256.Sum256(t.secret[:])
	now := time.Now()
	old, r, err := m.load(ctx, &t, &digest, now)
	if err != nil {
		return "", Session{}, err
	}
	nt, nr, err := m.newToken(r.user, r.meta)
	if err != nil {
		return "", Session{}, err
	}
	nr.login = old.LoginAt.UnixMilli()
	s := m.sessionOf(nt.session, &nr)
	ttl, ok := m.ttl(s, now)
	if !ok {
		return "", Session{}, ErrInvalidToken
	}
	n, err := m.s.rotate.Run(ctx, m.rdb,
		[]string{m.keys.session(t.tag, t.session), m.keys.session(nt.tag, nt.session), m.keys.index(t.tag, r.user)},
		digest[:digestLen], nr.encode(), ttl,
		strconv.FormatInt(int64(t.session), 10), strconv.FormatInt(int64(nt.session), 10),
	).Int()
	if err != nil {
		return "", Session{}, unavailable("rotate", err)
	}
	m.cache.delete(t.session)
	if n == 0 {
		return "", Session{}, ErrInvalidToken
	}
	return nt.format(m.opts.TokenPrefix), s, nil
}

// Revoke ends the session of a token: logging out. It returns
// ErrInvalidToken if the token was not valid (a logout handler may ignore
// that), or an error wrapping ErrUnavailable. It takes one round trip.
func (m *Manager) Revoke(ctx context.Context, token string) error {
	t, ok := parseToken(m.opts.TokenPrefix, token)
	if !ok {
		return ErrInvalidToken
	}
	digest := sha256.Sum256(t.secret[:])
	n, err := m.s.revoke.Run(ctx, m.rdb, []string{m.keys.session(t.tag, t.session)}, digest[:digestLen]).Int()
	if err != nil {
		return unavailable("revoke", err)
	}
	// Drop the cache entry even on a mismatch: it can only be for a
	// session that the stored digest no longer vouches for.
	m.cache.delete(t.session)
	if n == 0 {
		return ErrInvalidToken
	}
	return nil
}

// RevokeSession ends one session of a user by its ID, as shown by List:
// "log out that device". It reports whether a live session of that user
// was ended; a session ID of another user is left alone and reports false.
// It takes one round trip.
func (m *Manager) RevokeSession(ctx context.Context, userID, sessionID idtype.ID) (bool, error) {
	if userID <= 0 {
		return false, fmt.Errorf("%w: %d", ErrInvalidUser, userID)
	}
	tag := slotTag(userID)
	var uid [8]byte
	binary.BigEndian.PutUint64(uid[:], uint64(userID))
	n, err := m.s.revokeSession.Run(ctx, m.rdb,
		[]string{m.keys.session(tag, sessionID), m.keys.index(tag, userID)},
		strconv.FormatInt(int64(sessionID), 10), uid[:],
	).Int()
	if err != nil {
		return false, unavailable("revoke session", err)
	}
	if n == 0 {
		return false, nil
	}
	m.cache.delete(sessionID)
	return true, nil
}

// RevokeAll ends every session of a user except those in keep, such as the
// current one: "log out everywhere (else)". It returns how many live
// sessions it ended.
//
// Every session issued before RevokeAll was called is invalid when it
// returns without error, on every Redis deployment: the user's sessions
// and index share one slot, and one script reads the index and deletes
// the sessions, so no Issue or Rotate can slip between the two. Sessions
// issued while it runs may survive. With Options.CacheTTL set, other
// instances may still accept the ended sessions for up to CacheTTL.
func (m *Manager) RevokeAll(ctx context.Context, userID idtype.ID, keep ...idtype.ID) (int, error) {
	if userID <= 0 {
		return 0, fmt.Errorf("%w: %d", ErrInvalidUser, userID)
	}
	tag := slotTag(userID)
	args := make([]any, 1, 1+len(keep))
	args[0] = m.keys.sessionPrefix(tag)
	for _, k := range keep {
		args = append(args, strconv.FormatInt(int64(k), 10))
	}
	revoked, err := m.s.revokeAll.Run(ctx, m.rdb, []string{m.keys.index(tag, userID)}, args...).StringSlice()
	if err != nil {
		return 0, unavailable("revoke all", err)
	}
	m.forget(revoked)
	return len(revoked), nil
}

// List returns the user's live sessions, newest first, with their
// metadata. It never returns a token or a secret. It takes one round trip.
func (m *Manager) List(ctx context.Context, userID idtype.ID) ([]Session, error) {
	if userID <= 0 {
		return nil, fmt.Errorf("%w: %d", ErrInvalidUser, userID)
	}
	tag := slotTag(userID)
	pairs, err := m.s.list.Run(ctx, m.rdb, []string{m.keys.index(tag, userID)}, m.keys.sessionPrefix(tag)).StringSlice()
	if err != nil {
		return nil, unavailable("list", err)
	}
	now := time.Now()
	out := make([]Session, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		sid, err := strconv.ParseInt(pairs[i], 10, 64)
		if err != nil {
			continue
		}
		r, err := decodeRecord(pairs[i+1], false)
		if err != nil || r.user != userID {
			continue
		}
		if s := m.sessionOf(idtype.ID(sid), &r); now.Before(s.ExpiresAt) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Session) int {
		switch {
		case a.ID > b.ID:
			return -1
		case a.ID < b.ID:
			return 1
		}
		return 0
	})
	return out, nil
}

// sessionOf computes a session's times from its ID and record.
func (m *Manager) sessionOf(sid idtype.ID, r *record) Session {
	issued := m.layout.Decode(sid).Time
	login := issued
	if r.login != 0 {
		login = time.UnixMilli(r.login).UTC()
	}
	last := issued.Add(time.Duration(r.lastSeen) * timeUnit)
	abs := login.Add(m.opts.AbsoluteLifetime)
	return Session{
		ID:                sid,
		UserID:            r.user,
		LoginAt:           login,
		IssuedAt:          issued,
		LastSeenAt:        last,
		ExpiresAt:         minTime(last.Add(m.opts.IdleTimeout), abs),
		AbsoluteExpiresAt: abs,
		Metadata:          r.meta,
	}
}

// ttl returns the Redis TTL in milliseconds that makes the key expire at
// s.ExpiresAt, or false if that is already past.
func (m *Manager) ttl(s Session, now time.Time) (int64, bool) {
	ms := s.ExpiresAt.Sub(now).Milliseconds()
	return ms, ms > 0
}

// forget drops sessions (decimal IDs, as the scripts return them) from the
// cache.
func (m *Manager) forget(sids []string) {
	for _, s := range sids {
		if id, err := strconv.ParseInt(s, 10, 64); err == nil {
			m.cache.delete(idtype.ID(id))
		}
	}
}

// steps counts the 10 ms steps from issued to t, clamped to a uint32.
func steps(issued, t time.Time) uint32 {
	d := t.Sub(issued) / timeUnit
	return uint32(max(0, min(d, math.MaxUint32)))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// unavailable wraps a Redis failure.
func unavailable(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

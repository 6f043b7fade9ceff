package tokens

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
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
// user's slot tag (see slotTag and the key schema in keys.go), so each
// method sends commands and scripts for one slot: the same code works on a
// *redis.Client (for Sentinel, the one redis.NewFailoverClient returns)
// and a *redis.ClusterClient.
//
// Round trips: Validate, Rotate, Revoke and RevokeSession take one (with
// Options.WaitReplicas, the WAIT goes in the same round trip); Validate
// takes one more when the session is due for a refresh (at most once per
// RefreshInterval), and none when served from the cache. Issue takes one,
// plus one to delete the keys of the sessions it revoked past
// MaxSessions, if any; RevokeAll one, plus one to delete the keys of the
// sessions it ended, if any; List one, plus one to read the sessions'
// records, if the user has any. A token that Rotate replaced within
// Options.RotationGrace costs Validate, Rotate, Revoke and RevokeSession
// one more round trip for each rotation since. A script's first run on a
// server takes one more, to load it (EVALSHA, then EVAL).
type Manager struct {
	rdb      redis.UniversalClient
	gen      idtype.Source
	layout   idtype.Layout
	opts     Options
	keys     keys
	s        scripts
	cache    *cache   // nil when Options.CacheTTL is zero
	defences defences // zero: every defence on; only export_test.go turns one off
	stats    counters
	obs      Observer // Options.Observer
}

// defences lists the defences of a Manager, each of which a test may
// switch off (export_test.go) to show that it fails without it; the zero
// value has every defence on.
type defences struct {
	// noPrefixBinding leaves TokenPrefix out of the stored digest.
	noPrefixBinding bool
	// noCacheGuard lets a Validate cache a session although a revocation
	// ran on the same Manager while its read was in flight.
	noCacheGuard bool
	// noIndexCheck makes a session valid without being in its user's
	// index, as if a lost index were harmless.
	noIndexCheck bool
	// noRefreshTolerance fails a Validate whose refresh write failed
	// after its read verified the session.
	noRefreshTolerance bool
	// noFence lets a revocation that wrote nothing return once WAIT
	// counts replicas that have only the connection's earlier writes.
	noFence bool
	// noRotationGrace makes Rotate delete the old session's key, leaving
	// no stub: the old token is refused at once, also to the requests its
	// client sent before the rotation's answer came back.
	noRotationGrace bool
	// noGraceRevoke makes Revoke and RevokeSession of a token or session
	// that Rotate replaced within the grace window end nothing, instead
	// of ending its successor.
	noGraceRevoke bool
}

// maxGraceHops bounds how many stubs a call follows from a token: one
// per rotation of the session within the grace window, so more than a
// few means a client that rotates in a loop, whose oldest tokens need
// not work.
const maxGraceHops = 4

// New returns a Manager that keeps sessions in client and takes session IDs
// from gen. The zero Options is a working configuration (see Options). The
// error wraps idtype.ErrInvalidOptions and names the bad field. New does no I/O.
func New(client redis.UniversalClient, gen idtype.Source, opts Options) (*Manager, error) {
	return newManager(client, gen, opts, defences{})
}

// newManager is New with the defences d.
func newManager(client redis.UniversalClient, gen idtype.Source, opts Options, d defences) (*Manager, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: the Redis client is nil", idtype.ErrInvalidOptions)
	}
	if gen == nil {
		return nil, fmt.Errorf("%w: the generator is nil", idtype.ErrInvalidOptions)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.WaitReplicas > 0 {
		var readTimeout time.Duration
		switch c := client.(type) {
		case *redis.Client:
			readTimeout = c.Options().ReadTimeout
		case *redis.ClusterClient:
			readTimeout = c.Options().ReadTimeout
		default:
			return nil, fmt.Errorf("%w: WaitReplicas needs a *redis.Client or *redis.ClusterClient, not %T",
				idtype.ErrInvalidOptions, client)
		}
		if readTimeout > 0 && o.WaitTimeout >= readTimeout {
			return nil, fmt.Errorf("%w: WaitTimeout %v is not less than the client's ReadTimeout %v",
				idtype.ErrInvalidOptions, o.WaitTimeout, readTimeout)
		}
	}
	m := &Manager{
		rdb:      client,
		gen:      gen,
		layout:   gen.Layout(),
		opts:     o,
		keys:     keys{prefix: o.KeyPrefix},
		s:        newScripts(d, o.WaitReplicas > 0),
		defences: d,
		obs:      o.Observer,
	}
	if o.CacheTTL > 0 {
		m.cache = newCache(o.CacheTTL, o.CacheSize, d.noCacheGuard)
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
// Redis fails (out of memory, or, in a Cluster, while the user's slot
// migrates: retry), or the generator's error. With Options.WaitReplicas,
// an Issue that revoked sessions and did not get its acknowledgements
// fails with ErrUnavailable; the new session may exist, unused, until it
// idles out.
func (m *Manager) Issue(ctx context.Context, userID idtype.ID, meta Metadata) (_ string, _ Session, err error) {
	if m.obs != nil {
		ctx = m.obs.Start(ctx, OpIssue)
		defer func() { m.obs.End(ctx, OpIssue, err) }()
	}
	if userID <= 0 {
		return "", Session{}, fmt.Errorf("%w: %d", ErrInvalidUser, userID)
	}
	tag := slotTag(userID)
	t, d, err := m.newToken(tag)
	if err != nil {
		return "", Session{}, err
	}
	r := newRecord(userID, meta, &d)
	s := m.sessionOf(t.session, &r)
	ttl, ok := m.ttl(s, time.Now())
	if !ok {
		return "", Session{}, fmt.Errorf("tokens: issue: session %d would expire at once (AbsoluteLifetime %v)",
			t.session, m.opts.AbsoluteLifetime)
	}
	cmd, acked := m.exec(ctx, m.s.issue,
		[]string{m.keys.session(tag, t.session), m.keys.index(tag)},
		r.encode(), ttl, userField(userID), entryID(t.session), m.opts.MaxSessions, -sweepFields,
	)
	ids, err := cmd.StringSlice()
	if err != nil {
		// The script may have revoked sessions before it failed, or
		// before its reply was lost.
		m.cache.revokeUser(userID, nil)
		return "", Session{}, unavailable(fmt.Sprintf("issue session %d", t.session), err)
	}
	revoked := parseEntryIDs(ids)
	m.stats.issued.Add(1)
	m.stats.revocations.Add(uint64(len(revoked)))
	m.forget(revoked)
	m.cleanUp(ctx, tag, revoked)
	if len(revoked) > 0 {
		if err := m.acknowledged("issue", acked); err != nil {
			return "", Session{}, err
		}
	}
	return t.format(m.opts.TokenPrefix), s, nil
}

// successorOf returns the token that replaced t when Rotate left the
// stub st: its session ID is the stub's, and its secret the HMAC-SHA256,
// keyed by t's secret, of the stub's salt and that session ID. So the
// holder of t can get the successor's token back for as long as the stub
// lives, and nobody else: Redis holds the salt but not t's secret, and
// the client holds t's secret but never sees the salt.
func successorOf(t *token, st *stub) token {
	mac := hmac.New(sha256.New, t.secret[:])
	mac.Write(st.salt[:])
	var sid [8]byte
	binary.BigEndian.PutUint64(sid[:], uint64(st.next))
	mac.Write(sid[:])
	nt := token{session: st.next, tag: t.tag}
	mac.Sum(nt.secret[:0])
	return nt
}

// cleanUp deletes the keys of sessions that a revocation has just ended
// by removing them from the index: they can no longer validate, and
// deleting them frees their memory now rather than at their expiry. It
// is one DEL of keys in one slot; its failure changes nothing for the
// caller (in a Cluster slot that is migrating, say, where the keys may be
// on two nodes), and the keys expire.
func (m *Manager) cleanUp(ctx context.Context, tag uint16, sids []idtype.ID) {
	if len(sids) == 0 {
		return
	}
	keys := make([]string, len(sids))
	for i, sid := range sids {
		keys[i] = m.keys.session(tag, sid)
	}
	_ = m.rdb.Del(ctx, keys...).Err()
}

// Validate returns the session a token stands for. The error is
// ErrInvalidToken if the token is malformed, unknown, expired or revoked,
// or if its user's index is gone (see the package doc), and wraps
// ErrUnavailable if Redis could not answer (down, failing, or, in a
// Cluster, while the user's slot migrates and the session and index are
// on different nodes): fail closed on any error.
//
// A malformed token costs no round trip; a valid one costs one script
// (the session's GET and its user's field of the index), plus a second script
// that extends the idle timeout when the stored last-seen time is at
// least Options.RefreshInterval old. A refresh that Redis does not take
// (out of memory, say) does not fail the call: the read has verified the
// session; Stats counts the failure and a later Validate tries again.
// With Options.CacheTTL set, a session validated within CacheTTL is
// served from memory.
//
// A token that Rotate replaced within Options.RotationGrace validates as
// the session it was rotated to (the Session's ID is the new one), as
// long as that session is valid; this costs one more script.
func (m *Manager) Validate(ctx context.Context, token string) (Session, error) {
	s, _, err := m.validate(ctx, token)
	return s, err
}

// validate is Validate that also returns, when token was replaced by
// Rotate within the grace window and served as its successor, the
// successor's token; "" otherwise.
func (m *Manager) validate(ctx context.Context, token string) (_ Session, next string, err error) {
	if m.obs != nil {
		ctx = m.obs.Start(ctx, OpValidate)
		defer func() { m.obs.End(ctx, OpValidate, err) }()
	}
	t, sum, ok := parseFields(m.opts.TokenPrefix, token)
	if !ok {
		m.stats.validInvalid.Add(1)
		return Session{}, "", ErrInvalidToken
	}
	// The cache knows a token by the SHA-256 of its secret, which is
	// cheaper than the digest stored in Redis, and enough: this Manager
	// caches only tokens that Redis vouched for under its own prefix, and
	// a hit must match every other field of the token too.
	var secretSum [sha256.Size]byte
	if m.cache != nil {
		secretSum = sha256.Sum256(t.secret[:])
		if s, ok := m.cache.get(&t, sum, &secretSum); ok {
			return s, "", nil // counted as a hit by the cache
		}
		m.stats.cacheMisses.Add(1)
	}
	if !sumOK(token, sum) {
		m.stats.validInvalid.Add(1)
		return Session{}, "", ErrInvalidToken
	}
	s, next, err := m.validateStored(ctx, &t, sum, &secretSum)
	switch {
	case err == nil:
		m.stats.validOK.Add(1)
	case errors.Is(err, ErrInvalidToken):
		m.stats.validInvalid.Add(1)
	default:
		m.stats.validUnavailable.Add(1)
	}
	return s, next, err
}

// validateStored is Validate past the cache, for a token whose checksum
// is right: it asks Redis, follows the stubs of rotations within the
// grace window to the live successor (returning its token as next),
// refreshes the idle timeout when that is due, and caches the answer.
// Its errors are ErrInvalidToken itself or errors wrapping
// ErrUnavailable.
func (m *Manager) validateStored(ctx context.Context, t *token, sum uint32, secretSum *[sha256.Size]byte) (_ Session, next string, _ error) {
	for hop := 0; ; hop++ {
		digest := m.digest(t)
		// Read the cache's revocation count and the clock before Redis
		// answers: a revocation after this point keeps the answer out of
		// the cache, and the cache's bound on staleness runs from a
		// moment no later than Redis's answer.
		mark := m.cache.mark(t.session)
		now := time.Now()
		s, st, err := m.load(ctx, t, &digest, now)
		if err != nil {
			return Session{}, "", err
		}
		if st == nil {
			s, err = m.refreshDue(ctx, t, &digest, s, now)
			if err != nil {
				return Session{}, "", err
			}
			m.cache.put(t, sum, secretSum, s, now, mark)
			return s, next, nil
		}
		if hop == maxGraceHops {
			return Session{}, "", ErrInvalidToken
		}
		nt := successorOf(t, st)
		t = &nt
		next = nt.format(m.opts.TokenPrefix)
		_, sum, _ = parseFields(m.opts.TokenPrefix, next)
		if m.cache != nil {
			secretSum = new([sha256.Size]byte)
			*secretSum = sha256.Sum256(nt.secret[:])
			if s, ok := m.cache.get(t, sum, secretSum); ok {
				return s, next, nil
			}
		}
	}
}

// refreshDue refreshes the idle timeout of the session s that load read
// at now, if that is due, and returns the session as it then stands.
func (m *Manager) refreshDue(ctx context.Context, t *token, digest *[sha256.Size]byte, s Session, now time.Time) (Session, error) {
	if now.Sub(s.LastSeenAt) >= m.opts.RefreshInterval {
		refreshed, err := m.refresh(ctx, t, digest, s, now)
		switch {
		case err == nil:
			m.stats.refreshes.Add(1)
			s = refreshed
		case errors.Is(err, ErrInvalidToken):
			return Session{}, err
		default:
			m.stats.refreshFailures.Add(1)
			if m.defences.noRefreshTolerance {
				return Session{}, err
			}
		}
	}
	return s, nil
}

// load reads and checks the session of a parsed token: its key, digest
// and index entry, in one script. It returns the stub instead when Rotate
// replaced the token within the grace window. In a Cluster slot that is
// migrating, Redis answers ASK or TRYAGAIN until the session's key and
// its tag's index are on one node, which go-redis follows and retries,
// and failing that the call is ErrUnavailable.
func (m *Manager) load(ctx context.Context, t *token, digest *[sha256.Size]byte, now time.Time) (Session, *stub, error) {
	key, index := m.keys.sessionAndIndex(t.tag, t.session)
	rec, err := m.s.validate.Run(ctx, m.rdb, []string{key, index}, string(digest[:digestLen]), entryID(t.session)).Text()
	if errors.Is(err, redis.Nil) {
		return Session{}, nil, ErrInvalidToken
	}
	if err != nil {
		return Session{}, nil, unavailable("validate", err)
	}
	if len(rec) > digestLen && isStub(rec[digestLen:]) {
		st, ok := m.stubOf(t, rec[digestLen:])
		if !ok || subtle.ConstantTimeCompare([]byte(rec[:digestLen]), digest[:digestLen]) != 1 {
			return Session{}, nil, ErrInvalidToken
		}
		return Session{}, &st, nil
	}
	r, err := decodeRecord(rec, true)
	if err != nil || subtle.ConstantTimeCompare(r.digest[:], digest[:digestLen]) != 1 || slotTag(r.user) != t.tag {
		return Session{}, nil, ErrInvalidToken
	}
	s := m.sessionOf(t.session, &r)
	// Redis expires the key on time; this catches lowered timeouts and
	// the moment between Redis's clock and ours.
	if !now.Before(s.ExpiresAt) {
		return Session{}, nil, ErrInvalidToken
	}
	return s, nil, nil
}

// stubOf reads the stub v (from byte 16 on) that a script returned for
// the token t, reporting false for a stub that cannot be t's: malformed,
// or of a user of another slot tag.
func (m *Manager) stubOf(t *token, v string) (stub, bool) {
	st, ok := decodeStub(v)
	return st, ok && slotTag(st.user) == t.tag
}

// refresh writes a new last-seen time and extends the expiry. It returns
// ErrInvalidToken if the session stopped being valid since load, and
// ErrUnavailable if Redis did not take the write.
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
	key, index := m.keys.sessionAndIndex(t.tag, t.session)
	n, err := m.s.refresh.Run(ctx, m.rdb, []string{key, index},
		string(digest[:digestLen]), buf[:], steps(s.IssuedAt, now.Add(-m.opts.RefreshInterval)), ttl, entryID(t.session),
	).Int()
	if err != nil {
		return Session{}, unavailable("refresh", err)
	}
	if n == 0 {
		return Session{}, ErrInvalidToken // revoked since load
	}
	return s, nil
}

// Rotate replaces a token by a new one for the same session: the new one
// keeps the user, the metadata, LoginAt and AbsoluteExpiresAt, under a
// new session ID, and the old token stops working once
// Options.RotationGrace has passed (until then it validates as the new
// session, for the requests its client sent before this answer reached
// it). A rotation racing RevokeAll cannot outlive it.
//
// Rotate of a token that was rotated within the grace window rotates
// nothing: it returns the token and session that the earlier rotation
// made (or, if that one was rotated in turn, the newest), so that two
// rotations of one token, concurrent or not, agree, and the client keeps
// one live session whichever answer it reads last.
//
// Errors are those of Validate; an ErrUnavailable (Redis out of memory, a
// Cluster slot migrating, too few replica acknowledgements with
// Options.WaitReplicas) leaves it unknown whether the old token was
// replaced: the client should retry the rotation, which within the
// window returns the token the first attempt made, and log in again if
// that says ErrInvalidToken. It takes one round trip: one script checks
// the old session as Validate does and replaces it; Rotate of a token
// rotated within the window takes one more, to check the new session.
func (m *Manager) Rotate(ctx context.Context, token string) (_ string, _ Session, err error) {
	if m.obs != nil {
		ctx = m.obs.Start(ctx, OpRotate)
		defer func() { m.obs.End(ctx, OpRotate, err) }()
	}
	t, ok := parseToken(m.opts.TokenPrefix, token)
	if !ok {
		return "", Session{}, ErrInvalidToken
	}
	digest := m.digest(&t)
	// The new token is the successor that the stub leads to: a new
	// session ID and salt, and a secret made from them and the old one.
	next := stub{}
	if next.next, err = m.gen.Next(); err != nil {
		return "", Session{}, fmt.Errorf("tokens: new session ID: %w", err)
	}
	_, _ = rand.Read(next.salt[:]) // never fails; it crashes the program instead
	nt := successorOf(&t, &next)
	nd := m.digest(&nt)
	grace := m.opts.RotationGrace.Milliseconds()
	if m.defences.noRotationGrace {
		grace = 0
	}
	// The script decides with the record it reads; it gets what it needs
	// of the options and of this clock, as Validate's Go side would use
	// them: the old session is valid while now < LastSeenAt + IdleTimeout
	// and now < LoginAt + AbsoluteLifetime, and the new one expires at the
	// earlier of its IssuedAt + IdleTimeout and that same absolute end.
	now := time.Now()
	oldIssued := m.layout.Decode(t.session).Time
	newIssued := m.layout.Decode(nt.session).Time
	login := oldIssued.UnixMilli()
	cmd, acked := m.exec(ctx, m.s.rotate,
		[]string{m.keys.session(t.tag, t.session), m.keys.session(nt.tag, nt.session), m.keys.index(t.tag)},
		string(digest[:digestLen]), string(nd[:digestLen]), entryID(t.session), entryID(nt.session),
		string(binary.BigEndian.AppendUint64([]byte{fieldLogin, 8}, uint64(login))), login,
		newIssued.Add(m.opts.IdleTimeout).Sub(now).Milliseconds(), m.opts.AbsoluteLifetime.Milliseconds()-now.UnixMilli(),
		floorSteps(now.Add(-m.opts.IdleTimeout).Sub(oldIssued)), next.salt[:], grace,
	)
	v, err := cmd.Result()
	m.cache.revoke(t.session)
	if err != nil {
		return "", Session{}, unavailable(fmt.Sprintf("rotate to session %d", nt.session), err)
	}
	rec, ok := v.(string)
	if !ok || isStub(rec) {
		// What made the old session invalid, or the rotation the stub
		// stands for, may be a write the replicas do not have yet:
		// WaitReplicas covers these answers too.
		if err := m.acknowledged("rotate", acked); err != nil {
			return "", Session{}, err
		}
		if !ok {
			return "", Session{}, ErrInvalidToken
		}
		return m.rotated(ctx, &t, rec)
	}
	r, err := decodeRecord(rec, false)
	if err != nil {
		// The old session was replaced; the new one is lost with its
		// token, and idles out.
		return "", Session{}, ErrInvalidToken
	}
	copy(r.digest[:], nd[:])
	r.lastSeen = 0
	if r.login == 0 {
		r.login = login
	}
	m.stats.issued.Add(1)
	m.stats.revocations.Add(1)
	if err := m.acknowledged("rotate", acked); err != nil {
		return "", Session{}, err
	}
	return nt.format(m.opts.TokenPrefix), m.sessionOf(nt.session, &r), nil
}

// rotated is Rotate of the token t that an earlier rotation replaced,
// leaving the stub v: it returns the newest successor's token and
// session, if that session is valid.
func (m *Manager) rotated(ctx context.Context, t *token, v string) (string, Session, error) {
	st, ok := m.stubOf(t, v)
	if !ok {
		return "", Session{}, ErrInvalidToken
	}
	nt := successorOf(t, &st)
	tok := nt.format(m.opts.TokenPrefix)
	_, sum, _ := parseFields(m.opts.TokenPrefix, tok)
	var secretSum [sha256.Size]byte
	if m.cache != nil {
		secretSum = sha256.Sum256(nt.secret[:])
	}
	s, newer, err := m.validateStored(ctx, &nt, sum, &secretSum)
	if err != nil {
		return "", Session{}, err
	}
	if newer != "" {
		tok = newer
	}
	return tok, s, nil
}

// Revoke ends the session of a token: logging out. It returns
// ErrInvalidToken if the token was not valid (a logout handler may ignore
// that), or an error wrapping ErrUnavailable, after which the session may
// or may not have ended: retry (Revoke is safe to repeat; a repeat that
// finds the session ended says ErrInvalidToken, with Options.WaitReplicas
// only once enough replicas have what ended it). It works when Redis is
// out of memory, since it deletes before it writes. It takes one round
// trip.
//
// Revoke of a token that Rotate replaced within Options.RotationGrace
// ends the session it was rotated to (one more round trip), so that a
// logout sent with the old token, by a tab that had not seen the new one
// yet, logs out.
func (m *Manager) Revoke(ctx context.Context, token string) (err error) {
	if m.obs != nil {
		ctx = m.obs.Start(ctx, OpRevoke)
		defer func() { m.obs.End(ctx, OpRevoke, err) }()
	}
	t, ok := parseToken(m.opts.TokenPrefix, token)
	if !ok {
		return ErrInvalidToken
	}
	var stubs []idtype.ID // the rotated-out sessions on the way
	for hop := 0; ; hop++ {
		digest := m.digest(&t)
		key, index := m.keys.sessionAndIndex(t.tag, t.session)
		cmd, acked := m.exec(ctx, m.s.revoke, []string{key, index}, string(digest[:digestLen]), entryID(t.session))
		v, err := cmd.Result()
		// Drop the cache entry whatever the outcome: on a mismatch it can
		// only be for a session that the stored digest no longer vouches
		// for.
		m.cache.revoke(t.session)
		if err != nil {
			return unavailable("revoke", err)
		}
		n, _ := v.(int64)
		if err := m.acknowledged("revoke", acked); err != nil {
			// Also when the session was not valid: what made it so may be
			// a write the replicas do not have yet.
			if n == 1 {
				m.stats.revocations.Add(1)
			}
			return err
		}
		if rec, ok := v.(string); ok {
			st, ok := m.stubOf(&t, rec)
			if !ok || hop == maxGraceHops || m.defences.noGraceRevoke {
				return ErrInvalidToken
			}
			stubs = append(stubs, t.session)
			t = successorOf(&t, &st)
			continue
		}
		if n == 0 {
			return ErrInvalidToken
		}
		m.stats.revocations.Add(1)
		// The stubs lead to an ended session now, so they validate
		// nothing; deleting them is clean-up.
		m.cleanUp(ctx, t.tag, stubs)
		return nil
	}
}

// RevokeSession ends one session of a user by its ID, as shown by List:
// "log out that device". It reports whether a live session of that user
// was ended; a session ID of another user is left alone and reports false.
// An error wraps ErrUnavailable, after which the session may or may not
// have ended: retry (a repeat reports false once it has). It works when
// Redis is out of memory. It takes one round trip.
//
// RevokeSession of a session that Rotate replaced within
// Options.RotationGrace ends the session it was rotated to (one more
// round trip), so that a handler that read the session's ID just before
// a rotation ends what the user sees as that session.
func (m *Manager) RevokeSession(ctx context.Context, userID, sessionID idtype.ID) (_ bool, err error) {
	if m.obs != nil {
		ctx = m.obs.Start(ctx, OpRevokeSession)
		defer func() { m.obs.End(ctx, OpRevokeSession, err) }()
	}
	if userID <= 0 {
		return false, fmt.Errorf("%w: %d", ErrInvalidUser, userID)
	}
	tag := slotTag(userID)
	var stubs []idtype.ID // the rotated-out sessions on the way
	for hop := 0; ; hop++ {
		cmd, acked := m.exec(ctx, m.s.revokeSession,
			[]string{m.keys.session(tag, sessionID), m.keys.index(tag)},
			userField(userID), entryID(sessionID),
		)
		v, err := cmd.Result()
		m.cache.revoke(sessionID)
		if err != nil {
			return false, unavailable("revoke session", err)
		}
		n, _ := v.(int64)
		if n == 1 {
			m.stats.revocations.Add(1)
		}
		if err := m.acknowledged("revoke session", acked); err != nil {
			return false, err
		}
		if rec, ok := v.(string); ok {
			st, ok := decodeStub(rec)
			if !ok || st.user != userID || hop == maxGraceHops || m.defences.noGraceRevoke {
				return false, nil
			}
			stubs = append(stubs, sessionID)
			sessionID = st.next
			continue
		}
		m.cleanUp(ctx, tag, stubs)
		return n == 1, nil
	}
}

// RevokeAll ends every session of a user except those in keep, such as the
// current one: "log out everywhere (else)". It returns how many live
// sessions it ended: those in the user's index whose expiry had not
// passed.
//
// Every session issued before RevokeAll was called is invalid when it
// returns without error, on every Redis deployment: the revocation is one
// script that removes the sessions from the user's field of the index,
// the one key it declares, so no Issue or Rotate can slip in, and in a
// Cluster whose slot is migrating, Redis runs it whole on the node that
// has the index or not at all. Sessions issued while it runs may survive.
// With Options.CacheTTL set, other instances may still accept the ended
// sessions for up to CacheTTL. A second round trip deletes the ended
// sessions' keys, as clean-up: they can no longer validate, and a
// clean-up that fails (in a Cluster slot that is migrating, where the
// keys may be on two nodes) leaves them to expire.
//
// It is idempotent and safe to retry. An error wraps ErrUnavailable
// (Redis down or failing, a Cluster slot move that go-redis's redirects
// and retries did not ride out, too few replica acknowledgements with
// Options.WaitReplicas): the sessions may or may not have ended, so call
// it again until it returns nil; a repeat that finds them ended returns
// 0. It works when Redis is out of memory.
func (m *Manager) RevokeAll(ctx context.Context, userID idtype.ID, keep ...idtype.ID) (_ int, err error) {
	if m.obs != nil {
		ctx = m.obs.Start(ctx, OpRevokeAll)
		defer func() { m.obs.End(ctx, OpRevokeAll, err) }()
	}
	if userID <= 0 {
		return 0, fmt.Errorf("%w: %d", ErrInvalidUser, userID)
	}
	tag := slotTag(userID)
	args := make([]any, 1, 1+len(keep))
	args[0] = userField(userID)
	for _, k := range keep {
		args = append(args, entryID(k))
	}
	cmd, acked := m.exec(ctx, m.s.revokeAll, []string{m.keys.index(tag)}, args...)
	ids, err := cmd.StringSlice()
	// Whatever Redis answered: see cache.revokeUser.
	m.cache.revokeUser(userID, keep)
	if err != nil {
		return 0, unavailable("revoke all", err)
	}
	ended := parseEntryIDs(ids)
	m.stats.revocations.Add(uint64(len(ended)))
	m.cleanUp(ctx, tag, ended)
	if err := m.acknowledged("revoke all", acked); err != nil {
		return 0, err
	}
	return len(ended), nil
}

// List returns the user's live sessions, newest first, with their
// metadata. It never returns a token or a secret. It lists exactly the
// sessions that Validate accepts (by the index), and in a Cluster it does
// not run while the user's sessions are split between two nodes by a slot
// migration, so that it never lists half: then it returns
// ErrUnavailable, after go-redis's retries. It takes one round trip to
// read the user's field of the index, and, if it names any session, one
// more to read their records (a script that declares their keys, so it
// checks the field again beside them).
func (m *Manager) List(ctx context.Context, userID idtype.ID) ([]Session, error) {
	if userID <= 0 {
		return nil, fmt.Errorf("%w: %d", ErrInvalidUser, userID)
	}
	tag := slotTag(userID)
	index, field := m.keys.index(tag), userField(userID)
	entries, err := m.rdb.HGet(ctx, index, field).Result()
	if errors.Is(err, redis.Nil) {
		return []Session{}, nil
	}
	if err != nil {
		return nil, unavailable("list", err)
	}
	sids := parseEntries(entries)
	keys := make([]string, 1, 1+len(sids))
	keys[0] = index
	args := make([]any, 1, 1+len(sids))
	args[0] = field
	for _, sid := range sids {
		keys = append(keys, m.keys.session(tag, sid))
		args = append(args, entryID(sid))
	}
	pairs, err := m.s.list.Run(ctx, m.rdb, keys, args...).StringSlice()
	if err != nil {
		return nil, unavailable("list", err)
	}
	now := time.Now()
	out := make([]Session, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		if len(pairs[i]) != 8 {
			continue
		}
		sid := idtype.ID(beUint64(pairs[i]))
		r, err := decodeRecord(pairs[i+1], false)
		if err != nil || r.user != userID {
			continue
		}
		if s := m.sessionOf(sid, &r); now.Before(s.ExpiresAt) {
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

// ttl returns the Redis TTL in milliseconds that makes a session's key
// expire at s.ExpiresAt, or false if that is already past.
func (m *Manager) ttl(s Session, now time.Time) (int64, bool) {
	ms := s.ExpiresAt.Sub(now).Milliseconds()
	return ms, ms > 0
}

// forget drops revoked sessions from the cache.
func (m *Manager) forget(sids []idtype.ID) {
	for _, sid := range sids {
		m.cache.revoke(sid)
	}
}

// steps counts the 10 ms steps from issued to t, clamped to a uint32.
func steps(issued, t time.Time) uint32 {
	d := t.Sub(issued) / timeUnit
	return uint32(max(0, min(d, math.MaxUint32)))
}

// floorSteps counts the 10 ms steps in d, rounded down (toward minus
// infinity): a last-seen of n steps since IssuedAt is past a moment d
// after IssuedAt if and only if n > floorSteps(d).
func floorSteps(d time.Duration) int64 {
	n := d / timeUnit
	if d%timeUnit < 0 {
		n--
	}
	return int64(n)
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

package tokens

import (
	"fmt"
	"strings"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Defaults for the zero values of Options.
const (
	// DefaultKeyPrefix is the default Options.KeyPrefix.
	DefaultKeyPrefix = "tok:"
	// DefaultTokenPrefix is the default Options.TokenPrefix.
	DefaultTokenPrefix = "snk"
	// DefaultIdleTimeout is the default Options.IdleTimeout.
	DefaultIdleTimeout = 7 * 24 * time.Hour
	// DefaultAbsoluteLifetime is the default Options.AbsoluteLifetime.
	DefaultAbsoluteLifetime = 30 * 24 * time.Hour
	// DefaultMaxSessions is the default Options.MaxSessions.
	DefaultMaxSessions = 100
	// DefaultCacheSize is the default Options.CacheSize.
	DefaultCacheSize = 10000
	// DefaultWaitTimeout is the default Options.WaitTimeout.
	DefaultWaitTimeout = time.Second
	// DefaultRotationGrace is the default Options.RotationGrace: long
	// enough for the requests a browser or app had sent before a
	// rotation's answer came back, on a slow network, and short, since
	// whoever holds the old token holds the session until it ends.
	DefaultRotationGrace = 10 * time.Second
)

// MaxRotationGrace is the longest Options.RotationGrace: a rotation
// replaces a token that should stop working, and a window longer than a
// minute covers no request in flight that a shorter one would not.
const MaxRotationGrace = time.Minute

// MaxAbsoluteLifetime is the longest Options.AbsoluteLifetime: the stored
// last-seen time counts 10 ms steps from the issue time in 32 bits.
const MaxAbsoluteLifetime = 400 * 24 * time.Hour

// timeUnit is the resolution of the stored last-seen time.
const timeUnit = 10 * time.Millisecond

// Options configures a Manager, go-redis style: New takes it by value, the
// zero value of every field is a documented, safe default ("Zero means
// …"), so the zero Options is a working configuration, and a bad field
// makes New fail with an error wrapping idtype.ErrInvalidOptions that
// names it. What the middleware needs is in MiddlewareOptions.
type Options struct {
	// KeyPrefix starts every Redis key the Manager writes. Zero means
	// DefaultKeyPrefix, "tok:". Give each Manager that shares a Redis its
	// own prefix. It must not hold '{' or '}', which would change the
	// keys' Redis Cluster hash slot. A session's key is the prefix plus
	// 16 bytes; Redis stores a key of up to 22 bytes in a 24-byte
	// allocation (up to 30 in 32 bytes where the allocator's sizes step
	// by 16, as Debian's jemalloc's do), so a prefix of up to 6 bytes
	// costs the least memory.
	KeyPrefix string

	// TokenPrefix starts every token, before an underscore: "snk" makes
	// "snk_…". Zero means DefaultTokenPrefix, "snk". One to 16 ASCII
	// letters and digits. A distinct prefix lets secret scanners (and
	// people) recognize the tokens. The stored digest covers the prefix
	// with the secret, so a token validates only under the prefix it was
	// issued with: changing the prefix invalidates every token issued
	// under the old one, and a token re-prefixed by hand (with a
	// recomputed checksum) is refused.
	TokenPrefix string

	// IdleTimeout ends a session that has not been used for this long.
	// Zero means DefaultIdleTimeout, 7 days. Use extends it (see
	// RefreshInterval), up to AbsoluteLifetime.
	IdleTimeout time.Duration

	// AbsoluteLifetime ends a session this long after login however much
	// it is used. Zero means DefaultAbsoluteLifetime, 30 days; at most
	// MaxAbsoluteLifetime. Lowering it applies to existing sessions too.
	AbsoluteLifetime time.Duration

	// RefreshInterval throttles the sliding idle timeout: Validate writes
	// the new last-seen time (and extends the expiry) only when the stored
	// one is at least this old. Zero means IdleTimeout/2, so a session in
	// use costs at most one write per half idle window, and a session dies
	// after between IdleTimeout-RefreshInterval and IdleTimeout without
	// use. It must be shorter than IdleTimeout and at least 10 ms.
	RefreshInterval time.Duration

	// MaxSessions bounds the live sessions of one user. Zero means
	// DefaultMaxSessions, 100. When Issue would pass it, the user's oldest
	// sessions are revoked, so a login loop cannot fill Redis; there is no
	// setting without a bound. Every Validate reads the user's entries in
	// the index (12 bytes a session), so a bound in the hundreds keeps
	// that read small.
	MaxSessions int

	// CacheTTL turns on an in-process cache of validated sessions when
	// positive. Zero means no cache. A cached session is served without
	// asking Redis for at most CacheTTL after Redis last vouched for it,
	// so a token revoked elsewhere keeps working on this instance for at
	// most CacheTTL. Revocations made through this Manager
	// (Revoke, RevokeSession, RevokeAll, Rotate, MaxSessions) take effect
	// here at once: no Validate that begins after one returned, with or
	// without an error, serves the sessions it may have ended, even if a
	// Validate that read Redis before it finishes after it. CacheTTL +
	// RefreshInterval must be less than IdleTimeout, so that a session in
	// use is refreshed before it idles out.
	CacheTTL time.Duration

	// CacheSize bounds the cache's entries. Zero means DefaultCacheSize,
	// 10,000. It matters only with CacheTTL.
	CacheSize int

	// WaitReplicas makes every call that revokes sessions wait until this
	// many replicas have acknowledged the revocation, so that a failover
	// to a replica cannot undo it. Zero means do not wait. The call sends
	// Redis's WAIT on the connection that made the write, in one round
	// trip with it, and fails with ErrUnavailable when fewer replicas
	// acknowledge within WaitTimeout: the revocation then applied on the
	// primary but may be lost in a failover, and the caller should retry
	// (every revocation is safe to repeat; a repeat that finds the
	// session already ended waits for the replicas too, since what ended
	// it may be the first attempt's write). It covers Revoke,
	// RevokeSession, RevokeAll and Rotate, and Issue when MaxSessions
	// made it revoke a session (an Issue that revoked nothing succeeds
	// however many replicas acknowledged: losing a new session in a
	// failover only logs it out). Set it to the number of replicas a
	// failover may promote, or to how many must hold the write so that
	// the replica your failover promotes (the most up to date, for
	// Sentinel and Cluster) has it; and set min-replicas-to-write on the
	// primary as the server-side complement, so that the primary refuses
	// writes while it has fewer replicas in reach. It needs a
	// *redis.Client (redis.NewFailoverClient returns one, for Sentinel)
	// or a *redis.ClusterClient (where it talks to the key's master); New
	// refuses other clients.
	WaitReplicas int

	// WaitTimeout bounds the wait of WaitReplicas. Zero means
	// DefaultWaitTimeout, 1 second. It must be at least 1 ms and less than
	// the client's ReadTimeout, which bounds the reply to WAIT.
	WaitTimeout time.Duration

	// RotationGrace is how long a token that Rotate replaced keeps
	// working as the new session, for the requests its client sent
	// before the rotation's answer came back: a second tab, a background
	// fetch, a double click that rotates twice. Zero means
	// DefaultRotationGrace, 10 seconds; it must be between 1 ms and
	// MaxRotationGrace. Within it, Validate of the old token returns the
	// new session (and the middleware sets the cookie to the new token);
	// Rotate of the old token returns the same new token and session
	// again, so that two rotations racing from one client agree and leave
	// one session; Revoke of the old token and RevokeSession of the old
	// session ID end the new session. After it, the old token is invalid.
	// Any revocation of the new session ends the old token at once, grace
	// or not. Whoever holds the old token holds the session for the
	// window, as they did before the rotation, and can get its new token:
	// a rotation shuts out a token stolen before it only once the window
	// has passed unused by the thief (see docs/browsers.md).
	RotationGrace time.Duration

	// Observer, when set, is told when each call of the Manager starts
	// and ends, for metrics and tracing (see Observer). Nil observes
	// nothing.
	Observer Observer
}

// withDefaults fills in the zero fields and checks the result.
func (o Options) withDefaults() (Options, error) {
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.TokenPrefix == "" {
		o.TokenPrefix = DefaultTokenPrefix
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.AbsoluteLifetime == 0 {
		o.AbsoluteLifetime = DefaultAbsoluteLifetime
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = o.IdleTimeout / 2
	}
	if o.MaxSessions == 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.WaitTimeout == 0 {
		o.WaitTimeout = DefaultWaitTimeout
	}
	if o.RotationGrace == 0 {
		o.RotationGrace = DefaultRotationGrace
	}
	bad := func(format string, args ...any) (Options, error) {
		return o, fmt.Errorf("%w: "+format, append([]any{idtype.ErrInvalidOptions}, args...)...)
	}
	switch {
	case strings.ContainsAny(o.KeyPrefix, "{}"):
		return bad("KeyPrefix %q holds a hash tag brace", o.KeyPrefix)
	case len(o.TokenPrefix) > maxPrefixLen || !isAlnum(o.TokenPrefix):
		return bad("TokenPrefix %q is not 1 to %d ASCII letters and digits", o.TokenPrefix, maxPrefixLen)
	case o.IdleTimeout < 0:
		return bad("IdleTimeout %v is negative", o.IdleTimeout)
	case o.AbsoluteLifetime < 0 || o.AbsoluteLifetime > MaxAbsoluteLifetime:
		return bad("AbsoluteLifetime %v is outside 0..%v", o.AbsoluteLifetime, MaxAbsoluteLifetime)
	case o.RefreshInterval < timeUnit || o.RefreshInterval >= o.IdleTimeout:
		return bad("RefreshInterval %v is not between %v and IdleTimeout %v", o.RefreshInterval, timeUnit, o.IdleTimeout)
	case o.MaxSessions < 1:
		return bad("MaxSessions %d is not positive", o.MaxSessions)
	case o.CacheTTL < 0:
		return bad("CacheTTL %v is negative", o.CacheTTL)
	case o.CacheTTL > 0 && o.CacheTTL+o.RefreshInterval >= o.IdleTimeout:
		return bad("CacheTTL %v + RefreshInterval %v is not less than IdleTimeout %v",
			o.CacheTTL, o.RefreshInterval, o.IdleTimeout)
	case o.CacheSize < 1:
		return bad("CacheSize %d is not positive", o.CacheSize)
	case o.WaitReplicas < 0:
		return bad("WaitReplicas %d is negative", o.WaitReplicas)
	case o.WaitTimeout < time.Millisecond:
		return bad("WaitTimeout %v is less than 1ms", o.WaitTimeout)
	case o.RotationGrace < time.Millisecond || o.RotationGrace > MaxRotationGrace:
		return bad("RotationGrace %v is not between 1ms and %v", o.RotationGrace, MaxRotationGrace)
	}
	return o, nil
}

func isAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return s != ""
}

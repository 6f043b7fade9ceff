package tokens

import (
	"crypto/sha256"
	"crypto/subtle"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// cacheShards spreads the cache's locks so that goroutines validating
// different sessions rarely meet on one.
const cacheShards = 64

// cache holds validated sessions for at most ttl after Redis vouched for
// them. Entries are keyed by session ID and hold the token's other fields,
// its secret only as the full SHA-256, so a hit still proves the caller
// holds the secret, and the cache never holds a secret. It bounds its size
// by evicting on insert and runs no goroutine. Its methods are safe on a
// nil *cache, which caches nothing.
//
// A revocation must take effect in the cache of the Manager that made it
// at once, also against a Validate whose read was in flight while the
// revocation ran: that read may have seen the session still valid, and
// putting it in the cache afterwards would serve a revoked session for
// up to ttl. So each shard counts the revocations of its sessions; a
// Validate reads its shard's count before it asks Redis, and put, under
// the shard's lock, caches nothing if the count has moved since. The
// count moves only after Redis answered the revocation, so a read that
// starts after the move sees the revocation in Redis.
type cache struct {
	ttl      time.Duration
	perShard int
	// unguarded turns off the revocation count, for the tests' control
	// runs (see defences).
	unguarded bool
	// raced counts the answers that put found overtaken by a revocation
	// in their shard: kept out of the cache, or cached anyway when
	// unguarded. Tests read it to know that a run met the race.
	raced atomic.Uint64
	// uncounted turns off the count of hits, for the benchmark that
	// measures what counting costs (BenchmarkStatsPaired).
	uncounted bool
	// base anchors the entries' deadlines, kept as monotonic nanoseconds
	// since base: a hit reads the monotonic clock only.
	base   time.Time
	shards [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[idtype.ID]*cacheEntry
	// revocations counts the revocations of the shard's sessions; it
	// moves only under mu, and is read without it before a request.
	revocations atomic.Uint64
	// hits counts the shard's cache hits for Stats, on the cache line
	// that a hit's read lock has just taken.
	hits atomic.Uint64
	_    [16]byte // keep neighbouring shards' locks off one cache line
}

type cacheEntry struct {
	digest [sha256.Size]byte
	tag    uint16
	sum    uint32
	// until is when the entry stops being served, in ns since the
	// cache's base: ttl after Redis vouched for the session, or when the
	// session expires, whichever is first.
	until int64
	s     Session
}

func newCache(ttl time.Duration, size int, unguarded bool) *cache {
	c := &cache{ttl: ttl, perShard: max(1, (size+cacheShards-1)/cacheShards), base: time.Now(), unguarded: unguarded}
	for i := range c.shards {
		c.shards[i].m = make(map[idtype.ID]*cacheEntry)
	}
	return c
}

func (c *cache) shard(sid idtype.ID) *cacheShard {
	// Fibonacci hashing: the low bits of a snowflake are a sequence that
	// is often zero, the high ones change slowly.
	return &c.shards[(uint64(sid)*0x9e3779b97f4a7c15)>>58]
}

// get returns the cached session of a token whose fields were parsed but
// whose checksum was not checked: every field must equal the cached
// token's, the checksum included, and the entry must be within its
// deadline.
func (c *cache) get(t *token, sum uint32, digest *[sha256.Size]byte) (Session, bool) {
	if c == nil {
		return Session{}, false
	}
	sh := c.shard(t.session)
	sh.mu.RLock()
	e := sh.m[t.session]
	sh.mu.RUnlock()
	if e == nil || e.tag != t.tag || e.sum != sum ||
		subtle.ConstantTimeCompare(e.digest[:], digest[:]) != 1 ||
		int64(time.Since(c.base)) >= e.until {
		return Session{}, false
	}
	if !c.uncounted {
		sh.hits.Add(1)
	}
	return e.s, true
}

// hits returns the cache hits so far: zero for a nil cache.
func (c *cache) hits() uint64 {
	if c == nil {
		return 0
	}
	var n uint64
	for i := range c.shards {
		n += c.shards[i].hits.Load()
	}
	return n
}

// mark returns the revocation count of a session's shard, which a
// Validate reads before it asks Redis and hands to put.
func (c *cache) mark(sid idtype.ID) uint64 {
	if c == nil {
		return 0
	}
	return c.shard(sid).revocations.Load()
}

// put caches the session of a fully checked token, which Redis vouched for
// at the time vouched, unless a revocation in the session's shard was
// counted since mark. vouched and mark are both read before the request
// went out.
func (c *cache) put(t *token, sum uint32, digest *[sha256.Size]byte, s Session, vouched time.Time, mark uint64) {
	if c == nil {
		return
	}
	at := int64(vouched.Sub(c.base))
	e := &cacheEntry{
		digest: *digest,
		tag:    t.tag,
		sum:    sum,
		until:  at + int64(min(c.ttl, s.ExpiresAt.Sub(vouched))),
		s:      s,
	}
	sh := c.shard(t.session)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.revocations.Load() != mark {
		c.raced.Add(1)
		if !c.unguarded {
			return
		}
	}
	if _, ok := sh.m[t.session]; !ok && len(sh.m) >= c.perShard {
		c.evict(sh, int64(time.Since(c.base)))
	}
	sh.m[t.session] = e
}

// evict makes room in a full shard: it drops every stale entry, or, if
// none is, an arbitrary eighth of the shard, so that a full scan happens
// at most once per perShard/8 puts.
func (c *cache) evict(sh *cacheShard, now int64) {
	n := len(sh.m)
	for sid, e := range sh.m {
		if now >= e.until {
			delete(sh.m, sid)
		}
	}
	if len(sh.m) < n {
		return
	}
	drop := c.perShard/8 + 1
	for sid := range sh.m {
		if drop == 0 {
			return
		}
		delete(sh.m, sid)
		drop--
	}
}

// revoke drops a session that a revocation through this Manager may have
// ended, and counts the revocation. Call it after Redis answered (or
// failed to answer) the revocation.
func (c *cache) revoke(sid idtype.ID) {
	if c == nil {
		return
	}
	sh := c.shard(sid)
	sh.mu.Lock()
	sh.revocations.Add(1)
	delete(sh.m, sid)
	sh.mu.Unlock()
}

// revokeUser drops every session of a user but those in keep, and counts
// a revocation in every shard. RevokeAll calls it whatever Redis answered:
// a session revoked earlier elsewhere may still be in this cache (for up
// to ttl), and RevokeAll, which does not find it in the index any more,
// cannot name it; and a RevokeAll that failed may have ended any of them.
// It visits every entry, which RevokeAll, rare beside Validate, can pay
// for.
func (c *cache) revokeUser(user idtype.ID, keep []idtype.ID) {
	if c == nil {
		return
	}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		sh.revocations.Add(1)
		for sid, e := range sh.m {
			if e.s.UserID == user && !slices.Contains(keep, sid) {
				delete(sh.m, sid)
			}
		}
		sh.mu.Unlock()
	}
}

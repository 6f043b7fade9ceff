package tokens

import (
	"crypto/sha256"
	"crypto/subtle"
	"sync"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
)

// cacheShards spreads the cache's locks so that goroutines validating
// different sessions rarely meet on one.
const cacheShards = 64

// cache holds validated sessions for at most ttl after Redis vouched for
// them. Entries are keyed by session ID and hold the full SHA-256 of the
// secret, so a hit still proves the caller holds the secret; the cache
// never holds a secret. It bounds its size by evicting on insert and runs
// no goroutine. Its methods are safe on a nil *cache, which caches
// nothing.
type cache struct {
	ttl      time.Duration
	perShard int
	shards   [cacheShards]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[idtype.ID]*cacheEntry
	_  [40]byte // keep neighbouring shards' locks off one cache line
}

type cacheEntry struct {
	digest [sha256.Size]byte
	// vouched is when Redis last vouched for the session (read before the
	// request went out), with its monotonic reading.
	vouched time.Time
	s       Session
}

func newCache(ttl time.Duration, size int) *cache {
	c := &cache{ttl: ttl, perShard: max(1, (size+cacheShards-1)/cacheShards)}
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

// get returns the cached session if the digest matches, the entry is
// younger than ttl and the session has not expired by now.
func (c *cache) get(sid idtype.ID, digest *[sha256.Size]byte, now time.Time) (Session, bool) {
	if c == nil {
		return Session{}, false
	}
	sh := c.shard(sid)
	sh.mu.RLock()
	e := sh.m[sid]
	sh.mu.RUnlock()
	if e == nil || subtle.ConstantTimeCompare(e.digest[:], digest[:]) != 1 ||
		now.Sub(e.vouched) >= c.ttl || !now.Before(e.s.ExpiresAt) {
		return Session{}, false
	}
	return e.s, true
}

// put caches a session that Redis vouched for at the time vouched.
func (c *cache) put(sid idtype.ID, digest *[sha256.Size]byte, s Session, vouched time.Time) {
	if c == nil {
		return
	}
	e := &cacheEntry{digest: *digest, vouched: vouched, s: s}
	sh := c.shard(sid)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[sid]; !ok && len(sh.m) >= c.perShard {
		c.evict(sh, vouched)
	}
	sh.m[sid] = e
}

// evict makes room in a full shard: it drops every stale entry, or, if
// none is, an arbitrary eighth of the shard, so that a full scan happens
// at most once per perShard/8 puts.
func (c *cache) evict(sh *cacheShard, now time.Time) {
	n := len(sh.m)
	for sid, e := range sh.m {
		if now.Sub(e.vouched) >= c.ttl || !now.Before(e.s.ExpiresAt) {
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

// delete drops a session.
func (c *cache) delete(sid idtype.ID) {
	if c == nil {
		return
	}
	sh := c.shard(sid)
	sh.mu.Lock()
	delete(sh.m, sid)
	sh.mu.Unlock()
}

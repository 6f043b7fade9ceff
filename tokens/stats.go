package tokens

import "sync/atomic"

// Stats counts what a Manager has done since New, for an application to
// export (as Generator.Stats and the worker lease's Status are). Every
// count only grows; take differences between two calls for rates. The
// counts are read one by one while other goroutines go on counting, so
// two of them may be a few calls apart.
type Stats struct {
	// ValidationsOK counts the Validate calls that returned a session,
	// from Redis or from the cache (CacheHits of them).
	ValidationsOK uint64
	// ValidationsInvalid counts the Validate calls that returned
	// ErrInvalidToken: malformed, unknown, expired or revoked tokens. A
	// count that jumps may be someone guessing tokens.
	ValidationsInvalid uint64
	// ValidationsUnavailable counts the Validate calls that failed with
	// ErrUnavailable (Redis down or failing, the caller's context ended):
	// the requests the middleware answered with 503.
	ValidationsUnavailable uint64
	// CacheHits counts the Validate calls served from the cache without
	// asking Redis; CacheMisses those that looked in the cache, found no
	// usable entry and asked Redis. Both stay zero without
	// Options.CacheTTL. A token too malformed to parse reaches neither.
	CacheHits, CacheMisses uint64
	// Refreshes counts the refreshes of the idle timeout that Redis took:
	// at most one per session per Options.RefreshInterval.
	Refreshes uint64
	// RefreshFailures counts the refreshes of the idle timeout that Redis
	// did not take, typically because it is out of memory under
	// maxmemory-policy noeviction. Validate serves the session anyway,
	// since its read verified it, and the next Validate tries the refresh
	// again; a session whose refreshes keep failing idles out after
	// IdleTimeout. A count that keeps growing means Redis needs memory.
	RefreshFailures uint64
	// Revocations counts the sessions that revocations through this
	// Manager ended, as Redis reported them: one per Revoke and
	// RevokeSession that ended a session, the count RevokeAll returns,
	// the old session of each Rotate, and the oldest sessions that Issue
	// ended past Options.MaxSessions. Sessions that expired are not
	// counted, nor revocations that found nothing to end.
	Revocations uint64
	// Issued counts the sessions created: one per Issue, and one per
	// Rotate for the new token. So Issued minus Revocations, less the
	// sessions that expired, is how many this Manager left live.
	//
	// Issued and Revocations count what Redis's primary did, so a call
	// that then failed only because too few replicas acknowledged it
	// (Options.WaitReplicas) counts too.
	Issued uint64
}

// Stats returns the Manager's counters. It takes no lock, and counting
// takes none: a Validate served from the cache adds one to an atomic
// counter of its cache shard, a line its read lock has just touched; one
// that asks Redis adds to one or two atomic counters of the Manager.
func (m *Manager) Stats() Stats {
	hits := m.cache.hits()
	return Stats{
		ValidationsOK:          m.stats.validOK.Load() + hits,
		ValidationsInvalid:     m.stats.validInvalid.Load(),
		ValidationsUnavailable: m.stats.validUnavailable.Load(),
		CacheHits:              hits,
		CacheMisses:            m.stats.cacheMisses.Load(),
		Refreshes:              m.stats.refreshes.Load(),
		RefreshFailures:        m.stats.refreshFailures.Load(),
		Revocations:            m.stats.revocations.Load(),
		Issued:                 m.stats.issued.Load(),
	}
}

// counters are what Stats reports, except the cache hits, which the
// cache counts in its shards so that a hit touches no cache line that
// every goroutine shares. Everything counted here costs a Redis round
// trip anyway, or is a token rejected before one.
type counters struct {
	validOK          atomic.Uint64 // Validates that Redis vouched for
	validInvalid     atomic.Uint64
	validUnavailable atomic.Uint64
	cacheMisses      atomic.Uint64
	refreshes        atomic.Uint64
	refreshFailures  atomic.Uint64
	revocations      atomic.Uint64
	issued           atomic.Uint64
}

// Package tokens issues and checks opaque login tokens for app backends,
// keeping the sessions they stand for in Redis with TTL expiry.
//
// A client holds a token instead of the user's real ID; the server can log
// a device out, log a user out everywhere and list a user's sessions; and
// a copy of Redis gives nobody a usable token, because Redis keeps only a
// hash of each token's secret.
//
//	snk_2Demo2YPKL22JKNny5dUfCEFAAjsFT8Tut633fY4W6sPDm7cJfYCw3Iqi2vazCf
//	└┬┘ └────┬────┘└┘└────────────────────┬─────────────────────┘└─┬──┘
//	 │       │     │                      │                        └ checksum: CRC-32
//	 │       │     │                      └ secret: 256 bits from crypto/rand
//	 │       │     └ slot tag
//	 │       └ session ID (snowflake)
//	 └ prefix
//
// The session ID is a snowflake from an idtype.Generator: the public handle
// of the session, shown in session lists and used to revoke one device.
// The slot tag, a 10-bit hash of the user ID, names the Redis Cluster slot
// that holds all of that user's keys, so every operation sends its
// commands and scripts to one slot, on a single node, Sentinel and Cluster
// alike, and every script receives every key it touches in KEYS, as
// Redis's rule asks (Dragonfly and cloud proxies enforce it). The user ID
// itself never appears in a token. The checksum turns away mistyped and
// made-up tokens before any Redis round trip.
//
// Sessions end after Options.IdleTimeout without use (sliding, with at
// most one write per Options.RefreshInterval) and after
// Options.AbsoluteLifetime in any case; Redis's TTL enforces both, so
// there is nothing to sweep. Options.CacheTTL turns on an in-process cache
// with a hard bound on how long a revocation takes to reach this instance.
//
// # Options
//
// Like every snowkey constructor, New takes one Options struct by value,
// go-redis style: the zero value of each field is a documented default
// ("Zero means …"), so tokens.Options{} is a working configuration, and a
// bad field makes New fail with an error wrapping idtype.ErrInvalidOptions
// (the one sentinel for bad options across snowkey) that names it. The
// HTTP middleware has its own MiddlewareOptions (Header, Realm, Logger,
// Cookies): Manager.Middleware uses the zero value, NewMiddleware any
// other; the cookie transport has CookieOptions.
//
// # Browsers
//
// Apps send their token in "Authorization: Bearer". A browser page should
// not: a token that script can read (in sessionStorage, or in the body of
// the login answer) is a token that any injected script can send away.
// Cookies carries the token in an HttpOnly, Secure, SameSite cookie named
// "__Host-session" (see CookieOptions): the login handler calls
// Cookies.Issue, which sets the cookie and returns the session but not
// the token; the middleware, given MiddlewareOptions.Cookies, reads it;
// the logout handler calls Cookies.Revoke (or Clear after RevokeSession),
// which deletes it. A request with a token in a header is decided by the
// header alone, whatever cookie it carries.
//
// Since the browser sends the cookie on requests that other pages make
// it send, the middleware refuses every unsafe request (not GET, HEAD or
// OPTIONS) from another origin that carries the cookie, with Go's
// http.CrossOriginProtection, and answers 403 before any Redis round
// trip; and Issue, Rotate and Revoke, which change the browser's session,
// refuse a request from another origin whatever its method, links
// included, with ErrCrossOrigin. SameSite alone would not do: it lets
// through requests from other origins of the same site, such as another
// port or a sibling subdomain, and top-level GETs from anywhere. GET,
// HEAD and OPTIONS from other sites are served, so that links into the
// app work: their handlers must only read (see MiddlewareOptions.Cookies).
// The cookie's name must carry the "__Host-" or "__Secure-" prefix, which
// keeps pages on plain HTTP (and for "__Host-", on sibling subdomains)
// from setting it, and a request that carries it twice is refused with
// every copy ended and deleted (ErrDuplicateCookie).
//
// Rotate replaces a session's token, after a re-authentication say, while
// the client may have other requests on the way with the old one: a
// second tab, a background fetch, a double click that rotates again. For
// Options.RotationGrace, 10 seconds by default, the old token stands for
// the new session: Validate serves it as the new session, the middleware
// sets the cookie to the new token in its answer, and Rotate of it
// returns the same new token, so that the browser is never logged out by
// whichever answer it reads last, and keeps one session. A revocation
// ends the old token with the new session, at once.
//
// # Counters
//
// Manager.Stats returns counts of validations (OK, invalid,
// unavailable), cache hits and misses, refreshes and failed refreshes,
// revocations (sessions ended) and sessions issued, for an application to
// export beside idtype's Generator.Stats and the worker lease's Status
// (the module extra/snowkeyprom exports all three to Prometheus).
// Counting takes atomic adds and no lock. Options.Observer is told when
// each call starts and ends, for tracing and timing (extra/snowkeyotel
// implements it for OpenTelemetry).
//
// # The promise
//
// No revoked session is served after the revocation returned without
// error: by the Manager that revoked it, never; by another Manager, not
// after its Options.CacheTTL has passed. A revocation is Revoke,
// RevokeSession, RevokeAll, Rotate (of the old session: its token is
// then served as the new session alone, and only for
// Options.RotationGrace), and the eviction of the oldest sessions past
// Options.MaxSessions by Issue. A revocation of a session ends, at once,
// the tokens of the sessions that Rotate replaced by it within the
// window. A revocation that returned an error (ErrUnavailable) may or
// may not have applied: retry it; every revocation is safe to repeat.
//
// A session is valid only if its Redis key holds the token's digest and
// its ID is in its user's index (the user's field of a hash per slot
// tag): the index is the authority, and revoking is removing from it. So
// a lost index logs its users' sessions out instead of letting them
// escape a RevokeAll, and a Cluster slot migration, which may put a
// user's keys on two nodes for a while, cannot leave a revoked session
// behind.
//
// # Keys in Redis
//
// Under Options.KeyPrefix, each session is one string key and each slot
// tag one hash, its index:
//
//	<KeyPrefix>{<tag>}s<session ID>   the session's record (digest, user,
//	                                  times, metadata); its TTL is the
//	                                  session's expiry; after Rotate, a
//	                                  stub that leads to the new session,
//	                                  for Options.RotationGrace
//	<KeyPrefix>{<tag>}i               the tag's index: a field per user of
//	                                  the tag, holding 12 bytes (session
//	                                  ID, expiry) per session of theirs
//
// A token names both keys (session ID and tag), so every script receives
// every key it touches in KEYS, including Validate's, which reads both in
// one round trip: servers and proxies that refuse undeclared keys
// (Dragonfly by default, ElastiCache Serverless and other cloud proxies)
// get what they ask for. The index holds no secret and no token.
//
// # What it needs from Redis
//
// Redis 7 or Valkey 8 (tested on Redis 7.0 and Valkey 8.0), one node,
// Sentinel or Cluster. What happens when a requirement is not met, each
// shown by a test of this package:
//
//   - maxmemory-policy noeviction, and memory for the sessions. When full,
//     Issue and Rotate fail with ErrUnavailable; Validate still serves
//     the sessions it reads (a refresh of the idle timeout that Redis
//     refuses is skipped and counted in Stats.RefreshFailures, and tried
//     again on a later Validate); every revocation still works, since it
//     deletes before it writes, and Redis lets a script that has deleted
//     go on writing (TestRefreshUnderOOM). Under an allkeys-* or
//     volatile-* policy, Redis evicts sessions and indexes: their
//     sessions are logged out (ErrInvalidToken), never revived
//     (TestEvictionFailsClosed). An index holds every user of a slot tag,
//     about one in 1024, so its eviction logs all of them out; every
//     Validate of theirs reads it, so LRU and LFU keep it longer than any
//     of their sessions.
//   - Persistence that keeps every acknowledged write, or none. With
//     appendonly yes and appendfsync always a revocation survives a crash;
//     without persistence a restart logs everybody out. With RDB snapshots
//     (or appendfsync everysec) a restart loads data from before recent
//     revocations, and those sessions validate again
//     (TestRestartKeepsRevocations).
//   - Replicas: Redis replicates asynchronously, so a failover to a replica
//     that had not received a revocation undoes it
//     (TestFailoverLaggingReplica). Set Options.WaitReplicas, so that
//     revocations wait for replicas to acknowledge them (with Redis's
//     WAIT) and fail with ErrUnavailable when they do not; a retry that
//     finds the session already ended waits for the replicas as well
//     (TestFailoverRetriedRevocation). And set min-replicas-to-write and
//     min-replicas-max-lag on the primary, so that it refuses writes while
//     too few replicas are in reach.
//   - Cluster resharding: while a user's slot migrates, calls for that
//     user may fail with ErrUnavailable after go-redis's own redirections
//     and retries (Issue and Rotate always do until the slot has moved;
//     Validate, Revoke and RevokeSession do while the session's key and
//     its tag's index are on different nodes, List while the user's
//     sessions are); retry. Revocations stay correct, and a RevokeAll
//     that fails applied all or nothing (TestRevokeAllMidMigration,
//     TestWaitReplicasCluster).
//
// A typical setup:
//
//	gen, _ := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 1})
//	m, err := tokens.New(redisClient, gen, tokens.Options{})
//	…
//	tok, sess, err := m.Issue(ctx, user.ID, tokens.Metadata{UserAgent: r.UserAgent()})
//	…
//	mux.Handle("/api/", m.Middleware(api))
//	// or, with a header of your own and the app's logger:
//	auth, err := tokens.NewMiddleware(m, tokens.MiddlewareOptions{Header: "X-Session", Logger: logger})
//	…
//	mux.Handle("/api/", auth(api))
//	// in a handler:
//	sess, _ := tokens.FromContext(r.Context())
//	// for browsers, the token in a cookie:
//	cookies, err := tokens.NewCookies(m, tokens.CookieOptions{})
//	auth, err = tokens.NewMiddleware(m, tokens.MiddlewareOptions{Cookies: cookies})
//	sess, err = cookies.Issue(w, r, user.ID, tokens.Metadata{UserAgent: r.UserAgent()}) // at login
package tokens

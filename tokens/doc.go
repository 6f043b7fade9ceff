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
// that holds all of that user's keys, so every operation is one command or
// script in one slot, on a single node, Sentinel and Cluster alike. The
// user ID itself never appears in a token. The checksum turns away
// mistyped and made-up tokens before any Redis round trip.
//
// Sessions end after Options.IdleTimeout without use (sliding, with at
// most one write per Options.RefreshInterval) and after
// Options.AbsoluteLifetime in any case; Redis's TTL enforces both, so
// there is nothing to sweep. Options.CacheTTL turns on an in-process cache
// with a hard bound on how long a revocation takes to reach this instance.
//
// A typical setup:
//
//	gen, _ := idtype.NewGenerator(idtype.Config{Worker: 1})
//	m, err := tokens.New(redisClient, gen, tokens.Options{})
//	…
//	tok, sess, err := m.Issue(ctx, user.ID, tokens.Metadata{UserAgent: r.UserAgent()})
//	…
//	mux.Handle("/api/", m.Middleware(api))
//	// in a handler:
//	sess, _ := tokens.FromContext(r.Context())
package tokens

// Package workerid leases worker numbers for idtype generators from Redis
// or PostgreSQL, so that a fleet of app instances never has two live
// owners of one number and never repeats an ID, across crashes, restarts
// and clock trouble.
//
//	pool, err := workerid.Redis(rdb, workerid.Options{Namespace: "api"})
//	// or: workerid.Postgres(db, opts), after migrations.Up(ctx, db, migrations.Options{})
//	lease, err := pool.Acquire(ctx)
//	if err != nil {
//		return err
//	}
//	defer lease.Close(ctx)
//	gen, err := lease.NewGenerator()
//
// The lease builds its one generator (Lease.NewGenerator) and drives it:
// calls go one way, from the lease to the generator's idtype.Gate, never
// back. A box that runs a single generator needs none of this: give it a
// fixed number, idtype.GeneratorOptions{Worker: n}, and keep n out of every
// pool's range with Options.Reserved.
//
// # Options
//
// Redis and Postgres take one Options struct by value, as every snowkey
// constructor takes one options struct: the zero value of each field is
// the default its doc names, and a bad value is an error wrapping
// idtype.ErrInvalidOptions that names the field. The generators on a
// pool's leases follow its Layout, Clock, MaxWait and MaxDrift.
//
// # How IDs stay unique
//
// A lease lasts Options.TTL (10 s) from each renewal, which it sends every
// RenewEvery (TTL/3) from one background goroutine. Three rules keep the
// IDs of successive owners of a number apart:
//
//  1. A generator on a lease issues nothing later than TTL - Margin after
//     the last confirmed renewal was sent, by the lease's own clock. When
//     renewals fail it stops with idtype.ErrLeaseExpired, Margin (TTL/5)
//     before the store could hand the number to anyone else, and goes on
//     by itself once a renewal gets through. The check reads the grant in
//     Next, one pointer load before the reservation and one after; the
//     store is never touched on that path.
//  2. Every renewal also raises the number's high-water mark in the store
//     to TTL after it was sent: no ID of the owner can be later. The mark outlives the lease (a hash in
//     Redis, a row in PostgreSQL), and the next owner issues nothing at
//     or before it. So a process killed with SIGKILL and restarted with
//     its clock set back starts after its old IDs all the same: Acquire
//     returns once the clock has passed the mark, or fails with
//     idtype.ErrClockBehind after MaxStartWait.
//  3. When a renewal finds the lease gone from the store (it lapsed while
//     the store was out of reach), the lease takes the number back if it
//     is free, after the mark; if another owner holds it, the lease is
//     lost: Done is closed, Err wraps idtype.ErrLeaseLost and ErrTaken,
//     and the generator never issues again.
//
// The store keeps, with each lease, the mark its ownership started after,
// and every renewal returns it: the lease raises its generator's floor to
// it before it grants more time. So a take-back whose reply was lost (it
// ran; the lease heard nothing) is learned from the next renewal, and the
// lease still starts after the IDs of the owner it took the number back
// from. A take that finds the number held by its own token (a take sent
// again, by go-redis's retries, after its first attempt ran) knows it as
// its own and keeps that mark.
//
// Close stops the generator first, then gives the number back, lowering
// its mark to the generator's last ID, so the next owner starts at once;
// never below the mark the ownership started after, and, when a
// take-back's outcome is unknown, never below that take's reservation.
//
// Acquire takes a free number in one round trip (Redis: one script;
// PostgreSQL: one statement, and one more at the namespace's first take,
// which makes its rows), and a renewal and a release are one round trip
// too. None scans the namespace: each costs O(log n) in its n numbers, so
// that a namespace of 65,536 numbers costs what one of 1,024 does. When
// every number is held Acquire fails with ErrNoFreeWorker, which says how
// many there are, or, with Options.WaitForFree, waits for one to free up,
// for as long as its context lasts. Renewals are jittered, so that a
// fleet started together does not renew in bursts.
//
// A process that runs several generators shares one Pool among its
// leases: on PostgreSQL the pool runs at most Options.MaxConns statements
// at once (one by default), on the *sql.DB it was given, which may be the
// app's own. docs/fleet.md says what a fleet of each size costs.
//
// # Clocks
//
// A lease and its generator read one clock, Options.Clock, by default
// idtype.SystemClock(), which runs at the monotonic rate and never goes
// back. The lease's expiry is judged by the store's clock (Redis's key
// expiry, PostgreSQL's statement_timestamp()). Margin has to cover how far
// the two may drift apart in one TTL, and, for the Redis case below, how
// far the clocks of the hosts that share a namespace disagree: keep hosts
// on NTP, and Margin well above their offsets.
//
// # When Redis loses data
//
// Redis may lose writes it has acknowledged: a restart without
// persistence (or after FLUSHALL) loses every key; a restart that replays
// an append-only file loses the last second with appendfsync everysec; a
// failover promotes a replica that may lag its master. Leases then vanish
// while their owners still issue IDs, and high-water marks go back. A
// Redis pool defends against it with the namespace's record: the identity
// of the server it was written on (its run_id and master_replid). Every
// take compares it with the server that runs it. When the record is
// missing (a new namespace, or one Redis lost) or names another server (a
// restart, a failover, a slot that moved), the take asks the server
// whether it may have lost data within one TTL: whether it started less
// than a TTL ago (INFO's uptime), was ever promoted from a replica (a
// master_replid2 other than zeros), ran FLUSHALL or FLUSHDB since it
// started (its command statistics), or is a Cluster node (whose slots may
// come from another node). If none holds, nothing Redis forgot can still
// be issuing, and the number starts at once: a new namespace on a server
// that has run for a while waits for nothing. If one does, the take opens
// a loss window: every new owner of any number, with a record or none,
// issues nothing until it has passed, by when any owner that Redis forgot
// has stopped (by rule 1, one TTL after its last confirmed renewal at
// most, as long as the hosts' clocks agree within Margin). The window
// lasts one TTL from the take (by the later of the taker's clock and the
// server's, since a take held up in the network or resent by its client
// may have been sent before the loss), or, after a restart and no other
// sign, one TTL from the server's start. Acquire logs why it waits. Tests show the
// window needed: without it, new owners repeat the IDs of owners that
// Redis forgot, after a restart without persistence and after a failover
// to a lagging replica (whether the replica had the number's record
// stale, had a record from an earlier owner, or had none); and each sign
// opens it.
//
// What the window does not cover: writes that a master took while cut
// off from its replicas and lost when it was demoted (a split brain). Set
// min-replicas-to-write 1 and min-replicas-max-lag on a replicated Redis,
// so that such a master refuses writes: its renewals fail and its
// generators stop. Evictions lose single keys without a sign: run Redis
// with maxmemory-policy noeviction or a volatile-* policy (the pool's keys
// have no TTL, so those never evict them). Keys deleted by hand (DEL),
// and a CONFIG RESETSTAT after a FLUSHALL, leave no sign either. A server
// that does not tell a script its run_id, master_replid and uptime gets a
// loss window at every take.
//
// A renewal that finds the mark lower than the lease last wrote logs "the
// store had lost the lease's high-water mark" and writes it back.
//
// PostgreSQL keeps what it committed, so a number without a row was never
// leased and is not waited out. A failover to a standby that had not
// received every commit is a loss as on Redis, and PostgreSQL gives no
// sign of it: run the lease table on a primary with a synchronous standby
// (synchronous_standby_names naming it, and synchronous_commit on, the
// default, or remote_apply), so that no take or renewal counts as done
// before the standby has it; the PostgreSQL failover fault kind shows it
// needed (docs/operations.md says how). After a database is restored from a backup, raise
// every mark past what the lost writes could hold:
//
//	UPDATE snowkey_worker_leases
//	SET high_water = GREATEST(high_water, (extract(epoch FROM now()) * 1000)::bigint + 60000);
//
// (60 s: the TTL plus the time between the lost writes and now, at
// least.)
//
// # Redis Cluster
//
// A namespace's keys share one hash slot, and every script declares each
// key it touches. While the slot migrates between nodes (a reshard), a
// script whose keys are not all on one node is refused with ASK or
// TRYAGAIN, which go-redis retries a few times, rather than run on one
// node and find a key that has moved away absent there. So during a
// migration Acquire may fail with ErrStore (TRYAGAIN), and renewals may
// fail: a generator stops after TTL - Margin if the migration lasts that
// long, and goes on by itself when it is done. The slot holds four keys
// per namespace, so it moves in moments. The node that takes the slot is
// another server than the record names: the next takes open a loss
// window, as after a failover.
//
// # What is in the store
//
// Redis, with the namespace as hash tag so that a Cluster keeps a
// namespace in one slot:
//
//	snowkey:workerid:{api}:meta     hash: id, trust, next             the namespace's record
//	snowkey:workerid:{api}:hw       sorted set: 17 by Unix ms         high-water marks
//	snowkey:workerid:{api}:leases   hash: 17 -> "<expiry>|<start>|host:pid/<token>"
//	snowkey:workerid:{api}:tokens   hash: host:pid/<token> -> 17
//
// where <expiry> is when the lease ends by the server's clock (Unix ms),
// <start> the mark the lease's ownership started after (empty when the
// number had none), trust the end of the loss window and next the lowest
// number never leased.
//
// PostgreSQL: table snowkey_worker_leases (namespace, worker, owner,
// holder, expires_at, high_water, start_after, acquired_at, renewed_at),
// created by migrations.Up (00002_worker_leases.sql and
// 00005_worker_leases_free.sql): one row per number of a namespace, made
// at its first take; a free row has expires_at '-infinity', and the index
// snowkey_worker_leases_free finds free rows and lapsed leases.
//
// # Watching a lease
//
// Lease.Status reports its state (held, expired, lost, closed), when it
// was last renewed and how long the generator may go on without another
// renewal. The lease logs through Options.Logger: at info when a number
// is acquired, renewed again after failures, or released; at warn when a
// renewal fails (the first of a row), when a lapsed lease is taken back,
// or when the store had lost its mark; at error when the lease expires
// (its generator stops) and when it is lost. Options.Observer is told
// when each Acquire and each renewal starts and ends, for tracing and
// timing (the module extra/snowkeyotel implements it for OpenTelemetry;
// extra/snowkeyprom exports Status to Prometheus).
package workerid

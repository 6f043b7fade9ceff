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
//     to TTL after it was sent (two TTLs in Redis; see below): no ID of
//     the owner can be later. The mark outlives the lease (a hash in
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
// Acquire takes a free number from a random start in one round trip
// (Redis: one script; PostgreSQL: one statement, retried when concurrent
// Acquires pick the same number, or when a stricter
// default_transaction_isolation fails it with a serialization failure). When every number is held it fails with
// ErrNoFreeWorker, which says how many there are.
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
// Redis pool has two defences, each proven by a test that also runs
// without it and finds duplicate IDs:
//
//   - A number without any record is waited out: its new owner's first ID
//     is at least one TTL after Acquire got the number, by its own clock.
//     Any owner that Redis forgot had its last confirmed renewal before
//     the loss, so by rule 1 it stopped within TTL - Margin of that:
//     before the new owner starts, as long as the two hosts' clocks agree
//     within Margin. This covers a restart without persistence, and, after
//     a failover, every number leased since the replica last synced.
//     Acquire prefers free numbers with a record, the one it can start on
//     soonest, so the wait is paid on a fresh Redis and after a loss, not
//     at every start.
//   - The marks run one TTL further ahead than the leases they cover. A
//     number whose record survived but lost its latest renewals has an
//     old lease key, which may expire while its owner, cut off, still
//     issues IDs up to TTL - Margin after its last (lost) renewal; the
//     next owner starts after the old mark, which lies one TTL beyond the
//     old lease: no overlap while the writes lost span less than TTL +
//     Margin - RenewEvery (8.6 s with the defaults). On a replicated
//     Redis bound that with min-replicas-to-write 1 and
//     min-replicas-max-lag (seconds) well under it: the master then
//     refuses writes while its replicas lag more, renewals fail and
//     generators stop. The price: after a crash, the next owner of that
//     very number waits up to one TTL more (a clean Close lowers the mark
//     to the last ID, so a restart after one waits for nothing).
//
// A renewal that finds the mark lower than the lease last wrote logs "the
// store had lost the lease's high-water mark" and writes it back.
//
// PostgreSQL keeps what it committed, so a number without a row was never
// leased and is not waited out. A database restored from a backup, or a
// failover to an asynchronous standby, has the same problem as Redis; after
// one, raise every mark past what the lost writes could hold:
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
// key it touches (the take script: the hash of marks and every
// candidate's lease key). While the slot migrates between nodes (a
// reshard), a script whose keys are not all on one node is refused with
// ASK or TRYAGAIN, which go-redis retries a few times, rather than run on
// one node and find a lease key that has moved away absent there. So
// during a migration Acquire may fail with ErrStore (TRYAGAIN), and
// renewals may fail: a generator stops after TTL - Margin if the
// migration lasts that long, and goes on by itself when it is done. The
// slot holds one key per held number and one hash, so it moves in
// moments.
//
// # What is in the store
//
// Redis, with the namespace as hash tag so that a Cluster keeps a
// namespace in one slot:
//
//	snowkey:workerid:{api}:17   "host:pid/<token>|<start>", PX = TTL   the lease on 17
//	snowkey:workerid:{api}:hw   hash 17 -> Unix ms                     high-water marks
//
// where <start> is the mark the lease's ownership started after (empty
// when the number had none).
//
// PostgreSQL: table snowkey_worker_leases (namespace, worker, owner,
// holder, expires_at, high_water, start_after, acquired_at, renewed_at),
// from sql/00002_worker_leases.sql beside this package's queries
// (Migrations), which migrations.Up applies.
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

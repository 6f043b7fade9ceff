package workerid

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
)

// A Claim is a worker number taken out of a pool's namespace for good, for
// something that issues IDs without holding a lease: a database server's
// snowflake_id() (see migrations.Options.WorkerPool). Pool.Claim makes
// one.
type Claim struct {
	// Worker is the number claimed.
	Worker int64
	// Claimant is who holds it, as given to Pool.Claim.
	Claimant string
	// After is the time the claimant's first ID must be later than: the
	// number's high-water mark when the claim took it (the last ID its
	// previous owners may have issued), or, for a number without any
	// record in a store that may have lost it (Redis), one TTL after the
	// claim, as Acquire waits. Zero when the claimant held the number
	// already (it has issued on it since) or the number was never used.
	After time.Time
	// New is true when this call took the number, false when the
	// claimant held it already.
	New bool
}

// claimTTL is the lease a claim holds: for good, as far as any fleet is
// concerned. Its high-water mark lies as far ahead, so that a number whose
// claim record a store loses, but not its mark, is never started on again.
const claimTTL = 100 * 365 * 24 * time.Hour

// claimChunk is how many numbers one take of a claim tries.
const claimChunk = 512

// maxClaimant bounds a claimant's name.
const maxClaimant = 200

// claimToken is the lease token of a claimant's claim. It is the same at
// every call, so that a claim taken again is recognised as the
// claimant's own (a take by the same token).
func claimToken(claimant string) string { return "claim/" + claimant }

// Claim takes a worker number out of the namespace for good, for
// claimant, a name unique among everything that issues IDs in the
// namespace (a database server's name, say). No lease of any pool on the
// namespace gets the number afterwards; nothing renews the claim and
// nothing releases it. Calling Claim again with the same claimant returns
// the same number (New is false): the store records who holds each
// claim. A claim is a lease whose TTL is 100 years and whose high-water
// mark lies as far ahead, held by the token "claim/<claimant>" and shown
// to operators with the claimant as its holder.
//
// The claimant must issue no ID at or before Claim.After.
//
// Numbers are tried from the highest down, so that claims gather at the
// top of the range. The error wraps ErrNoFreeWorker when every number is
// held; ErrTaken when the claimant's recorded number is held by a lease
// of someone else, which happens only when the store lost the claim (a
// Redis restart without persistence, a failover) and a fleet leased the
// number since: IDs of the two may have collided, and the claimant must
// stop issuing on it; ErrStore or the context's error otherwise; and
// idtype.ErrInvalidOptions for a claimant that is empty, longer than 200
// bytes, or holds other than printable UTF-8.
//
// A claim that failed after its number was taken (the reply lost, the
// process killed between the take and the record) leaves that number held
// by the claimant's token: out of the pool, unused.
func (p *Pool) Claim(ctx context.Context, claimant string) (Claim, error) {
	if err := checkClaimant(claimant); err != nil {
		return Claim{}, err
	}
	rec, ok := p.store.(claimRecords)
	if !ok {
		return Claim{}, fmt.Errorf("%w: claims on %s", errors.ErrUnsupported, p.store.kind())
	}
	token := claimToken(claimant)
	held, err := rec.claimed(ctx, token)
	if err != nil {
		return Claim{}, p.wrap("claim", err)
	}
	if len(held) > 0 {
		w := held[0]
		t, err := p.takeClaim(ctx, token, claimant, []int64{w})
		if err != nil {
			return Claim{}, p.wrap("claim", err)
		}
		switch {
		case t.worker < 0:
			return Claim{}, fmt.Errorf("%w: worker %d of namespace %q in %s, claimed by %q, is held by a lease of someone "+
				"else: the store lost the claim and the number was leased since, so IDs of the two may have collided; "+
				"stop issuing on %d", ErrTaken, w, p.opts.Namespace, p.store.kind(), claimant, w)
		case t.worker != w:
			return Claim{}, fmt.Errorf("%w: claim on %s: asked for worker %d, got %d", ErrStore, p.store.kind(), w, t.worker)
		}
		c := p.claimOf(t, claimant)
		if t.prev > p.nowMs()+claimTTL.Milliseconds()/2 {
			// The number lost its lease but kept the mark of this very
			// claim (nothing else sets one so far ahead, and no lease
			// starts after it): this claimant has been issuing on it,
			// and no one else has since.
			c.After = time.Time{}
		}
		return c, nil
	}

	// The numbers from the top down, claimChunk at a time, so that no
	// script or statement tries more than that.
	t := taken{worker: -1}
	for hi := p.opts.Layout.MaxWorker(); hi >= 0 && t.worker < 0; hi -= claimChunk {
		cands := make([]int64, 0, claimChunk)
		for w := hi; w >= 0 && w > hi-claimChunk; w-- {
			if _, found := slices.BinarySearch(p.reserved, w); !found {
				cands = append(cands, w)
			}
		}
		if len(cands) == 0 {
			continue
		}
		if t, err = p.takeClaim(ctx, token, claimant, cands); err != nil {
			return Claim{}, p.wrap("claim", err)
		}
	}
	if t.worker < 0 {
		return Claim{}, fmt.Errorf("%w: no number of namespace %q in %s is free to claim: all %d are held",
			ErrNoFreeWorker, p.opts.Namespace, p.store.kind(), p.size)
	}
	kept, err := rec.record(ctx, token, t.worker)
	if err != nil {
		return Claim{}, p.wrap("claim", err)
	}
	if kept != t.worker {
		// Another call for the same claimant won: give this number back
		// as it was found, unused.
		if err := p.store.release(ctx, t.worker, token, t.prev); err != nil {
			return Claim{}, p.wrap("claim", err)
		}
		return p.Claim(ctx, claimant)
	}
	return p.claimOf(t, claimant), nil
}

// Claims lists the claims of the pool's namespace, lowest number first,
// each with its number and claimant (After is zero and New false). It
// reads what the store records of claims: on Redis the namespace's hash
// of claims, one round trip; on PostgreSQL the namespace's lease rows,
// O(n) in its numbers, so call it for a status or a check, not on a path
// that issues IDs. The error wraps ErrStore or the context's error.
func (p *Pool) Claims(ctx context.Context) ([]Claim, error) {
	rec, ok := p.store.(claimRecords)
	if !ok {
		return nil, fmt.Errorf("%w: claims on %s", errors.ErrUnsupported, p.store.kind())
	}
	all, err := rec.claims(ctx)
	if err != nil {
		return nil, p.wrap("list claims", err)
	}
	out := make([]Claim, 0, len(all))
	for token, w := range all {
		if claimant, ok := strings.CutPrefix(token, claimToken("")); ok {
			out = append(out, Claim{Worker: w, Claimant: claimant})
		}
	}
	slices.SortFunc(out, func(a, b Claim) int {
		return cmp.Or(cmp.Compare(a.Worker, b.Worker), strings.Compare(a.Claimant, b.Claimant))
	})
	return out, nil
}

// Unclaim gives claimant's number back to the namespace, for leases and
// claims to take again: the claim of a database server that no longer
// issues IDs on it (a server taken out of service, the old primary of a
// failover once it takes no more writes). It reports the number and
// whether claimant held one; a claimant without a claim is false, nil.
//
// The claimant must issue no ID on the number after Unclaim: nothing
// here can tell whether it still does. The number's high-water mark is
// set one TTL past now, by the pool's clock, so that whoever takes it
// next starts after any ID the claimant issued until now on a clock up
// to one TTL ahead of the pool's. The error wraps ErrStore or the
// context's error, and idtype.ErrInvalidOptions for a claimant Claim
// would refuse.
func (p *Pool) Unclaim(ctx context.Context, claimant string) (int64, bool, error) {
	if err := checkClaimant(claimant); err != nil {
		return 0, false, err
	}
	rec, ok := p.store.(claimRecords)
	if !ok {
		return 0, false, fmt.Errorf("%w: claims on %s", errors.ErrUnsupported, p.store.kind())
	}
	token := claimToken(claimant)
	held, err := rec.claimed(ctx, token)
	if err != nil {
		return 0, false, p.wrap("unclaim", err)
	}
	if len(held) == 0 {
		return 0, false, nil
	}
	w := held[0]
	// The lease first: a record left without it is taken back by the
	// claimant's next Claim, while a lease left without its record would
	// stay held by no one the store can name.
	if err := p.store.release(ctx, w, token, p.nowMs()+p.opts.TTL.Milliseconds()); err != nil {
		return 0, false, p.wrap("unclaim", err)
	}
	if err := rec.forget(ctx, token); err != nil {
		return 0, false, p.wrap("unclaim", err)
	}
	p.opts.Logger.Info("workerid: claim given back", "store", p.store.kind(), "namespace", p.opts.Namespace,
		"worker", w, "claimant", claimant)
	return w, true, nil
}

// Namespace returns the namespace whose worker numbers the pool leases.
func (p *Pool) Namespace() string { return p.opts.Namespace }

// takeClaim takes the first free number of cands, or the one the token
// holds, for good.
func (p *Pool) takeClaim(ctx context.Context, token, claimant string, cands []int64) (taken, error) {
	now := p.nowMs()
	ttl := claimTTL.Milliseconds()
	return p.store.take(ctx, takeRequest{
		cands: cands, token: token, holder: claimant, ttl: ttl, reserve: now + ttl, now: now,
	})
}

// claimOf is the Claim of a take.
func (p *Pool) claimOf(t taken, claimant string) Claim {
	c := Claim{Worker: t.worker, Claimant: claimant, New: !t.own}
	if !t.own {
		if after := p.floor(t); after > 0 {
			c.After = unixMsTime(after)
		}
	}
	return c
}

// checkClaimant refuses names that operators could not read back.
func checkClaimant(s string) error {
	if s == "" || len(s) > maxClaimant || !utf8.ValidString(s) {
		return fmt.Errorf("%w: claimant %q: want 1 to %d bytes of UTF-8", idtype.ErrInvalidOptions, s, maxClaimant)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: claimant %q: control character %U", idtype.ErrInvalidOptions, s, r)
		}
	}
	return nil
}

// claimRecords is what a store keeps of claims beside their leases: who
// holds which number, so that a claim made again finds its number.
type claimRecords interface {
	// claimed returns the numbers recorded for the claim token, lowest
	// first.
	claimed(ctx context.Context, token string) ([]int64, error)
	// record records worker as the token's claim unless another number
	// is recorded for it already, and returns the number recorded.
	record(ctx context.Context, token string, worker int64) (int64, error)
	// claims returns every claim token recorded, with its number.
	claims(ctx context.Context) (map[string]int64, error)
	// forget removes the token's record, after its lease is released.
	forget(ctx context.Context, token string) error
}

// claimsKey is the Redis hash of claims: claim token -> number. It shares
// the namespace's hash tag.
func (s *redisStore) claimsKey() string { return s.base + "claims" }

func (s *redisStore) claimed(ctx context.Context, token string) ([]int64, error) {
	v, err := s.c.HGet(ctx, s.claimsKey(), token).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	w, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("claim record %q of %q: %w", v, token, err)
	}
	return []int64{w}, nil
}

func (s *redisStore) record(ctx context.Context, token string, worker int64) (int64, error) {
	var get *redis.StringCmd
	_, err := s.c.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.HSetNX(ctx, s.claimsKey(), token, worker)
		get = pipe.HGet(ctx, s.claimsKey(), token)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return get.Int64()
}

func (s *redisStore) claims(ctx context.Context) (map[string]int64, error) {
	all, err := s.c.HGetAll(ctx, s.claimsKey()).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(all))
	for token, v := range all {
		w, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("claim record %q of %q: %w", v, token, err)
		}
		out[token] = w
	}
	return out, nil
}

func (s *redisStore) forget(ctx context.Context, token string) error {
	return s.c.HDel(ctx, s.claimsKey(), token).Err()
}

// In PostgreSQL the lease row is the record: its owner is the claim
// token for as long as the claim lasts.
func (s *pgStore) claimed(ctx context.Context, token string) ([]int64, error) {
	var out []int64
	err := s.do(ctx, func() error {
		out = out[:0]
		rows, err := s.db.QueryContext(ctx,
			`SELECT worker FROM snowkey_worker_leases WHERE namespace = $1 AND owner = $2 ORDER BY worker`, s.ns, token)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var w sql.NullInt64
			if err := rows.Scan(&w); err != nil {
				return err
			}
			out = append(out, w.Int64)
		}
		return rows.Err()
	})
	return out, err
}

func (s *pgStore) record(ctx context.Context, token string, worker int64) (int64, error) {
	held, err := s.claimed(ctx, token)
	if err != nil {
		return 0, err
	}
	if len(held) == 0 {
		return 0, fmt.Errorf("the claim of worker %d by %q has no row", worker, token)
	}
	return held[0], nil
}

func (s *pgStore) claims(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	err := s.do(ctx, func() error {
		clear(out)
		rows, err := s.db.QueryContext(ctx,
			`SELECT owner, worker FROM snowkey_worker_leases WHERE namespace = $1 AND starts_with(owner, $2)`,
			s.ns, claimToken(""))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				token string
				w     int64
			)
			if err := rows.Scan(&token, &w); err != nil {
				return err
			}
			out[token] = w
		}
		return rows.Err()
	})
	return out, err
}

// forget has nothing to do: the release cleared the row's owner, which
// was the record.
func (s *pgStore) forget(context.Context, string) error { return nil }

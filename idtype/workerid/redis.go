package workerid

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Redis returns a Pool that keeps its leases in Redis: one key per held
// number, set with SET NX PX and renewed by a script that checks the
// owner's token, and one hash, without expiry, of every number's
// high-water mark. A namespace's keys share one hash tag, so the pool
// works on a single server, with Sentinel and on a Cluster alike:
//
//	<KeyPrefix>{<Namespace>}:<number>   the lease: "<holder>/<token>", PX = TTL
//	<KeyPrefix>{<Namespace>}:hw         hash: number -> high-water mark (Unix ms)
//
// Acquire is one round trip (two the first time a server meets the
// script): a script scans the numbers from a random start and takes the
// free one that its taker can start on soonest, preferring numbers used
// and given back before.
//
// Redis can lose data; see the package doc for what a pool does about it.
func Redis(client redis.UniversalClient, opts Options) (*Pool, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil Redis client", ErrInvalidOptions)
	}
	return newPool(opts, func(o Options, trips *atomic.Int64) store {
		base := o.KeyPrefix + "{" + o.Namespace + "}:"
		return &redisStore{
			c: client, base: base, hw: base + "hw", trips: trips,
			takeSc: redis.NewScript(takeScript), renewSc: redis.NewScript(renewScript), releaseSc: redis.NewScript(releaseScript),
		}
	})
}

// takeScript takes a free number of a list, atomically: the one its taker
// can start on soonest. A number with a high-water mark in the past costs
// no wait and ends the scan; one with a mark ahead costs the time until
// the mark; one without a record costs one TTL (see the package doc).
// Ties go to the earlier in the list.
//
// KEYS[1]: the hash of high-water marks. ARGV[1]: the prefix of lease
// keys; ARGV[2]: the token; ARGV[3]: the TTL (ms); ARGV[4]: the taker's
// reservation (Unix ms); ARGV[5]: the numbers to try, in order, separated
// by commas; ARGV[6]: the taker's time (Unix ms). Returns {number,
// previous high-water mark or ""}, or {"-1", ""}.
const takeScript = `
local ttl, reserve, now = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6])
local pick, mark, best
for w in string.gmatch(ARGV[5], '%d+') do
  if redis.call('EXISTS', ARGV[1] .. w) == 0 then
    local prev = redis.call('HGET', KEYS[1], w)
    local cost = ttl
    if prev then
      cost = math.max(tonumber(prev) - now, 0)
    end
    if not best or cost < best then
      pick, mark, best = w, prev, cost
      if cost == 0 then
        break
      end
    end
  end
end
if not pick then
  return {'-1', ''}
end
redis.call('SET', ARGV[1] .. pick, ARGV[2], 'PX', ARGV[3])
if not mark or tonumber(mark) < reserve then
  redis.call('HSET', KEYS[1], pick, ARGV[4])
end
return {pick, mark or ''}
`

// renewScript extends a lease that is still the token's.
//
// KEYS[1]: the lease key; KEYS[2]: the hash of high-water marks.
// ARGV[1]: the token; ARGV[2]: the TTL (ms); ARGV[3]: the number;
// ARGV[4]: the new reservation (Unix ms). Returns {"1", previous
// high-water mark or ""} when renewed, else {"0", what the key holds or
// ""}.
const renewScript = `
local v = redis.call('GET', KEYS[1])
if v ~= ARGV[1] then
  return {'0', v or ''}
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local prev = redis.call('HGET', KEYS[2], ARGV[3])
if not prev or tonumber(prev) < tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
end
return {'1', prev or ''}
`

// releaseScript ends a lease that is still the token's and sets the
// number's high-water mark to what its owner really used.
//
// KEYS[1]: the lease key; KEYS[2]: the hash of high-water marks.
// ARGV[1]: the token; ARGV[2]: the number; ARGV[3]: the final mark.
const releaseScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
  return 1
end
return 0
`

type redisStore struct {
	c               redis.UniversalClient
	base, hw        string // lease key prefix; hash of high-water marks
	trips           *atomic.Int64
	takeSc, renewSc *redis.Script
	releaseSc       *redis.Script
}

func (s *redisStore) kind() string  { return "redis" }
func (s *redisStore) durable() bool { return false }

// run runs a script by its hash, sending its source only when the server
// does not know it yet.
func (s *redisStore) run(ctx context.Context, sc *redis.Script, keys []string, args ...any) (any, error) {
	s.trips.Add(1)
	v, err := sc.EvalSha(ctx, s.c, keys, args...).Result()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		s.trips.Add(1)
		v, err = sc.Eval(ctx, s.c, keys, args...).Result()
	}
	return v, err
}

// pair reads a script's {string, string} reply.
func pair(v any) (string, string, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return "", "", fmt.Errorf("unexpected script reply %v", v)
	}
	x, ok1 := a[0].(string)
	y, ok2 := a[1].(string)
	if !ok1 || !ok2 {
		return "", "", fmt.Errorf("unexpected script reply %v", v)
	}
	return x, y, nil
}

// mark parses a high-water mark; "" means no record.
func mark(s string) (int64, bool, error) {
	if s == "" {
		return 0, false, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("high-water mark %q: %w", s, err)
	}
	return v, true, nil
}

func (s *redisStore) take(ctx context.Context, r takeRequest) (taken, error) {
	cands := make([]byte, 0, 5*len(r.cands))
	for i, w := range r.cands {
		if i > 0 {
			cands = append(cands, ',')
		}
		cands = strconv.AppendInt(cands, w, 10)
	}
	v, err := s.run(ctx, s.takeSc, []string{s.hw}, s.base, r.token, r.ttl, r.reserve, cands, r.now)
	if err != nil {
		return taken{}, err
	}
	ws, prevs, err := pair(v)
	if err != nil {
		return taken{}, err
	}
	w, err := strconv.ParseInt(ws, 10, 64)
	if err != nil {
		return taken{}, fmt.Errorf("worker number %q: %w", ws, err)
	}
	prev, had, err := mark(prevs)
	if err != nil {
		return taken{}, err
	}
	return taken{worker: w, prev: prev, hadRecord: had}, nil
}

func (s *redisStore) renew(ctx context.Context, worker int64, token string, ttl, reserve int64) (renewal, error) {
	v, err := s.run(ctx, s.renewSc, []string{s.base + strconv.FormatInt(worker, 10), s.hw}, token, ttl, worker, reserve)
	if err != nil {
		return renewal{}, err
	}
	ok, found, err := pair(v)
	if err != nil {
		return renewal{}, err
	}
	if ok != "1" {
		return renewal{holder: found}, nil
	}
	prev, _, err := mark(found)
	if err != nil {
		return renewal{}, err
	}
	return renewal{held: true, prev: prev}, nil
}

func (s *redisStore) release(ctx context.Context, worker int64, token string, final int64) error {
	_, err := s.run(ctx, s.releaseSc, []string{s.base + strconv.FormatInt(worker, 10), s.hw}, token, worker, final)
	return err
}

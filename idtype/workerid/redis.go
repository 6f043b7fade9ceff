package workerid

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Redis returns a Pool that keeps its leases in Redis: one key per held
// number, set with SET NX PX and renewed by a script that checks the
// owner's token, and one hash, without expiry, of every number's
// high-water mark. A namespace's keys share one hash tag, so the pool
// works on a single server, with Sentinel and on a Cluster alike:
//
//	<KeyPrefix>{<Namespace>}:<number>   the lease: "<holder>/<token>|<start>", PX = TTL
//	<KeyPrefix>{<Namespace>}:hw         hash: number -> high-water mark (Unix ms)
//
// where <start> is the high-water mark the number had when the lease took
// it (empty if it had none): the lease's IDs all come after it, and the
// lease key keeps it so that it lives and dies with the ownership.
//
// Acquire is one round trip (two the first time a server meets the
// script): a script scans the numbers from a random start and takes the
// free one that its taker can start on soonest, preferring numbers used
// and given back before. Every script declares each key it touches, so
// that on a Cluster whose slot is migrating Redis refuses it (ASK,
// TRYAGAIN) rather than let it see half the keys.
//
// Redis can lose data; see the package doc for what a pool does about it.
func Redis(client redis.UniversalClient, opts Options) (*Pool, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil Redis client", idtype.ErrInvalidOptions)
	}
	return newPool(opts, func(o Options, defences *defences, trips *atomic.Int64) store {
		base := o.KeyPrefix + "{" + o.Namespace + "}:"
		return &redisStore{
			c: client, base: base, hw: base + "hw", defences: defences, trips: trips,
			takeSc: redis.NewScript(takeScript), renewSc: redis.NewScript(renewScript), releaseSc: redis.NewScript(releaseScript),
		}
	})
}

// leaseParts, in the scripts, splits a lease key's value into the token
// and the mark the ownership started after ("" for none). The mark is all
// digits, so the last '|' separates them whatever the holder's name holds.
// A value of another form is nobody's token.
const leaseParts = `
local function parts(v)
  if not v then
    return nil, nil
  end
  return string.match(v, '^(.*)|(%d*)$')
end
`

// takeScript takes a free number of a list, atomically: the one its taker
// can start on soonest. A number with a high-water mark in the past costs
// no wait and ends the scan; one with a mark ahead costs the time until
// the mark; one without a record costs one TTL (see the package doc).
// Ties go to the earlier in the list. A number whose lease holds the
// taker's own token is the taker's already: a retried take whose first
// attempt ran and whose reply was lost. The script extends it, keeps the
// mark its ownership started after, and returns that.
//
// KEYS[1]: the hash of high-water marks; KEYS[2..]: the lease key of each
// number to try, in order. ARGV[1]: the token; ARGV[2]: the TTL (ms);
// ARGV[3]: the taker's reservation (Unix ms); ARGV[4]: the taker's time
// (Unix ms); ARGV[5]: "1" to recognise the taker's own token; ARGV[6]:
// "" (a test's control run sends the lease key prefix, to build keys it
// does not declare); ARGV[7..]: the numbers to try, in the order of their
// keys. Returns {number, the mark the ownership started after or "",
// "1" if it was the taker's already else "0"}, or {"-1", "", "0"}.
const takeScript = leaseParts + `
local ttl, reserve, now = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local own, prefix = ARGV[5] == '1', ARGV[6]
local pick, pickKey, mark, best
for i = 7, #ARGV do
  local w, key = ARGV[i], KEYS[i - 5]
  if prefix ~= '' then
    key = prefix .. w -- undeclared key: control run
  end
  local v = redis.call('GET', key)
  if not v then
    local prev = redis.call('HGET', KEYS[1], w)
    local cost = ttl
    if prev then
      cost = math.max(tonumber(prev) - now, 0)
    end
    if not best or cost < best then
      pick, pickKey, mark, best = w, key, prev, cost
      if cost == 0 then
        break
      end
    end
  elseif own then
    local tok, start = parts(v)
    if tok == ARGV[1] then
      redis.call('PEXPIRE', key, ARGV[2])
      local prev = redis.call('HGET', KEYS[1], w)
      if not prev or tonumber(prev) < reserve then
        redis.call('HSET', KEYS[1], w, ARGV[3])
      end
      return {w, start, '1'}
    end
  end
end
if not pick then
  return {'-1', '', '0'}
end
redis.call('SET', pickKey, ARGV[1] .. '|' .. (mark or ''), 'PX', ARGV[2])
if not mark or tonumber(mark) < reserve then
  redis.call('HSET', KEYS[1], pick, ARGV[3])
end
return {pick, mark or '', '0'}
`

// renewScript extends a lease that is still the token's.
//
// KEYS[1]: the lease key; KEYS[2]: the hash of high-water marks.
// ARGV[1]: the token; ARGV[2]: the TTL (ms); ARGV[3]: the number;
// ARGV[4]: the new reservation (Unix ms). Returns {"1", previous
// high-water mark or "", the mark the ownership started after or ""}
// when renewed, else {"0", the token the key holds or "", ""}.
const renewScript = leaseParts + `
local v = redis.call('GET', KEYS[1])
local tok, start = parts(v)
if tok ~= ARGV[1] then
  return {'0', tok or v or '', ''}
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local prev = redis.call('HGET', KEYS[2], ARGV[3])
if not prev or tonumber(prev) < tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
end
return {'1', prev or '', start}
`

// releaseScript ends a lease that is still the token's and sets the
// number's high-water mark to what its owner really used, never below the
// mark the ownership started after: a Close that did not learn of its
// own take-back must not hand the next owner IDs that the previous one
// issued.
//
// KEYS[1]: the lease key; KEYS[2]: the hash of high-water marks.
// ARGV[1]: the token; ARGV[2]: the number; ARGV[3]: the final mark;
// ARGV[4]: "1" to keep the mark at or above the start (a test's control
// run sends "0").
const releaseScript = leaseParts + `
local tok, start = parts(redis.call('GET', KEYS[1]))
if tok ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
local final = ARGV[3]
if ARGV[4] == '1' and start ~= '' and tonumber(start) > tonumber(final) then
  final = start
end
redis.call('HSET', KEYS[2], ARGV[2], final)
return 1
`

type redisStore struct {
	c               redis.UniversalClient
	base, hw        string // lease key prefix; hash of high-water marks
	defences        *defences
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

// replyStrings reads a script's reply of n strings.
func replyStrings(v any, n int) ([]string, error) {
	a, ok := v.([]any)
	if !ok || len(a) != n {
		return nil, fmt.Errorf("unexpected script reply %v", v)
	}
	out := make([]string, n)
	for i, x := range a {
		if out[i], ok = x.(string); !ok {
			return nil, fmt.Errorf("unexpected script reply %v", v)
		}
	}
	return out, nil
}

// luaBool is a script's boolean argument.
func luaBool(on bool) string {
	if on {
		return "1"
	}
	return "0"
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

func (s *redisStore) key(worker int64) string { return s.base + strconv.FormatInt(worker, 10) }

func (s *redisStore) take(ctx context.Context, r takeRequest) (taken, error) {
	keys := make([]string, 1, 1+len(r.cands))
	keys[0] = s.hw
	prefix := ""
	if s.defences.undeclaredKeys {
		prefix = s.base
	}
	args := make([]any, 0, 6+len(r.cands))
	args = append(args, r.token, r.ttl, r.reserve, r.now, luaBool(!s.defences.noOwnToken), prefix)
	for _, w := range r.cands {
		args = append(args, w)
		if prefix == "" {
			keys = append(keys, s.key(w))
		}
	}
	v, err := s.run(ctx, s.takeSc, keys, args...)
	if err != nil {
		return taken{}, err
	}
	out, err := replyStrings(v, 3)
	if err != nil {
		return taken{}, err
	}
	w, err := strconv.ParseInt(out[0], 10, 64)
	if err != nil {
		return taken{}, fmt.Errorf("worker number %q: %w", out[0], err)
	}
	prev, had, err := mark(out[1])
	if err != nil {
		return taken{}, err
	}
	return taken{worker: w, prev: prev, hadRecord: had, own: out[2] == "1"}, nil
}

func (s *redisStore) renew(ctx context.Context, worker int64, token string, ttl, reserve int64) (renewal, error) {
	v, err := s.run(ctx, s.renewSc, []string{s.key(worker), s.hw}, token, ttl, worker, reserve)
	if err != nil {
		return renewal{}, err
	}
	out, err := replyStrings(v, 3)
	if err != nil {
		return renewal{}, err
	}
	if out[0] != "1" {
		return renewal{holder: out[1]}, nil
	}
	prev, _, err := mark(out[1])
	if err != nil {
		return renewal{}, err
	}
	start, hadStart, err := mark(out[2])
	if err != nil {
		return renewal{}, err
	}
	return renewal{held: true, prev: prev, startAfter: start, hadStart: hadStart}, nil
}

func (s *redisStore) release(ctx context.Context, worker int64, token string, final int64) error {
	_, err := s.run(ctx, s.releaseSc, []string{s.key(worker), s.hw}, token, worker, final, luaBool(!s.defences.noReleaseClamp))
	return err
}

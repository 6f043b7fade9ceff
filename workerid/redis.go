package workerid

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Redis returns a Pool that keeps its leases in Redis, in four keys per
// namespace that share one hash tag, so that the pool works on a single
// server, with Sentinel and on a Cluster alike:
//
//	<KeyPrefix>{<Namespace>}:meta     hash: id, trust, next   the namespace's record
//	<KeyPrefix>{<Namespace>}:hw       sorted set: number by high-water mark (Unix ms)
//	<KeyPrefix>{<Namespace>}:leases   hash: number -> "<expiry>|<start>|<holder>/<token>"
//	<KeyPrefix>{<Namespace>}:tokens   hash: token -> number
//
// A lease ends at <expiry>, Unix ms by the Redis server's clock (TIME),
// unless renewed; <start> is the high-water mark the number had when the
// lease took it (empty if it had none): the lease's IDs all come after it.
// The record holds the identity of the server it was written on (id), the
// end of the loss window (trust; see the package doc) and the lowest
// number never leased (next).
//
// Every script costs O(log n) in the namespace's n numbers: a take picks
// the free number with the lowest high-water mark from the sorted set, or
// the next number never leased, and never scans; a renewal and a release
// touch one number. Acquire is one round trip (two the first time a
// server meets the script). Every script declares each key it touches, so
// that on a Cluster whose slot is migrating Redis refuses it (ASK,
// TRYAGAIN) rather than let it see half the keys.
//
// Redis can lose data; see the package doc for what a pool does about it.
func Redis(client redis.UniversalClient, opts Options) (*Pool, error) {
	return newRedis(client, opts, defences{})
}

// newRedis is Redis with the defences d.
func newRedis(client redis.UniversalClient, opts Options, d defences) (*Pool, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil Redis client", idtype.ErrInvalidOptions)
	}
	return newPool(opts, d, func(o Options, reserved []int64, d *defences) store {
		base := o.KeyPrefix + "{" + o.Namespace + "}:"
		s := &redisStore{
			c: client, base: base, d: d, max: o.Layout.MaxWorker(), win: o.TTL.Milliseconds(),
			meta: base + "meta", hw: base + "hw", leases: base + "leases", tokens: base + "tokens",
			takeSc: redis.NewScript(takeScript), renewSc: redis.NewScript(renewScript), releaseSc: redis.NewScript(releaseScript),
		}
		for _, w := range reserved {
			s.reserved = append(s.reserved, strconv.FormatInt(w, 10))
		}
		return s
	})
}

// luaCommon, in every script, reads a lease's value, the server's clock
// and its identity. A lease value is "<expiry>|<start>|<token>": the two marks are
// all digits, so the second '|' ends them whatever the holder's name
// holds. A value of another form is nobody's lease.
const luaCommon = `
local function parts(v)
  if not v then
    return nil, nil, nil
  end
  local exp, start, tok = string.match(v, '^(%d+)|(%d*)|(.*)$')
  if not exp then
    return nil, nil, nil
  end
  return tonumber(exp), start, tok
end
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- identity names the server: a restart changes its run_id, a failover
-- the master_replid of the replica it promotes. "" when the server does
-- not say.
local function identity()
  local info = redis.pcall('INFO', 'server')
  if type(info) ~= 'string' then
    return ''
  end
  local run = string.match(info, 'run_id:(%x+)')
  info = redis.pcall('INFO', 'replication')
  local repl = type(info) == 'string' and string.match(info, 'master_replid:(%x+)')
  if not run or not repl then
    return ''
  end
  return run .. ':' .. repl
end
-- lossAge returns how long ago (ms) the server may last have lost data,
-- as far as it can tell: at its start, if it was never promoted from a
-- replica (master_replid2 all zeros), never ran FLUSHALL or FLUSHDB
-- since (its command statistics), and is no Cluster node (whose slots,
-- and the keys in them, may come from other servers). Else nil and why
-- not: 'promoted', 'flushed' or 'cluster'. checks names the signs to
-- read, one letter each ('u' uptime, 'p', 'f', 'c'); a test's control
-- run leaves one out.
local function lossAge(checks)
  local function has(c)
    return string.find(checks, c, 1, true) ~= nil
  end
  local info = redis.pcall('INFO', 'server')
  local up = type(info) == 'string' and tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
  if not up then
    return nil, 'unknown'
  end
  if has('c') then
    info = redis.pcall('INFO', 'cluster')
    if type(info) ~= 'string' or not string.match(info, 'cluster_enabled:0') then
      return nil, 'cluster'
    end
  end
  if has('p') then
    info = redis.pcall('INFO', 'replication')
    local r2 = type(info) == 'string' and string.match(info, 'master_replid2:(%x+)')
    if not r2 or not string.match(r2, '^0+$') then
      return nil, 'promoted'
    end
  end
  if has('f') then
    info = redis.pcall('INFO', 'commandstats')
    if type(info) ~= 'string' or string.find(info, 'cmdstat_flush', 1, true) then
      return nil, 'flushed'
    end
  end
  if not has('u') then
    return math.huge, ''
  end
  -- uptime_in_seconds counts from the second the server started in,
  -- rounded down, so it may say up to a second more than the server has
  -- run: count a second less.
  return math.max(up - 1, 0) * 1000, 'restarted'
end
`

// takeScript takes a free number, atomically, in O(log n): the number
// with the lowest high-water mark that is not in the taker's future, else
// the next number never leased, else the one with the lowest mark ahead
// (the taker waits for it); or, given a list of k numbers (a take-back,
// a claim), the first of them that is free, in O(k). A lease that lapsed
// is free. The script first checks the namespace's record against the
// server's identity (run_id and master_replid): a record missing (a new
// namespace, or one Redis lost) or written on another server (a restart,
// a failover, a slot moved) opens the loss window, which every new owner
// waits out (see the package doc), unless the server shows that it has
// lost nothing for a whole window (lossAge): then nothing can still issue
// on a lease it forgot.
//
// A lease that holds the taker's own token is the taker's already: a
// retried take whose first attempt ran and whose reply was lost. The
// script extends it, keeps the mark its ownership started after, and
// returns that.
//
// KEYS[1]: the record; KEYS[2]: the high-water marks; KEYS[3]: the
// leases; KEYS[4]: the tokens. ARGV[1]: the token; ARGV[2]: the TTL (ms);
// ARGV[3]: the taker's reservation (Unix ms); ARGV[4]: the taker's time
// (Unix ms); ARGV[5]: the defences on, one letter each: "o" recognises
// the taker's own token, "u", "p", "f" and "c" read those signs of lost
// data (lossAge; a test's control run leaves one out), "s" starts the
// loss window no earlier than the server's clock; ARGV[6]: how many
// numbers to try, k, or "-1" for any; ARGV[7]: the layout's largest
// number; ARGV[8]: "" (a test's control run declares only the high-water
// marks, in KEYS[1], and sends the key prefix, to build the names of the
// others it does not declare); ARGV[9]: the loss window (ms, the pool's
// TTL); ARGV[10..9+k]: the numbers to try, in order; ARGV[10+k..]: the
// numbers never to take. Returns {number or "-1", the mark the ownership
// started after or "", "1" if it was the taker's already else "0", the
// end of the loss window (Unix ms, "0" for none), what opened it
// ("restarted", "promoted", "flushed", "cluster", "unknown" or "")}.
const takeScript = luaCommon + `
local token, ttl, reserve, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local checks, k, max, prefix = ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8]
local own, win = string.find(checks, 'o', 1, true) ~= nil, tonumber(ARGV[9])
local meta, hw, leases, tokens = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
if prefix ~= '' then
  meta, hw, leases, tokens = prefix .. 'meta', KEYS[1], prefix .. 'leases', prefix .. 'tokens' -- undeclared key: control run
end
local reserved, budget = {}, 16
for i = 10 + math.max(k, 0), #ARGV do
  reserved[ARGV[i]] = true
  budget = budget + 1
end
local rnow = clock()

-- A record missing (a new namespace, or one Redis lost) or written on
-- another server (a restart, a failover, a slot moved) opens the loss
-- window, unless the server can show it lost nothing for a whole window.
local ident = identity()
local m = redis.call('HMGET', meta, 'id', 'trust', 'next')
local trust, why = tonumber(m[2]) or 0, ''
if ident == '' or m[1] ~= ident then
  local age, len = nil, win
  if ident == '' then
    why = 'unknown'
  else
    age, why = lossAge(checks)
  end
  if age then
    len = win - age
  end
  if len > 0 then
    -- From the later of the taker's clock and the server's: a take sent
    -- before the loss and run after it (held up in the network, or
    -- retried by its client) carries a time earlier than the loss, and an
    -- owner that Redis forgot may have renewed after that time.
    local from = now
    if string.find(checks, 's', 1, true) then
      from = math.max(now, rnow)
    end
    trust = math.max(trust, from + len)
  end
  redis.call('HSET', meta, 'id', ident, 'trust', string.format('%d', trust))
end
local window = '0'
if trust > now then
  window = string.format('%d', trust)
else
  why = ''
end

local function raise(w)
  local prev = redis.call('ZSCORE', hw, w)
  if not prev or tonumber(prev) < reserve then
    redis.call('ZADD', hw, ARGV[3], w)
  end
  return prev
end
local function mine(w)
  local _, start, tok = parts(redis.call('HGET', leases, w))
  if not tok or tok ~= token then
    return nil
  end
  redis.call('HSET', leases, w, string.format('%d', rnow + ttl) .. '|' .. start .. '|' .. token)
  raise(w)
  return {w, start, '1', window, why}
end
local function grant(w, old)
  if old then
    redis.call('HDEL', tokens, old)
  end
  local prev = redis.call('ZSCORE', hw, w)
  local start = ''
  if prev then
    start = string.format('%d', tonumber(prev))
  end
  redis.call('HSET', leases, w, string.format('%d', rnow + ttl) .. '|' .. start .. '|' .. token)
  redis.call('HSET', tokens, token, w)
  raise(w)
  return {w, start, '0', window, why}
end
-- free returns whether w can be taken, and the token of its lapsed lease.
local function free(w)
  if reserved[w] or tonumber(w) > max then
    return false, nil
  end
  local exp, _, tok = parts(redis.call('HGET', leases, w))
  return not exp or exp <= rnow, tok
end

if own then
  local w = redis.call('HGET', tokens, token)
  if w then
    local r = mine(w)
    if r then
      return r
    end
  end
end
if k >= 0 then
  for i = 10, 9 + k do
    if own then
      local r = mine(ARGV[i])
      if r then
        return r
      end
    end
    local ok, old = free(ARGV[i])
    if ok then
      return grant(ARGV[i], old)
    end
  end
  return {'-1', '', '0', window, why}
end
for _, w in ipairs(redis.call('ZRANGEBYSCORE', hw, '-inf', ARGV[4], 'LIMIT', 0, budget)) do
  local ok, old = free(w)
  if ok then
    return grant(w, old)
  end
end
local next, moved = tonumber(m[3]) or 0, false
for _ = 1, budget do
  if next > max then
    break
  end
  local w = string.format('%d', next)
  next, moved = next + 1, true
  if reserved[w] then
    -- Left, with a mark that binds nobody, for pools that lease it.
    if not redis.call('ZSCORE', hw, w) then
      redis.call('ZADD', hw, 0, w)
    end
  else
    local ok, old = free(w)
    if ok then
      redis.call('HSET', meta, 'next', next)
      return grant(w, old)
    end
  end
end
if moved then
  redis.call('HSET', meta, 'next', next)
end
for _, w in ipairs(redis.call('ZRANGEBYSCORE', hw, '(' .. ARGV[4], '+inf', 'LIMIT', 0, budget)) do
  local ok, old = free(w)
  if ok then
    return grant(w, old)
  end
end
return {'-1', '', '0', window, why}
`

// renewScript extends a lease that is still the token's and has not
// lapsed.
//
// KEYS[1]: the leases; KEYS[2]: the high-water marks; KEYS[3]: the
// record. ARGV[1]: the token; ARGV[2]: the TTL (ms); ARGV[3]: the number;
// ARGV[4]: the new reservation (Unix ms). Returns {"1", previous
// high-water mark or "", the mark the ownership started after or "", the
// end of the loss window or ""} when renewed, else {"0", the token of
// another's live lease or "", "", ""}.
const renewScript = luaCommon + `
local rnow = clock()
local exp, start, tok = parts(redis.call('HGET', KEYS[1], ARGV[3]))
if tok ~= ARGV[1] or exp <= rnow then
  if tok and tok ~= ARGV[1] and exp > rnow then
    return {'0', tok, '', ''}
  end
  return {'0', '', '', ''}
end
redis.call('HSET', KEYS[1], ARGV[3], string.format('%d', rnow + tonumber(ARGV[2])) .. '|' .. start .. '|' .. tok)
local prev = redis.call('ZSCORE', KEYS[2], ARGV[3])
if not prev or tonumber(prev) < tonumber(ARGV[4]) then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
end
if prev then
  prev = string.format('%d', tonumber(prev))
end
return {'1', prev or '', start, redis.call('HGET', KEYS[3], 'trust') or ''}
`

// releaseScript ends a lease that is still the token's and sets the
// number's high-water mark to what its owner really used, never below the
// mark the ownership started after: a Close that did not learn of its
// own take-back must not hand the next owner IDs that the previous one
// issued.
//
// KEYS[1]: the leases; KEYS[2]: the high-water marks; KEYS[3]: the
// tokens. ARGV[1]: the token; ARGV[2]: the number; ARGV[3]: the final
// mark; ARGV[4]: "1" to keep the mark at or above the start (a test's
// control run sends "0").
const releaseScript = luaCommon + `
local _, start, tok = parts(redis.call('HGET', KEYS[1], ARGV[2]))
if tok ~= ARGV[1] then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[3], ARGV[1])
local final = ARGV[3]
if ARGV[4] == '1' and start ~= '' and tonumber(start) > tonumber(final) then
  final = start
end
redis.call('ZADD', KEYS[2], final, ARGV[2])
return 1
`

type redisStore struct {
	c                          redis.UniversalClient
	base                       string // the namespace's key prefix
	meta, hw, leases, tokens   string // its keys
	max                        int64  // the layout's largest number
	win                        int64  // the loss window (ms): the pool's TTL
	reserved                   []string
	d                          *defences
	takeSc, renewSc, releaseSc *redis.Script
}

func (s *redisStore) kind() string { return "redis" }

// checks is the take script's ARGV[5]: the defences on.
func (s *redisStore) checks() string {
	var b []byte
	for _, c := range []struct {
		off    bool
		letter byte
	}{{s.d.noOwnToken, 'o'}, {s.d.noUptimeSign, 'u'}, {s.d.noPromotedSign, 'p'}, {s.d.noFlushSign, 'f'}, {s.d.noClusterSign, 'c'},
		{s.d.noServerTime, 's'}} {
		if !c.off {
			b = append(b, c.letter)
		}
	}
	return string(b)
}

// run runs a script by its hash, sending its source only when the server
// does not know it yet.
func (s *redisStore) run(ctx context.Context, sc *redis.Script, keys []string, args ...any) (any, error) {
	v, err := sc.EvalSha(ctx, s.c, keys, args...).Result()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
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

func (s *redisStore) take(ctx context.Context, r takeRequest) (taken, error) {
	keys := []string{s.meta, s.hw, s.leases, s.tokens}
	prefix := ""
	if s.d.noDeclaredKeys {
		keys, prefix = []string{s.hw}, s.base
	}
	k := -1
	if r.cands != nil {
		k = len(r.cands)
	}
	args := make([]any, 0, 9+len(r.cands)+len(s.reserved))
	args = append(args, r.token, r.ttl, r.reserve, r.now, s.checks(), k, s.max, prefix, s.win)
	for _, w := range r.cands {
		args = append(args, w)
	}
	for _, w := range s.reserved {
		args = append(args, w)
	}
	v, err := s.run(ctx, s.takeSc, keys, args...)
	if err != nil {
		return taken{}, err
	}
	out, err := replyStrings(v, 5)
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
	window, _, err := mark(out[3])
	if err != nil {
		return taken{}, err
	}
	return taken{worker: w, prev: prev, hadRecord: had, own: out[2] == "1", notBefore: window, why: out[4]}, nil
}

func (s *redisStore) renew(ctx context.Context, worker int64, token string, ttl, reserve int64) (renewal, error) {
	v, err := s.run(ctx, s.renewSc, []string{s.leases, s.hw, s.meta}, token, ttl, worker, reserve)
	if err != nil {
		return renewal{}, err
	}
	out, err := replyStrings(v, 4)
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
	window, _, err := mark(out[3])
	if err != nil {
		return renewal{}, err
	}
	return renewal{held: true, prev: prev, startAfter: start, hadStart: hadStart, notBefore: window}, nil
}

func (s *redisStore) release(ctx context.Context, worker int64, token string, final int64) error {
	_, err := s.run(ctx, s.releaseSc, []string{s.leases, s.hw, s.tokens}, token, worker, final, luaBool(!s.d.noReleaseClamp))
	return err
}

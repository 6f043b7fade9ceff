package tokens

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The scripts. Each receives in KEYS every key it touches, all with one
// slot tag. Session IDs and user IDs reach them as 8 big-endian bytes,
// the form of index entries and field names.
//
// None has a "#!lua flags=" line: Redis 7 refuses a script with flags
// but without allow-oom as a whole when it is out of memory, while a
// script without flags runs, and only a command that may grow memory
// (SET, HSET) fails, and only if the script has not written yet. So
// Issue, Rotate and the refresh, which SET before any other write, fail
// cleanly without writing anything in a full Redis under noeviction; the
// revoking scripts delete first (DEL, HDEL), which Redis allows when
// full, and then may rewrite the index field they shortened; and
// Validate only reads.
//
// Digests are compared in Lua with ==: Lua 5.1 interns every string, so
// equality is a pointer comparison once both exist, and what is compared
// are digests, which an attacker cannot steer byte by byte.
//
// Every script of a Manager opens with luaSwitches, which sets the
// locals that the scripts branch on: checkIndex, the index's authority
// (on but in the tests' control runs; see defences), and fenced (see
// luaFence).

// luaFind is a line of Lua that sets i to the place of session sid's
// entry in e, the entries of a field (a string), or to nil: the first
// match of the 8 bytes at an entry's start.
const luaFind = `local i = string.find(e, sid, 1, true) ` +
	`while i and i % 12 ~= 1 do i = string.find(e, sid, i + 1, true) end`

// luaExpiry is a line of Lua that sets now, the Unix second by Redis's
// clock, and x, the 4 bytes of an index entry's expiry for a key given
// a TTL of ttl ms (a number) earlier in the same script: the second after
// now + ttl, so past the key's own expiry, which Redis counted from a
// moment no later than TIME's.
const luaExpiry = `local t = redis.call('TIME') local now = tonumber(t[1]) ` +
	`local s = now + math.floor((tonumber(t[2]) / 1000 + ttl) / 1000) + 1 ` +
	`local x = string.char(math.floor(s / 16777216) % 256, math.floor(s / 65536) % 256, math.floor(s / 256) % 256, s % 256)`

// luaKeepIndex is a line of Lua that makes the index KEYS[ix] last at
// least ttl ms more (it must outlive every session in it), setting twice
// that when it is short, so that most writes find it long enough.
const luaKeepIndex = `if redis.call('PTTL', KEYS[ix]) < ttl then redis.call('PEXPIRE', KEYS[ix], 2 * ttl) end`

// luaFence defines fence(r), which a script that may revoke calls on each
// way out that wrote nothing, and which returns r. It sets a field of the
// index KEYS[ix] (ix declared before it) and deletes it again: no state changes, but the two
// writes go to the replicas like any other. Options.WaitReplicas's WAIT
// counts replicas that have the connection's own last write; without a
// write of its own, a call that found a session already ended by a write
// of another connection (a revocation that failed with ErrUnavailable,
// then retried) would be acknowledged by replicas that do not have that
// write, and return as done. After the fence, WAIT covers everything the
// primary had applied when the script read it. Only the scripts of a
// Manager with WaitReplicas set fenced (see newScripts); while Redis is out
// of memory it refuses the fence, and the call fails with ErrUnavailable,
// as a revocation whose replication cannot be shown should.
const luaFence = `local function fence(r) if fenced then redis.call('HSET', KEYS[ix], '', '') redis.call('HDEL', KEYS[ix], '') end return r end`

// validateScript returns the record of a valid session, the stub of a
// token that Rotate replaced within Options.RotationGrace (which Go
// follows), and nil for any other.
//
// KEYS: session, index. ARGV: digest, session ID.
const validateScript = `
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 16) ~= ARGV[1] or #v < 28 then return false end
if string.byte(v, 17) > 127 then return v end
if checkIndex then
  local e = redis.call('HGET', KEYS[2], string.sub(v, 17, 24))
  if not e then return false end
  local sid = ARGV[2]
  ` + luaFind + `
  if not i then return false end
end
return v
`

// issueScript creates a session and adds its entry to its user's field,
// dropping the entries of ended sessions and revoking the oldest live
// ones past MaxSessions, then sweeps a few fields of the tag (see
// sweepFields). It returns the IDs of the sessions it revoked, whose keys
// Go deletes afterwards. It declares the new key, which never exists
// before, so it does not run while the slot migrates.
//
// KEYS: session, index. ARGV: record, TTL ms, user, session ID, max
// sessions, -sweepFields.
const issueScript = `
if not redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then
  return redis.error_reply('ERR session ID already in use')
end
local ttl, ix = tonumber(ARGV[2]), 2
` + luaExpiry + `
local function live(e)
  for j = 1, #e - 11, 12 do
    local a, b, c, d = string.byte(e, j + 8, j + 11)
    if ((a * 256 + b) * 256 + c) * 256 + d < now then
      local l = {}
      for k = 1, #e - 11, 12 do
        a, b, c, d = string.byte(e, k + 8, k + 11)
        if ((a * 256 + b) * 256 + c) * 256 + d >= now then l[#l + 1] = string.sub(e, k, k + 11) end
      end
      return table.concat(l)
    end
  end
  return e
end
local mine = live(redis.call('HGET', KEYS[2], ARGV[3]) or '')
local over = #mine / 12 + 1 - tonumber(ARGV[5])
local revoked = {}
for j = 1, over do revoked[j] = string.sub(mine, j * 12 - 11, j * 12 - 4) end
if over > 0 then mine = string.sub(mine, over * 12 + 1) end
redis.call('HSET', KEYS[2], ARGV[3], mine .. ARGV[4] .. x)
` + luaKeepIndex + `
local f = redis.call('HRANDFIELD', KEYS[2], ARGV[6], 'WITHVALUES')
for j = 1, #f - 1, 2 do
  if f[j] ~= ARGV[3] then
    local l = live(f[j + 1])
    if l == '' then
      redis.call('HDEL', KEYS[2], f[j])
    elseif l ~= f[j + 1] then
      redis.call('HSET', KEYS[2], f[j], l)
    end
  end
end
return revoked
`

// refreshScript writes a new last-seen time and expiry, unless the session
// is no longer valid, or another call has already refreshed it, or Rotate
// has replaced it since it was read (the stub then stands in its key, and
// the successor is fresh). It returns 0 when the session is not valid,
// else 1.
//
// KEYS: session, index. ARGV: digest, new last-seen (4 bytes), a last-seen
// past which another call has refreshed the session since it was read,
// TTL ms, session ID.
const refreshScript = `
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 16) ~= ARGV[1] or #v < 28 then return 0 end
if string.byte(v, 17) > 127 then return 1 end
local u = string.sub(v, 17, 24)
local e = redis.call('HGET', KEYS[2], u) or ''
local sid = ARGV[5]
` + luaFind + `
if checkIndex and not i then return 0 end
local a, b, c, d = string.byte(v, 25, 28)
if ((a * 256 + b) * 256 + c) * 256 + d > tonumber(ARGV[3]) then return 1 end
redis.call('SET', KEYS[1], string.sub(v, 1, 24) .. ARGV[2] .. string.sub(v, 29), 'PX', ARGV[4])
local ttl, ix = tonumber(ARGV[4]), 2
` + luaExpiry + `
if i then redis.call('HSET', KEYS[2], u, string.sub(e, 1, i + 7) .. x .. string.sub(e, i + 12)) end
` + luaKeepIndex + `
return 1
`

// rotateScript replaces a valid session by a new one for the same user:
// the new record keeps the user, the login time and the metadata, under
// the new digest; the new entry goes last in the user's field; the old
// key becomes the stub that leads the old token to the new session for
// the grace window (or, with a window of 0 ms, which only the tests'
// control runs pass, is deleted). It returns the old record without its
// digest; the stub without its digest if the old token was replaced
// already, within the window (Go then follows it, so that two rotations
// of one token agree on its successor); or 0 if the old session is not
// valid (also when it has idled out or passed its absolute lifetime by
// the Manager's options, which may have been lowered since its key's TTL
// was set). Like Issue, it creates a key, so it does not run while the
// slot migrates.
//
// KEYS: old session, new session, index. ARGV: old digest, new digest,
// old session ID, new session ID, the login field for a record without
// one (the old session's IssuedAt), that login time in Unix ms, the new
// session's idle TTL ms, AbsoluteLifetime ms minus the Unix ms now, the
// last-seen at or below which the old session has idled out, the salt,
// and the grace window in ms.
const rotateScript = `local ix = 3 ` + luaFence + `
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 16) ~= ARGV[1] or #v < 28 then return fence(0) end
if string.byte(v, 17) > 127 then return fence(string.sub(v, 17)) end
local u = string.sub(v, 17, 24)
local e = redis.call('HGET', KEYS[3], u) or ''
local sid = ARGV[3]
` + luaFind + `
if checkIndex and not i then return fence(0) end
local a, b, c, d = string.byte(v, 25, 28)
if ((a * 256 + b) * 256 + c) * 256 + d <= tonumber(ARGV[9]) then return fence(0) end
local rest, login = string.sub(v, 29), tonumber(ARGV[6])
if string.sub(rest, 1, 2) == '\1\8' then
  login = 0
  for _, y in ipairs({string.byte(rest, 3, 10)}) do login = login * 256 + y end
else
  rest = ARGV[5] .. rest
end
local ttl, ix = math.min(tonumber(ARGV[7]), login + tonumber(ARGV[8])), 3
if ttl <= 0 then return fence(0) end
if not redis.call('SET', KEYS[2], ARGV[2] .. u .. '\0\0\0\0' .. rest, 'PX', ttl, 'NX') then
  return redis.error_reply('ERR session ID already in use')
end
if tonumber(ARGV[11]) > 0 then
  local flagged = string.char(string.byte(u, 1) + 128) .. string.sub(u, 2)
  redis.call('SET', KEYS[1], ARGV[1] .. flagged .. ARGV[4] .. ARGV[10], 'PX', ARGV[11])
else
  redis.call('DEL', KEYS[1])
end
` + luaExpiry + `
if i then e = string.sub(e, 1, i - 1) .. string.sub(e, i + 12) end
redis.call('HSET', KEYS[3], u, e .. ARGV[4] .. x)
` + luaKeepIndex + `
return string.sub(v, 17)
`

// revokeScript ends the session of a token: it deletes the key if the
// digest matches, which ends the session on its own, then drops the
// entry. It returns 1 if the session was valid, 0 if not (wrong digest,
// gone, or not in the index), and the stub without its digest, changing
// nothing, if Rotate replaced the token within the grace window: Go then
// revokes the successor.
//
// KEYS: session, index. ARGV: digest, session ID.
const revokeScript = `local ix = 2 ` + luaFence + `
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 16) ~= ARGV[1] or #v < 28 then return fence(0) end
if string.byte(v, 17) > 127 then return fence(string.sub(v, 17)) end
redis.call('DEL', KEYS[1])
local u = string.sub(v, 17, 24)
local e = redis.call('HGET', KEYS[2], u) or ''
local sid = ARGV[2]
` + luaFind + `
if not i then return 0 end
e = string.sub(e, 1, i - 1) .. string.sub(e, i + 12)
if e == '' then redis.call('HDEL', KEYS[2], u) else redis.call('HSET', KEYS[2], u, e) end
return 1
`

// revokeSessionScript ends one session of a user: dropping its entry from
// the user's field is the revocation, and a session ID that is not there
// (another user's, or already ended) is left alone. It deletes the key
// first. It returns 1 if it ended a session whose key was there, else 0;
// and, changing nothing, the stub without its digest if the session is
// the user's and Rotate replaced it within the grace window: Go then
// revokes the successor.
//
// KEYS: session, index. ARGV: user, session ID.
const revokeSessionScript = `local ix = 2 ` + luaFence + `
local e = redis.call('HGET', KEYS[2], ARGV[1]) or ''
local sid = ARGV[2]
` + luaFind + `
if not i then
  local v = redis.call('GET', KEYS[1])
  if v and #v == 48 and string.byte(v, 17) > 127 and string.char(string.byte(v, 17) - 128) .. string.sub(v, 18, 24) == ARGV[1] then
    return fence(string.sub(v, 17))
  end
  return fence(0)
end
local n = redis.call('DEL', KEYS[1])
e = string.sub(e, 1, i - 1) .. string.sub(e, i + 12)
if e == '' then redis.call('HDEL', KEYS[2], ARGV[1]) else redis.call('HSET', KEYS[2], ARGV[1], e) end
return n
`

// revokeAllScript ends every session in the user's field but those to
// keep: it deletes the field, which is the revocation, then writes back
// the entries kept, if any. It returns the IDs of the sessions it ended
// whose keys had not expired, which Go deletes afterwards as clean-up.
//
// KEYS: index. ARGV: user, then the session IDs to keep.
const revokeAllScript = `local ix = 1 ` + luaFence + `
local e = redis.call('HGET', KEYS[1], ARGV[1])
if not e then return fence({}) end
redis.call('HDEL', KEYS[1], ARGV[1])
local keep = {}
for j = 2, #ARGV do keep[ARGV[j]] = true end
local now = tonumber(redis.call('TIME')[1])
local kept, ended = {}, {}
for j = 1, #e - 11, 12 do
  local sid = string.sub(e, j, j + 7)
  if keep[sid] then
    kept[#kept + 1] = string.sub(e, j, j + 11)
  else
    local a, b, c, d = string.byte(e, j + 8, j + 11)
    if ((a * 256 + b) * 256 + c) * 256 + d >= now then ended[#ended + 1] = sid end
  end
end
if #kept > 0 then redis.call('HSET', KEYS[1], ARGV[1], table.concat(kept)) end
return ended
`

// listScript returns, of the sessions given, those still in the user's
// field whose keys exist, as pairs of ID and record without its digest.
// Every key it reads is declared, so in a Cluster it runs only on a node
// that holds all of them: it never lists half of a slot that is
// migrating.
//
// KEYS: index, then session keys. ARGV: user, then the sessions' IDs.
const listScript = `
local e = redis.call('HGET', KEYS[1], ARGV[1]) or ''
local out = {}
for j = 2, #KEYS do
  local sid = ARGV[j]
  ` + luaFind + `
  if i then
    local v = redis.call('GET', KEYS[j])
    if v then
      out[#out + 1] = sid
      out[#out + 1] = string.sub(v, 17)
    end
  end
end
return out
`

// scripts are a Manager's loaded scripts. redis.Script caches its SHA, so
// each Manager has its own set rather than sharing package-level ones.
type scripts struct {
	validate, issue, refresh, rotate, revoke, revokeSession, revokeAll, list *redis.Script
}

// newScripts returns the scripts with the defences in d, and with the
// fence (luaFence) when fence is set: only WaitReplicas needs it, and a
// fence is a write, which Redis refuses while it is out of memory, where
// a revocation that finds nothing to end must still succeed.
func newScripts(d defences, fence bool) scripts {
	switches := luaSwitches(!d.noIndexCheck, fence && !d.noFence)
	load := func(src string) *redis.Script { return redis.NewScript(switches + src) }
	return scripts{
		validate:      load(validateScript),
		issue:         load(issueScript),
		refresh:       load(refreshScript),
		rotate:        load(rotateScript),
		revoke:        load(revokeScript),
		revokeSession: load(revokeSessionScript),
		revokeAll:     load(revokeAllScript),
		list:          load(listScript),
	}
}

// luaSwitches is the first line of every script: the locals checkIndex
// and fenced, which the scripts branch on.
func luaSwitches(checkIndex, fenced bool) string {
	return "local checkIndex, fenced = " + strconv.FormatBool(checkIndex) + ", " + strconv.FormatBool(fenced) + "\n"
}

package tokens

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
)

// What the Manager keeps in Redis, per user, all under the user's slot
// tag, so that every command and script touches a single Cluster slot:
//
//	<KeyPrefix>{<tag>}s<session ID>   string, the session record; its TTL
//	                                  is the session's expiry
//	<KeyPrefix>{<tag>}u<user ID>      set of the user's session IDs (the
//	                                  index); its TTL is at least that of
//	                                  every session in it
//
// Session IDs are in decimal, in keys and in the index, because the
// scripts turn index members (stored by Redis as integers) back into
// session keys, and Lua 5.1 has no 64-bit integers to do any other
// conversion with. The user ID in the index key is 16 hex digits: Validate's
// script builds that key from the 8 user bytes of the session record,
// which Lua can format byte by byte but not read as one number.
//
// The rule (the index is the authority): a session is valid if and only
// if its key exists, holds the token's digest, and its ID is a member of
// its user's index. So:
//   - removing an ID from the index revokes the session: one write to one
//     key, which every revoking script declares, so it is atomic on every
//     deployment and, in a Cluster whose slot is migrating, Redis answers
//     ASK or TRYAGAIN (which go-redis follows and retries) instead of
//     running the script on half of the user's keys. Deleting the session
//     key also ends the session; RevokeAll and MaxSessions delete the keys
//     after the index change as clean-up only.
//   - a lost index (evicted, or a write lost in a failover) logs every
//     session of the user out instead of letting it survive a RevokeAll
//     that can no longer find it: fail closed. Nothing puts a session back
//     into the index: with the index as the authority, re-adding an ID
//     would bring a revoked session back.
//   - only Issue and Rotate add IDs, each a new session ID in the script
//     that creates its key (SET NX); the refresh rewrites a key only after
//     seeing it exist, with its digest, in the index, in the same script.
//
// The index may hold IDs of sessions whose keys are gone (expired, or
// deleted by Revoke); Issue and List drop them.

// keys names a Manager's Redis keys.
type keys struct{ prefix string }

// appendTagged appends "<prefix>{<tag>}<kind>", the start of a key.
func (k keys) appendTagged(b []byte, tag uint16, kind byte) []byte {
	b = append(b, k.prefix...)
	b = append(b, '{')
	b = appendBase62(b, uint64(tag), tagDigits)
	return append(b, '}', kind)
}

// taggedLen is the length of "<prefix>{<tag>}<kind>".
func (k keys) taggedLen() int { return len(k.prefix) + tagDigits + 3 }

// session is the key of a session record. It builds the key on the stack,
// so that Validate pays for one allocation, the string.
func (k keys) session(tag uint16, sid idtype.ID) string {
	var buf [64]byte
	return string(strconv.AppendInt(k.appendTagged(buf[:0], tag, 's'), int64(sid), 10))
}

// sessionID returns the decimal session ID at the end of a session key,
// sharing its memory.
func (k keys) sessionID(sessionKey string) string { return sessionKey[k.taggedLen():] }

// index is the key of a user's set of session IDs.
func (k keys) index(tag uint16, user idtype.ID) string {
	var buf [64]byte
	var u [8]byte
	binary.BigEndian.PutUint64(u[:], uint64(user))
	return string(hex.AppendEncode(k.appendTagged(buf[:0], tag, 'u'), u[:]))
}

// sessionPrefix is a session key without the ID, for the scripts.
func (k keys) sessionPrefix(tag uint16) string { return string(k.appendTagged(nil, tag, 's')) }

// guard is a key that is never written. A script that declares it beside
// a key that exists cannot run while its Cluster slot migrates: the
// source node answers TRYAGAIN or ASK for a request with a missing key,
// and the target answers TRYAGAIN for one with several keys of which it
// lacks some. List declares it, so that it never reads half of a user's
// sessions; on a single node it costs nothing.
func (k keys) guard(tag uint16) string { return string(k.appendTagged(nil, tag, 'g')) }

// A record is the stored value of a session: a fixed 28-byte head that
// the scripts read, then optional fields that only Go reads.
//
//	offset  size  field
//	 0      16    digest: the first 16 bytes of SHA-256(secret)
//	16       8    user ID, big-endian
//	24       4    last seen: 10 ms steps since the session's IssuedAt, big-endian
//	28       …    fields: kind byte, length byte, value; unknown kinds are skipped
//
// Redis keeps a string of up to 44 bytes in one allocation with its
// object header, and a 28-byte one in the 48-byte size class, so a
// session without metadata costs the least memory. That is also why the
// digest is SHA-256 cut to 128 bits: a second preimage of 128 bits of
// SHA-256 still costs 2^128 work, so a copy of Redis yields no usable
// token, and the secret itself keeps its full 256 bits.
type record struct {
	digest   [digestLen]byte
	user     idtype.ID
	lastSeen uint32
	// login is the Unix millisecond of the first token of a rotated
	// session; zero means the session's own IssuedAt.
	login int64
	meta  Metadata
}

const (
	digestLen = 16
	headLen   = 28

	fieldLogin     = 1
	fieldDevice    = 2
	fieldUserAgent = 3
	fieldIP        = 4
)

var errCorrupt = errors.New("tokens: corrupt session record")

// encode writes the record.
func (r *record) encode() []byte {
	b := make([]byte, headLen, headLen+10+len(r.meta.Device)+len(r.meta.UserAgent)+len(r.meta.IP)+6)
	copy(b, r.digest[:])
	binary.BigEndian.PutUint64(b[16:], uint64(r.user))
	binary.BigEndian.PutUint32(b[24:], r.lastSeen)
	if r.login != 0 {
		b = append(b, fieldLogin, 8)
		b = binary.BigEndian.AppendUint64(b, uint64(r.login))
	}
	for _, f := range []struct {
		kind byte
		v    string
	}{{fieldDevice, r.meta.Device}, {fieldUserAgent, r.meta.UserAgent}, {fieldIP, r.meta.IP}} {
		if f.v != "" {
			v := truncate(f.v, maxMetaLen)
			b = append(b, f.kind, byte(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

// decodeRecord reads a record, or one without its digest (List's script
// strips it) when hasDigest is false. Metadata strings share v's memory.
func decodeRecord(v string, hasDigest bool) (record, error) {
	var r record
	if hasDigest {
		if len(v) < digestLen {
			return r, errCorrupt
		}
		copy(r.digest[:], v)
		v = v[digestLen:]
	}
	if len(v) < headLen-digestLen {
		return r, errCorrupt
	}
	r.user = idtype.ID(beUint64(v))
	r.lastSeen = uint32(v[8])<<24 | uint32(v[9])<<16 | uint32(v[10])<<8 | uint32(v[11])
	if r.user <= 0 {
		return r, errCorrupt
	}
	for rest := v[headLen-digestLen:]; len(rest) > 0; {
		if len(rest) < 2 || len(rest) < 2+int(rest[1]) {
			return r, errCorrupt
		}
		kind, f := rest[0], rest[2:2+int(rest[1])]
		rest = rest[2+len(f):]
		switch kind {
		case fieldLogin:
			if len(f) != 8 {
				return r, errCorrupt
			}
			r.login = int64(beUint64(f))
		case fieldDevice:
			r.meta.Device = f
		case fieldUserAgent:
			r.meta.UserAgent = f
		case fieldIP:
			r.meta.IP = f
		}
	}
	return r, nil
}

// beUint64 reads the first 8 bytes of s as a big-endian number.
func beUint64(s string) uint64 {
	_ = s[7]
	return uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 |
		uint64(s[4])<<24 | uint64(s[5])<<16 | uint64(s[6])<<8 | uint64(s[7])
}

// The scripts. Each touches only keys in the slot of its first key: KEYS,
// and keys it builds from them or from the user's index, which carry the
// same tag. Every key whose answer decides the result is declared in KEYS,
// except where the key's name is only known from a value the script
// reads (Validate's and Revoke's index); those scripts tell "the index is
// elsewhere or gone" apart from "not a member", so that Go can ask again
// with the key declared (see Manager.load).
//
// None has a "#!lua flags=" line: Redis 7 refuses a script with flags
// but without allow-oom as a whole when it is out of memory, while a
// script without flags runs, and only its first command that may grow
// memory (SET, SADD) fails. So the revoking scripts, which only delete
// (DEL, SREM), work in a full Redis under noeviction, and so does the read
// of Validate; Issue, Rotate and the refresh, which SET before any other
// write, fail cleanly without writing anything.
//
// Digests are compared in Lua with ==: Lua 5.1 interns every string, so
// equality is a pointer comparison once both exist, and what is compared
// are digests, which an attacker cannot steer byte by byte.
//
// Lines ending in "-- index check" enforce the index's authority; the
// package's tests remove them (see defences) for control runs.

// luaIndexKey is a line of Lua that sets idx to the index key of the
// session in v (its record) and KEYS[1] (its key), whose decimal ID is
// ARGV[2]: the key's tagged start with 'u' for 's', then the record's 8
// user bytes as 16 hex digits, formatted as two 32-bit halves, which a
// Lua number holds exactly (measured in Redis 7, about 0.45 µs a call,
// against 0.8 µs for eight %02x).
const luaIndexKey = `local a, b, c, d, e, f, g, h = string.byte(v, 17, 24) ` +
	`local idx = string.sub(KEYS[1], 1, #KEYS[1] - #ARGV[2] - 1) .. string.format('u%08x%08x', ` +
	`((a * 256 + b) * 256 + c) * 256 + d, ((e * 256 + f) * 256 + g) * 256 + h)`

// validateScript returns the record of a valid session: its key holds the
// digest and its ID is in its user's index. It returns nil for an invalid
// one, and {record} when the index key does not exist here, or is on
// another Cluster node: Go then asks again with validateIndexedScript.
//
// KEYS: session. ARGV: digest, session ID.
const validateScript = `
local v = redis.call('GET', KEYS[1])
if not v or #v < 28 or string.sub(v, 1, 16) ~= ARGV[1] then
  return false
end
` + luaIndexKey + ` -- index check
local member = redis.pcall('SISMEMBER', idx, ARGV[2]) -- index check
if member == 0 and redis.call('EXISTS', idx) == 1 then return false end -- index check
if member ~= 1 then return {v} end -- index check
return v
`

// validateIndexedScript is validateScript with the index key declared:
// it runs only where both keys are, and where the index is missing from
// a stable slot, the session is not valid.
//
// KEYS: session, index. ARGV: digest, session ID.
const validateIndexedScript = `
local v = redis.call('GET', KEYS[1])
if not v or #v < 28 or string.sub(v, 1, 16) ~= ARGV[1] then
  return false
end
if redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 0 then return false end -- index check
return v
`

// issueScript creates a session and adds it to the user's index, dropping
// ended sessions from the index and revoking the oldest live ones past
// MaxSessions. It returns the IDs it revoked. It declares the new key,
// which never exists before, so it does not run while the slot migrates
// (see keys.guard), and the EXISTS and DEL of other sessions are exact.
//
// KEYS: session, index. ARGV: record, TTL ms, session ID, session key
// prefix, max sessions.
const issueScript = `
if not redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then
  return redis.error_reply('ERR session ID ' .. ARGV[3] .. ' is already in use')
end
local live = {}
for _, sid in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if redis.call('EXISTS', ARGV[4] .. sid) == 1 then
    live[#live + 1] = sid
  else
    redis.call('SREM', KEYS[2], sid)
  end
end
local revoked = {}
local over = #live + 1 - tonumber(ARGV[5])
if over > 0 then
  table.sort(live, function(a, b)
    if #a ~= #b then return #a < #b end
    return a < b
  end)
  for i = 1, over do
    redis.call('SREM', KEYS[2], live[i])
    redis.call('DEL', ARGV[4] .. live[i])
    revoked[#revoked + 1] = live[i]
  end
end
redis.call('SADD', KEYS[2], ARGV[3])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return revoked
`

// refreshScript writes a new last-seen time and expiry, unless the session
// is no longer valid, or another call has already refreshed it. It
// returns 0 when the session is not valid, else 1.
//
// KEYS: session, index. ARGV: digest, new last-seen (4 bytes), a last-seen
// past which another call has refreshed the session since it was read,
// TTL ms, session ID.
const refreshScript = `
local v = redis.call('GET', KEYS[1])
if not v or #v < 28 or string.sub(v, 1, 16) ~= ARGV[1] then
  return 0
end
if redis.call('SISMEMBER', KEYS[2], ARGV[5]) == 0 then return 0 end -- index check
local a, b, c, d = string.byte(v, 25, 28)
if ((a * 256 + b) * 256 + c) * 256 + d > tonumber(ARGV[3]) then
  return 1
end
redis.call('SET', KEYS[1], string.sub(v, 1, 24) .. ARGV[2] .. string.sub(v, 29), 'PX', ARGV[4])
if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[4]) then
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end
return 1
`

// rotateScript replaces a session by a new one, if the old one is still
// valid. It returns 1 if it did, else 0. Like Issue, it creates a key, so
// it does not run while the slot migrates.
//
// KEYS: old session, new session, index. ARGV: old digest, new record,
// TTL ms, old session ID, new session ID.
const rotateScript = `
local v = redis.call('GET', KEYS[1])
if not v or #v < 28 or string.sub(v, 1, 16) ~= ARGV[1] then
  return 0
end
if redis.call('SISMEMBER', KEYS[3], ARGV[4]) == 0 then return 0 end -- index check
if not redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3], 'NX') then
  return redis.error_reply('ERR session ID ' .. ARGV[5] .. ' is already in use')
end
redis.call('SREM', KEYS[3], ARGV[4])
redis.call('DEL', KEYS[1])
redis.call('SADD', KEYS[3], ARGV[5])
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
return 1
`

// revokeScript ends the session of a token: it deletes the key if the
// digest matches, which ends the session on its own, then drops the ID
// from the index as clean-up (the index may be on another node while the
// slot migrates; then it stays, harmless, until Issue or List drops it).
// It returns 1 if the session was valid, 0 if not (wrong digest, gone, or
// no longer in an index that exists).
//
// KEYS: session. ARGV: digest, session ID.
const revokeScript = `
local v = redis.call('GET', KEYS[1])
if not v or #v < 28 or string.sub(v, 1, 16) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
` + luaIndexKey + `
local removed = redis.pcall('SREM', idx, ARGV[2])
if removed == 0 and redis.call('EXISTS', idx) == 1 then return 0 end
return 1
`

// revokeSessionScript ends one session of a user: removing its ID from
// the user's index is the revocation, and a session ID that is not there
// (another user's, or already ended) is left alone. It returns 1 if it
// ended a live session, else 0.
//
// KEYS: session, index. ARGV: session ID.
const revokeSessionScript = `
if redis.call('SREM', KEYS[2], ARGV[1]) == 0 then
  return 0
end
return redis.call('DEL', KEYS[1])
`

// revokeAllScript ends every session in the user's index but those to
// keep: it removes them from the index, which is the revocation, then
// deletes their keys as clean-up. While the slot migrates, a key may be
// on the other node, where the DEL cannot reach it; the session is ended
// all the same, and its key expires. It returns the number of sessions
// whose keys it deleted or could not reach.
//
// KEYS: index. ARGV: session key prefix, then the session IDs to keep.
const revokeAllScript = `
local keep = {}
for i = 2, #ARGV do
  keep[ARGV[i]] = true
end
local ended = {}
for _, sid in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if not keep[sid] then
    redis.call('SREM', KEYS[1], sid)
    ended[#ended + 1] = sid
  end
end
local live = 0
for _, sid in ipairs(ended) do
  if redis.pcall('DEL', ARGV[1] .. sid) ~= 0 then
    live = live + 1
  end
end
return live
`

// listScript returns the user's live sessions as pairs of ID and record
// without its digest, and drops ended sessions from the index. It
// declares the guard key (see keys.guard), so it never runs on a slot
// that is half migrated.
//
// KEYS: index, guard. ARGV: session key prefix.
const listScript = `
local out = {}
for _, sid in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local v = redis.call('GET', ARGV[1] .. sid)
  if v then
    out[#out + 1] = sid
    out[#out + 1] = string.sub(v, 17)
  else
    redis.call('SREM', KEYS[1], sid)
  end
end
return out
`

// scripts are a Manager's loaded scripts. redis.Script caches its SHA, so
// each Manager has its own set rather than sharing package-level ones.
type scripts struct {
	validate, validateIndexed, issue, refresh, rotate, revoke, revokeSession, revokeAll, list *redis.Script
}

// newScripts returns the scripts with the defences in d.
func newScripts(d defences) scripts {
	load := func(src string) *redis.Script {
		if d.noIndexCheck {
			src = withoutIndexCheck(src)
		}
		return redis.NewScript(src)
	}
	return scripts{
		validate:        load(validateScript),
		validateIndexed: load(validateIndexedScript),
		issue:           load(issueScript),
		refresh:         load(refreshScript),
		rotate:          load(rotateScript),
		revoke:          load(revokeScript),
		revokeSession:   load(revokeSessionScript),
		revokeAll:       load(revokeAllScript),
		list:            load(listScript),
	}
}

// withoutIndexCheck drops the lines of a script that end in "-- index
// check", for the tests' control runs.
func withoutIndexCheck(src string) string {
	lines := strings.Split(src, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if !strings.HasSuffix(l, "-- index check") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}

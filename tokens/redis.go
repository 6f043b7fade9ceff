package tokens

import (
	"encoding/binary"
	"errors"
	"strconv"

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
// IDs are in decimal, because the scripts turn index members (decimal,
// stored by Redis as integers) back into session keys, and Lua 5.1 has no
// 64-bit integers to do any other conversion with.
//
// Invariants, kept by scripts that run atomically in the slot:
//   - every live session of a user is in the user's index: Issue and
//     Rotate add it in the same script that creates the session, and
//     nothing removes a member whose session still exists except together
//     with the session (RevokeSession, RevokeAll, Issue's MaxSessions);
//   - no command that can create a session key runs unless the script has
//     just seen the key exist (refresh) or is creating a new session ID
//     (SET NX): a revoked session never comes back.
//
// The index may hold IDs of sessions that have ended (expired, or revoked
// with Revoke); Issue and List drop them.

// keys names a Manager's Redis keys.
type keys struct{ prefix string }

// appendTagged appends "<prefix>{<tag>}<kind>", the start of a key.
func (k keys) appendTagged(b []byte, tag uint16, kind byte) []byte {
	b = append(b, k.prefix...)
	b = append(b, '{')
	b = appendBase62(b, uint64(tag), tagDigits)
	return append(b, '}', kind)
}

// key returns "<prefix>{<tag>}<kind><id>". It builds the key on the stack,
// so that Validate pays for one allocation, the string.
func (k keys) key(tag uint16, kind byte, id idtype.ID) string {
	var buf [64]byte
	return string(strconv.AppendInt(k.appendTagged(buf[:0], tag, kind), int64(id), 10))
}

// session is the key of a session record.
func (k keys) session(tag uint16, sid idtype.ID) string { return k.key(tag, 's', sid) }

// index is the key of a user's set of session IDs.
func (k keys) index(tag uint16, user idtype.ID) string { return k.key(tag, 'u', user) }

// sessionPrefix is a session key without the ID, for the scripts.
func (k keys) sessionPrefix(tag uint16) string { return string(k.appendTagged(nil, tag, 's')) }

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
	// offsets as Lua's 1-based string.sub sees them
	luaUserFrom, luaUserTo = 17, 24

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
// and session keys it builds from the user's index, which carry the same
// tag. Digests are compared in Lua with ==: Lua 5.1 interns every string,
// so equality is a pointer comparison once both exist, and what is
// compared are digests, which an attacker cannot steer byte by byte.

// issueScript creates a session and adds it to the user's index, dropping
// ended sessions from the index and revoking the oldest live ones past
// MaxSessions. It returns the IDs it revoked.
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
    redis.call('DEL', ARGV[4] .. live[i])
    redis.call('SREM', KEYS[2], live[i])
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
// is gone, the digest differs, or another call has already refreshed it.
// It returns 0 when the session is gone, else 1.
//
// KEYS: session, index. ARGV: digest, new last-seen (4 bytes), a last-seen
// past which another call has refreshed the session since it was read,
// TTL ms.
const refreshScript = `
local v = redis.call('GET', KEYS[1])
if not v or #v < 28 or string.sub(v, 1, 16) ~= ARGV[1] then
  return 0
end
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

// rotateScript replaces a session by a new one, if the old one still
// exists with the same digest. It returns 1 if it did, else 0.
//
// KEYS: old session, new session, index. ARGV: old digest, new record,
// TTL ms, old session ID, new session ID.
const rotateScript = `
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 16) ~= ARGV[1] then
  return 0
end
if not redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3], 'NX') then
  return redis.error_reply('ERR session ID ' .. ARGV[5] .. ' is already in use')
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[3], ARGV[4])
redis.call('SADD', KEYS[3], ARGV[5])
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
return 1
`

// revokeScript deletes a session if the digest matches. It returns 1 if it
// did, else 0. The index keeps the ID until Issue or List drops it.
//
// KEYS: session. ARGV: digest.
const revokeScript = `
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 16) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
`

// revokeSessionScript deletes one session of a user, if it is the user's.
// It returns 1 if it deleted a live session, else 0.
//
// KEYS: session, index. ARGV: session ID, user ID (8 bytes).
const revokeSessionScript = `
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then
  return 0
end
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SREM', KEYS[2], ARGV[1])
  return 0
end
if string.sub(v, 17, 24) ~= ARGV[2] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[1])
return 1
`

// revokeAllScript deletes every session in the user's index but those to
// keep, and returns the IDs of the live sessions it deleted.
//
// KEYS: index. ARGV: session key prefix, then the session IDs to keep.
const revokeAllScript = `
local keep = {}
for i = 2, #ARGV do
  keep[ARGV[i]] = true
end
local revoked = {}
for _, sid in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if not keep[sid] then
    if redis.call('DEL', ARGV[1] .. sid) == 1 then
      revoked[#revoked + 1] = sid
    end
    redis.call('SREM', KEYS[1], sid)
  end
end
return revoked
`

// listScript returns the user's live sessions as pairs of ID and record
// without its digest, and drops ended sessions from the index.
//
// KEYS: index. ARGV: session key prefix.
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
	issue, refresh, rotate, revoke, revokeSession, revokeAll, list *redis.Script
}

func newScripts() scripts {
	return scripts{
		issue:         redis.NewScript(issueScript),
		refresh:       redis.NewScript(refreshScript),
		rotate:        redis.NewScript(rotateScript),
		revoke:        redis.NewScript(revokeScript),
		revokeSession: redis.NewScript(revokeSessionScript),
		revokeAll:     redis.NewScript(revokeAllScript),
		list:          redis.NewScript(listScript),
	}
}

package tokens

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
)

// What the Manager keeps in Redis, all under a slot tag (see slotTag),
// so that every command and script touches a single Cluster slot:
//
//	<KeyPrefix>{<tag>}s<session ID>   string, a session's record; its TTL is
//	                                  the session's expiry. Once Rotate has
//	                                  replaced the session, its stub (see
//	                                  below) for Options.RotationGrace
//	<KeyPrefix>{<tag>}i               hash, the index of the tag's users:
//	                                  field = a user ID (8 bytes, big-endian),
//	                                  value = the user's sessions, 12 bytes
//	                                  each (see below); its TTL is at least
//	                                  that of every session in it
//
// The session ID in a key is its 11 base62 digits, as in the token. An
// index entry is the session ID (8 bytes, big-endian) and the Unix second
// (4 bytes, big-endian) after which the session's key is surely gone:
// each script that sets a key's TTL writes its entry's expiry from
// Redis's own clock (TIME) in the same call, rounded past the key's
// expiry, so that a script can drop the entries of ended sessions without
// touching their keys. Entries are in the order Redis created their
// sessions, oldest first.
//
// A token names its session key and its tag's index, but not its user:
// the user ID, which the token never carries, is in the session record,
// where the scripts read the user's field name. So every script receives
// every key it touches in KEYS, as Redis asks (a Cluster checks them,
// Dragonfly and proxies refuse others), and no token reveals its user.
//
// The rule (the index is the authority): a session is valid if and only
// if its key exists, holds the token's digest, and its entry is in its
// user's field of the index. So:
//   - removing an entry revokes the session: one write to one key, which
//     every revoking script declares, so it is atomic on every deployment
//     and, in a Cluster whose slot is migrating, Redis answers ASK or
//     TRYAGAIN (which go-redis follows and retries) instead of running
//     the script on half of the tag's keys. Deleting the session key also
//     ends the session; RevokeAll and MaxSessions delete the keys after the
//     index change, as clean-up only.
//   - a lost index (evicted, or a write lost in a failover) logs out
//     every session of the tag's users instead of letting one survive a
//     RevokeAll that can no longer find it: fail closed. Nothing puts an
//     entry back: with the index as the authority, re-adding one would
//     bring a revoked session back.
//   - only Issue and Rotate add entries, each for a new session ID in the
//     script that creates its key (SET NX); the refresh rewrites a key
//     only after seeing it, with its digest, in the index, in the same
//     script.
//
// A field may hold entries of ended sessions: Issue drops the user's own,
// and those of a few other fields of the tag picked at random (see
// sweepFields); Revoke, RevokeSession and RevokeAll rewrite the field
// without the sessions they end. A field left with no entry is deleted.
//
// Rotate replaces a session by its successor: it removes the old entry
// and adds the new one, as a revocation and an Issue would, and leaves in
// the old session's key a stub that points to the successor, for
// Options.RotationGrace (its TTL). A stub is no session and has no entry:
// it only lets the holder of the old token find the successor (see
// stub), which must then be valid by the rule above. So any revocation of
// the successor ends the old token too, at once, and nothing is ever
// valid that the index does not hold.

// slotTag maps a user ID to one of numSlotTags slot tags. All of a
// user's keys carry the user's tag as their Redis Cluster hash tag, so
// that every script touching them runs in one slot, and every token of
// the user carries it, so that Validate finds the slot from the token
// alone. The function mixes all 64 bits (SplitMix64's finalizer), because
// the low bits of a snowflake are a sequence that is often zero. It must
// never change: a different tag would orphan every stored session.
func slotTag(user idtype.ID) uint16 {
	x := uint64(user)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return uint16(x >> 54) // the top 10 bits: 0..1023
}

// keys names a Manager's Redis keys.
type keys struct{ prefix string }

// appendTagged appends "<prefix>{<tag>}<kind>", the start of a key.
func (k keys) appendTagged(b []byte, tag uint16, kind byte) []byte {
	b = append(b, k.prefix...)
	b = append(b, '{')
	b = appendBase62(b, uint64(tag), tagDigits)
	return append(b, '}', kind)
}

// session is the key of a session record.
func (k keys) session(tag uint16, sid idtype.ID) string {
	var buf [64]byte
	return string(appendBase62(k.appendTagged(buf[:0], tag, 's'), uint64(sid), sidDigits))
}

// index is the key of a slot tag's index.
func (k keys) index(tag uint16) string {
	var buf [32]byte
	return string(k.appendTagged(buf[:0], tag, 'i'))
}

// sessionAndIndex returns a session's key and its tag's index key in one
// allocation, for Validate.
func (k keys) sessionAndIndex(tag uint16, sid idtype.ID) (session, index string) {
	var buf [96]byte
	b := appendBase62(k.appendTagged(buf[:0], tag, 's'), uint64(sid), sidDigits)
	n := len(b)
	both := string(k.appendTagged(b, tag, 'i'))
	return both[:n], both[n:]
}

// entryLen is the length of an index entry: session ID and expiry.
const entryLen = 12

// sweepFields is how many fields of its tag's index each Issue picks at
// random (HRANDFIELD) to drop the entries of ended sessions from, and
// the field itself once none is left. A field is picked, in expectation,
// once per F/sweepFields Issues of its tag (F: the index's fields), so
// fields whose sessions all ended stay bounded: at most about
// 1/(sweepFields-1) as many as live ones, even if no user ever comes back
// (the worst case, where every Issue makes a field that later dies
// unvisited); users who do come back drop their own field's ended
// entries. An index that stops being written expires after its last
// session.
const sweepFields = 3

// userField is a user's field name in the index: the ID, 8 bytes
// big-endian, as the session record holds it.
func userField(user idtype.ID) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(user))
	return string(b[:])
}

// entryID is a session ID as the index entries and the scripts hold it:
// 8 bytes, big-endian.
func entryID(sid idtype.ID) string { return userField(sid) }

// parseEntryIDs returns the session IDs of the 8-byte IDs the scripts
// return, skipping anything else.
func parseEntryIDs(ids []string) []idtype.ID {
	out := make([]idtype.ID, 0, len(ids))
	for _, s := range ids {
		if len(s) == 8 {
			out = append(out, idtype.ID(beUint64(s)))
		}
	}
	return out
}

// parseEntries returns the session IDs of a user's index field.
func parseEntries(v string) []idtype.ID {
	out := make([]idtype.ID, 0, len(v)/entryLen)
	for ; len(v) >= entryLen; v = v[entryLen:] {
		out = append(out, idtype.ID(beUint64(v)))
	}
	return out
}

// A record is the stored value of a session: a fixed 28-byte head that
// the scripts read, then optional fields that only Go reads.
//
//	offset  size  field
//	 0      16    digest: the first 16 bytes of SHA-256(secret)
//	16       8    user ID, big-endian
//	24       4    last seen: 10 ms steps since the session's IssuedAt, big-endian
//	28       …    fields: kind byte, length byte, value; unknown kinds are skipped
//
// The login field, when a record has one, is its first field: Rotate's
// script reads it there, to carry it to the new session.
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

// A stub is what the key of a session that Rotate replaced holds for
// Options.RotationGrace: the way from the old token to its successor.
//
//	offset  size  field
//	 0      16    digest of the old token, as in its record
//	16       8    user ID with its top bit set, big-endian
//	24       8    successor's session ID, big-endian
//	32      16    salt: with the old token's secret, it makes the
//	              successor's secret (see successorOf)
//
// A record's user ID is positive, so byte 16 of a record is below 0x80
// and that of a stub is not: that bit tells them apart, in the scripts
// (string.byte(v, 17) > 127) and in Go (isStub). The scripts that meet a
// stub whose digest matches return it, from byte 16 on, and Go follows it
// to the successor's token, which it checks like any other: the stub
// names the successor but vouches for nothing.
type stub struct {
	user idtype.ID // the user of both sessions
	next idtype.ID // the successor
	salt [saltLen]byte
}

const (
	stubLen = 48
	saltLen = 16
)

// isStub reports whether v, a record or a stub from byte 16 on (as the
// scripts return them), is a stub.
func isStub(v string) bool { return len(v) > 0 && v[0] >= 0x80 }

// decodeStub reads a stub from byte 16 on, reporting false for anything
// else.
func decodeStub(v string) (stub, bool) {
	if len(v) != stubLen-digestLen || !isStub(v) {
		return stub{}, false
	}
	st := stub{user: idtype.ID(beUint64(v) &^ (1 << 63)), next: idtype.ID(beUint64(v[8:]))}
	copy(st.salt[:], v[16:])
	return st, st.user > 0 && st.next > 0
}

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

package tokens

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"unicode/utf8"

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

// numSlotTags is how many slot tags there are: a token spells one in
// tagDigits base62 digits, and a key carries it the same way.
const numSlotTags = 1024

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

// maxMetaLen is the most bytes a Metadata field keeps: a field's length
// is one byte of the record.
const maxMetaLen = 255

// newRecord returns the record of a new session of user, whose token has
// the digest d, with each field of meta cut to maxMetaLen.
func newRecord(user idtype.ID, meta Metadata, d *[sha256.Size]byte) record {
	r := record{user: user, meta: Metadata{
		Device:    truncate(meta.Device, maxMetaLen),
		UserAgent: truncate(meta.UserAgent, maxMetaLen),
		IP:        truncate(meta.IP, maxMetaLen),
	}}
	copy(r.digest[:], d[:])
	return r
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut > n-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

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

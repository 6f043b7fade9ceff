package tokens

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"unsafe"

	"github.com/snowkeyhq/snowkey/idtype"
)

// A token is the text a client holds: the configured prefix, an
// underscore, and 63 base62 digits (0-9, A-Z, a-z) in fixed-width fields,
// each a big-endian number padded with leading zeros:
//
//	digits  field
//	    11  session ID, the snowflake: the public handle of the session
//	     2  slot tag, 0..1023: names the Redis hash slot of the user's keys (see slotTag)
//	    44  secret: 256 bits from crypto/rand, as four 64-bit words of 11 digits
//	     6  checksum: CRC-32 (IEEE) of everything before it, prefix included
//
// Every field has exactly one spelling (a field whose digits overflow its
// range is rejected), so a token has exactly one text: the parser and the
// formatter are inverses. The checksum lets Validate turn away typos and
// made-up tokens without asking Redis; it is no defence against forgery,
// which the secret is.
const (
	sidDigits    = 11 // ceil(64 / log2(62))
	tagDigits    = 2
	wordDigits   = 11
	secretWords  = 4
	secretBytes  = secretWords * 8
	sumDigits    = 6 // ceil(32 / log2(62))
	bodyLen      = sidDigits + tagDigits + secretWords*wordDigits + sumDigits
	maxPrefixLen = 16
)

// base62 is the digit alphabet, in ASCII order so that tokens of equal
// length sort like their numbers.
const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// token is a parsed token.
type token struct {
	session idtype.ID
	tag     uint16
	secret  [secretBytes]byte
}

// newToken makes a token with a new session ID and secret for a user of
// the given slot tag, and returns it with its digest.
func (m *Manager) newToken(tag uint16) (token, [sha256.Size]byte, error) {
	sid, err := m.gen.Next()
	if err != nil {
		return token{}, [sha256.Size]byte{}, fmt.Errorf("tokens: new session ID: %w", err)
	}
	t := token{session: sid, tag: tag}
	_, _ = rand.Read(t.secret[:]) // never fails; it crashes the program instead
	return t, m.digest(&t), nil
}

// digest is what a token's secret is checked against: the SHA-256 of
// the token prefix, an underscore and the secret. Covering the prefix
// binds the token to it, so that a token moved to another prefix (and
// given a matching checksum) does not validate on a Manager that uses
// that prefix. The prefix is letters and digits and the secret has a
// fixed length, so the hashed bytes have one reading.
func (m *Manager) digest(t *token) [sha256.Size]byte {
	if m.defences.noPrefixBinding {
		return sha256.Sum256(t.secret[:])
	}
	var b [maxPrefixLen + 1 + secretBytes]byte
	n := copy(b[:], m.opts.TokenPrefix)
	b[n] = '_'
	n++
	n += copy(b[n:], t.secret[:])
	return sha256.Sum256(b[:n])
}

// tokenLen is the length of a token with the given prefix.
func tokenLen(prefix string) int { return len(prefix) + 1 + bodyLen }

// format writes the token with the prefix, as parseToken reads it.
func (t *token) format(prefix string) string {
	b := make([]byte, 0, tokenLen(prefix))
	b = append(b, prefix...)
	b = append(b, '_')
	b = appendBase62(b, uint64(t.session), sidDigits)
	b = appendBase62(b, uint64(t.tag), tagDigits)
	for i := range secretWords {
		b = appendBase62(b, binary.BigEndian.Uint64(t.secret[i*8:]), wordDigits)
	}
	b = appendBase62(b, uint64(checksum(string(b))), sumDigits)
	return string(b)
}

// parseToken reads a token written by format with the same prefix. It
// reports false for anything else: a wrong prefix or length, a byte that
// is not a base62 digit, a field out of its range, a wrong checksum, or a
// session ID that a generator cannot issue (zero). It does not allocate
// and does not panic on any input.
func parseToken(prefix, s string) (token, bool) {
	t, sum, ok := parseFields(prefix, s)
	if !ok || !sumOK(s, sum) {
		return token{}, false
	}
	return t, true
}

// parseFields is parseToken without the checksum test: it returns the
// checksum the token carries, for sumOK. The cache skips that test on a
// hit, because it compares every field, the checksum included, with a
// token that passed it.
func parseFields(prefix, s string) (t token, sum uint32, ok bool) {
	if len(s) != tokenLen(prefix) || s[:len(prefix)] != prefix || s[len(prefix)] != '_' {
		return token{}, 0, false
	}
	body := s[len(prefix)+1:]
	sum64, ok := parseBase62(body[bodyLen-sumDigits:])
	if !ok || sum64 > math.MaxUint32 {
		return token{}, 0, false
	}
	sid, ok := parseBase62(body[:sidDigits])
	if !ok || sid == 0 || sid > math.MaxInt64 {
		return token{}, 0, false
	}
	tag, ok := parseBase62(body[sidDigits : sidDigits+tagDigits])
	if !ok || tag >= numSlotTags {
		return token{}, 0, false
	}
	t.session, t.tag = idtype.ID(sid), uint16(tag)
	words := body[sidDigits+tagDigits:]
	for i := range secretWords {
		w, ok := parseBase62(words[i*wordDigits : (i+1)*wordDigits])
		if !ok {
			return token{}, 0, false
		}
		binary.BigEndian.PutUint64(t.secret[i*8:], w)
	}
	return t, uint32(sum64), true
}

// sumOK reports whether sum is the checksum of the token s.
func sumOK(s string, sum uint32) bool {
	return sum == checksum(s[:len(s)-sumDigits])
}

// appendBase62 appends v as exactly width base62 digits; v must fit.
func appendBase62(b []byte, v uint64, width int) []byte {
	n := len(b)
	b = append(b, make([]byte, width)...)
	for i := n + width - 1; i >= n; i-- {
		b[i] = base62[v%62]
		v /= 62
	}
	return b
}

// parseBase62 reads a string of base62 digits as a uint64, reporting false
// for an empty string, a byte that is not a digit, or a value past 2^64-1.
func parseBase62(s string) (uint64, bool) {
	if len(s) == 0 {
		return 0, false
	}
	var v uint64
	i := 0
	// 62^10 < 2^64: the first ten digits cannot overflow. Taking them in
	// pairs halves the chain of multiplications.
	for n := min(len(s), 10); i+1 < n; i += 2 {
		d0, d1 := digits62[s[i]], digits62[s[i+1]]
		if (d0|d1)&0xc0 != 0 { // not a digit: 0xff
			return 0, false
		}
		v = v*(62*62) + uint64(d0)*62 + uint64(d1)
	}
	for ; i < len(s); i++ {
		d := digits62[s[i]]
		if d == 0xff {
			return 0, false
		}
		hi, lo := bits.Mul64(v, 62)
		lo, carry := bits.Add64(lo, uint64(d), 0)
		if hi != 0 || carry != 0 {
			return 0, false
		}
		v = lo
	}
	return v, true
}

// digits62 maps a byte to its base62 value, or 0xff for a byte that is not
// a base62 digit.
const digits62 = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\xff\xff\xff\xff\xff\xff" +
	"\xff\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18" +
	"\x19\x1a\x1b\x1c\x1d\x1e\x1f\x20\x21\x22\x23\xff\xff\xff\xff\xff" +
	"\xff\x24\x25\x26\x27\x28\x29\x2a\x2b\x2c\x2d\x2e\x2f\x30\x31\x32" +
	"\x33\x34\x35\x36\x37\x38\x39\x3a\x3b\x3c\x3d\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff" +
	"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"

// checksum is the CRC-32 (IEEE) of s. It hands hash/crc32 the string's own
// bytes, which crc32 only reads: copying them to a []byte would cost an
// allocation on every Validate, since crc32's entry points let their
// argument escape.
func checksum(s string) uint32 {
	return crc32.ChecksumIEEE(unsafe.Slice(unsafe.StringData(s), len(s)))
}

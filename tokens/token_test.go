package tokens

import (
	"bytes"
	"hash/crc32"
	"math"
	"strings"
	"testing"

	"github.com/snowkeyhq/snowkey/idtype"
)

func TestTokenRoundTrip(t *testing.T) {
	var ones [secretBytes]byte
	for i := range ones {
		ones[i] = 0xff
	}
	var counting [secretBytes]byte
	for i := range counting {
		counting[i] = byte(i)
	}
	tests := []struct {
		prefix string
		tok    token
	}{
		{"snk", token{session: 1, tag: 0}},
		{"snk", token{session: idtype.MaxID, tag: numSlotTags - 1, secret: ones}},
		{"a", token{session: 1863486340915077120, tag: 517, secret: counting}},
		{"ABCDEFGHIJKLMNOP", token{session: 42, tag: 9, secret: ones}},
	}
	for _, tt := range tests {
		s := tt.tok.format(tt.prefix)
		if len(s) != tokenLen(tt.prefix) {
			t.Errorf("%q: length %d, want %d", s, len(s), tokenLen(tt.prefix))
		}
		if !strings.HasPrefix(s, tt.prefix+"_") {
			t.Errorf("%q does not start with %q", s, tt.prefix+"_")
		}
		got, ok := parseToken(tt.prefix, s)
		if !ok || got != tt.tok {
			t.Errorf("parseToken(%q) = %+v, %v; want %+v", s, got, ok, tt.tok)
		}
	}
}

// withSum completes prefix_body (without its checksum) with a valid
// checksum, to make tokens that are wrong only in their fields.
func withSum(s string) string {
	return string(appendBase62([]byte(s), uint64(checksum(s)), sumDigits))
}

func TestParseTokenRejects(t *testing.T) {
	good := (&token{session: 1863486340915077120, tag: 517}).format("snk")
	body := good[4 : len(good)-sumDigits] // without prefix and checksum
	sid, tag, secret := body[:sidDigits], body[sidDigits:sidDigits+tagDigits], body[sidDigits+tagDigits:]
	maxU64 := string(appendBase62(nil, math.MaxUint64, 11)) // "LygHa16AHYF"
	tests := []struct{ name, s string }{
		{"empty", ""},
		{"prefix only", "snk_"},
		{"no underscore", "snk" + good[4:] + "0"},
		{"wrong prefix", "snx" + good[3:]},
		{"prefix case", "SNK" + good[3:]},
		{"one short", good[:len(good)-1]},
		{"one long", good + "0"},
		{"flipped checksum digit", good[:len(good)-1] + string(good[len(good)-1]^1)},
		{"flipped secret digit", good[:30] + string(good[30]^1) + good[31:]},
		{"non-base62 byte", withSum("snk_" + sid + tag + "-" + secret[1:])},
		{"NUL byte", withSum("snk_" + sid + tag + "\x00" + secret[1:])},
		{"high byte", withSum("snk_" + sid + tag + "\xff" + secret[1:])},
		{"session ID zero", withSum("snk_" + strings.Repeat("0", sidDigits) + tag + secret)},
		{"session ID past int64", withSum("snk_" + string(appendBase62(nil, math.MaxInt64+1, 11)) + tag + secret)},
		{"session ID past uint64", withSum("snk_" + "zzzzzzzzzzz" + tag + secret)},
		{"slot tag 1024", withSum("snk_" + sid + string(appendBase62(nil, numSlotTags, tagDigits)) + secret)},
		{"secret word past uint64", withSum("snk_" + sid + tag + "LygHa16AHYG" + secret[11:])},
		{"checksum past uint32", "snk_" + body + "zzzzzz"},
		{"checksum of another prefix", "snk_" + body + good[len(good)-sumDigits:][:0] + string(appendBase62(nil, uint64(checksum("abc_"+body)), sumDigits))},
	}
	if maxU64 != "LygHa16AHYF" {
		t.Fatalf("2^64-1 in base62 = %q, want LygHa16AHYF", maxU64)
	}
	if _, ok := parseToken("snk", good); !ok {
		t.Fatalf("the good token %q does not parse", good)
	}
	for _, tt := range tests {
		if tok, ok := parseToken("snk", tt.s); ok {
			t.Errorf("%s: parseToken(%q) = %+v, want rejection", tt.name, tt.s, tok)
		}
	}
}

func TestParseBase62(t *testing.T) {
	tests := []struct {
		s    string
		want uint64
		ok   bool
	}{
		{"0", 0, true},
		{"z", 61, true},
		{"10", 62, true},
		{"00000000000", 0, true},
		{"LygHa16AHYF", math.MaxUint64, true},
		{"LygHa16AHYG", 0, false},
		{"zzzzzzzzzzz", 0, false},
		{"", 0, false},
		{"+1", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseBase62(tt.s)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseBase62(%q) = %d, %v; want %d, %v", tt.s, got, ok, tt.want, tt.ok)
		}
	}
}

func TestChecksumIsCRC32(t *testing.T) {
	for _, s := range []string{"", "a", "snk_" + strings.Repeat("Zz9", 19)} {
		if got, want := checksum(s), crc32.ChecksumIEEE([]byte(s)); got != want {
			t.Errorf("checksum(%q) = %08x, want CRC-32 %08x", s, got, want)
		}
	}
}

func TestParseTokenDoesNotAllocate(t *testing.T) {
	s := (&token{session: 1863486340915077120, tag: 517}).format("snk")
	if n := testing.AllocsPerRun(100, func() { parseToken("snk", s) }); n != 0 {
		t.Errorf("parseToken allocates %v times", n)
	}
}

func TestSlotTagSpread(t *testing.T) {
	// Snowflakes of one worker in one millisecond differ only in their low
	// bits; the tags must still spread over all 1024 values.
	var counts [numSlotTags]int
	base := idtype.ID(1863486340915077120)
	const n = 1 << 17
	for i := range n {
		tag := slotTag(base + idtype.ID(i))
		if tag >= numSlotTags {
			t.Fatalf("slotTag = %d, past %d", tag, numSlotTags-1)
		}
		counts[tag]++
	}
	lo, hi := n, 0
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	if mean := n / numSlotTags; lo < mean/2 || hi > mean*2 {
		t.Errorf("tag counts range %d..%d, mean %d: poorly spread", lo, hi, mean)
	}
	// The function is part of the storage format: it must never change.
	if got := slotTag(1863486340915077120); got != golden {
		t.Errorf("slotTag(1863486340915077120) = %d, want %d (the stored format depends on it)", got, golden)
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"},                  // é is 2 bytes: do not split it
		{"a€b", 3, "a"},                 // € is 3 bytes
		{"a€b", 4, "a€"},                //
		{"\x80\x80\x80\x80\x80", 2, ""}, // continuation bytes only: cut before them
	}
	for _, tt := range tests {
		if got := truncate(tt.s, tt.n); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
	long := strings.Repeat("x", 300)
	if got := truncate(long, maxMetaLen); len(got) != maxMetaLen || !bytes.Equal([]byte(got), []byte(long[:maxMetaLen])) {
		t.Errorf("truncate to %d: %d bytes", maxMetaLen, len(got))
	}
}

// golden is slotTag(1863486340915077120), fixed forever.
const golden = 88

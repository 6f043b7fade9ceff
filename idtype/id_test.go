package idtype

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// Boundary values every encoding is checked with: 2^53±1 is where a
// JavaScript number starts to round, 2^63-1 is the largest ID.
var boundaryIDs = []ID{0, 1, 1<<53 - 1, 1 << 53, 1<<53 + 1, 1288834974657 << 22, math.MaxInt64 - 1, math.MaxInt64}

// badInputs are decimal inputs every text decoder must refuse, with the
// kind of error each must wrap.
var badInputs = []struct {
	in   string
	want error
}{
	{"", ErrEmpty},
	{" 1", ErrSyntax},
	{"1 ", ErrSyntax},
	{"1 2", ErrSyntax},
	{"\t1", ErrSyntax},
	{"+1", ErrSyntax},
	{"-", ErrSyntax},
	{"-1", ErrNegative},
	{"-9223372036854775808", ErrNegative},
	{"-1x", ErrSyntax},
	{"1.0", ErrSyntax},
	{"1.5", ErrSyntax},
	{".5", ErrSyntax},
	{"1e3", ErrSyntax},
	{"1E3", ErrSyntax},
	{"0x10", ErrSyntax},
	{"1_000", ErrSyntax},
	{"abc", ErrSyntax},
	{"１", ErrSyntax}, // a full-width digit is not a digit
	{"9223372036854775808", ErrRange},
	{"18446744073709551616", ErrRange},
	{"99999999999999999999999999", ErrRange},
	{"99999999999999999999999999x", ErrSyntax},
	{"NaN", ErrSyntax},
	{"null", ErrSyntax},
	{"00", ErrSyntax},
	{"007", ErrSyntax},
	{"0000000000000000000000000009223372036854775807", ErrSyntax},
	{"09223372036854775808", ErrSyntax}, // a second spelling is refused before its size
}

func TestParse(t *testing.T) {
	good := []struct {
		in   string
		want ID
	}{
		{"0", 0},
		{"1", 1},
		{"10", 10},
		{"9007199254740991", 1<<53 - 1},
		{"9007199254740993", 1<<53 + 1},
		{"9223372036854775807", math.MaxInt64},
	}
	for _, tc := range good {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range badInputs {
		got, err := Parse(tc.in)
		if !errors.Is(err, tc.want) {
			t.Errorf("Parse(%q) = %d, %v; want an error wrapping %v", tc.in, got, err, tc.want)
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Op != "parse" {
			t.Errorf("Parse(%q) error %#v is not an *Error for op parse", tc.in, err)
		}
		if !strings.Contains(err.Error(), quoteInput(tc.in)) {
			t.Errorf("Parse(%q) error %q does not name the input", tc.in, err)
		}
	}
}

func TestParseErrorDetail(t *testing.T) {
	for _, tc := range []struct{ in, detail string }{
		{" 1", "space"},
		{"+1", "sign"},
		{"1.5", "fraction"},
		{"1e9", "exponent"},
		{"12a", `'a' at offset 2`},
		{"007", "leading zero at offset 0"},
		{"0x10", `'x' at offset 1`},
	} {
		_, err := Parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.detail) {
			t.Errorf("Parse(%q) error %v; want it to mention %q", tc.in, err, tc.detail)
		}
	}
}

func TestParseErrorCutsLongInput(t *testing.T) {
	long := strings.Repeat("x", 10_000)
	_, err := Parse(long)
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("error for a 10,000-byte input is %d bytes long: %v", len(err.Error()), err)
	}
	if !strings.Contains(err.Error(), "10000 bytes") {
		t.Errorf("error %q does not say how long the input was", err)
	}
}

func TestStringRoundTrip(t *testing.T) {
	for _, id := range boundaryIDs {
		got, err := Parse(id.String())
		if err != nil || got != id {
			t.Errorf("Parse(%q) = %d, %v; want %d", id.String(), got, err, id)
		}
	}
}

func TestTime(t *testing.T) {
	// ID 0 decodes to the epoch itself.
	if got := ID(0).Time(); !got.Equal(DefaultLayout.Epoch) {
		t.Errorf("ID(0).Time() = %v; want the epoch %v", got, DefaultLayout.Epoch)
	}
	// One million ms after the epoch, worker 5, sequence 7, put together
	// by hand from the 41/10/12 definition.
	id := ID(1_000_000<<22 | 5<<12 | 7)
	if got, want := id.Time().UnixMilli(), int64(1288834974657+1_000_000); got != want {
		t.Errorf("Time() of %d = %d ms; want %d", id, got, want)
	}
}

package idtype

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestMarshalGQL(t *testing.T) {
	for _, id := range boundaryIDs {
		var b strings.Builder
		id.MarshalGQL(&b)
		if want := `"` + id.String() + `"`; b.String() != want {
			t.Errorf("MarshalGQL(%d) = %s; want %s", id, b.String(), want)
		}
		// What it writes is a JSON string whose text reads back.
		var s string
		if err := json.Unmarshal([]byte(b.String()), &s); err != nil {
			t.Fatalf("MarshalGQL(%d) wrote %s, no JSON string: %v", id, b.String(), err)
		}
		var back ID
		if err := back.UnmarshalGQL(s); err != nil || back != id {
			t.Errorf("UnmarshalGQL(%q) = %d, %v; want %d", s, back, err, id)
		}
	}
}

func TestUnmarshalGQL(t *testing.T) {
	good := []struct {
		in   any
		want ID
	}{
		{"123", 123},
		{"0", 0},
		{"9007199254740993", 1<<53 + 1},
		{"9223372036854775807", MaxID},
		{int64(9007199254740993), 1<<53 + 1}, // an integer literal, exact
		{int64(math.MaxInt64), MaxID},
		{int(7), 7},
		{int32(7), 7},
		{uint64(math.MaxInt64), MaxID},
		{uint32(math.MaxUint32), math.MaxUint32},
		{json.Number("9007199254740993"), 1<<53 + 1}, // a JSON variable read with UseNumber, as gqlgen reads them
	}
	for _, tc := range good {
		id := ID(42)
		if err := id.UnmarshalGQL(tc.in); err != nil || id != tc.want {
			t.Errorf("UnmarshalGQL(%T %v) = %d, %v; want %d", tc.in, tc.in, id, err, tc.want)
		}
	}

	bad := []struct {
		in    any
		kind  error
		input string
	}{
		{"", ErrEmpty, `""`},
		{"12a", ErrSyntax, `"12a"`},
		{"007", ErrSyntax, `"007"`},
		{" 1", ErrSyntax, `" 1"`},
		{"-1", ErrNegative, `"-1"`},
		{"9223372036854775808", ErrRange, `"9223372036854775808"`},
		{int64(-1), ErrNegative, "int64(-1)"},
		{int(-5), ErrNegative, "int(-5)"},
		{uint64(math.MaxInt64 + 1), ErrRange, "uint64(9223372036854775808)"},
		{json.Number("1e3"), ErrSyntax, `"1e3"`},   // not exact: an exponent
		{json.Number("1.0"), ErrSyntax, `"1.0"`},   // not exact: a fraction
		{json.Number("-0"), ErrNegative, `"-0"`},   // no sign
		{json.Number("1E20"), ErrSyntax, `"1E20"`}, // past the range too, but first not exact
		{json.Number("99999999999999999999"), ErrRange, `"99999999999999999999"`},
		{float64(7), ErrUnsupportedType, "float64(7)"}, // whole, but a float may be rounded already
		{float64(9007199254740992), ErrUnsupportedType, "float64(9.007199254740992e+15)"},
		{float32(1.5), ErrUnsupportedType, "float32(1.5)"},
		{nil, ErrNull, "null"},
		{true, ErrKind, "bool(true)"},
		{[]any{"1"}, ErrKind, "[]interface {}([1])"},
		{map[string]any{"id": "1"}, ErrKind, "map[string]interface {}(map[id:1])"},
		{[]byte("1"), ErrUnsupportedType, "[]uint8([49])"},
	}
	for _, tc := range bad {
		id := ID(42)
		err := id.UnmarshalGQL(tc.in)
		var e *Error
		switch {
		case !errors.As(err, &e):
			t.Errorf("UnmarshalGQL(%T %v) = %v, not an *Error", tc.in, tc.in, err)
		case !errors.Is(err, tc.kind):
			t.Errorf("UnmarshalGQL(%T %v) = %v; want %v", tc.in, tc.in, err, tc.kind)
		case e.Op != "unmarshal GraphQL" || e.Input != tc.input:
			t.Errorf("UnmarshalGQL(%T %v): Op %q, Input %q; want %q", tc.in, tc.in, e.Op, e.Input, tc.input)
		}
		if id != 42 {
			t.Errorf("UnmarshalGQL(%T %v) failed but changed the ID to %d", tc.in, tc.in, id)
		}
	}
}

// FuzzUnmarshalGQL checks UnmarshalGQL, on the text of a string and of a
// json.Number and on the integer the text stands for, against Parse and
// strconv: each form accepts exactly the one spelling, and the integer
// form exactly 0 to MaxID.
func FuzzUnmarshalGQL(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		for _, v := range []any{s, json.Number(s)} {
			id := ID(42)
			err := id.UnmarshalGQL(v)
			if err != nil && id != 42 {
				t.Fatalf("UnmarshalGQL(%T %q): %v, but the ID changed to %d", v, s, err, id)
			}
			if err == nil {
				checkAgainstStrconv(t, s, id, err)
				var b strings.Builder
				id.MarshalGQL(&b)
				if b.String() != strconv.Quote(s) {
					t.Fatalf("UnmarshalGQL(%T %q) then MarshalGQL wrote %s", v, s, b.String())
				}
			} else {
				checkAgainstStrconv(t, s, 42, err)
			}
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			var id ID
			err := id.UnmarshalGQL(n)
			if (n < 0) != errors.Is(err, ErrNegative) || (n >= 0 && (err != nil || id != ID(n))) {
				t.Fatalf("UnmarshalGQL(int64 %d) = %d, %v", n, id, err)
			}
		}
	})
}

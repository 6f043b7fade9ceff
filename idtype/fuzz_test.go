package idtype

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

func addSeeds(f *testing.F) {
	for _, id := range boundaryIDs {
		f.Add(id.String())
	}
	for _, tc := range badInputs {
		f.Add(tc.in)
	}
	for _, s := range []string{`"123"`, `null`, `"\u0031"`, `1.5`, `true`, `{}`, `"`, `-0`, "00", "007", `"007"`, `" "`} {
		f.Add(s)
	}
}

// checkAgainstStrconv checks Parse's verdict against strconv, the
// reference: a plain unsigned decimal without leading zeros ("0" itself is
// one) that fits in int64. What is accepted is the ID's one spelling.
func checkAgainstStrconv(t *testing.T, s string, id ID, err error) {
	t.Helper()
	want, werr := strconv.ParseUint(s, 10, 63)
	plain := len(s) > 0 && allDigits(s) && (s == "0" || s[0] != '0')
	switch {
	case err == nil && (!plain || werr != nil || ID(want) != id):
		t.Fatalf("accepted %q as %d; strconv says %d, %v", s, id, want, werr)
	case err == nil && s != id.String():
		t.Fatalf("accepted %q as %d, whose spelling is %q", s, id, id.String())
	case err != nil && plain && werr == nil:
		t.Fatalf("refused %q (%v); strconv reads %d", s, err, want)
	case err != nil:
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("error for %q is %T, not *Error", s, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		checkAgainstStrconv(t, s, id, err)
		if err == nil {
			if back, err := Parse(id.String()); err != nil || back != id {
				t.Fatalf("round trip of %d: %d, %v", id, back, err)
			}
		}
	})
}

func FuzzUnmarshalText(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		var id ID
		err := id.UnmarshalText([]byte(s))
		checkAgainstStrconv(t, s, id, err)
		if err == nil {
			b, _ := id.MarshalText()
			var back ID
			if err := back.UnmarshalText(b); err != nil || back != id {
				t.Fatalf("round trip of %d: %d, %v", id, back, err)
			}
		}
	})
}

func FuzzUnmarshalJSON(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		id := ID(42)
		err := json.Unmarshal([]byte(s), &id)
		if err != nil {
			if id != 42 {
				t.Fatalf("%q: error %v but the ID changed to %d", s, err, id)
			}
			return
		}
		// Whatever was accepted is valid JSON whose value is a plain
		// decimal, as a number or a string, or null.
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("accepted %q, which encoding/json finds invalid: %v", s, err)
		}
		if v == nil {
			if id != 42 {
				t.Fatalf("null changed the ID to %d", id)
			}
			return
		}
		var text string
		switch v := v.(type) {
		case string:
			text = v
		case float64:
			d := json.NewDecoder(strings.NewReader(s))
			d.UseNumber()
			var n json.Number
			if err := d.Decode(&n); err != nil {
				t.Fatal(err)
			}
			text = n.String()
		default:
			t.Fatalf("accepted %q, a JSON %T", s, v)
		}
		want, err := Parse(text)
		if err != nil || want != id {
			t.Fatalf("accepted %q as %d; its text %q parses to %d, %v", s, id, text, want, err)
		}
		b, _ := json.Marshal(id)
		var back ID
		if err := json.Unmarshal(b, &back); err != nil || back != id {
			t.Fatalf("round trip of %d through %s: %d, %v", id, b, back, err)
		}
	})
}

func FuzzScan(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		var a, b ID
		errA := a.Scan(s)
		errB := b.Scan([]byte(s))
		checkAgainstStrconv(t, s, a, errA)
		if a != b || (errA == nil) != (errB == nil) {
			t.Fatalf("Scan(string %q) = %d, %v but Scan([]byte) = %d, %v", s, a, errA, b, errB)
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			var c ID
			err := c.Scan(n)
			if (n < 0) != errors.Is(err, ErrNegative) || (n >= 0 && c != ID(n)) {
				t.Fatalf("Scan(int64 %d) = %d, %v", n, c, err)
			}
		}
	})
}

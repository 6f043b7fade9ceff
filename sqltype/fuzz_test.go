package sqltype

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/snowkeyhq/snowkey/idtype"
)

func addArraySeeds(f *testing.F) {
	for _, s := range []string{
		"{}", "{1}", "{1,2,3}", " { 1 , 2 } ", `{"1","2"}`, `{"1\2"}`, "[0:1]={5,6}", "[-2:-2]={7}",
		"{1,NULL}", "{{1,2},{3,4}}", "[1:2][1:2]={{1,2},{3,4}}", "{9223372036854775807}",
		"{9223372036854775808}", "{-1}", "{1,,2}", "{", "}", "[", "[1:", "{\"", "{1 2}", "",
	} {
		f.Add(s)
	}
}

// checkError fails unless err is an *idtype.Error, the one error type of
// bad input.
func checkError(t *testing.T, in string, err error) {
	t.Helper()
	var e *idtype.Error
	if !errors.As(err, &e) {
		t.Fatalf("error for %q is %T (%v), not *idtype.Error", in, err, err)
	}
}

func FuzzIDsScan(f *testing.F) {
	addArraySeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		var ids IDs
		err := ids.Scan(s)
		var fromBytes IDs
		errBytes := fromBytes.Scan([]byte(s))
		if (err == nil) != (errBytes == nil) || !reflect.DeepEqual(ids, fromBytes) {
			t.Fatalf("string and []byte disagree on %q: %v, %v / %v, %v", s, ids, err, fromBytes, errBytes)
		}
		if err != nil {
			checkError(t, s, err)
			return
		}
		for _, id := range ids {
			if id < 0 {
				t.Fatalf("%q gave a negative element: %v", s, ids)
			}
		}
		v, err := ids.Value()
		if err != nil {
			t.Fatalf("Value of %v from %q: %v", ids, s, err)
		}
		var back IDs
		if err := back.Scan(v); err != nil || !reflect.DeepEqual(back, ids) {
			t.Fatalf("round trip of %v (from %q): %v, %v", ids, s, back, err)
		}
	})
}

func FuzzIDsUnmarshalJSON(f *testing.F) {
	for _, s := range []string{`null`, `[]`, `["1",2]`, `["\u0031"]`, `[null]`, `[[1]]`, `{}`, `"1"`, `[1.5]`, `["-1"]`, `[`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var ids IDs
		if err := ids.UnmarshalJSON([]byte(s)); err != nil {
			checkError(t, s, err)
			return
		}
		b, err := json.Marshal(ids)
		if err != nil {
			t.Fatalf("Marshal of %v (from %q): %v", ids, s, err)
		}
		var back IDs
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, ids) {
			t.Fatalf("round trip of %v (from %q) via %s: %v, %v", ids, s, b, back, err)
		}
	})
}

func FuzzNullIDUnmarshalJSON(f *testing.F) {
	for _, s := range []string{`null`, `"1"`, `1`, `"-1"`, `true`, `""`, ` null `, `"\u0031"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n NullID
		if err := n.UnmarshalJSON([]byte(s)); err != nil {
			checkError(t, s, err)
			if n != (NullID{}) {
				t.Fatalf("failed UnmarshalJSON(%q) changed the value to %+v", s, n)
			}
			return
		}
		b, err := json.Marshal(n)
		if err != nil {
			t.Fatalf("Marshal of %+v (from %q): %v", n, s, err)
		}
		var back NullID
		if err := json.Unmarshal(b, &back); err != nil || back != n {
			t.Fatalf("round trip of %+v (from %q) via %s: %+v, %v", n, s, b, back, err)
		}
	})
}

func FuzzNullIDScan(f *testing.F) {
	for _, s := range []string{"1", "", "-1", "x", "9223372036854775808", "007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n NullID
		if err := n.Scan(s); err != nil {
			checkError(t, s, err)
			return
		}
		v, err := n.Value()
		if err != nil || !n.Valid {
			t.Fatalf("Value of %+v (from %q): %v, %v", n, s, v, err)
		}
		var back NullID
		if err := back.Scan(v); err != nil || back != n {
			t.Fatalf("round trip of %+v (from %q): %+v, %v", n, s, back, err)
		}
	})
}

package sqltype

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

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
		// Bytes that start with 0 are the binary form (FuzzIDsScanBinary);
		// no text does.
		if isBinaryArray([]byte(s)) {
			if err == nil {
				t.Fatalf("text %q, which starts with a 0 byte, was read as %v", s, ids)
			}
			return
		}
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

// FuzzIDsScanBinary feeds Scan PostgreSQL's binary array format, as pgx
// hands it over: no panic, a typed error that leaves the IDs alone, or IDs
// that agree with pgx's own decoding of the same bytes and survive a round
// trip through pgx's encoder.
func FuzzIDsScanBinary(f *testing.F) {
	m := pgtype.NewMap()
	enc := func(oid uint32, v any) []byte {
		// A fresh map each time: a map that planned []int64 for _int8
		// fails to encode [][]int64 (pgx v5.12).
		b, err := pgtype.NewMap().Encode(oid, pgtype.BinaryFormatCode, v, nil)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	for _, b := range [][]byte{
		enc(pgtype.Int8ArrayOID, []int64{1, 2, 1<<63 - 1}),
		enc(pgtype.Int8ArrayOID, []int64{}),
		enc(pgtype.Int8ArrayOID, []*int64{nil}),
		enc(pgtype.Int8ArrayOID, []int64{-1}),
		enc(pgtype.Int8ArrayOID, [][]int64{{1}, {2}}),
		enc(pgtype.Int4ArrayOID, []int32{5}),
		enc(pgtype.Int2ArrayOID, []int16{5}),
		enc(pgtype.TextArrayOID, []string{"12", "x"}),
		enc(pgtype.Float8ArrayOID, []float64{3}),
		{0, 0, 0, 1},
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !isBinaryArray(b) {
			return // text: FuzzIDsScan
		}
		ids := IDs{42}
		if err := ids.Scan(b); err != nil {
			checkError(t, string(b), err)
			if !reflect.DeepEqual(ids, IDs{42}) {
				t.Fatalf("failed Scan of %x changed the IDs to %v", b, ids)
			}
			return
		}
		for _, id := range ids {
			if id < 0 {
				t.Fatalf("%x gave a negative element: %v", b, ids)
			}
		}
		if len(b) >= 12 && binary.BigEndian.Uint32(b[8:]) == oidInt8 {
			var theirs []int64
			if err := m.Scan(pgtype.Int8ArrayOID, pgtype.BinaryFormatCode, b, &theirs); err != nil {
				t.Fatalf("Scan read %x as %v; pgx refuses it: %v", b, ids, err)
			}
			if len(theirs) != len(ids) {
				t.Fatalf("Scan read %x as %v; pgx as %v", b, ids, theirs)
			}
			for i := range ids {
				if int64(ids[i]) != theirs[i] {
					t.Fatalf("Scan read %x as %v; pgx as %v", b, ids, theirs)
				}
			}
		}
		back, err := m.Encode(pgtype.Int8ArrayOID, pgtype.BinaryFormatCode, ids, nil)
		if err != nil {
			t.Fatalf("encode %v (from %x): %v", ids, b, err)
		}
		var again IDs
		if err := again.Scan(back); err != nil || !reflect.DeepEqual(again, ids) {
			t.Fatalf("round trip of %v (from %x): %v, %v", ids, b, again, err)
		}
	})
}

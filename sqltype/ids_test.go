package sqltype

import (
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/snowkeyhq/snowkey/idtype"
)

func TestIDsScan(t *testing.T) {
	good := []struct {
		src  any
		want IDs
	}{
		{nil, nil},
		{"{}", IDs{}},
		{[]byte("{}"), IDs{}},
		{"{1}", IDs{1}},
		{"{1,2,3}", IDs{1, 2, 3}},
		{"{0,9223372036854775807}", IDs{0, idtype.MaxID}},
		{[]byte("{1541815603606036480,9007199254740993}"), IDs{1541815603606036480, 1<<53 + 1}},
		{" { 1 , 2 } ", IDs{1, 2}}, // array_in allows spaces
		{`{"1","2"}`, IDs{1, 2}},   // and quoted elements
		{`{"1\2"}`, IDs{12}},       // with escapes
		{"[0:1]={5,6}", IDs{5, 6}}, // and a lower bound other than 1
		{"[-2:-2]={7}", IDs{7}},    // even a negative one
		{"{1,1,1}", IDs{1, 1, 1}},  // duplicates are the caller's business
		{"{\t1,\n2\r}", IDs{1, 2}}, // any space array_in skips
		{"{" + strings.Repeat("1,", 999) + "1}", manyOnes(1000)},
	}
	for _, tc := range good {
		ids := IDs{42}
		if err := ids.Scan(tc.src); err != nil || !reflect.DeepEqual(ids, tc.want) {
			t.Errorf("Scan(%#v) = %v, %v; want %v", tc.src, ids, err, tc.want)
		}
	}

	bad := []struct {
		src     any
		want    error
		mention string
	}{
		{"", ErrArraySyntax, `""`},
		{"1,2", ErrArraySyntax, "want '{'"},
		{"{1,2", ErrArraySyntax, "missing '}'"},
		{"{1,2}}", ErrArraySyntax, "after the closing"},
		{"{1,,2}", ErrArraySyntax, "empty element 1"},
		{"{,}", ErrArraySyntax, "empty element 0"},
		{"{1 2}", ErrArraySyntax, "after element 0"},
		{`{"1}`, ErrArraySyntax, "unterminated"},
		{`{"1\`, ErrArraySyntax, "unterminated"},
		{"{1,NULL}", idtype.ErrNull, "element 1"},
		{"{null}", idtype.ErrNull, "element 0"},
		{"{1,-2}", idtype.ErrNegative, `element 1 "-2"`},
		{"{x}", idtype.ErrSyntax, `element 0 "x"`},
		{"{1.5}", idtype.ErrSyntax, "fraction"},
		{"{1e3}", idtype.ErrSyntax, "exponent"},
		{"{007}", idtype.ErrSyntax, `element 0 "007": not a decimal integer: leading zero`}, // one spelling, as Parse
		{`{"007"}`, idtype.ErrSyntax, "leading zero"},
		{`{""}`, idtype.ErrEmpty, "element 0"},
		{"{9223372036854775808}", idtype.ErrRange, "element 0"},
		{"{{1,2},{3,4}}", ErrDimensions, "nested"},
		{"[1:2][1:2]={{1,2},{3,4}}", ErrDimensions, "second dimension"},
		{"[1:3]={1,2}", ErrArraySyntax, "bounds say 3"},
		{"[1:x]={1}", ErrArraySyntax, "bounds"},
		{"[5:1]={1}", ErrArraySyntax, "bounds"},
		{"(1,2)", ErrArraySyntax, "want '{'"},
		{int64(5), idtype.ErrUnsupportedType, "int64(5)"},
		{[]int64{1}, idtype.ErrUnsupportedType, "[]int64"},
		{"{" + strings.Repeat("9", 200) + "}", idtype.ErrRange, "bytes)"}, // long input is cut
	}
	for _, tc := range bad {
		ids := IDs{42}
		err := ids.Scan(tc.src)
		var e *idtype.Error
		if !errors.Is(err, tc.want) || !errors.As(err, &e) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("Scan(%#v) = %v; want an *idtype.Error wrapping %q that mentions %q", tc.src, err, tc.want, tc.mention)
		}
		if !reflect.DeepEqual(ids, IDs{42}) {
			t.Errorf("Scan(%#v) changed the value to %v", tc.src, ids)
		}
	}
}

func manyOnes(n int) IDs {
	ids := make(IDs, n)
	for i := range ids {
		ids[i] = 1
	}
	return ids
}

func TestIDsValue(t *testing.T) {
	tests := []struct {
		ids     IDs
		want    driver.Value
		wantErr error
	}{
		{nil, nil, nil},
		{IDs{}, "{}", nil},
		{IDs{1}, "{1}", nil},
		{IDs{0, 1541815603606036480, idtype.MaxID}, "{0,1541815603606036480,9223372036854775807}", nil},
		{IDs{1, -2}, nil, idtype.ErrNegative},
	}
	for _, tc := range tests {
		v, err := tc.ids.Value()
		if v != tc.want || !errors.Is(err, tc.wantErr) {
			t.Errorf("%v.Value() = %#v, %v; want %#v, %v", tc.ids, v, err, tc.want, tc.wantErr)
		}
		if err != nil {
			continue
		}
		var back IDs
		if err := back.Scan(v); err != nil || !reflect.DeepEqual(back, tc.ids) {
			t.Errorf("Scan(Value(%v)) = %v, %v", tc.ids, back, err)
		}
	}
}

func TestIDsJSON(t *testing.T) {
	marshal := []struct {
		ids  IDs
		want string
	}{
		{nil, `null`},
		{IDs{}, `[]`},
		{IDs{0}, `["0"]`},
		{IDs{1541815603606036480, 9007199254740993, idtype.MaxID},
			`["1541815603606036480","9007199254740993","9223372036854775807"]`},
	}
	for _, tc := range marshal {
		b, err := json.Marshal(tc.ids)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", tc.ids, b, err, tc.want)
		}
		in := struct {
			P *IDs `json:"p"`
			V IDs  `json:"v"`
		}{&tc.ids, tc.ids}
		b, err = json.Marshal(in)
		if want := `{"p":` + tc.want + `,"v":` + tc.want + `}`; err != nil || string(b) != want {
			t.Errorf("Marshal in a struct = %s, %v; want %s", b, err, want)
		}
	}
	// encoding/json writes IDs through its elements' MarshalText; a
	// MarshalJSON would have its output re-scanned (see ids.go).
	if _, ok := any(IDs{}).(json.Marshaler); ok {
		t.Error("IDs implements json.Marshaler")
	}

	unmarshal := []struct {
		in      string
		want    IDs
		wantErr error
		mention string
	}{
		{`null`, nil, nil, ""},
		{`[]`, IDs{}, nil, ""},
		{` [ "1" , 2 ] `, IDs{1, 2}, nil, ""},
		{`["1541815603606036480",9007199254740993]`, IDs{1541815603606036480, 1<<53 + 1}, nil, ""},
		{`["\u0031"]`, IDs{1}, nil, ""},
		{`"1"`, IDs{42}, idtype.ErrKind, "want an array"},
		{`{}`, IDs{42}, idtype.ErrKind, "want an array"},
		{`5`, IDs{42}, idtype.ErrKind, "want an array"},
		{`["1",null]`, IDs{42}, idtype.ErrKind, "element 1"},
		{`[true]`, IDs{42}, idtype.ErrKind, "element 0"},
		{`[[1]]`, IDs{42}, idtype.ErrKind, "element 0"},
		{`["1","-2"]`, IDs{42}, idtype.ErrNegative, `element 1 "\"-2\""`},
		{`[1.5]`, IDs{42}, idtype.ErrSyntax, "element 0"},
		{`["x"]`, IDs{42}, idtype.ErrSyntax, "element 0"},
		{`[9223372036854775808]`, IDs{42}, idtype.ErrRange, "element 0"},
		{`["1",]`, IDs{42}, idtype.ErrSyntax, ""},
		{`[`, IDs{42}, idtype.ErrSyntax, ""},
	}
	for _, tc := range unmarshal {
		ids := IDs{42}
		err := ids.UnmarshalJSON([]byte(tc.in))
		if !reflect.DeepEqual(ids, tc.want) || !errors.Is(err, tc.wantErr) || (err != nil && !strings.Contains(err.Error(), tc.mention)) {
			t.Errorf("UnmarshalJSON(%s) = %v, %v; want %v, %v mentioning %q", tc.in, ids, err, tc.want, tc.wantErr, tc.mention)
		}
	}

	// Through encoding/json, in a struct: an empty input is encoding/json's
	// own syntax error, an absent field leaves the value alone.
	var d struct{ IDs IDs }
	d.IDs = IDs{7}
	if err := json.Unmarshal([]byte(`{}`), &d); err != nil || !reflect.DeepEqual(d.IDs, IDs{7}) {
		t.Errorf("absent field: %v, %v", d.IDs, err)
	}
	if err := (&d.IDs).UnmarshalJSON(nil); !errors.Is(err, idtype.ErrEmpty) {
		t.Errorf("UnmarshalJSON(nil) = %v, want ErrEmpty", err)
	}
}

func TestIDsPgxInterfaces(t *testing.T) {
	if d := IDs(nil).Dimensions(); d != nil {
		t.Errorf("Dimensions of nil = %v, want nil (NULL)", d)
	}
	if d := (IDs{}).Dimensions(); len(d) != 1 || d[0].Length != 0 {
		t.Errorf("Dimensions of empty = %v", d)
	}
	ids := IDs{4, 5}
	if d := ids.Dimensions(); len(d) != 1 || d[0].Length != 2 || d[0].LowerBound != 1 {
		t.Errorf("Dimensions = %v", d)
	}
	if v, err := ids.Index(1).(pgtype.Int64Valuer).Int64Value(); err != nil || v != (pgtype.Int8{Int64: 5, Valid: true}) {
		t.Errorf("Index(1) writes %+v, %v; want int8 5", v, err)
	}
	if _, err := (IDs{-1}).Index(0).(pgtype.Int64Valuer).Int64Value(); !errors.Is(err, idtype.ErrNegative) {
		t.Errorf("a negative element writes with %v; want ErrNegative", err)
	}
	// Scan targets are never pgx integer scanners: pgx would hand them
	// floats.
	if _, ok := any(new(IDs)).(pgtype.ArraySetter); ok {
		t.Errorf("*IDs is a pgtype.ArraySetter: pgx would scan into it element by element, half filling it on error")
	}
}

// binaryArray encodes v with pgx's own codecs in PostgreSQL's binary array
// format, as the server sends it.
func binaryArray(t *testing.T, oid uint32, v any) []byte {
	t.Helper()
	b, err := pgtype.NewMap().Encode(oid, pgtype.BinaryFormatCode, v, nil)
	if err != nil {
		t.Fatalf("encode %v: %v", v, err)
	}
	return b
}

func TestIDsScanBinary(t *testing.T) {
	good := []struct {
		name string
		src  []byte
		want IDs
	}{
		{"int8[]", binaryArray(t, pgtype.Int8ArrayOID, []int64{1, math.MaxInt64, 0}), IDs{1, idtype.MaxID, 0}},
		{"empty", binaryArray(t, pgtype.Int8ArrayOID, []int64{}), IDs{}},
		{"int4[]", binaryArray(t, pgtype.Int4ArrayOID, []int32{7, math.MaxInt32}), IDs{7, math.MaxInt32}},
		{"int2[]", binaryArray(t, pgtype.Int2ArrayOID, []int16{3}), IDs{3}},
		{"text[]", binaryArray(t, pgtype.TextArrayOID, []string{"9007199254740993"}), IDs{1<<53 + 1}},
	}
	for _, tc := range good {
		var got IDs
		if err := got.Scan(tc.src); err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Scan = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}

	null := binaryArray(t, pgtype.Int8ArrayOID, []*int64{new(int64), nil})
	bad := []struct {
		name    string
		src     []byte
		want    error
		mention string
	}{
		{"NULL element", null, idtype.ErrNull, "element 1"},
		{"negative", binaryArray(t, pgtype.Int8ArrayOID, []int64{1, -2}), idtype.ErrNegative, "-2"},
		{"negative int4", binaryArray(t, pgtype.Int4ArrayOID, []int32{-2}), idtype.ErrNegative, "-2"},
		{"float8[]", binaryArray(t, pgtype.Float8ArrayOID, []float64{3}), idtype.ErrUnsupportedType, "float8"},
		{"float4[]", binaryArray(t, pgtype.Float4ArrayOID, []float32{3}), idtype.ErrUnsupportedType, "float4"},
		{"numeric[]", binaryArray(t, pgtype.NumericArrayOID, []int64{3}), idtype.ErrUnsupportedType, "numeric"},
		{"bool[]", binaryArray(t, pgtype.BoolArrayOID, []bool{true}), idtype.ErrUnsupportedType, "bool"},
		{"uuid[]", binaryArray(t, pgtype.UUIDArrayOID, [][16]byte{{1}}), idtype.ErrUnsupportedType, "uuid"},
		{"unknown type", func() []byte {
			b := binaryArray(t, pgtype.Int8ArrayOID, []int64{1})
			b[8], b[9] = 0x7f, 0x7f // the element type's OID
			return b
		}(), idtype.ErrUnsupportedType, "type OID 2139029524"},
		{"short header", binaryArray(t, pgtype.Int8ArrayOID, []int64{1})[:8:8], ErrArraySyntax, "header"},
		{"2 dimensions", binaryArray(t, pgtype.Int8ArrayOID, [][]int64{{1}, {2}}), ErrDimensions, "2 dimensions"},
		{"text junk", binaryArray(t, pgtype.TextArrayOID, []string{"1", "x"}), idtype.ErrSyntax, `"x"`},
		{"cut short", null[:len(null)-1], ErrArraySyntax, "element 1"},
		{"trailing", append(binaryArray(t, pgtype.Int8ArrayOID, []int64{1}), 0), ErrArraySyntax, "after the last"},
		{"huge count", func() []byte {
			b := binaryArray(t, pgtype.Int8ArrayOID, []int64{1})
			b[12], b[13] = 0x7f, 0xff // the length of dimension 1
			return b
		}(), ErrArraySyntax, "announced"},
	}
	for _, tc := range bad {
		got := IDs{42}
		err := got.Scan(tc.src)
		if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.mention) {
			t.Errorf("%s: Scan error %v; want one wrapping %q that mentions %q", tc.name, err, tc.want, tc.mention)
		}
		if !reflect.DeepEqual(got, IDs{42}) {
			t.Errorf("%s: a failed Scan changed the IDs to %v", tc.name, got)
		}
	}
}

package sqltype

import (
	"bytes"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/snowkeyhq/snowkey/idtype"
)

// The interfaces NullID and IDs promise to database/sql, pgx, GORM and
// encoding/json.
var (
	_ sql.Scanner                        = (*NullID)(nil)
	_ driver.Valuer                      = NullID{}
	_ json.Marshaler                     = NullID{}
	_ json.Unmarshaler                   = (*NullID)(nil)
	_ interface{ GormDataType() string } = NullID{}

	_ sql.Scanner                        = (*IDs)(nil)
	_ driver.Valuer                      = IDs(nil)
	_ pgtype.ArrayGetter                 = IDs(nil)
	_ json.Unmarshaler                   = (*IDs)(nil)
	_ interface{ GormDataType() string } = IDs(nil)
)

func TestNullIDScan(t *testing.T) {
	good := []struct {
		src  any
		want NullID
	}{
		{nil, NullID{}},
		{int64(0), NewNullID(0)},
		{int64(math.MaxInt64), NewNullID(idtype.MaxID)},
		{[]byte("9007199254740993"), NewNullID(1<<53 + 1)},
		{"1541815603606036480", NewNullID(1541815603606036480)},
	}
	for _, tc := range good {
		n := NewNullID(42)
		if err := n.Scan(tc.src); err != nil || n != tc.want {
			t.Errorf("Scan(%#v) = %+v, %v; want %+v", tc.src, n, err, tc.want)
		}
	}
	bad := []struct {
		src     any
		want    error
		mention string
	}{
		{int64(-1), idtype.ErrNegative, "int64(-1)"},
		{"12x", idtype.ErrSyntax, `"12x"`},
		{[]byte(""), idtype.ErrEmpty, `""`},
		{"99999999999999999999", idtype.ErrRange, "99999999999999999999"},
		{float64(1.5), idtype.ErrUnsupportedType, "float64(1.5)"},
		{true, idtype.ErrUnsupportedType, "bool(true)"},
	}
	for _, tc := range bad {
		n := NewNullID(42)
		err := n.Scan(tc.src)
		var e *idtype.Error
		if !errors.Is(err, tc.want) || !errors.As(err, &e) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("Scan(%#v) = %v; want an *idtype.Error wrapping %v that mentions %s", tc.src, err, tc.want, tc.mention)
		}
		if n != NewNullID(42) {
			t.Errorf("Scan(%#v) changed the value to %+v", tc.src, n)
		}
	}
}

func TestNullIDValue(t *testing.T) {
	tests := []struct {
		n       NullID
		want    driver.Value
		wantErr error
	}{
		{NullID{}, nil, nil},
		{NullID{ID: 7}, nil, nil}, // not valid: the ID is ignored
		{NewNullID(0), int64(0), nil},
		{NewNullID(idtype.MaxID), int64(math.MaxInt64), nil},
		{NewNullID(-1), nil, idtype.ErrNegative},
	}
	for _, tc := range tests {
		v, err := tc.n.Value()
		if v != tc.want || !errors.Is(err, tc.wantErr) {
			t.Errorf("%+v.Value() = %#v, %v; want %#v, %v", tc.n, v, err, tc.want, tc.wantErr)
		}
	}
}

// TestRegisterPgx runs the binary plans RegisterPgx adds against the
// same inputs as Scan, without a server: the same results, the same errors,
// the destination unchanged on error.
func TestRegisterPgx(t *testing.T) {
	m := pgtype.NewMap()
	RegisterPgx(m)
	RegisterPgx(m) // twice is once
	if c, _ := m.TypeForOID(pgtype.Int8OID); c == nil {
		t.Fatal("int8 is gone")
	} else if inner, ok := c.Codec.(int8Codec); !ok {
		t.Fatalf("int8's codec is %T", c.Codec)
	} else if _, twice := inner.Codec.(int8Codec); twice {
		t.Fatal("RegisterPgx twice wrapped the codec twice")
	}
	int8 := func(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }
	tests := []struct {
		src     []byte
		id      idtype.ID
		null    NullID
		wantErr error // for ID; NULL is fine for a NullID
	}{
		{int8(5), 5, NewNullID(5), nil},
		{int8(math.MaxInt64), idtype.MaxID, NewNullID(idtype.MaxID), nil},
		{nil, 42, NullID{}, idtype.ErrNull},
		{int8(-5), 42, NewNullID(42), idtype.ErrNegative},
		{[]byte{1, 2, 3}, 42, NewNullID(42), idtype.ErrSyntax},
	}
	for _, tc := range tests {
		id, n := idtype.ID(42), NewNullID(42)
		err := m.Scan(pgtype.Int8OID, pgtype.BinaryFormatCode, tc.src, &id)
		if id != tc.id || !errors.Is(err, tc.wantErr) {
			t.Errorf("scan %x into ID = %d, %v; want %d, %v", tc.src, id, err, tc.id, tc.wantErr)
		}
		err = m.Scan(pgtype.Int8OID, pgtype.BinaryFormatCode, tc.src, &n)
		if wantErr := tc.wantErr; n != tc.null || (wantErr == idtype.ErrNull && err != nil) ||
			(wantErr != idtype.ErrNull && !errors.Is(err, wantErr)) {
			t.Errorf("scan %x into NullID = %+v, %v; want %+v", tc.src, n, err, tc.null)
		}
	}
	// A float8 column is not int8: the fast path is not taken, and Scan
	// refuses the float.
	id := idtype.ID(42)
	f := binary.BigEndian.AppendUint64(nil, math.Float64bits(2124962550683529217))
	if err := m.Scan(pgtype.Float8OID, pgtype.BinaryFormatCode, f, &id); !errors.Is(err, idtype.ErrUnsupportedType) || id != 42 {
		t.Errorf("float8 into ID with RegisterPgx = %d, %v; want ErrUnsupportedType and no change", id, err)
	}

	for _, v := range []any{idtype.ID(7), NewNullID(7), NullID{}} {
		b, err := m.Encode(pgtype.Int8OID, pgtype.BinaryFormatCode, v, nil)
		want := int8(7)
		if v == (NullID{}) {
			want = nil
		}
		if err != nil || !bytes.Equal(b, want) {
			t.Errorf("encode %v = %x, %v; want %x", v, b, err, want)
		}
	}
	for _, v := range []any{idtype.ID(-1), NewNullID(-1)} {
		if _, err := m.Encode(pgtype.Int8OID, pgtype.BinaryFormatCode, v, nil); !errors.Is(err, idtype.ErrNegative) {
			t.Errorf("encode %v: %v; want ErrNegative", v, err)
		}
	}
}

func TestNullIDJSON(t *testing.T) {
	type doc struct {
		Parent NullID `json:"parent"`
	}
	marshal := []struct {
		n    NullID
		want string
	}{
		{NullID{}, `{"parent":null}`},
		{NullID{ID: 9}, `{"parent":null}`},
		{NewNullID(0), `{"parent":"0"}`},
		{NewNullID(1541815603606036480), `{"parent":"1541815603606036480"}`},
		{NewNullID(idtype.MaxID), `{"parent":"9223372036854775807"}`},
	}
	for _, tc := range marshal {
		b, err := json.Marshal(doc{tc.n})
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tc.n, b, err, tc.want)
		}
	}
	unmarshal := []struct {
		in      string
		want    NullID
		wantErr error
	}{
		{`{"parent":null}`, NullID{}, nil},
		{`{"parent":"1541815603606036480"}`, NewNullID(1541815603606036480), nil},
		{`{"parent":9007199254740993}`, NewNullID(1<<53 + 1), nil},
		{`{"parent":"0"}`, NewNullID(0), nil},
		{`{}`, NewNullID(42), nil}, // absent: untouched, as encoding/json does
		{`{"parent":"-1"}`, NewNullID(42), idtype.ErrNegative},
		{`{"parent":1.5}`, NewNullID(42), idtype.ErrSyntax},
		{`{"parent":true}`, NewNullID(42), idtype.ErrKind},
		{`{"parent":""}`, NewNullID(42), idtype.ErrEmpty},
		{`{"parent":"9223372036854775808"}`, NewNullID(42), idtype.ErrRange},
	}
	for _, tc := range unmarshal {
		d := doc{NewNullID(42)}
		err := json.Unmarshal([]byte(tc.in), &d)
		if d.Parent != tc.want || !errors.Is(err, tc.wantErr) {
			t.Errorf("Unmarshal(%s) = %+v, %v; want %+v, %v", tc.in, d.Parent, err, tc.want, tc.wantErr)
		}
	}
}

func TestNullIDString(t *testing.T) {
	if s := (NullID{}).String(); s != "NULL" {
		t.Errorf("String of NULL = %q", s)
	}
	if s := NewNullID(12).String(); s != "12" {
		t.Errorf("String of 12 = %q", s)
	}
}

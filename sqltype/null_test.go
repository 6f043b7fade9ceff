package sqltype

import (
	"database/sql"
	"database/sql/driver"
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
	_ pgtype.Int64Scanner                = (*NullID)(nil)
	_ pgtype.Int64Valuer                 = NullID{}
	_ json.Marshaler                     = NullID{}
	_ json.Unmarshaler                   = (*NullID)(nil)
	_ interface{ GormDataType() string } = NullID{}

	_ sql.Scanner                        = (*IDs)(nil)
	_ driver.Valuer                      = IDs(nil)
	_ pgtype.ArrayGetter                 = IDs(nil)
	_ pgtype.ArraySetter                 = (*IDs)(nil)
	_ json.Marshaler                     = IDs(nil)
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

func TestNullIDPgx(t *testing.T) {
	tests := []struct {
		in      pgtype.Int8
		want    NullID
		wantErr error
	}{
		{pgtype.Int8{}, NullID{}, nil},
		{pgtype.Int8{Int64: 5, Valid: true}, NewNullID(5), nil},
		{pgtype.Int8{Int64: math.MaxInt64, Valid: true}, NewNullID(idtype.MaxID), nil},
		{pgtype.Int8{Int64: -5, Valid: true}, NewNullID(42), idtype.ErrNegative},
	}
	for _, tc := range tests {
		n := NewNullID(42)
		err := n.ScanInt64(tc.in)
		if n != tc.want || !errors.Is(err, tc.wantErr) {
			t.Errorf("ScanInt64(%+v) = %+v, %v; want %+v, %v", tc.in, n, err, tc.want, tc.wantErr)
		}
		if err != nil {
			continue
		}
		back, err := n.Int64Value()
		if err != nil || back != tc.in {
			t.Errorf("Int64Value of %+v = %+v, %v; want %+v", n, back, err, tc.in)
		}
	}
	if _, err := NewNullID(-3).Int64Value(); !errors.Is(err, idtype.ErrNegative) {
		t.Errorf("Int64Value of a negative ID: %v, want ErrNegative", err)
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

package idtype

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// The interfaces an ID promises to database/sql, pgx and encoding.
var (
	_ sql.Scanner                        = (*ID)(nil)
	_ driver.Valuer                      = ID(0)
	_ interface{ GormDataType() string } = ID(0)
)

func TestScan(t *testing.T) {
	good := []struct {
		src  any
		want ID
	}{
		{int64(0), 0},
		{int64(1), 1},
		{int64(math.MaxInt64), MaxID},
		{[]byte("9007199254740993"), 1<<53 + 1},
		{"9223372036854775807", MaxID},
	}
	for _, tc := range good {
		var id ID
		if err := id.Scan(tc.src); err != nil || id != tc.want {
			t.Errorf("Scan(%#v) = %d, %v; want %d", tc.src, id, err, tc.want)
		}
	}
	bad := []struct {
		src     any
		want    error
		mention string
	}{
		{nil, ErrNull, "NULL"},
		{int64(-1), ErrNegative, "int64(-1)"},
		{[]byte("12x"), ErrSyntax, `"12x"`},
		{"", ErrEmpty, `""`},
		{"-5", ErrNegative, `"-5"`},
		{"99999999999999999999", ErrRange, `"99999999999999999999"`},
		{float64(1.5), ErrUnsupportedType, "float64(1.5)"},
		{float64(12), ErrUnsupportedType, "float64(12)"},
		{float64(2124962550683529217), ErrUnsupportedType, "float64(2124962550683529216)"},
		{float32(16777217), ErrUnsupportedType, "float32(16777216)"},
		{true, ErrUnsupportedType, "bool(true)"},
		{time.Unix(0, 0).UTC(), ErrUnsupportedType, "time.Time"},
		{int32(5), ErrUnsupportedType, "int32(5)"},
	}
	for _, tc := range bad {
		id := ID(42)
		err := id.Scan(tc.src)
		if !errors.Is(err, tc.want) {
			t.Errorf("Scan(%#v) error %v; want one wrapping %v", tc.src, err, tc.want)
			continue
		}
		if id != 42 {
			t.Errorf("Scan(%#v) changed the ID to %d", tc.src, id)
		}
		if msg := err.Error(); !strings.Contains(msg, tc.mention) || !strings.Contains(msg, "scan") {
			t.Errorf("Scan(%#v) error %q; want it to say scan and name %s", tc.src, msg, tc.mention)
		}
	}
}

func TestValue(t *testing.T) {
	for _, id := range boundaryIDs {
		v, err := id.Value()
		if err != nil || v != int64(id) {
			t.Errorf("Value(%d) = %#v, %v; want int64", id, v, err)
		}
	}
	if _, err := ID(-1).Value(); !errors.Is(err, ErrNegative) {
		t.Errorf("Value(-1) error %v; want ErrNegative", err)
	}
	id := ID(42)
	if got := id.GormDataType(); got != "bigint" {
		t.Errorf("GormDataType() = %q; want bigint", got)
	}
}

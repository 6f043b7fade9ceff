package idtype

import (
	"database/sql/driver"
	"fmt"
	"math"
	"strconv"
)

// Scan reads an ID from a database column (sql.Scanner). It accepts int64,
// the decimal text of an ID as []byte or string, and nothing else. SQL NULL
// is an error wrapping ErrNull: scan nullable columns into sqltype.NullID.
// Negative numbers and junk are errors too, and the ID is unchanged.
//
// A floating-point value (from a float4 or float8 column) is refused with
// ErrUnsupportedType even when it is whole: a float8 keeps 53 bits, so
// 2124962550683529217 stored as one reads back as 2124962550683529216, a
// different ID, and nothing in the value says so. A numeric with a
// fraction arrives as its text and is refused as ErrSyntax.
//
// pgx (native, not through database/sql) scans into an ID through this
// method too: ID has no pgx-specific methods, which would let pgx convert a
// float column into one. sqltype.RegisterPgx adds a faster binary path
// for bigint columns to a pgx connection.
func (id *ID) Scan(src any) error {
	switch v := src.(type) {
	case int64:
		if v < 0 {
			return &Error{Op: "scan", Input: fmt.Sprintf("int64(%d)", v), Err: ErrNegative}
		}
		*id = ID(v)
		return nil
	case []byte:
		n, err := parseDigits(v)
		if err != nil {
			return newError("scan", v, err)
		}
		*id = n
		return nil
	case string:
		n, err := parseDigits(v)
		if err != nil {
			return &Error{Op: "scan", Input: quoteInput(v), Err: err}
		}
		*id = n
		return nil
	case nil:
		return &Error{Op: "scan", Input: "NULL", Err: ErrNull}
	case float64:
		return floatError(v, 64)
	case float32:
		return floatError(float64(v), 32)
	default:
		return &Error{Op: "scan", Input: typedInput(src), Err: ErrUnsupportedType}
	}
}

// errFloat is the detail of every refusal of a floating-point value.
var errFloat = fmt.Errorf("%w: floating point (a float4 or float8 column) cannot carry an ID exactly; "+
	"store and select IDs as bigint", ErrUnsupportedType)

// floatError refuses a float. A whole one is named by every digit of its
// exact value (not the shortest form, 2124962550683529200, nor %v's
// exponent), so the message shows the ID it would have become.
func floatError(v float64, bits int) error {
	digits := strconv.FormatFloat(v, 'g', -1, 64)
	if v == math.Trunc(v) && math.Abs(v) < 1e30 {
		digits = strconv.FormatFloat(v, 'f', 0, 64)
	}
	return &Error{Op: "scan", Input: fmt.Sprintf("float%d(%s)", bits, digits), Err: errFloat}
}

// Value returns the ID as an int64 for database/sql (driver.Valuer).
// The zero ID is written as 0; a negative ID is refused with ErrNegative.
func (id ID) Value() (driver.Value, error) {
	if id < 0 {
		return nil, &Error{Op: "write", Input: fmt.Sprintf("ID(%d)", int64(id)), Err: ErrNegative}
	}
	return int64(id), nil
}

// GormDataType tells GORM that an ID column is a bigint, so AutoMigrate
// makes a plain bigint key instead of a bigserial one.
func (ID) GormDataType() string { return "bigint" }

package idtype

import (
	"database/sql/driver"
	"fmt"
)

// Scan reads an ID from a database column (sql.Scanner). It accepts int64,
// the decimal text of an ID as []byte or string, and nothing else. SQL NULL
// is an error wrapping ErrNull: scan nullable columns into sqltype.NullID.
// Negative numbers and junk are errors too, and the ID is unchanged.
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
	default:
		return &Error{Op: "scan", Input: describeValue(src), Err: ErrUnsupportedType}
	}
}

// describeValue names a value's Go type and value for an error message.
func describeValue(v any) string {
	s := fmt.Sprintf("%T(%v)", v, v)
	if len(s) > maxInputInError {
		s = s[:maxInputInError] + "..."
	}
	return s
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

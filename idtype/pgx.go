package idtype

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"
)

// ScanInt64 lets pgx scan an int8 column straight into an ID with its
// binary codec (pgtype.Int64Scanner). NULL and negative values are errors
// wrapping ErrNull and ErrNegative.
func (id *ID) ScanInt64(v pgtype.Int8) error {
	if !v.Valid {
		return &Error{Op: "scan", Input: "NULL", Err: ErrNull}
	}
	if v.Int64 < 0 {
		return &Error{Op: "scan", Input: fmt.Sprintf("int8(%d)", v.Int64), Err: ErrNegative}
	}
	*id = ID(v.Int64)
	return nil
}

// Int64Value lets pgx write an ID with its binary int8 codec
// (pgtype.Int64Valuer). A negative ID is refused with ErrNegative.
func (id ID) Int64Value() (pgtype.Int8, error) {
	if id < 0 {
		return pgtype.Int8{}, &Error{Op: "write", Input: fmt.Sprintf("ID(%d)", int64(id)), Err: ErrNegative}
	}
	return pgtype.Int8{Int64: int64(id), Valid: true}, nil
}

package idtype

import (
	"errors"
	"fmt"
)

// The kinds of bad input. Every error this package returns for bad input is
// an *Error that wraps exactly one of them, so callers match with errors.Is
// and read the offending input from the *Error.
var (
	// ErrEmpty means the input held no digits at all.
	ErrEmpty = errors.New("empty")
	// ErrSyntax means the input is not an ID's one spelling, a plain
	// decimal integer: it holds a space, a sign, a fraction, an exponent,
	// a leading zero or another non-digit byte.
	ErrSyntax = errors.New("not a decimal integer")
	// ErrNegative means the input is a negative number. A snowflake is never
	// negative: the sign bit is always zero.
	ErrNegative = errors.New("negative")
	// ErrRange means the number is larger than 2^63-1, the largest ID.
	ErrRange = errors.New("out of range (largest ID is 9223372036854775807)")
	// ErrKind means a JSON value of the wrong kind (true, an object, an
	// array) where an ID was expected.
	ErrKind = errors.New("wrong JSON kind (want a string or a number)")
	// ErrNull means SQL NULL was scanned into an ID. An ID column that may
	// be NULL is scanned into sqltype.NullID instead, the same way
	// database/sql refuses NULL for a plain int64.
	ErrNull = errors.New("NULL (scan nullable columns into sqltype.NullID)")
	// ErrUnsupportedType means Scan was given a source type that cannot
	// hold an ID (only int64, []byte and string can).
	ErrUnsupportedType = errors.New("unsupported source type")
)

// Error reports bad input to Parse, the Unmarshal methods and Scan.
//
// Err is the kind (one of ErrEmpty, ErrSyntax, ErrNegative, ErrRange,
// ErrKind, ErrNull, ErrUnsupportedType), possibly wrapped with detail;
// errors.Is(err, ErrSyntax) and friends match it.
type Error struct {
	// Op is what was being done: "parse", "unmarshal JSON", "unmarshal
	// text", "scan".
	Op string
	// Input is the offending input as text, cut to 64 bytes. For Scan of a
	// non-text value it is the Go type and value, as in "float64(1.5)".
	Input string
	// Err is the kind of failure, see above.
	Err error
}

// Error names the operation, the input and what is wrong with it.
func (e *Error) Error() string {
	return fmt.Sprintf("idtype: %s %s: %v", e.Op, e.Input, e.Err)
}

// Unwrap returns the kind of failure, for errors.Is.
func (e *Error) Unwrap() error { return e.Err }

func newError(op string, input []byte, err error) *Error {
	return &Error{Op: op, Input: quoteInput(string(input)), Err: err}
}

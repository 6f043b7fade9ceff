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

// maxInputInError bounds how much of a bad input an error message repeats,
// so a megabyte of junk does not become a megabyte of log line.
const maxInputInError = 64

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

// DescribeInput renders bad input for an error message the way an *Error's
// Input does: text (a string or []byte) quoted and cut to 64 bytes, with
// its length when cut; any other value as its Go type and value, cut the
// same way. Packages that read IDs from formats of their own (sqltype's
// arrays) use it, so that every snowkey error names its input alike.
func DescribeInput(v any) string {
	switch v := v.(type) {
	case string:
		return quoteInput(v)
	case []byte:
		return quoteInput(string(v))
	}
	return describeValue(v)
}

// describeValue names a value's Go type and value for an error message.
func describeValue(v any) string {
	s := fmt.Sprintf("%T(%v)", v, v)
	if len(s) > maxInputInError {
		s = s[:maxInputInError] + "..."
	}
	return s
}

// quoteInput renders bad input for an error message, cut short when long.
func quoteInput(s string) string {
	if len(s) > maxInputInError {
		return fmt.Sprintf("%q... (%d bytes)", s[:maxInputInError], len(s))
	}
	return fmt.Sprintf("%q", s)
}

func newError(op string, input []byte, err error) *Error {
	return &Error{Op: op, Input: quoteInput(string(input)), Err: err}
}

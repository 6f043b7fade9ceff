package sqltype

import (
	"errors"
	"fmt"

	"github.com/snowkeyhq/snowkey/idtype"
)

// The kinds of bad input this package finds beyond idtype's own. Errors
// wrap them inside an *idtype.Error; match with errors.Is.
var (
	// ErrArraySyntax means text that should be a PostgreSQL array of
	// bigints, such as {1,2,3}, is not one: a missing brace, a stray
	// character between elements, an empty element.
	ErrArraySyntax = errors.New("not an array literal like {1,2,3}")
	// ErrDimensions means an array of more than one dimension, such as
	// {{1,2},{3,4}}, where IDs holds a flat list.
	ErrDimensions = errors.New("array has more than one dimension (IDs is a flat list)")
)

// maxInputInError bounds how much of a bad input an error repeats, the
// same bound idtype uses.
const maxInputInError = 64

// quoteInput renders bad input for an *idtype.Error, cut short when long,
// the way idtype renders its own.
func quoteInput(b []byte) string {
	if len(b) > maxInputInError {
		return fmt.Sprintf("%q... (%d bytes)", b[:maxInputInError], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// describeValue names a value's Go type and value, for Scan errors.
func describeValue(v any) string {
	s := fmt.Sprintf("%T(%v)", v, v)
	if len(s) > maxInputInError {
		s = s[:maxInputInError] + "..."
	}
	return s
}

// kindOf returns the kind of failure inside an error from idtype (the Err
// of its *idtype.Error), so that it can be re-wrapped with this package's
// context without losing errors.Is.
func kindOf(err error) error {
	var e *idtype.Error
	if errors.As(err, &e) {
		return e.Err
	}
	return err
}

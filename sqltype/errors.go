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

// maxInput bounds how much of a bad input an *idtype.Error's Input
// repeats, as idtype's own errors do (TestInputLikeIdtype keeps them
// alike).
const maxInput = 64

// describeInput renders bad input for an *idtype.Error's Input as idtype
// does: text (a string or []byte) quoted and cut to maxInput bytes with
// its length when cut; any other value as describeValue does.
func describeInput(v any) string {
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case []byte:
		s = string(v)
	default:
		return describeValue(v)
	}
	if len(s) > maxInput {
		return fmt.Sprintf("%q... (%d bytes)", s[:maxInput], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// describeValue renders a bad non-text value as idtype does: its Go type
// and value, as in "float64(1.5)", cut to maxInput bytes.
func describeValue(v any) string {
	s := fmt.Sprintf("%T(%v)", v, v)
	if len(s) > maxInput {
		s = s[:maxInput] + "..."
	}
	return s
}

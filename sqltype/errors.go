package sqltype

import (
	"errors"

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

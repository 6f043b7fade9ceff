package idtype

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
)

// An ID is GraphQL's ID scalar as gqlgen binds a Go type to a scalar: by
// the methods MarshalGQL(io.Writer) and UnmarshalGQL(any) error, which
// take standard types only, so that idtype needs no GraphQL library.
// Map the scalar in gqlgen.yml,
//
//	models:
//	  ID:
//	    model:
//	      - github.com/snowkeyhq/snowkey/idtype.ID
//
// and every ID field is sent as a string, as the GraphQL spec says an ID
// is serialized, and is read from a string or an exact integer.

// MarshalGQL writes the ID as a GraphQL string, "123", as GraphQL
// serializes an ID and as JSON carries it to JavaScript exactly
// (gqlgen's graphql.Marshaler). A write error is left to the writer's
// owner, as gqlgen's own scalars do.
func (id ID) MarshalGQL(w io.Writer) {
	b := append(make([]byte, 0, 22), '"')
	b = strconv.AppendInt(b, int64(id), 10)
	_, _ = w.Write(append(b, '"'))
}

// UnmarshalGQL reads an ID from what gqlgen hands a scalar's input
// (gqlgen's graphql.Unmarshaler): a string, from a string literal or a
// JSON variable, that Parse accepts; an integer literal (int64, or any
// other Go integer type) from 0 to MaxID; or a json.Number, from a JSON
// variable, whose text Parse accepts, so 1e3 and 1.0 are refused as not
// exact. Floating-point values are refused even when whole: a JSON
// decoder that made one may have rounded the ID already. On error the ID
// is unchanged and the error is an *Error with Op "unmarshal GraphQL"
// wrapping ErrSyntax, ErrEmpty, ErrNegative, ErrRange, ErrNull (nil),
// ErrKind (a boolean, list or object) or ErrUnsupportedType.
func (id *ID) UnmarshalGQL(v any) error {
	n, err := fromGQL(v)
	if err != nil {
		return err
	}
	*id = n
	return nil
}

// opGQL is the Op of every *Error from UnmarshalGQL.
const opGQL = "unmarshal GraphQL"

// fromGQL reads one GraphQL input value as an ID.
func fromGQL(v any) (ID, error) {
	var text string
	switch v := v.(type) {
	case string:
		text = v
	case json.Number:
		text = string(v)
	case int64:
		return fromInt(v, v)
	case int:
		return fromInt(int64(v), v)
	case int32:
		return fromInt(int64(v), v)
	case int16:
		return fromInt(int64(v), v)
	case int8:
		return fromInt(int64(v), v)
	case uint64:
		if v > math.MaxInt64 {
			return 0, &Error{Op: opGQL, Input: typedInput(v), Err: ErrRange}
		}
		return ID(v), nil
	case uint:
		return fromGQL(uint64(v))
	case uint32:
		return ID(v), nil
	case uint16:
		return ID(v), nil
	case uint8:
		return ID(v), nil
	case float64, float32:
		return 0, &Error{Op: opGQL, Input: typedInput(v), Err: errFloatGQL}
	case nil:
		return 0, &Error{Op: opGQL, Input: "null", Err: ErrNull}
	case bool, map[string]any, []any:
		return 0, &Error{Op: opGQL, Input: typedInput(v), Err: fmt.Errorf("%w: a %T", ErrKind, v)}
	default:
		return 0, &Error{Op: opGQL, Input: typedInput(v), Err: ErrUnsupportedType}
	}
	id, err := parseDigits(text)
	if err != nil {
		return 0, &Error{Op: opGQL, Input: quoteInput(text), Err: err}
	}
	return id, nil
}

// fromInt reads an integer literal, n being v as an int64.
func fromInt(n int64, v any) (ID, error) {
	if n < 0 {
		return 0, &Error{Op: opGQL, Input: typedInput(v), Err: ErrNegative}
	}
	return ID(n), nil
}

// errFloatGQL is the detail of every refusal of a floating-point value.
var errFloatGQL = fmt.Errorf("%w: floating point cannot carry an ID exactly; send IDs as strings", ErrUnsupportedType)

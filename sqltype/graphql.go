package sqltype

import (
	"fmt"
	"io"
	"reflect"

	"github.com/snowkeyhq/snowkey/idtype"
)

// NullID and IDs are GraphQL values as gqlgen binds Go types to scalars,
// by MarshalGQL(io.Writer) and UnmarshalGQL(any) error, like idtype.ID:
// list them beside it under the ID scalar in gqlgen.yml (see
// docs/graphql.md), and a nullable ID field can be a NullID and a list of
// IDs an IDs.

// MarshalGQL writes null when n is not valid and the ID as a GraphQL
// string otherwise, as idtype.ID writes it (gqlgen's graphql.Marshaler).
func (n NullID) MarshalGQL(w io.Writer) {
	if !n.Valid {
		_, _ = io.WriteString(w, "null")
		return
	}
	n.ID.MarshalGQL(w)
}

// UnmarshalGQL reads null (nil) as Valid == false and anything else as
// (*idtype.ID).UnmarshalGQL reads it, with its errors (gqlgen's
// graphql.Unmarshaler). On error n is unchanged.
func (n *NullID) UnmarshalGQL(v any) error {
	if v == nil {
		*n = NullID{}
		return nil
	}
	var id idtype.ID
	if err := id.UnmarshalGQL(v); err != nil {
		return err
	}
	*n = NullID{ID: id, Valid: true}
	return nil
}

// MarshalGQL writes a nil IDs as null and any other as a list of GraphQL
// strings, ["1","2"], as idtype.ID writes each (gqlgen's
// graphql.Marshaler).
func (ids IDs) MarshalGQL(w io.Writer) {
	if ids == nil {
		_, _ = io.WriteString(w, "null")
		return
	}
	b := make([]byte, 0, 2+len(ids)*22)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b, _ = id.AppendText(b)
		b = append(b, '"')
	}
	_, _ = w.Write(append(b, ']'))
}

// UnmarshalGQL reads a list (a slice: []any, as gqlgen hands one over,
// or a slice of one type) whose elements are IDs as
// (*idtype.ID).UnmarshalGQL reads them, and null as a nil IDs (gqlgen's
// graphql.Unmarshaler). A single value is read as a list of one, as
// GraphQL coerces an input to a list. An element that is null,
// or not an ID, is an *idtype.Error with Op "unmarshal GraphQL
// sqltype.IDs" that names the element's position. On error ids is
// unchanged.
func (ids *IDs) UnmarshalGQL(v any) error {
	const op = "unmarshal GraphQL sqltype.IDs"
	var list []any
	switch rv := reflect.ValueOf(v); {
	case v == nil:
		*ids = nil
		return nil
	case rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() != reflect.Uint8:
		// []any from a list; gqlparser hands over a single variable
		// coerced to a list as a slice of its own type ([]string,
		// []json.Number).
		list = make([]any, rv.Len())
		for i := range list {
			list[i] = rv.Index(i).Interface()
		}
	default:
		list = []any{v}
	}
	out := make(IDs, len(list))
	for i, elem := range list {
		if elem == nil {
			return &idtype.Error{Op: op, Input: describeValue(v), Err: fmt.Errorf("element %d: %w: null", i, idtype.ErrKind)}
		}
		if err := out[i].UnmarshalGQL(elem); err != nil {
			return &idtype.Error{Op: op, Input: describeValue(v), Err: fmt.Errorf("element %d %s: %w", i, describeValue(elem), kindOf(err))}
		}
	}
	*ids = out
	return nil
}

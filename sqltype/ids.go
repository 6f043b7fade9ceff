package sqltype

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/snowkeyhq/snowkey/idtype"
)

// IDs is a list of IDs stored in one PostgreSQL bigint[] column, or passed
// as one array parameter:
//
//	SELECT ... WHERE id = ANY($1)
//
// works with an IDs argument through pgx, database/sql and GORM alike
// (GORM expands a plain slice into a list of parameters, which "= ANY"
// does not take; an IDs stays one parameter).
//
// A nil IDs is SQL NULL and JSON null; an empty, non-nil IDs is the empty
// array '{}' and JSON []. Elements are never NULL and never negative:
// reading either is an error. In JSON each element is a quoted decimal, as
// idtype.ID writes it, and elements are read from quoted decimals or bare
// numbers.
type IDs []idtype.ID

// GormDataType tells GORM that an IDs column is a bigint[], so AutoMigrate
// creates one.
func (IDs) GormDataType() string { return "bigint[]" }

// IDs has no MarshalJSON on purpose: encoding/json writes it as an array
// of its elements, each a quoted decimal through idtype.ID's MarshalText,
// ["1541815603606036480","9007199254740993"], and a nil IDs as null. A
// MarshalJSON writing the same bytes would be slower, since encoding/json
// re-scans a Marshaler's output (BenchmarkJSON shows that cost on NullID).

// UnmarshalJSON reads a JSON array whose elements are IDs as
// (*idtype.ID).UnmarshalJSON reads them (quoted decimals or bare numbers),
// and null as a nil IDs. An element that is null, or not an ID, is an
// *idtype.Error that names the element's position; anything but an array
// or null wraps idtype.ErrKind. On error ids is unchanged.
func (ids *IDs) UnmarshalJSON(b []byte) error {
	const op = "unmarshal JSON sqltype.IDs"
	t := bytes.TrimSpace(b)
	switch {
	case string(t) == "null":
		*ids = nil
		return nil
	case len(t) == 0:
		return &idtype.Error{Op: op, Input: describeInput(b), Err: idtype.ErrEmpty}
	case t[0] != '[':
		return &idtype.Error{Op: op, Input: describeInput(b), Err: fmt.Errorf("%w: want an array", idtype.ErrKind)}
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(t, &raw); err != nil {
		return &idtype.Error{Op: op, Input: describeInput(b), Err: fmt.Errorf("%w: %v", idtype.ErrSyntax, err)}
	}
	out := make(IDs, len(raw))
	for i, elem := range raw {
		if string(elem) == "null" {
			return &idtype.Error{Op: op, Input: describeInput(b),
				Err: fmt.Errorf("element %d: %w: null", i, idtype.ErrKind)}
		}
		if err := out[i].UnmarshalJSON(elem); err != nil {
			return &idtype.Error{Op: op, Input: describeInput(b),
				Err: fmt.Errorf("element %d %s: %w", i, describeInput([]byte(elem)), kindOf(err))}
		}
	}
	*ids = out
	return nil
}

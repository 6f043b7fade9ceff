package idtype

import (
	"encoding/json"
	"fmt"
)

// An ID is written to JSON as a quoted decimal string, "123", by
// MarshalText: encoding/json writes a TextMarshaler's text as a JSON
// string. JavaScript numbers are doubles and lose digits past 2^53; every
// ID issued after the first hours of the default epoch is above that, so a
// number would arrive rounded. A string arrives exact.
//
// ID has no MarshalJSON on purpose: encoding/json checks and re-scans what
// a MarshalJSON returns, and only quotes a MarshalText's digits, which
// makes a struct of IDs as quick to write as int64 fields tagged
// `json:",string"`. encoding/json/v2 uses MarshalJSONTo (jsonv2.go).

// UnmarshalJSON reads an ID from a quoted decimal ("123"), a bare JSON
// number (123) or null. Null leaves the ID unchanged, as encoding/json does
// for every type; decode into sqltype.NullID to learn that a value was
// null. Anything else (fractions, exponents, negative numbers, numbers past
// 2^63-1, true, objects, arrays, empty strings) is an *Error that names the
// input, and the ID is unchanged.
func (id *ID) UnmarshalJSON(b []byte) error {
	v, null, err := parseJSON(b)
	if err != nil {
		return newError("unmarshal JSON", b, err)
	}
	if !null {
		*id = v
	}
	return nil
}

// parseJSON reads one JSON value as an ID; null reports a JSON null.
func parseJSON(b []byte) (id ID, null bool, err error) {
	b = trimJSONSpace(b)
	if len(b) == 0 {
		return 0, false, ErrEmpty
	}
	switch c := b[0]; {
	case c == '"':
		if len(b) < 2 || b[len(b)-1] != '"' {
			return 0, false, fmt.Errorf("%w: unterminated string", ErrSyntax)
		}
		inner := b[1 : len(b)-1]
		for _, c := range inner {
			if c == '\\' {
				// Escaped digits ("\u0031") are legal JSON; unquote them
				// on this rare, slow path and keep the common one free of
				// allocations.
				var s string
				if err := json.Unmarshal(b, &s); err != nil {
					return 0, false, fmt.Errorf("%w: %v", ErrSyntax, err)
				}
				id, err := parseDigits(s)
				return id, false, err
			}
		}
		id, err := parseDigits(inner)
		return id, false, err
	case c == 'n' && string(b) == "null":
		return 0, true, nil
	case c == '-' || (c >= '0' && c <= '9'):
		id, err := parseDigits(b)
		return id, false, err
	case c == 't' || c == 'f' || c == '{' || c == '[' || c == 'n':
		return 0, false, ErrKind
	default:
		return 0, false, fmt.Errorf("%w: %s", ErrSyntax, describeByte(c, 0))
	}
}

func trimJSONSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

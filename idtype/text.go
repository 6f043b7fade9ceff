package idtype

import "strconv"

// AppendText appends the decimal form of the ID to b, without allocating
// when b has room (encoding.TextAppender).
func (id ID) AppendText(b []byte) ([]byte, error) {
	return strconv.AppendInt(b, int64(id), 10), nil
}

// MarshalText returns the decimal form of the ID (encoding.TextMarshaler),
// so IDs work in query parameters and any text format, and in JSON as
// quoted strings, as values and as map keys (see json.go).
func (id ID) MarshalText() ([]byte, error) {
	return strconv.AppendInt(make([]byte, 0, 20), int64(id), 10), nil
}

// UnmarshalText reads the decimal form of an ID (encoding.TextUnmarshaler).
// It accepts exactly what Parse accepts; on error the ID is unchanged.
func (id *ID) UnmarshalText(b []byte) error {
	v, err := parseDigits(b)
	if err != nil {
		return newError("unmarshal text", b, err)
	}
	*id = v
	return nil
}

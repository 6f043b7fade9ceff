//go:build goexperiment.jsonv2

package idtype

import (
	"encoding/json/jsontext"
	"strconv"
)

// MarshalJSONTo writes the ID as a quoted decimal for encoding/json/v2,
// without allocating. It writes what encoding/json writes (see json.go).
func (id ID) MarshalJSONTo(enc *jsontext.Encoder) error {
	return enc.WriteValue(appendJSON(enc.AvailableBuffer(), id))
}

// UnmarshalJSONFrom reads an ID for encoding/json/v2 and accepts exactly
// what UnmarshalJSON accepts.
func (id *ID) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	return id.UnmarshalJSON(v)
}

// appendJSON appends the ID as a quoted decimal.
func appendJSON(b []byte, id ID) []byte {
	b = append(b, '"')
	b = strconv.AppendInt(b, int64(id), 10)
	return append(b, '"')
}

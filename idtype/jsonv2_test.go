//go:build goexperiment.jsonv2

package idtype

import (
	jsonv2 "encoding/json/v2"
	"errors"
	"testing"
)

func TestJSONv2(t *testing.T) {
	for _, id := range boundaryIDs {
		b, err := jsonv2.Marshal(id)
		if err != nil || string(b) != `"`+id.String()+`"` {
			t.Errorf("v2 Marshal(%d) = %s, %v", id, b, err)
		}
		var back ID
		if err := jsonv2.Unmarshal(b, &back); err != nil || back != id {
			t.Errorf("v2 Unmarshal(%s) = %d, %v", b, back, err)
		}
		back = 0
		if err := jsonv2.Unmarshal([]byte(id.String()), &back); err != nil || back != id {
			t.Errorf("v2 Unmarshal(%s) = %d, %v", id.String(), back, err)
		}
	}
	for _, in := range []string{`1.5`, `"-1"`, `true`, `"1e3"`, `9223372036854775808`} {
		id := ID(42)
		err := jsonv2.Unmarshal([]byte(in), &id)
		var e *Error
		if !errors.As(err, &e) || id != 42 {
			t.Errorf("v2 Unmarshal(%s) = %d, %v; want an *Error and no change", in, id, err)
		}
	}
	var rec struct {
		A ID `json:"a"`
	}
	if err := jsonv2.Unmarshal([]byte(`{"a":null}`), &rec); err != nil || rec.A != 0 {
		t.Errorf("v2 null = %d, %v", rec.A, err)
	}
}

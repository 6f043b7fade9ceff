package gormplugin

import (
	"reflect"
	"testing"
)

func TestKeyIsZeroAndSetKey(t *testing.T) {
	var s struct {
		A int64
		B *int64
		C **int32
	}
	v := reflect.ValueOf(&s).Elem()
	for i := range 3 {
		f := v.Field(i)
		if !keyIsZero(f) {
			t.Fatalf("field %d: not zero before setKey", i)
		}
		setKey(f, 42)
		if keyIsZero(f) {
			t.Fatalf("field %d: zero after setKey", i)
		}
	}
	if s.A != 42 || *s.B != 42 || **s.C != 42 {
		t.Fatalf("got %d %d %d, want 42 each", s.A, *s.B, **s.C)
	}
}

package intfield

import (
	"reflect"
	"testing"
)

func TestIsZeroAndSet(t *testing.T) {
	var s struct {
		A int64
		B *int64
		C **int32
	}
	v := reflect.ValueOf(&s).Elem()
	for i := range 3 {
		f := v.Field(i)
		if !IsZero(f) {
			t.Fatalf("field %d: not zero before Set", i)
		}
		Set(f, 42)
		if IsZero(f) {
			t.Fatalf("field %d: zero after Set", i)
		}
	}
	if s.A != 42 || *s.B != 42 || **s.C != 42 {
		t.Fatalf("got %d %d %d, want 42 each", s.A, *s.B, **s.C)
	}
}

// Package intfield reads and writes the integer key fields of GORM
// models through reflection, for gormplugin and pgkit/bulk: a field of an
// integer type, or a pointer (of any depth) to one.
package intfield

import "reflect"

// IsZero reports whether an integer field, or a pointer to one, holds no
// key yet: zero or nil.
func IsZero(v reflect.Value) bool {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return true
		}
		v = v.Elem()
	}
	return v.Int() == 0
}

// Set stores n in an integer field, allocating through nil pointers.
func Set(v reflect.Value, n int64) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	v.SetInt(n)
}

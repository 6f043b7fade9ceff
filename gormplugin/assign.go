package gormplugin

import (
	"fmt"
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/snowkeyhq/snowkey/idtype"
)

// assign is the create callback. It finds every zero key the statement is
// about to insert, takes IDs for all of them with one NextN, and sets
// them; on any failure it adds an error, which stops the create before
// anything is written.
func (p *Plugin) assign(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil {
		return
	}
	pl := p.planOf(stmt.Schema)
	if pl.err != nil {
		db.AddError(pl.err)
		return
	}
	fields := selected(stmt, pl.fields)
	if len(fields) == 0 {
		return
	}
	if done := p.assignMaps(db, fields); done {
		return
	}

	var slots []reflect.Value
	modelType := stmt.Schema.ModelType
	add := func(rv reflect.Value) error {
		if rv.Type() != modelType {
			// Dest is not the model GORM parsed (db.Model(&A{}).Create(&b)):
			// its fields are not the schema's, so there is nothing to fill.
			return nil
		}
		for _, f := range fields {
			if !rv.CanAddr() {
				// A struct or array passed by value: GORM can insert it,
				// but nothing can be written back into it.
				if _, zero := f.ValueOf(stmt.Context, rv); zero {
					return fmt.Errorf("%w: %s.%s is zero in a %s passed by value; pass a pointer",
						ErrNotAddressable, stmt.Schema.Name, f.Name, stmt.ReflectValue.Type())
				}
				continue
			}
			if fv := f.ReflectValueOf(stmt.Context, rv); isZeroInt(fv) {
				slots = append(slots, fv)
			}
		}
		return nil
	}
	var err error
	switch rv := stmt.ReflectValue; rv.Kind() {
	case reflect.Struct:
		err = add(rv)
	case reflect.Slice, reflect.Array:
		n := rv.Len()
		slots = make([]reflect.Value, 0, n*len(fields))
		for i := 0; i < n && err == nil; i++ {
			// Nil elements of a slice of pointers are skipped: GORM
			// refuses them itself, with its own error.
			if elem, ok := structOf(rv.Index(i)); ok {
				err = add(elem)
			}
		}
	}
	if err != nil {
		db.AddError(err)
		return
	}
	if len(slots) > 0 {
		ids := make([]idtype.ID, len(slots))
		if err := p.src.NextN(ids); err != nil {
			db.AddError(generateError(stmt.Schema, fields, len(ids), err))
			return
		}
		for i, fv := range slots {
			setInt(fv, int64(ids[i]))
		}
	}
	p.upsertReturning(stmt, fields)
}

// selected returns the fields that the statement inserts: all of them,
// unless Select or Omit names columns, which GORM then honours for the
// keys too.
func selected(stmt *gorm.Statement, fields []*schema.Field) []*schema.Field {
	if len(stmt.Selects) == 0 && len(stmt.Omits) == 0 {
		return fields
	}
	cols, restricted := stmt.SelectAndOmitColumns(true, false)
	out := make([]*schema.Field, 0, len(fields))
	for _, f := range fields {
		if v, ok := cols[f.DBName]; (ok && v) || (!ok && !restricted) {
			out = append(out, f)
		}
	}
	return out
}

// structOf follows pointers and interfaces to a struct, reporting false
// for nil and for anything that is not a struct.
func structOf(v reflect.Value) (reflect.Value, bool) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return v, false
		}
		v = v.Elem()
	}
	return v, v.Kind() == reflect.Struct
}

// isZeroInt reports whether an integer field, or a pointer to one, holds
// no key yet: zero or nil.
func isZeroInt(v reflect.Value) bool {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return true
		}
		v = v.Elem()
	}
	return v.Int() == 0
}

// setInt stores n in an integer field, allocating through nil pointers.
func setInt(v reflect.Value, n int64) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	v.SetInt(n)
}

func generateError(s *schema.Schema, fields []*schema.Field, n int, err error) error {
	names := fields[0].DBName
	if len(fields) > 1 {
		names = fmt.Sprintf("%s and %d more", names, len(fields)-1)
	}
	return fmt.Errorf("%w: %d for %s (%s): %w", ErrGenerate, n, s.Table, names, err)
}

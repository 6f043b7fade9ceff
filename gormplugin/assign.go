package gormplugin

import (
	"fmt"
	"reflect"
	"unsafe"

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
	fields, filtered := selected(stmt, pl.fields)
	if len(fields) == 0 {
		return
	}
	offs, direct := pl.offs, pl.direct
	if filtered {
		offs, direct = directOffsets(fields)
	}
	if done := p.assignMaps(db, fields); done {
		return
	}

	// Most models keep their keys as plain int64-kind fields of the
	// struct itself: those are found by offset, without reflection per row.
	if direct {
		if rows, ok := rowsOf(stmt.ReflectValue, stmt.Schema.ModelType); ok {
			if n, err := fillDirect(rows, offs, p.src); err != nil {
				db.AddError(generateError(stmt.Schema, fields, n, err))
				return
			}
			p.upsertReturning(stmt, fields)
			return
		}
	}

	slots, err := collect(stmt, fields)
	if err != nil {
		db.AddError(err)
		return
	}
	if n := len(slots); n > 0 {
		ids := make([]idtype.ID, n)
		if err := p.src.NextN(ids); err != nil {
			db.AddError(generateError(stmt.Schema, fields, n, err))
			return
		}
		for i, fv := range slots {
			setKey(fv, int64(ids[i]))
		}
	}
	p.upsertReturning(stmt, fields)
}

// collect finds the zero keys of the rows the statement inserts, in row
// order, as reflect.Values to set: the general path, for keys in embedded
// structs or behind pointers (fillDirect handles the common case).
func collect(stmt *gorm.Statement, fields []*schema.Field) (slots []reflect.Value, err error) {
	rv := stmt.ReflectValue
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
			if fv := f.ReflectValueOf(stmt.Context, rv); keyIsZero(fv) {
				slots = append(slots, fv)
			}
		}
		return nil
	}
	switch rv.Kind() {
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
	return slots, err
}

// maxDirect bounds how many fields fillDirect handles; models with more
// snowflake fields take the reflect path.
const maxDirect = 8

// directOffsets returns the fields' offsets in the model struct when every
// one is a non-pointer field of kind int64 declared in the struct itself.
func directOffsets(fields []*schema.Field) (offs []uintptr, ok bool) {
	if len(fields) > maxDirect {
		return nil, false
	}
	offs = make([]uintptr, len(fields))
	for i, f := range fields {
		if len(f.StructField.Index) != 1 || f.FieldType.Kind() != reflect.Int64 {
			return nil, false
		}
		offs[i] = f.StructField.Offset
	}
	return offs, true
}

// directRows lists the address of every row of the statement whose keys
// fillDirect can reach by offset: an addressable struct, or every element
// of a slice or array of structs or of pointers to structs (nil pointers
// skipped). It reports false for anything else, which the reflect path
// then handles (or refuses).
type directRows struct {
	one  unsafe.Pointer // a single struct; nil otherwise
	base unsafe.Pointer // first element of a slice or array of structs
	size uintptr        // element size for base
	ptrs reflect.Value  // a slice of pointers to structs
	n    int
}

func rowsOf(rv reflect.Value, model reflect.Type) (r directRows, ok bool) {
	switch {
	case rv.Kind() == reflect.Struct && rv.Type() == model && rv.CanAddr():
		r.one, r.n = rv.Addr().UnsafePointer(), 1
	case (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array) && rv.Type().Elem() == model:
		if r.n = rv.Len(); r.n > 0 {
			first := rv.Index(0)
			if !first.CanAddr() {
				return r, false // an array passed by value
			}
			r.base, r.size = first.Addr().UnsafePointer(), model.Size()
		}
	case rv.Kind() == reflect.Slice && rv.Type().Elem() == reflect.PointerTo(model):
		r.ptrs, r.n = rv, rv.Len()
	default:
		return r, false
	}
	return r, true
}

// row returns the address of row i, or nil for a nil pointer.
func (r *directRows) row(i int) unsafe.Pointer {
	switch {
	case r.one != nil:
		return r.one
	case r.base != nil:
		return unsafe.Add(r.base, uintptr(i)*r.size)
	default:
		return r.ptrs.Index(i).UnsafePointer()
	}
}

// fillDirect fills the zero keys at offs of every row with IDs from src,
// taken with one NextN, in row order. It counts them first and sets them
// in a second pass, so that it keeps no list of addresses (whose every
// store would cost the garbage collector a write barrier).
func fillDirect(r directRows, offs []uintptr, src idtype.Source) (int, error) {
	zeros := 0
	for i := 0; i < r.n; i++ {
		if base := r.row(i); base != nil {
			for _, off := range offs {
				if *(*int64)(unsafe.Add(base, off)) == 0 {
					zeros++
				}
			}
		}
	}
	if zeros == 0 {
		return 0, nil
	}
	ids := make([]idtype.ID, zeros)
	if err := src.NextN(ids); err != nil {
		return zeros, err
	}
	next := 0
	for i := 0; i < r.n; i++ {
		if base := r.row(i); base != nil {
			for _, off := range offs {
				if p := (*int64)(unsafe.Add(base, off)); *p == 0 {
					*p = int64(ids[next])
					next++
				}
			}
		}
	}
	return zeros, nil
}

// selected returns the fields that the statement inserts: all of them,
// unless Select or Omit names columns, which GORM then honours for the
// keys too; filtered reports the latter.
func selected(stmt *gorm.Statement, fields []*schema.Field) (out []*schema.Field, filtered bool) {
	if len(stmt.Selects) == 0 && len(stmt.Omits) == 0 {
		return fields, false
	}
	cols, restricted := stmt.SelectAndOmitColumns(true, false)
	out = make([]*schema.Field, 0, len(fields))
	for _, f := range fields {
		if v, ok := cols[f.DBName]; (ok && v) || (!ok && !restricted) {
			out = append(out, f)
		}
	}
	return out, true
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

func generateError(s *schema.Schema, fields []*schema.Field, n int, err error) error {
	names := fields[0].DBName
	if len(fields) > 1 {
		names = fmt.Sprintf("%s and %d more", names, len(fields)-1)
	}
	return fmt.Errorf("%w: %d for %s (%s): %w", ErrGenerate, n, s.Table, names, err)
}

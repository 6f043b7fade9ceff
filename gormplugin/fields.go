package gormplugin

import (
	"fmt"
	"reflect"

	"gorm.io/gorm/schema"
	"gorm.io/gorm/utils"

	"github.com/snowkeyhq/snowkey/idtype"
)

// idType is the type whose primary keys are filled without a tag.
var idType = reflect.TypeFor[idtype.ID]()

// tagName is the gorm tag setting that asks for a snowflake, as GORM's
// parser spells it.
const tagName = "SNOWFLAKE"

// plan is what the plugin fills in one model, read from GORM's own schema.
type plan struct {
	// fields are the fields to fill, in the order of the model.
	fields []*schema.Field
	// offs are the fields' offsets in the model when fillDirect can
	// find them by address (direct); see directOffsets.
	offs   []uintptr
	direct bool
	// err, when set, fails every create of the model: a tagged field of
	// the wrong type.
	err error
}

// newPlan picks the fields of s to fill:
//
//   - the primary key, when it is the model's only one and its type is
//     idtype.ID (unless onlyTagged, or tagged `snowflake:false`);
//   - every field tagged `gorm:"snowflake"`, in a composite key or not:
//     of type int64, idtype.ID or another type defined as int64, or a
//     pointer to one (any other type is an ErrFieldType for the model);
//
// but never a field the database fills itself (a `default:` tag, an
// explicit `autoIncrement` tag, a `generated:` column), and never one
// GORM does not insert (`<-:false`, `-`).
func newPlan(s *schema.Schema, onlyTagged bool) *plan {
	p := &plan{}
	var onlyPK *schema.Field
	if len(s.PrimaryFields) == 1 {
		onlyPK = s.PrimaryFields[0]
	}
	for _, f := range s.Fields {
		tag, tagged := f.TagSettings[tagName]
		switch {
		case tagged && !utils.CheckTruth(tag):
			continue // `snowflake:false` opts a key out
		case tagged:
			if f.IndirectFieldType.Kind() != reflect.Int64 {
				p.err = fmt.Errorf("%w: %s.%s is %s; a snowflake field must be int64, idtype.ID, "+
					"another type defined as int64, or a pointer to one", ErrFieldType, s.Name, f.Name, f.FieldType)
				return p
			}
		case onlyTagged || f != onlyPK || f.IndirectFieldType != idType:
			continue
		}
		if !f.Creatable || f.DBName == "" || filledByDatabase(f) {
			continue
		}
		p.fields = append(p.fields, f)
	}
	p.offs, p.direct = directOffsets(p.fields)
	return p
}

// filledByDatabase reports whether the model leaves f to the database:
// GORM itself then omits a zero f from the INSERT and reads the value back
// with RETURNING.
func filledByDatabase(f *schema.Field) bool {
	if _, ok := f.TagSettings["DEFAULT"]; ok {
		return true
	}
	if _, ok := f.TagSettings["GENERATED"]; ok {
		return true
	}
	// GORM marks an integer primary key auto-increment by itself; only an
	// explicit tag says the database numbers the column.
	return utils.CheckTruth(f.TagSettings["AUTOINCREMENT"])
}

// keyIsZero reports whether an integer key field, or a pointer (of any
// depth) to one, holds no key yet: zero or nil.
func keyIsZero(v reflect.Value) bool {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return true
		}
		v = v.Elem()
	}
	return v.Int() == 0
}

// setKey stores n in an integer key field, allocating through nil
// pointers.
func setKey(v reflect.Value, n int64) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	v.SetInt(n)
}

package gormplugin

import (
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/snowkeyhq/snowkey/idtype"
)

// assignMaps fills keys when the statement creates from maps,
// db.Model(&User{}).Create(map[string]any{...}) or a slice of them, and
// reports whether the destination was one. A map names a key by field name
// ("ID") or column name ("id"), as GORM accepts; a key that is missing is
// added under its column name, one that is present with a zero value (nil,
// 0, "") is replaced, any other value is kept. Maps are changed in place,
// so the caller sees the keys.
func (p *Plugin) assignMaps(db *gorm.DB, fields []*schema.Field) bool {
	var ms []map[string]any
	switch d := db.Statement.Dest.(type) {
	case map[string]any:
		ms = []map[string]any{d}
	case *map[string]any:
		if d != nil {
			ms = []map[string]any{*d}
		}
	case []map[string]any:
		ms = d
	case *[]map[string]any:
		if d != nil {
			ms = *d
		}
	default:
		return false
	}

	type slot struct {
		m   map[string]any
		key string
		f   *schema.Field
	}
	var slots []slot
	for _, m := range ms {
		if m == nil {
			continue
		}
		for _, f := range fields {
			key, v, found := f.DBName, any(nil), false
			for _, k := range []string{f.DBName, f.Name} {
				if x, ok := m[k]; ok {
					key, v, found = k, x, true
					break
				}
			}
			if !found || isZeroAny(v) {
				slots = append(slots, slot{m, key, f})
			}
		}
	}
	if len(slots) == 0 {
		return true
	}
	ids := make([]idtype.ID, len(slots))
	if err := p.src.NextN(ids); err != nil {
		db.AddError(generateError(db.Statement.Schema, fields, len(ids), err))
		return true
	}
	for i, s := range slots {
		s.m[s.key] = valueFor(s.f, ids[i])
	}
	return true
}

// isZeroAny reports whether a map value holds no key: nil, or the zero of
// its type.
func isZeroAny(v any) bool {
	if v == nil {
		return true
	}
	return reflect.ValueOf(v).IsZero()
}

// valueFor returns id as a value of f's type (idtype.ID, int64, or another
// 64-bit integer type), so that the map holds what a struct would.
func valueFor(f *schema.Field, id idtype.ID) any {
	// newPlan admits only types of kind int64, so the conversion holds.
	if t := f.IndirectFieldType; t != idType {
		return reflect.ValueOf(int64(id)).Convert(t).Interface()
	}
	return id
}

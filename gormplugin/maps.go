package gormplugin

import (
	"database/sql/driver"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/snowkeyhq/snowkey/idtype"
)

// assignMaps fills keys when the statement creates from maps,
// db.Model(&User{}).Create(map[string]any{...}) or a slice of them, and
// reports whether the destination was one. A map names a key by field name
// ("ID") or column name ("id"), as GORM accepts; a key that is missing is
// added under its column name. A value present is read as mapKey reads it:
// every spelling of zero is filled like a missing key, an ID in another
// spelling ("123", json.Number) is replaced by the ID in the field's type,
// and anything that is not an ID fails the create with ErrKeyValue before
// anything is written. Maps are changed in place, so the caller sees the
// keys; a non-nil pointer to a zero key is filled through the pointer.
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
		ptr reflect.Value // a pointer to fill through, or invalid
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
			if !found {
				slots = append(slots, slot{m: m, key: key, f: f})
				continue
			}
			k, err := mapKey(v)
			switch {
			case err != nil:
				db.AddError(fmt.Errorf("%w: %s.%s (map key %q): %w", ErrKeyValue, db.Statement.Schema.Name, f.Name, key, err))
				return true
			case k.zero:
				slots = append(slots, slot{m: m, key: key, f: f, ptr: k.ptr})
			case k.text:
				m[key] = valueFor(f, k.id)
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
		if s.ptr.IsValid() {
			s.ptr.Elem().SetInt(int64(ids[i]))
			continue
		}
		s.m[s.key] = valueFor(s.f, ids[i])
	}
	return true
}

// mapValue is what mapKey made of a map's value for a key.
type mapValue struct {
	// zero: the key is not assigned yet, and is to be filled.
	zero bool
	// ptr is a non-nil pointer to an integer zero, to be filled through.
	ptr reflect.Value
	// id is the key when not zero; text says it was spelled as text and
	// the map should hold it as an ID instead.
	id   idtype.ID
	text bool
}

// maxValuerDepth bounds how many driver.Valuer results mapKey follows,
// against a Valuer that returns itself.
const maxValuerDepth = 4

// mapKey reads the value a map holds for a key. Zero is spelled many ways,
// and every one means "not assigned yet", as a zero field of a struct does:
// nil, a nil pointer or a pointer to zero, an integer or float zero, "",
// "0" (any number of zeros), json.Number("0"), []byte("0"), and a
// driver.Valuer whose value is one of these (sqltype.NullID{},
// sql.NullInt64{}). Text is read strictly, as idtype.Parse reads it. An
// SQL expression (gorm.Expr) is kept for the database. Anything else that
// is not a non-negative integer is an error: a float never becomes a key,
// and nothing PostgreSQL would cast into one (" 12", "-5", 1.5) reaches it.
func mapKey(v any) (mapValue, error) {
	for depth := 0; ; depth++ {
		if v == nil {
			return mapValue{zero: true}, nil
		}
		if _, ok := v.(clause.Expression); ok {
			return mapValue{}, nil // the database's business
		}
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Pointer {
			if rv.IsNil() {
				return mapValue{zero: true}, nil
			}
			if e := rv.Elem(); e.Kind() == reflect.Int64 && e.CanSet() {
				if e.Int() == 0 {
					return mapValue{zero: true, ptr: rv}, nil
				}
				return mapValue{id: idtype.ID(e.Int())}, checkNegative(e.Int())
			}
			v = rv.Elem().Interface()
			continue
		}
		if dv, ok := v.(driver.Valuer); ok && depth < maxValuerDepth {
			x, err := dv.Value()
			if err != nil {
				return mapValue{}, err
			}
			v = x
			continue
		}
		switch rv.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			n := rv.Int()
			return mapValue{zero: n == 0, id: idtype.ID(n)}, checkNegative(n)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			n := rv.Uint()
			if n > math.MaxInt64 {
				_, err := idtype.Parse(strconv.FormatUint(n, 10)) // idtype's own ErrRange
				return mapValue{}, err
			}
			return mapValue{zero: n == 0, id: idtype.ID(n)}, nil
		case reflect.Float32, reflect.Float64:
			if rv.Float() == 0 {
				return mapValue{zero: true}, nil
			}
			var id idtype.ID
			return mapValue{}, id.Scan(rv.Float()) // idtype refuses every float
		case reflect.String:
			return textKey(rv.String())
		case reflect.Slice:
			if rv.Type().Elem().Kind() == reflect.Uint8 {
				return textKey(string(rv.Bytes()))
			}
		}
		var id idtype.ID
		return mapValue{}, id.Scan(v) // idtype's ErrUnsupportedType, naming the value
	}
}

// textKey reads a key spelled as text: "" and zeros are unassigned.
func textKey(s string) (mapValue, error) {
	if s == "" {
		return mapValue{zero: true}, nil
	}
	id, err := idtype.Parse(s)
	if err != nil {
		return mapValue{}, err
	}
	return mapValue{zero: id == 0, id: id, text: true}, nil
}

// checkNegative refuses a negative key with idtype's own error.
func checkNegative(n int64) error {
	if n >= 0 {
		return nil
	}
	_, err := idtype.ID(n).Value()
	return err
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

package gormplugin

import "gorm.io/gorm/schema"

// KeyFields returns the fields of s that the plugin fills on create, in
// the model's order: the rules of "Which fields" in the package
// documentation, with onlyTagged as the plugin's OnlyTagged. The error,
// wrapping ErrFieldType, names a field tagged `gorm:"snowflake"` that is
// not a 64-bit integer; every create of such a model fails with it.
//
// It is for code that fills keys without going through GORM's create
// callbacks, such as the loads of package bulk (pgkit/bulk), so that they
// pick exactly the fields a create would.
func KeyFields(s *schema.Schema, onlyTagged bool) ([]*schema.Field, error) {
	p := newPlan(s, onlyTagged)
	return p.fields, p.err
}

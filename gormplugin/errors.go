package gormplugin

import "errors"

// Errors a create fails with when the plugin cannot give it its keys. Each
// is wrapped with detail that names the model and field; match with
// errors.Is. The statement that fails writes nothing and its keys stay
// zero; the package documentation says what earlier statements of the same
// call (earlier batches of CreateInBatches) leave.
var (
	// ErrGenerate means the Source failed to issue the IDs the create
	// needed. The error also wraps the Source's own error, such as
	// idtype.ErrClockBehind.
	ErrGenerate = errors.New("gormplugin: generate IDs")
	// ErrFieldType means a field tagged `gorm:"snowflake"` is not of a
	// type the plugin fills: int64, idtype.ID, another type defined as
	// int64 (type Seq int64), or a pointer to one of these. int, uint64
	// and the other integer types are refused, even where they are 64
	// bits wide. The error names the model, the field and its type.
	ErrFieldType = errors.New("gormplugin: snowflake field is not int64-based")
	// ErrNotAddressable means a key needs filling in a value the plugin
	// cannot write to: a struct or array passed to Create by value. Pass a
	// pointer, as GORM's own documentation does.
	ErrNotAddressable = errors.New("gormplugin: cannot set the key of a value passed by value")
	// ErrKeyValue means a map given to Create holds, under the name of a
	// field the plugin fills, a value that is not an ID: text that is not a
	// plain decimal ("12x", "-5", " 12"), a negative number, a float, a
	// bool. The error also wraps the *idtype.Error that says why (match
	// idtype.ErrSyntax, idtype.ErrNegative and so on).
	ErrKeyValue = errors.New("gormplugin: map value is not an ID")
)

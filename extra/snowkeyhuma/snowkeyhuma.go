// Package snowkeyhuma makes huma (github.com/danielgtaylor/huma/v2)
// describe snowkey's ID types in the OpenAPI documents it produces as
// what they are on the wire, strings of decimal digits:
//
//	api := humago.New(mux, huma.DefaultConfig("posts", "1.0.0"))
//	snowkeyhuma.Register(api.OpenAPI().Components.Schemas)
//	huma.Register(api, ...) // operations after Register
//
// Without it huma already shows an idtype.ID as a string (an ID is an
// encoding.TextUnmarshaler), but with no pattern, and a sqltype.NullID
// as an object with fields ID and Valid, which no client sends. With it,
// an idtype.ID is {"type": "string", "pattern": "^(0|[1-9][0-9]{0,18})$"},
// a NullID the same or null, and a sqltype.IDs an array of them; huma
// validates requests against these schemas before the types' own
// decoders read them.
//
// Path, query and header parameters take a ParamID instead: huma parses a
// parameter by its Go kind, and an idtype.ID is an int64.
//
// A module of its own, so that huma stays out of snowkey's core module.
package snowkeyhuma

import (
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/sqltype"
)

// Pattern is the spelling of every ID: decimal digits, no sign, no
// leading zeros, at most 19 digits. The value is at most
// 9223372036854775807, which the ID's own decoder checks.
const Pattern = "^(0|[1-9][0-9]{0,18})$"

// Description is what the schemas say an ID is.
const Description = "A 64-bit snowflake ID as decimal digits, at most 9223372036854775807."

// Register makes r describe idtype.ID and sqltype.NullID (and so
// sqltype.IDs, an array of IDs) as strings of digits. Call it before
// registering the operations that use them: huma makes an operation's
// schemas when it is registered.
func Register(r huma.Registry) {
	r.RegisterTypeAlias(reflect.TypeFor[idtype.ID](), reflect.TypeFor[idSchema]())
	r.RegisterTypeAlias(reflect.TypeFor[sqltype.NullID](), reflect.TypeFor[nullIDSchema]())
}

// Schema returns the schema of an idtype.ID.
func Schema() *huma.Schema {
	return &huma.Schema{
		Type:        huma.TypeString,
		Pattern:     Pattern,
		Description: Description,
		Examples:    []any{"1541815603606036480"},
	}
}

// idSchema and nullIDSchema stand in for the ID types in the registry:
// huma asks them for their schemas.
type (
	idSchema     struct{}
	nullIDSchema struct{}
)

func (idSchema) Schema(huma.Registry) *huma.Schema { return Schema() }

func (nullIDSchema) Schema(huma.Registry) *huma.Schema {
	s := Schema()
	s.Nullable = true
	return s
}

// ParamID is an idtype.ID for path, query and header parameters:
//
//	type getPost struct {
//		ID snowkeyhuma.ParamID `path:"id"`
//	}
//
// huma parses a parameter by its Go kind, so an idtype.ID (an int64)
// would be read as a number and then fail the string schema; a ParamID
// is read by idtype.ID's UnmarshalText, which accepts the one spelling
// alone, and is described by Schema. Its ID field is the value.
type ParamID struct{ idtype.ID }

// Schema describes a ParamID as an idtype.ID (huma.SchemaProvider).
func (ParamID) Schema(huma.Registry) *huma.Schema { return Schema() }

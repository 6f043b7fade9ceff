// Package openapi shows snowflake IDs in an OpenAPI document that
// oapi-codegen and ogen read (openapi.yaml): every ID is a string of
// decimal digits on the wire, and the generated Go code keeps it exact,
// as idtype.ID (oapi-codegen, through x-go-type) or as an int64 (ogen,
// through format int64). The generated packages are oapigen and ogenapi;
// the tests serve and call both, and check that the committed code is
// what each generator writes. docs/openapi.md explains the schema.
package openapi

package sqltype

import (
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/snowkeyhq/snowkey/idtype"
)

// pgx reads and writes IDs in PostgreSQL's binary array format through
// these methods (pgtype.ArrayGetter and pgtype.ArraySetter); each element
// goes through idtype.ID's binary int8 methods, so a NULL or negative
// element is refused there.

// Dimensions returns the shape of the array for pgx: one dimension, or nil
// (SQL NULL) for a nil IDs.
func (ids IDs) Dimensions() []pgtype.ArrayDimension {
	if ids == nil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(len(ids)), LowerBound: 1}}
}

// Index returns element i, for pgx.
func (ids IDs) Index(i int) any { return ids[i] }

// IndexType returns a value of the element type, for pgx to plan the
// element encoding.
func (IDs) IndexType() any { return idtype.ID(0) }

// SetDimensions makes ids ready for pgx to scan an array of the given
// shape into: nil dimensions (SQL NULL) give a nil IDs, and more than one
// dimension is an error wrapping ErrDimensions.
func (ids *IDs) SetDimensions(dims []pgtype.ArrayDimension) error {
	switch {
	case dims == nil:
		*ids = nil
		return nil
	case len(dims) > 1:
		return &idtype.Error{Op: "scan sqltype.IDs", Input: fmt.Sprintf("bigint array of %d dimensions", len(dims)),
			Err: ErrDimensions}
	case len(dims) == 0:
		*ids = IDs{}
		return nil
	case dims[0].Length < 0:
		return &idtype.Error{Op: "scan sqltype.IDs", Input: fmt.Sprintf("bigint array of length %d", dims[0].Length),
			Err: ErrArraySyntax}
	}
	*ids = make(IDs, dims[0].Length)
	return nil
}

// ScanIndex returns where pgx scans element i into.
func (ids *IDs) ScanIndex(i int) any { return &(*ids)[i] }

// ScanIndexType returns a scan target of the element type, for pgx to plan
// the element decoding.
func (*IDs) ScanIndexType() any { return new(idtype.ID) }

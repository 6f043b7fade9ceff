package sqltype

import (
	"encoding/binary"
	"fmt"

	"github.com/snowkeyhq/snowkey/idtype"
)

// This file reads PostgreSQL's binary array format, which pgx hands to
// (*IDs).Scan as []byte when it reads a bigint[] natively:
//
//	int32  number of dimensions (0 for the empty array)
//	int32  flags (1 when there are NULL elements)
//	uint32 element type OID
//	per dimension: int32 length, int32 lower bound
//	per element:   int32 byte length (-1 for NULL), then the bytes
//
// The element type is in the data, so an array of floats or numerics is
// refused by its type before any value is read: no float becomes an ID.
// Arrays of smaller integers are read, and arrays of text are parsed as
// decimal IDs, as the text form is.

// PostgreSQL's OIDs for the element types IDs reads from binary arrays.
const (
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidText    = 25
	oidVarchar = 1043
)

// elementTypeNames names the element types an error may meet.
var elementTypeNames = map[uint32]string{
	16: "bool", 17: "bytea", 18: "char", 19: "name", 20: "int8", 21: "int2", 23: "int4", 25: "text",
	26: "oid", 700: "float4", 701: "float8", 1043: "varchar", 1082: "date", 1114: "timestamp",
	1184: "timestamptz", 1700: "numeric", 2950: "uuid", 3802: "jsonb",
}

// isBinaryArray reports whether src is in the binary format rather than
// the text one: the binary format starts with the big-endian dimension
// count (0 to 6), so its first byte is 0, which no array text starts
// with.
func isBinaryArray(src []byte) bool { return len(src) > 0 && src[0] == 0 }

// parseBinaryArray reads a one-dimensional array of integers in the binary
// format into a new IDs.
func parseBinaryArray(src []byte) (IDs, error) {
	fail := func(kind error, format string, args ...any) error {
		return &idtype.Error{Op: "scan sqltype.IDs", Input: fmt.Sprintf("binary array of %d bytes", len(src)),
			Err: fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))}
	}
	if len(src) < 12 {
		return nil, fail(ErrArraySyntax, "a header of %d bytes; want at least 12", len(src))
	}
	ndim := int32(binary.BigEndian.Uint32(src))
	elemOID := binary.BigEndian.Uint32(src[8:])
	switch elemOID {
	case oidInt8, oidInt4, oidInt2, oidText, oidVarchar:
	default:
		name, ok := elementTypeNames[elemOID]
		if !ok {
			name = fmt.Sprintf("type OID %d", elemOID)
		}
		kind := fmt.Errorf("%w: an array of %s; IDs reads arrays of bigint (cast the column to bigint[])",
			idtype.ErrUnsupportedType, name)
		if elemOID == 700 || elemOID == 701 || elemOID == 1700 {
			kind = fmt.Errorf("%w: an array of %s, which cannot carry IDs exactly; store and select IDs as bigint[]",
				idtype.ErrUnsupportedType, name)
		}
		return nil, &idtype.Error{Op: "scan sqltype.IDs", Input: fmt.Sprintf("binary array of %s", name), Err: kind}
	}
	switch {
	case ndim == 0:
		if len(src) != 12 {
			return nil, fail(ErrArraySyntax, "%d bytes after the header of an empty array", len(src)-12)
		}
		return IDs{}, nil
	case ndim > 1:
		return nil, fail(ErrDimensions, "%d dimensions", ndim)
	case ndim < 0:
		return nil, fail(ErrArraySyntax, "%d dimensions", ndim)
	case len(src) < 20:
		return nil, fail(ErrArraySyntax, "a header of %d bytes; want 20 for one dimension", len(src))
	}
	n := int32(binary.BigEndian.Uint32(src[12:]))
	rest := src[20:]
	// Each element takes at least its 4-byte length: a count beyond that
	// is a lie, and must not size an allocation.
	if n < 0 || int(n) > len(rest)/4 {
		return nil, fail(ErrArraySyntax, "%d elements announced in %d bytes", n, len(rest))
	}
	width := 0 // bytes of an integer element; 0 for text
	switch elemOID {
	case oidInt8:
		width = 8
	case oidInt4:
		width = 4
	case oidInt2:
		width = 2
	}
	out := make(IDs, n)
	for i := range out {
		if len(rest) < 4 {
			return nil, fail(ErrArraySyntax, "element %d is cut short", i)
		}
		size := int32(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
		if size == -1 {
			return nil, fail(idtype.ErrNull, "element %d", i)
		}
		if size < 0 || int(size) > len(rest) {
			return nil, fail(ErrArraySyntax, "element %d has length %d with %d bytes left", i, size, len(rest))
		}
		elem := rest[:size]
		rest = rest[size:]
		if width == 0 {
			if err := out[i].UnmarshalText(elem); err != nil {
				return nil, fail(kindOf(err), "element %d %s", i, describeInput(elem))
			}
			continue
		}
		if len(elem) != width {
			return nil, fail(ErrArraySyntax, "element %d of %s has %d bytes, not %d",
				i, elementTypeNames[elemOID], len(elem), width)
		}
		var v int64
		switch width {
		case 8:
			v = int64(binary.BigEndian.Uint64(elem))
		case 4:
			v = int64(int32(binary.BigEndian.Uint32(elem)))
		default:
			v = int64(int16(binary.BigEndian.Uint16(elem)))
		}
		if v < 0 {
			return nil, fail(idtype.ErrNegative, "element %d is %d", i, v)
		}
		out[i] = idtype.ID(v)
	}
	if len(rest) != 0 {
		return nil, fail(ErrArraySyntax, "%d bytes after the last element", len(rest))
	}
	return out, nil
}

package sqltype

import (
	"encoding/binary"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/snowkeyhq/snowkey/idtype"
)

// This file is what pgx, used natively, needs beyond sql.Scanner and
// driver.Valuer.
//
// Scanning goes through Scan everywhere. pgx's own integer interfaces
// (pgtype.Int64Scanner) are not implemented on purpose: pgx hands a float4,
// float8 or numeric column to an Int64Scanner as soon as the float is
// whole, so 2124962550683529217 stored as a float8 would scan as the ID
// 2124962550683529216. Through Scan, pgx hands over the float itself, which
// is refused.
//
// The price is speed: pgx boxes every int8 it passes to Scan. RegisterPgx
// gets the speed back without the hole, by deciding on the column's type
// (bigint only) instead of on the Go type.

// Dimensions returns the shape of the array for pgx (pgtype.ArrayGetter):
// one dimension, or nil (SQL NULL) for a nil IDs. pgx then writes the IDs
// as a binary bigint[].
func (ids IDs) Dimensions() []pgtype.ArrayDimension {
	if ids == nil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(len(ids)), LowerBound: 1}}
}

// Index returns element i, for pgx.
func (ids IDs) Index(i int) any { return idElem(ids[i]) }

// IndexType returns a value of the element type, for pgx to plan the
// element encoding.
func (IDs) IndexType() any { return idElem(0) }

// idElem is an element of IDs as pgx writes it: through pgx's binary int8
// encoder, with negative IDs refused. It is never a scan target, so it
// cannot be handed a float.
type idElem idtype.ID

// Int64Value implements pgtype.Int64Valuer.
func (e idElem) Int64Value() (pgtype.Int8, error) {
	if e < 0 {
		_, err := idtype.ID(e).Value() // idtype's own refusal of a negative ID
		return pgtype.Int8{}, err
	}
	return pgtype.Int8{Int64: int64(e), Valid: true}, nil
}

// RegisterPgx makes pgx read and write bigint columns as idtype.ID and
// NullID in its binary format directly, without the allocations of the
// generic Scan path (BENCHMARKS.md gives their cost, from
// BenchmarkPgxScanRows). Call it once per connection, before the
// connection's first query, for example in pgxpool.Config.AfterConnect:
//
//	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
//		sqltype.RegisterPgx(conn.TypeMap())
//		return nil
//	}
//
// It replaces the codec of PostgreSQL's int8 type in m with one that
// handles these two Go types itself and passes everything else to the codec
// registered before. Only int8 columns take the fast path; a float,
// numeric or any other column still goes through Scan and is refused or
// converted exactly as without RegisterPgx. Results, errors and the
// destination on error are the same with it and without it.
func RegisterPgx(m *pgtype.Map) {
	base := pgtype.Codec(pgtype.Int8Codec{})
	name := "int8"
	if t, ok := m.TypeForOID(pgtype.Int8OID); ok {
		base, name = t.Codec, t.Name
	}
	if _, done := base.(int8Codec); done {
		return
	}
	m.RegisterType(&pgtype.Type{Name: name, OID: pgtype.Int8OID, Codec: int8Codec{base}})
}

// int8Codec is an int8 codec with binary plans of its own for idtype.ID
// and NullID; it passes every other value to the codec it wraps.
type int8Codec struct{ pgtype.Codec }

// PlanScan implements pgtype.Codec.
func (c int8Codec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if format == pgtype.BinaryFormatCode {
		switch target.(type) {
		case *idtype.ID:
			return scanBinaryID{}
		case *NullID:
			return scanBinaryNullID{}
		}
	}
	return c.Codec.PlanScan(m, oid, format, target)
}

// PlanEncode implements pgtype.Codec.
func (c int8Codec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if format == pgtype.BinaryFormatCode {
		switch value.(type) {
		case idtype.ID:
			return encodeBinaryID{}
		case NullID:
			return encodeBinaryNullID{}
		}
	}
	return c.Codec.PlanEncode(m, oid, format, value)
}

// binaryInt8 reads an int8 in PostgreSQL's binary format.
func binaryInt8(src []byte) (int64, error) {
	if len(src) != 8 {
		return 0, &idtype.Error{Op: "scan", Input: describeInput(src),
			Err: fmt.Errorf("%w: a binary int8 has 8 bytes, not %d", idtype.ErrSyntax, len(src))}
	}
	return int64(binary.BigEndian.Uint64(src)), nil
}

type scanBinaryID struct{}

// Scan implements pgtype.ScanPlan. Errors come from (*idtype.ID).Scan, so
// they are the same as without RegisterPgx.
func (scanBinaryID) Scan(src []byte, dst any) error {
	id := dst.(*idtype.ID)
	if src == nil {
		return id.Scan(nil)
	}
	v, err := binaryInt8(src)
	if err != nil {
		return err
	}
	if v < 0 {
		return id.Scan(v)
	}
	*id = idtype.ID(v)
	return nil
}

type scanBinaryNullID struct{}

// Scan implements pgtype.ScanPlan.
func (scanBinaryNullID) Scan(src []byte, dst any) error {
	n := dst.(*NullID)
	if src == nil {
		*n = NullID{}
		return nil
	}
	v, err := binaryInt8(src)
	if err != nil {
		return err
	}
	if v < 0 {
		return n.Scan(v)
	}
	*n = NullID{ID: idtype.ID(v), Valid: true}
	return nil
}

type encodeBinaryID struct{}

// Encode implements pgtype.EncodePlan.
func (encodeBinaryID) Encode(value any, buf []byte) ([]byte, error) {
	id := value.(idtype.ID)
	if id < 0 {
		_, err := id.Value()
		return nil, err
	}
	return binary.BigEndian.AppendUint64(buf, uint64(id)), nil
}

type encodeBinaryNullID struct{}

// Encode implements pgtype.EncodePlan; nil is SQL NULL.
func (encodeBinaryNullID) Encode(value any, buf []byte) ([]byte, error) {
	n := value.(NullID)
	if !n.Valid {
		return nil, nil
	}
	return encodeBinaryID{}.Encode(n.ID, buf)
}

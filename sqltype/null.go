package sqltype

import (
	"bytes"
	"database/sql/driver"

	"github.com/snowkeyhq/snowkey/idtype"
)

// NullID is an ID that may be missing: a nullable bigint column, an
// optional reference. The zero value is NULL.
//
// The three forms of "missing" are one: SQL NULL scans to Valid == false,
// Valid == false is written as NULL and as JSON null, and JSON null reads
// back as Valid == false. A valid ID is written to JSON as a quoted
// decimal, exactly as idtype.ID writes it, and reads from whatever
// idtype.ID reads (a quoted decimal or a bare number).
//
// Parsing and its errors are idtype's own: the same inputs are refused with
// the same *idtype.Error as for a plain ID.
type NullID struct {
	// ID is the value; it means nothing when Valid is false.
	ID idtype.ID
	// Valid is true when the value is not NULL.
	Valid bool
}

// NewNullID returns a valid NullID holding id.
func NewNullID(id idtype.ID) NullID {
	return NullID{ID: id, Valid: true}
}

// Scan reads a nullable ID column (sql.Scanner): NULL gives Valid ==
// false; anything else is read as (*idtype.ID).Scan reads it, with its
// errors. On error n is unchanged.
func (n *NullID) Scan(src any) error {
	if src == nil {
		*n = NullID{}
		return nil
	}
	var id idtype.ID
	if err := id.Scan(src); err != nil {
		return err
	}
	*n = NullID{ID: id, Valid: true}
	return nil
}

// Value writes NULL when n is not valid and the ID otherwise
// (driver.Valuer). A negative ID is refused, as idtype.ID refuses it.
func (n NullID) Value() (driver.Value, error) {
	if !n.Valid {
		return nil, nil
	}
	return n.ID.Value()
}

// GormDataType tells GORM that a NullID column is a bigint.
func (NullID) GormDataType() string { return "bigint" }

// MarshalJSON writes null when n is not valid and the ID as a quoted
// decimal otherwise, as encoding/json writes an idtype.ID.
func (n NullID) MarshalJSON() ([]byte, error) {
	if !n.Valid {
		return []byte("null"), nil
	}
	b := append(make([]byte, 0, 22), '"')
	b, _ = n.ID.AppendText(b)
	return append(b, '"'), nil
}

// UnmarshalJSON reads null as Valid == false and anything else as
// (*idtype.ID).UnmarshalJSON reads it, with its errors. On error n is
// unchanged.
func (n *NullID) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*n = NullID{}
		return nil
	}
	var id idtype.ID
	if err := id.UnmarshalJSON(b); err != nil {
		return err
	}
	*n = NullID{ID: id, Valid: true}
	return nil
}

// String returns the ID in decimal, or "NULL" when n is not valid, for
// logs and debugging.
func (n NullID) String() string {
	if !n.Valid {
		return "NULL"
	}
	return n.ID.String()
}

package gormplugin

import (
	"slices"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"
)

// upsertReturning makes an upsert read back the keys the rows really have.
//
// With ON CONFLICT ... DO UPDATE, a row that already existed keeps its own
// key, not the one the struct was given. When the conflict target does not
// include a key column, this adds that column to the statement's RETURNING
// clause, and GORM then scans the row's real key into the struct. A target
// that includes the key needs nothing: a conflict there means the keys are
// equal.
//
// ON CONFLICT DO NOTHING is left as it is: RETURNING yields no row for a
// conflict, and GORM cannot tell which struct of a batch it was. A struct
// whose row was not inserted keeps the key the plugin gave it, which no row
// has; RowsAffected says how many rows were inserted, and a query on the
// conflict columns finds the real keys.
//
// Maps are left as they are too: GORM appends RETURNING rows to a slice of
// maps instead of merging them.
func (p *Plugin) upsertReturning(stmt *gorm.Statement, fields []*schema.Field) {
	c, ok := stmt.Clauses["ON CONFLICT"]
	if !ok {
		return
	}
	oc, ok := c.Expression.(clause.OnConflict)
	if !ok || oc.DoNothing || (len(oc.DoUpdates) == 0 && !oc.UpdateAll) {
		return
	}
	if !slices.Contains(stmt.DB.Callback().Create().Clauses, "RETURNING") {
		return // the dialect cannot; nothing to be done
	}

	var missing []clause.Column
	for _, f := range fields {
		if f.Readable && !inTarget(stmt.Schema, oc, f) {
			missing = append(missing, clause.Column{Name: f.DBName})
		}
	}
	if len(missing) == 0 {
		return
	}
	if r, ok := stmt.Clauses["RETURNING"]; ok {
		if ret, _ := r.Expression.(clause.Returning); len(ret.Columns) == 0 {
			return // RETURNING *: every column comes back already
		}
		stmt.AddClause(clause.Returning{Columns: missing}) // merged into the existing list
		return
	}
	// GORM adds a RETURNING clause for the columns the database fills
	// (defaults) only when the statement has none; since this one will,
	// it names them too.
	cols := make([]clause.Column, 0, len(stmt.Schema.FieldsWithDefaultDBValue)+len(missing))
	for _, f := range stmt.Schema.FieldsWithDefaultDBValue {
		if f.Readable {
			cols = append(cols, clause.Column{Name: f.DBName})
		}
	}
	for _, m := range missing {
		if !slices.Contains(cols, m) {
			cols = append(cols, m)
		}
	}
	stmt.AddClause(clause.Returning{Columns: cols})
}

// inTarget reports whether column f is part of the conflict target. With
// no target columns, an UpdateAll upsert conflicts on the primary key
// (GORM fills that in later); a named constraint is not inspected.
func inTarget(s *schema.Schema, oc clause.OnConflict, f *schema.Field) bool {
	if oc.OnConstraint != "" {
		return false
	}
	if len(oc.Columns) == 0 {
		return oc.UpdateAll && f.PrimaryKey && slices.Contains(s.PrimaryFields, f)
	}
	for _, c := range oc.Columns {
		if c.Name == f.DBName {
			return true
		}
	}
	return false
}

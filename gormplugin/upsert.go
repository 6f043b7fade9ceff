package gormplugin

import (
	"reflect"
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
	c, ok := stmt.Clauses[onConflict]
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

// onConflictBuilder returns the builder of the ON CONFLICT clause that the
// plugin registers in db.ClauseBuilders; next is the builder registered
// before it, or nil for the clause's own Build.
//
// OnConflict{UpdateAll: true} makes GORM set every inserted column to
// excluded.<column>, except the primary key, columns with a database
// default and autoCreateTime, so that an existing row keeps them. A
// snowflake field is in the same position: the plugin gave the struct a
// fresh value only because it was zero, and copying that over the row's
// would change its public ID. GORM expands UpdateAll into assignments
// while it builds the INSERT, after every callback has run, so the place
// to leave the snowflake fields out is the clause's builder, which sees
// GORM's own list. The statement's clause is not changed, only what is
// written for it. An assignment the caller wrote in DoUpdates is kept.
func (p *Plugin) onConflictBuilder(next clause.ClauseBuilder) clause.ClauseBuilder {
	return func(c clause.Clause, b clause.Builder) {
		if oc, ok := c.Expression.(clause.OnConflict); ok && oc.UpdateAll && !oc.DoNothing {
			if stmt, ok := b.(*gorm.Statement); ok && stmt.Schema != nil {
				if pl := p.planOf(stmt.Schema); pl.err == nil {
					oc.DoUpdates = keepSnowflakes(oc.DoUpdates, pl.fields)
					c.Expression = oc
				}
			}
		}
		if next != nil {
			next(c, b)
			return
		}
		c.Build(b)
	}
}

// keepSnowflakes returns set without the assignments col = excluded.col
// of the snowflake fields. When nothing would be left, the first such
// column is set to itself instead, so that the statement still updates the
// row (and RETURNING reads it) as GORM's UpdateAll asked, where an empty
// SET list would not be valid SQL.
func keepSnowflakes(set clause.Set, fields []*schema.Field) clause.Set {
	var out clause.Set
	var first string
	for i, a := range set {
		if !fromExcluded(a, fields) {
			if out != nil {
				out = append(out, a)
			}
			continue
		}
		if out == nil {
			out = append(make(clause.Set, 0, len(set)), set[:i]...)
			first = a.Column.Name
		}
	}
	if out == nil {
		return set // nothing to leave out
	}
	if len(out) == 0 {
		out = append(out, clause.Assignment{Column: clause.Column{Name: first},
			Value: clause.Column{Table: clause.CurrentTable, Name: first}})
	}
	return out
}

// fromExcluded reports whether a sets a snowflake field to the value the
// insert proposed, as UpdateAll does.
func fromExcluded(a clause.Assignment, fields []*schema.Field) bool {
	v, ok := a.Value.(clause.Column)
	if !ok || v.Table != "excluded" || v.Name != a.Column.Name || v.Raw || a.Column.Raw {
		return false
	}
	for _, f := range fields {
		if !f.PrimaryKey && f.DBName == a.Column.Name {
			return true
		}
	}
	return false
}

// UpdateCallbackName is the name of the plugin's update callback, which
// runs before GORM's "gorm:update".
const UpdateCallbackName = "snowkey:keep_on_save"

// keepOnSave is the update callback. Save of a struct whose key is set
// updates every column (Select("*")), and so would write a zero snowflake
// field over the row's value, which the struct did not know. Such a field
// is left out of the SET list, as the create path treats a zero field as
// unassigned, and read back with RETURNING so the struct holds the row's
// value. A field named in Select, or holding a value, is updated as asked.
func (p *Plugin) keepOnSave(db *gorm.DB) {
	stmt := db.Statement
	if db.Error != nil || stmt.Schema == nil || !slices.Contains(stmt.Selects, "*") {
		return
	}
	rv := stmt.ReflectValue
	if rv.Kind() != reflect.Struct || rv.Type() != stmt.Schema.ModelType {
		return
	}
	pl := p.planOf(stmt.Schema)
	if pl.err != nil {
		return
	}
	var keep []clause.Column
	for _, f := range pl.fields {
		if f.PrimaryKey || slices.Contains(stmt.Selects, f.Name) || slices.Contains(stmt.Selects, f.DBName) {
			continue
		}
		if _, zero := f.ValueOf(stmt.Context, rv); zero {
			keep = append(keep, clause.Column{Name: f.DBName})
		}
	}
	if len(keep) == 0 {
		return
	}
	// The statement is this update's own copy (Save runs the update in a
	// session of its own), so neither the Omit nor the RETURNING reaches
	// the create Save runs when no row matched.
	omits := slices.Clip(stmt.Omits)
	for _, c := range keep {
		omits = append(omits, c.Name)
	}
	stmt.Omits = omits
	if !slices.Contains(db.Callback().Update().Clauses, "RETURNING") {
		return
	}
	if r, ok := stmt.Clauses["RETURNING"]; ok {
		if ret, _ := r.Expression.(clause.Returning); len(ret.Columns) == 0 {
			return // RETURNING *
		}
	}
	stmt.AddClause(clause.Returning{Columns: keep})
}

package bunkeys

import (
	"reflect"

	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/schema"

	"github.com/snowkeyhq/snowkey/sqltype"
)

// Dialect is bun's PostgreSQL dialect (pgdialect) with snowkey's ID types
// registered: a table bun creates from a model (NewCreateTable,
// NewAddColumn) gets a bigint column for a sqltype.NullID field and a
// bigint[] column for a sqltype.IDs field, as it does for an idtype.ID.
// pgdialect alone makes both jsonb, since it stores a struct or a slice it
// does not know as JSON, and an insert then fails (column "parent" is of
// type jsonb but expression is of type bigint). Values go through the
// types' own Value and Scan either way. A field with a `type:` tag keeps
// the type it names.
//
// Open bun with it where the app would call pgdialect.New:
//
//	db := bun.NewDB(sqldb, bunkeys.NewDialect())
type Dialect struct {
	*pgdialect.Dialect
	tables *schema.Tables
}

// NewDialect returns pgdialect.New(opts...) with the ID types registered.
func NewDialect(opts ...pgdialect.DialectOption) *Dialect {
	d := &Dialect{Dialect: pgdialect.New(opts...)}
	// bun parses a model through the dialect's Tables, which call back the
	// dialect they were made with: these call d.OnTable.
	d.tables = schema.NewTables(d)
	return d
}

// Tables returns the dialect's table cache, which parses models with
// OnTable.
func (d *Dialect) Tables() *schema.Tables { return d.tables }

// OnTable sets the SQL type of each sqltype.NullID and sqltype.IDs field
// of table that has no `type:` tag; bun calls it once per model.
func (d *Dialect) OnTable(table *schema.Table) {
	d.Dialect.OnTable(table)
	for _, f := range table.Fields {
		if f.UserSQLType != "" {
			continue
		}
		switch f.IndirectType {
		case reflect.TypeFor[sqltype.NullID]():
			f.DiscoveredSQLType = "bigint"
		case reflect.TypeFor[sqltype.IDs]():
			f.DiscoveredSQLType = "bigint[]"
		}
	}
}

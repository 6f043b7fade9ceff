package partition

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Create makes the table of a GORM model partitioned by range on its
// snowflake key, which GORM's AutoMigrate cannot do, and then runs
// Maintain, so that the table leaves it with its default partition and
// the partitions of the current and the next Premake periods.
//
// GORM writes the CREATE TABLE (columns, primary key, indexes, unique
// and check constraints, foreign keys to other tables) with PARTITION BY
// RANGE (key) added. Before it does, Create checks what PostgreSQL
// requires, so that the error says why instead of PostgreSQL's terse one
// (ErrKey): the key is a 64-bit integer column, and the primary
// key and every unique constraint or unique index include it, since
// PostgreSQL enforces uniqueness per partition. A model that others
// reference by foreign key (it has has-one, has-many or many2many
// associations) needs PostgreSQL 12, as does any foreign key into a
// partitioned table; PostgreSQL 11 is the least (ErrServer).
// Foreign keys declared only on the other model are PostgreSQL's to
// refuse.
//
// When the table exists, Create leaves it as it is if it is
// partitioned by range on the key, and fails with ErrNotPartitioned if it
// is a plain table: PostgreSQL cannot partition a table in place. Call it
// before AutoMigrate, which would make a plain table; after it, AutoMigrate
// finds the table there and only adds what the model gained (columns,
// indexes; a unique index must still include the key, or PostgreSQL
// refuses it). It is safe to call from every instance of an app at start-up:
// the creation is serialized by the advisory lock LockClass.
//
// model is a pointer to the model, whose table must be the Table's.
// db must be on a connection pool, not in a transaction: Maintain runs
// each of its steps in a transaction of its own.
func (p *Table) Create(ctx context.Context, db *gorm.DB, model any) error {
	if db == nil {
		return fmt.Errorf("%w: Create: nil *gorm.DB", idtype.ErrInvalidOptions)
	}
	stmt := &gorm.Statement{DB: db}
	if err := stmt.Parse(model); err != nil {
		return fmt.Errorf("%w: Create: model %T: %w", idtype.ErrInvalidOptions, model, err)
	}
	sch := stmt.Schema
	if sch.Table != p.Name() {
		return fmt.Errorf("%w: Create: model %s's table is %q, the Table's is %q",
			idtype.ErrInvalidOptions, sch.Name, sch.Table, p.Name())
	}
	key, err := p.keyField(sch)
	if err != nil {
		return err
	}
	// GORM's DB() digs the pool out of a transaction too; Maintain on the
	// pool would not see a table made in it.
	pool := db.ConnPool
	if db.Statement != nil && db.Statement.ConnPool != nil {
		pool = db.Statement.ConnPool
	}
	if _, inTx := pool.(gorm.TxCommitter); inTx {
		return fmt.Errorf("%w: Create needs a *gorm.DB on a connection pool, not in a transaction: "+
			"Maintain runs each step in a transaction of its own", idtype.ErrInvalidOptions)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return fmt.Errorf("%w: Create needs a *gorm.DB on a *sql.DB: %w", idtype.ErrInvalidOptions, err)
	}
	var version int
	if err := sqlDB.QueryRowContext(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return fmt.Errorf("partition: create %s: %w", p.Name(), err)
	}
	if err := checkServer(version, sch); err != nil {
		return err
	}

	err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var schemaName *string
		if p.schema != "" {
			schemaName = &p.schema
		}
		// The table may not exist yet, so the lock is on its name.
		if err := tx.Exec("SELECT pg_advisory_xact_lock(?, hashtext(coalesce(?, current_schema()) || '.' || ?))",
			LockClass, schemaName, p.table).Error; err != nil {
			return fmt.Errorf("partition: create %s: advisory lock: %w", p.Name(), err)
		}
		var oid sql.NullInt64
		if err := tx.Raw("SELECT to_regclass(?)::oid::bigint", p.quoted()).Row().Scan(&oid); err != nil {
			return fmt.Errorf("partition: create %s: %w", p.Name(), err)
		}
		if oid.Valid {
			q, ok := tx.Statement.ConnPool.(querier)
			if !ok {
				return fmt.Errorf("partition: create %s: GORM's connection (%T) cannot query", p.Name(), tx.Statement.ConnPool)
			}
			st, err := p.readState(ctx, q, uint32(oid.Int64))
			if err != nil {
				return err
			}
			if st.key != key.DBName {
				return fmt.Errorf("%w: table %s exists, partitioned by %s, not by the model's key %s",
					ErrNotPartitioned, p.Name(), st.key, key.DBName)
			}
			return nil
		}
		opts := " PARTITION BY RANGE (" + pgx.Identifier{key.DBName}.Sanitize() + ")"
		if err := tx.Set("gorm:table_options", opts).Migrator().CreateTable(model); err != nil {
			return fmt.Errorf("partition: create %s: %w", p.Name(), err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	_, err = p.Maintain(ctx, sqlDB)
	return err
}

// keyField finds the model's partition key and checks it against what
// PostgreSQL requires of a partitioned table.
func (p *Table) keyField(sch *schema.Schema) (*schema.Field, error) {
	var key *schema.Field
	switch {
	case p.column != "":
		if key = sch.LookUpField(p.column); key == nil {
			return nil, fmt.Errorf("%w: model %s has no column %q (Options.Column)", ErrKey, sch.Name, p.column)
		}
	case len(sch.PrimaryFields) == 1:
		key = sch.PrimaryFields[0]
	default:
		return nil, fmt.Errorf("%w: model %s has %d primary key columns; say which is the snowflake key in Options.Column",
			ErrKey, sch.Name, len(sch.PrimaryFields))
	}
	t := key.FieldType
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Int64 {
		return nil, fmt.Errorf("%w: model %s's key %s is a %s, not a 64-bit integer such as idtype.ID",
			ErrKey, sch.Name, key.Name, key.FieldType)
	}
	if len(sch.PrimaryFields) > 0 && !hasField(sch.PrimaryFields, key) {
		return nil, fmt.Errorf("%w: model %s's primary key (%s) leaves out the partition key %s; "+
			"PostgreSQL requires a partitioned table's primary key to include it", ErrKey, sch.Name,
			columnList(sch.PrimaryFields), key.DBName)
	}
	for _, f := range sch.Fields {
		if f.Unique && f != key {
			return nil, fmt.Errorf("%w: model %s's field %s is unique on its own (tag unique); PostgreSQL enforces "+
				"uniqueness per partition and refuses a unique constraint that leaves out the partition key %s: "+
				"make it a unique index on (%s, %s), or keep it unique elsewhere", ErrKey, sch.Name, f.Name,
				key.DBName, f.DBName, key.DBName)
		}
	}
	for _, idx := range sch.ParseIndexes() {
		if !strings.EqualFold(idx.Class, "UNIQUE") {
			continue
		}
		fields := make([]*schema.Field, 0, len(idx.Fields))
		for _, o := range idx.Fields {
			if o.Field != nil && o.Expression == "" {
				fields = append(fields, o.Field)
			}
		}
		if !hasField(fields, key) {
			return nil, fmt.Errorf("%w: model %s's unique index %s on (%s) leaves out the partition key %s; "+
				"PostgreSQL enforces uniqueness per partition and refuses it: add %s to the index",
				ErrKey, sch.Name, idx.Name, columnList(fields), key.DBName, key.DBName)
		}
	}
	return key, nil
}

func hasField(fields []*schema.Field, f *schema.Field) bool {
	for _, g := range fields {
		if g.DBName == f.DBName {
			return true
		}
	}
	return false
}

func columnList(fields []*schema.Field) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.DBName
	}
	return strings.Join(names, ", ")
}

// checkServer refuses a server (server_version_num) too old for the
// model's partitioned table.
func checkServer(version int, sch *schema.Schema) error {
	if version < 110000 {
		return fmt.Errorf("%w: the server is PostgreSQL %d; a table partitioned by key time needs 11 or later "+
			"(a default partition, a primary key on a partitioned table)", ErrServer, version/10000)
	}
	if version >= 120000 {
		return nil
	}
	rels := &sch.Relationships
	for _, group := range [][]*schema.Relationship{rels.HasOne, rels.HasMany, rels.Many2Many} {
		if len(group) == 0 {
			continue
		}
		r, from := group[0], group[0].FieldSchema.Table
		if r.JoinTable != nil {
			from = r.JoinTable.Table
		}
		return fmt.Errorf("%w: model %s is referenced by table %s (association %s): a foreign key into a "+
			"partitioned table needs PostgreSQL 12; the server is %d", ErrServer, sch.Name, from, r.Name, version/10000)
	}
	return nil
}

// Package pgkit holds snowkey's PostgreSQL helpers that are not
// migrations: tables cut into partitions by the time in their snowflake
// keys, kept by a maintenance call; loading whole object graphs at COPY
// speed; and moving an existing schema's serial keys onto snowflakes. Each
// is something snowflake keys allow and bigserial keys do not: a key
// carries its time, every key is known before a row is sent, and new keys
// can be told apart from old ones. The SQL functions it builds on
// (snowflake_time, snowflake_first_id, snowflake_id, ...) ship in package
// migrations.
//
// # Options
//
// As everywhere in snowkey, each constructor or call takes one options
// struct by value (PartitionOptions, BulkOptions, AdoptOptions; optional
// where the zero value serves), whose zero fields are documented defaults
// (PartitionOptions{} partitions by day); a bad option is an error
// wrapping idtype.ErrInvalidOptions that names the field and value.
//
// # Partitions by ID time
//
// A snowflake carries its creation time, so a table keyed by snowflakes
// can be cut by time on its key alone, with no created_at column or
// index: a range partition whose bounds are the first IDs
// (idtype.Layout.FirstID) of a day, a week or a month holds exactly that
// period's rows. A Partitioner makes such a table for a GORM model, and
// keeps it:
//
//	parts, err := pgkit.NewPartitioner("events", gen.Layout(), pgkit.PartitionOptions{
//		Period:    pgkit.Day,
//		Retention: 90 * 24 * time.Hour,
//	})
//	err = parts.CreateTable(ctx, gormDB, &Event{}) // PARTITION BY RANGE (id), a default partition, today and 4 days ahead
//	go parts.Run(ctx, sqlDB)                       // every hour: days ahead made, days past 90 dropped
//
// What it gives:
//
//   - A query that bounds the key by time reads only the partitions of
//     that time: WHERE id >= FirstID(from) AND id < FirstID(to), and
//     WHERE id = ?, are pruned by the planner to the partitions they can
//     touch (Partitioner.Bounds gives one period's range).
//   - Retention is a DROP TABLE per period, not a DELETE of millions of
//     rows that leaves the table to VACUUM: Maintain removes the
//     partitions whose whole period is older than Retention.
//   - Rows whose period has no partition yet (a clock ahead, maintenance
//     that did not run) land in the default partition, and Maintain moves
//     them when it makes their partition.
//
// Maintain is idempotent and safe to call from every app instance at once
// (each step takes an advisory lock); Run calls it in a loop until its
// context ends. Periods start at midnight UTC, weeks on Monday.
//
// # What PostgreSQL requires
//
// PostgreSQL enforces a unique constraint per partition, so the primary
// key and every unique constraint or index must include the partition key;
// CreateTable checks the model first and says which does not
// (ErrPartitionKey). A foreign key into a partitioned table needs
// PostgreSQL 12; PostgreSQL 11 is the least for any of this
// (ErrPartitionServer). GORM's AutoMigrate makes plain tables, and a plain
// table cannot be partitioned in place (ErrNotPartitioned): call
// CreateTable first; AutoMigrate afterwards finds the table and only adds
// what the model gained.
//
// # When not to partition
//
// Partitions pay off for big tables that are read and expired by time
// (events, messages, audit logs). A lookup by anything but the key (a
// user's email) reads every partition's index, and each partition costs
// planning time and a file set; a table of a few million rows, or one
// whose rows are kept for ever and read by other columns, is better left
// whole, with a plain B-tree on the key for time ranges.
//
// # Bulk loads
//
// With bigserial keys a client must INSERT ... RETURNING to learn a
// parent's key before it can write the children, so bulk loads go through
// batched INSERTs. With snowflakes every key is known up front, and
// parents, children and join rows can all go through COPY:
//
//	gen, _ := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 7})
//	authors := []Author{{Name: "Ann", Books: []Book{{Title: "One"}, {Title: "Two"}}}, ...}
//	res, err := pgkit.BulkCreate(ctx, db, gen, authors)
//
// BulkCreate takes a slice of GORM models (structs or pointers) with their
// has-one, has-many, belongs-to and many2many associations, and writes
// what db.Create(&authors) writes, in one transaction: it fills every zero
// snowflake key (the fields gormplugin fills, see gormplugin.KeyFields)
// with one Source.NextN per batch, sets every foreign key from the keys it
// just made, and copies each table with pgx's binary CopyFrom, tables
// that others refer to first. The keys, foreign keys and GORM-set columns
// are written back into the structs. BulkCreateSeq does the same for an
// iter.Seq, reading BatchSize rows at a time, so that its memory is
// bounded by the batch whatever the number of rows.
//
// The connection: db is the app's *gorm.DB on PostgreSQL through pgx
// (gorm.io/driver/postgres, whose pool is database/sql over pgx's stdlib
// driver). The load takes a connection from that pool and runs in a
// transaction of its own. database/sql hides the connection of a
// transaction, so a load cannot join db.Transaction (it fails with
// ErrBulkConn); to load inside a transaction of your own, begin it with
// pgx (on a pgx.Conn or pgxpool.Pool) and pass it as BulkOptions.Tx: the
// load then runs in a savepoint of it, and db only supplies the models'
// schema.
//
// Which rows, as Create writes them:
//
//   - the input rows, and their has-one and has-many rows, are always
//     written, with the keys they hold or new ones;
//   - a belongs-to or many2many row with a zero key is new: it gets a key
//     and is written once, however many rows share it (through a pointer);
//   - a belongs-to or many2many row whose key is set is taken as a row
//     that exists: only the foreign key or join row that points at it is
//     written, and its own associations are not followed. Create inserts
//     such rows with ON CONFLICT DO NOTHING, which ends the same when the
//     row exists; when it does not, the load fails on the foreign key;
//   - a many2many pair given twice is one join row, as with Create.
//
// Which columns, as Create binds them: GORM's create columns of each model
// (embedded structs included; `-` and read-only fields left out), each
// value taken with the field's ValueOf (so serializers and driver.Valuer
// types work) and encoded by pgx for the column's type, in binary: an
// idtype.ID, a sqltype.NullID and a sqltype.IDs go as int8 and int8[]. A
// zero field with a `default:` value GORM parses gets that value, and a
// zero autoCreateTime or autoUpdateTime field gets db.NowFunc(), set in
// the struct as Create sets it. A zero field whose default is the
// database's (`default:now()`, `default:snowflake_id()`) is left to the
// database; rows that set such columns and rows that do not go in separate
// COPYs.
//
// Where a load differs from Create:
//
//   - Hooks. A load calls no hooks (BeforeSave, BeforeCreate, AfterCreate,
//     AfterSave). A model that has any fails the load with ErrBulkHooks,
//     before anything is written, unless BulkOptions.SkipHooks says to
//     load it without them; to keep their effect, call them on the rows
//     before the load.
//   - Conflicts. COPY has no ON CONFLICT: a row that breaks a unique
//     constraint fails the whole load with PostgreSQL's unique_violation
//     (23505), and nothing is written. To merge rows of one table into
//     existing ones, load them into a staging table (CREATE UNLOGGED
//     TABLE staging (LIKE t INCLUDING DEFAULTS), loaded with
//     db.Table("staging")) and move them with INSERT INTO t SELECT * FROM
//     staging ON CONFLICT ... DO NOTHING (or DO UPDATE). A graph cannot
//     be merged that way: a child would point at a parent key that the
//     conflict threw away.
//   - Database defaults are not read back into the structs: Create does
//     that with RETURNING, which COPY has not. A key left to the database
//     (serial, `default:snowflake_id()`) is unknown to the load, so a row
//     that other rows of the load refer to cannot have one (ErrBulkKey).
//   - Select and Omit are not taken (ErrBulkModel): a load writes every
//     column Create would.
//
// A failure anywhere (a value pgx cannot encode, ErrBulkEncode, naming the
// model, field, column and row; a constraint; the Source; the context)
// rolls the whole load back.
//
// # Adopting an existing schema
//
// Tables with serial, bigserial or identity keys, and foreign keys into
// them, can move to snowflakes in place. PlanAdopt reads the catalog and
// works out the statements; AdoptPlan.SQL prints them with the locks each
// takes (what `snowkey adopt --dry-run` shows); AdoptPlan.Apply runs them
// in one transaction:
//
//	plan, err := pgkit.PlanAdopt(ctx, sqlDB, []string{"users", "posts"})
//	if err != nil {
//		log.Fatal(err) // a refusal names what is in the way
//	}
//	fmt.Print(plan.SQL())
//	err = plan.Apply(ctx, sqlDB)
//
// The plan widens each integer key, and every foreign-key column that
// holds its values (following foreign keys to foreign keys), to bigint;
// drops identities and detaches serial sequences (kept, unused); and sets
// each key's default to snowflake_id() (from migrations.Up), or drops it
// with AdoptOptions.AppKeys when every insert brings its key, as GORM with
// gormplugin does. Rows, indexes and constraints are kept; plain views on
// widened columns are dropped and created again with their definition,
// owner, comments and privileges.
//
// Apply sets lock_timeout (AdoptOptions.LockTimeout), takes an ACCESS
// EXCLUSIVE lock on every table and view it changes, all at once, plans
// again under the locks (ErrAdoptChanged if the schema moved meanwhile),
// checks the keys again, runs the statements and commits. Nothing reads or
// writes those tables until it commits: widening a column rewrites its
// table and rebuilds its indexes, a time that grows with the table (about
// 3 s for a 1,000,000-row table and a 1,000,000-row table that refers to
// it, on 2 cores), while a key that is bigint already only changes its
// default, in milliseconds. Writers that arrive meanwhile wait; when a long
// transaction holds a table, Apply gives up after the lock timeout instead
// of making every query on the table queue behind it. After a widening,
// each pooled connection's cached prepared statements that return the
// widened columns fail once with "cached plan must not change result type"
// (SQLSTATE 0A000), and work again from the next call: retry such
// statements, or restart the app's pools after adopting.
//
// PlanAdopt refuses, naming every problem at once and changing nothing:
// a composite, non-integer or generated key (ErrAdoptTable), a default
// that is not a sequence (ErrAdoptDefault), objects PostgreSQL cannot
// change a column's type under, such as materialized views, rules,
// triggers that name the column, policies and views that other views use
// (ErrAdoptDependents), keys that reach the first snowflake of now, so
// that new keys would not all be greater than old ones
// (ErrAdoptKeyRange), and a missing snowflake_id() (ErrAdoptFunction).
// Adopting tables that are adopted already plans nothing and changes
// nothing.
//
// What it cannot see: columns that hold keys without a foreign key, keys
// kept outside the database, and code that reads keys as 32-bit integers
// or as JSON numbers. idtype.ID writes JSON strings; see the README's
// guide for phasing that in.
package pgkit

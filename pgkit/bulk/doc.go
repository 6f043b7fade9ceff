// Package bulk loads whole GORM object graphs into PostgreSQL at COPY
// speed, leaving the database as db.Create of the same graph would.
//
// With bigserial keys a client must INSERT ... RETURNING to learn a
// parent's key before it can write the children, so bulk loads go through
// batched INSERTs. With snowflakes every key is known up front, and
// parents, children and join rows can all go through COPY:
//
//	gen, _ := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 7})
//	authors := []Author{{Name: "Ann", Books: []Book{{Title: "One"}, {Title: "Two"}}}, ...}
//	res, err := bulk.Create(ctx, db, gen, authors, bulk.Options{})
//
// Create takes a slice of GORM models (structs or pointers) with their
// has-one, has-many, belongs-to and many2many associations, and writes
// what db.Create(&authors) writes, in one transaction: it fills every zero
// snowflake key (the fields gormplugin fills, see gormplugin.KeyFields)
// with one Source.NextN per batch (and one more for join rows), sets
// every foreign key from the keys it just made, and copies each table
// with pgx's binary CopyFrom, tables that others refer to first. The keys, foreign keys and GORM-set columns
// are written back into the structs. CreateSeq does the same for an
// iter.Seq, reading BatchSize rows at a time, so that its memory is
// bounded by the batch whatever the number of rows (and the belongs-to
// and many2many rows it keys: see below).
//
// The connection: db is the app's *gorm.DB on PostgreSQL through pgx
// (gorm.io/driver/postgres, whose pool is database/sql over pgx's stdlib
// driver). The load takes a connection from that pool and runs in a
// transaction of its own. database/sql hides the connection of a
// transaction, so a load cannot join db.Transaction (it fails with
// ErrConn); to load inside a transaction of your own, begin it with
// pgx (on a pgx.Conn or pgxpool.Pool) and pass it as Options.Tx: the
// load then runs in a savepoint of it, and db only supplies the models'
// schema.
//
// Which rows, as db.Create writes them:
//
//   - the input rows, and their has-one and has-many rows, are always
//     written, with the keys they hold or new ones;
//   - a belongs-to or many2many row with a zero key is new: it gets a key
//     and is written once, however many rows share it (through a pointer);
//   - a belongs-to or many2many row whose key is set is taken as a row
//     that exists: only the foreign key or join row that points at it is
//     written, and its own associations are not followed. db.Create inserts
//     such rows with ON CONFLICT DO NOTHING, which ends the same when the
//     row exists; when it does not, the load fails on the foreign key
//     (23503), or, in a schema without foreign-key constraints, writes a
//     reference to no row;
//   - a many2many association writes a join row for each pair, as
//     db.Create does; a join row equal to an earlier one of its batch in a
//     unique constraint made of the join's foreign keys (the pair, in
//     GORM's own join tables) is left out, as db.Create's ON CONFLICT DO
//     NOTHING leaves it out, so a pair given twice is one row there, and
//     two rows in a join model (SetupJoinTable) with a key of its own and
//     nothing unique about the pair. A join model's key and snowflake
//     fields are filled as db.Create fills them, after the keys of the
//     rows it joins (with a NextN of their own).
//
// Which columns, as db.Create binds them: GORM's create columns of each model
// (embedded structs included; `-` and read-only fields left out), each
// value taken with the field's ValueOf (so serializers and driver.Valuer
// types work) and encoded by pgx for the column's type, in binary: an
// idtype.ID, a sqltype.NullID and a sqltype.IDs go as int8 and int8[]. A
// zero field with a `default:` value GORM parses gets that value, and a
// zero autoCreateTime or autoUpdateTime field gets db.NowFunc(), set in
// the struct as db.Create sets it. A zero field whose default is the
// database's (`default:now()`, `default:snowflake_id()`) is left to the
// database; rows that set such columns and rows that do not go in separate
// COPYs.
//
// Where a load differs from db.Create:
//
//   - Hooks. A load calls no hooks (BeforeSave, BeforeCreate, AfterCreate,
//     AfterSave). A model that has any fails the load with ErrHooks,
//     before anything is written, unless Options.SkipHooks says to
//     load it without them; to keep their effect, call them on the rows
//     before the load.
//   - Conflicts. COPY has no ON CONFLICT: a row that breaks a unique
//     constraint fails the whole load with PostgreSQL's unique_violation
//     (23505), and nothing is written; that includes a join row that
//     exists already, or repeats one of an earlier batch, which db.Create
//     would skip. To merge rows of one table into
//     existing ones, load them into a staging table (CREATE UNLOGGED
//     TABLE staging (LIKE t INCLUDING DEFAULTS), loaded with
//     db.Table("staging")) and move them with INSERT INTO t SELECT * FROM
//     staging ON CONFLICT ... DO NOTHING (or DO UPDATE). A graph cannot
//     be merged that way: a child would point at a parent key that the
//     conflict threw away.
//   - Database defaults are not read back into the structs: db.Create does
//     that with RETURNING, which COPY has not. A key left to the database
//     (serial, `default:snowflake_id()`) is unknown to the load, so a row
//     that other rows of the load refer to cannot have one (ErrKey).
//   - Select and Omit are not taken (ErrModel): a load writes every
//     column db.Create would.
//
// A failure anywhere (a value pgx cannot encode, ErrEncode, naming the
// model, field, column and row; a constraint, checked as a row is copied
// or at COMMIT; the Source; the context) rolls the whole load back, and
// leaves the structs as they were before the load: every key it filled is
// zero again, every foreign key and polymorphic type it set holds what it
// held, every field it gave a GORM value (`default:`, autoCreateTime) is
// zero again, and every embedded struct it allocated is nil again. A retry
// of the same structs then writes what db.Create's retry writes. Were the
// keys left, the retry would take every new belongs-to and many2many row
// the failed load had keyed (a publisher its books share, tags) as
// existing, and write only what points at it: with foreign-key
// constraints, every retry would fail (23503); without, it would succeed
// and leave books pointing at a publisher that was never written.
//
// CreateSeq puts back all of that in the rows of every batch it had not
// copied when it failed (the one that failed, and one it was preparing),
// and in every belongs-to and many2many row it keyed. The input rows of the batches it had copied before, and their
// has-one and has-many rows, keep their keys: it does not hold them, since
// the input may be larger than memory, and a retry writes them again as
// they are, keys included, as db.Create's retry writes the keys its first
// attempt filled.
//
// Two failures leave keys in the structs. A COMMIT that got no answer
// (ErrCommitUnknown) may have written the rows, so the structs keep their
// keys: a retry then fails on them (23505) rather than write the rows a
// second time. And a load in Options.Tx that succeeded has done its part:
// if the caller's transaction then rolls back, the structs hold the keys
// of rows that were never written. After either, look the rows up, and
// build the structs afresh before loading them again.
package bulk

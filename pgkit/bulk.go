package pgkit

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Errors of BulkCreate and BulkCreateSeq. Each is wrapped with detail that
// names the model, and where there is one the field and the row; match
// with errors.Is. Whatever the error, the load wrote nothing: it runs in
// one transaction (or one savepoint of BulkOptions.Tx), rolled back on any
// failure. Errors from PostgreSQL itself, such as a unique or foreign-key
// violation, come back wrapped with the table they hit, and
// errors.As(err, new(*pgconn.PgError)) finds the server's error.
var (
	// ErrBulkModel means the input cannot be bulk loaded: it is not a
	// struct or a pointer to one, GORM cannot parse the model, the row is a
	// nil pointer, or db carries Select or Omit, which bulk loads do not
	// take.
	ErrBulkModel = errors.New("pgkit: cannot bulk load")
	// ErrBulkHooks means a model of the load (the input's or an
	// association's) has GORM create hooks (BeforeSave, BeforeCreate,
	// AfterCreate, AfterSave), which bulk loads do not call. Set
	// BulkOptions.SkipHooks to load it without them.
	ErrBulkHooks = errors.New("pgkit: model has create hooks, which bulk loads do not call")
	// ErrBulkEncode means a field's value cannot be encoded for its
	// column, as pgx would refuse it in a Create: the error names the
	// model, the field, the column and the row (its index in the input,
	// then the associations that lead to it), and wraps pgx's own error.
	ErrBulkEncode = errors.New("pgkit: value cannot be encoded for its column")
	// ErrBulkKey means a row that other rows refer to has no key and the
	// load cannot give it one: its key is left to the database (a serial
	// or identity column, a `default:` tag), so no foreign key could point
	// at it before it is written.
	ErrBulkKey = errors.New("pgkit: row that others refer to has no key")
	// ErrBulkConn means the load cannot reach a pgx connection through db:
	// db runs in a database/sql transaction (inside db.Transaction), whose
	// connection database/sql does not expose, or its connection pool is
	// not pgx's database/sql driver. Pass a pgx.Tx in BulkOptions.Tx.
	ErrBulkConn = errors.New("pgkit: no pgx connection to copy through")
	// ErrBulkGenerate means the Source failed to issue the IDs a batch
	// needed; the error also wraps the Source's own error.
	ErrBulkGenerate = errors.New("pgkit: generate IDs")
)

// DefaultBulkBatchSize is the number of input rows a load keys and sends
// at a time when BulkOptions.BatchSize is zero.
const DefaultBulkBatchSize = 10000

// BulkOptions configures BulkCreate and BulkCreateSeq. The zero value is a
// load in a transaction of its own, in batches of DefaultBulkBatchSize
// input rows, that refuses models with hooks.
type BulkOptions struct {
	// BatchSize is how many input rows, each with its associations, a load
	// keys and sends at a time: it takes their IDs with one Source.NextN,
	// sets their foreign keys and copies them, table by table, while it
	// prepares the next batch. The load's own memory grows with it (two
	// batches at a time), never with the input's length. Zero means
	// DefaultBulkBatchSize; negative is an error.
	BatchSize int
	// Tx is a pgx transaction of the caller's for the load to run in,
	// inside a savepoint that is released on success and rolled back on
	// failure; the caller commits. db then only supplies the models'
	// schema (naming strategy, schema cache, NowFunc). Zero (nil) means
	// the load takes a connection from db's pool, runs in a transaction of
	// its own and commits it before returning nil.
	Tx pgx.Tx
	// OnlyTagged picks the fields to fill as gormplugin's OnlyTagged does:
	// only fields tagged `gorm:"snowflake"`. Zero means the plugin's
	// default: the idtype.ID primary key of each model and every tagged
	// field.
	OnlyTagged bool
	// SkipHooks loads models that have GORM create hooks without calling
	// them. Zero means such a model fails the load with ErrBulkHooks
	// before anything is written: a bulk load calls no hooks, and silently
	// skipping them could write rows that Create would not.
	SkipHooks bool

	// defences switches the load's defences off, for the control runs of
	// this package's tests; users cannot reach it.
	defences bulkDefences
}

// bulkDefences lists the defences that a test may switch off to show that
// it fails without them.
type bulkDefences struct {
	// unbounded reads the whole input before loading it, as one batch.
	unbounded bool
	// noTx runs every COPY on its own, outside a transaction.
	noTx bool
	// noHookCheck loads models with hooks without saying so.
	noHookCheck bool
}

// BulkResult says what a load wrote.
type BulkResult struct {
	// Rows is the number of rows written, every table together.
	Rows int64
	// Tables maps each table written to the number of rows written to it.
	Tables map[string]int64
}

// BulkCreate writes rows, and every association they hold, with
// PostgreSQL's COPY, in one transaction: what db.Create(&rows) writes,
// at the speed of COPY. rows is a slice of structs or of pointers to
// structs, GORM models of db. The load fills every zero snowflake key
// (the fields gormplugin fills, taken from src with one NextN per
// batch), sets every foreign key from the keys it just made, and copies
// each table, parents before children. The keys, foreign keys and
// GORM-set columns (autoCreateTime, parsed `default:` values) it fills are
// written back into rows, as Create writes them.
//
// db is a *gorm.DB on PostgreSQL through pgx (gorm.io/driver/postgres); the
// load uses its schema parsing and naming, and, unless BulkOptions.Tx is
// set, a connection of its pool. The package documentation says which rows
// and columns are written, and how a load differs from Create.
func BulkCreate[T any](ctx context.Context, db *gorm.DB, src idtype.Source, rows []T, opts ...BulkOptions) (BulkResult, error) {
	l, err := newBulkLoad[T](ctx, db, src, opts)
	if err != nil {
		return BulkResult{}, err
	}
	err = l.run(ctx, func(yield func(reflect.Value) error) error {
		for i := range rows {
			if err := yield(reflect.ValueOf(&rows[i]).Elem()); err != nil {
				return err
			}
		}
		return nil
	})
	return l.result, err
}

// BulkCreateSeq is BulkCreate for input that need not be in memory at
// once: rows read from a file or another database as the load goes. It
// reads BatchSize rows from seq, loads them, and reads on, so its memory
// is bounded by the batch whatever the length of seq. Keys are written
// into the values seq yields; a T that is a struct is copied, so only a
// pointer type lets the caller see them.
//
// A failure stops reading seq and rolls everything back, the rows of
// earlier batches too.
func BulkCreateSeq[T any](ctx context.Context, db *gorm.DB, src idtype.Source, rows iter.Seq[T], opts ...BulkOptions) (BulkResult, error) {
	l, err := newBulkLoad[T](ctx, db, src, opts)
	if err != nil {
		return BulkResult{}, err
	}
	err = l.run(ctx, func(yield func(reflect.Value) error) error {
		var err error
		for v := range rows {
			// v is a variable of its own at each iteration, so the keys
			// of a struct T can be set in it.
			if err = yield(reflect.ValueOf(&v).Elem()); err != nil {
				break
			}
		}
		return err
	})
	return l.result, err
}

// bulkOptionsOf returns the one options struct of a call, or the zero
// value, after checking it.
func bulkOptionsOf(opts []BulkOptions) (BulkOptions, error) {
	var o BulkOptions
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		return o, fmt.Errorf("%w: %d BulkOptions given; pass at most one", idtype.ErrInvalidOptions, len(opts))
	}
	if o.BatchSize < 0 {
		return o, fmt.Errorf("%w: BulkOptions.BatchSize %d is negative", idtype.ErrInvalidOptions, o.BatchSize)
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBulkBatchSize
	}
	return o, nil
}

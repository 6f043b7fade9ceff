package bulk

import (
	"context"
	"iter"
	"reflect"

	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/idtype"
)

// Result says what a load wrote.
type Result struct {
	// Rows is the number of rows written, every table together.
	Rows int64
	// Tables maps each table written to the number of rows written to it.
	Tables map[string]int64
}

// defences lists the defences of a load, each of which a test may switch
// off (export_test.go) to show that it fails without it; the zero value
// has every defence on.
type defences struct {
	// unbounded reads the whole input before loading it, as one batch.
	unbounded bool
	// noTx runs every COPY on its own, outside a transaction.
	noTx bool
	// noHookCheck loads models with hooks without saying so.
	noHookCheck bool
	// keepStructs leaves in the structs what a failed load wrote into
	// them: the keys it filled, the foreign keys it set.
	keepStructs bool
	// restoreUnknownCommit puts the structs back after a COMMIT that got
	// no answer too, though the rows may be written.
	restoreUnknownCommit bool
}

// Create writes rows, and every association they hold, with
// PostgreSQL's COPY, in one transaction: what db.Create(&rows) writes,
// at the speed of COPY. rows is a slice of structs or of pointers to
// structs, GORM models of db. The load fills every zero snowflake key
// (the fields gormplugin fills, taken from src with one NextN per
// batch), sets every foreign key from the keys it just made, and copies
// each table, parents before children. The keys, foreign keys and
// GORM-set columns (autoCreateTime, parsed `default:` values) it fills are
// written back into rows, as db.Create writes them. A load that fails
// puts them back as they were (unless the error is ErrCommitUnknown), so
// that the same rows can be loaded again.
//
// db is a *gorm.DB on PostgreSQL through pgx (gorm.io/driver/postgres); the
// load uses its schema parsing and naming, and, unless Options.Tx is
// set, a connection of its pool. The package documentation says which rows
// and columns are written, and how a load differs from db.Create.
func Create[T any](ctx context.Context, db *gorm.DB, src idtype.Source, rows []T, opts Options) (Result, error) {
	return create(ctx, db, src, rows, opts, defences{})
}

func create[T any](ctx context.Context, db *gorm.DB, src idtype.Source, rows []T, opts Options, d defences) (Result, error) {
	l, err := newLoad[T](ctx, db, src, opts, d, false)
	if err != nil {
		return Result{}, err
	}
	// Input row i, for putting back what a failed load wrote into it: the
	// log names only rows the load took, none of them a nil pointer.
	l.undo.input = func(i int) reflect.Value {
		v := reflect.ValueOf(&rows[i]).Elem()
		for v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		return v
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

// CreateSeq is Create for input that need not be in memory at
// once: rows read from a file or another database as the load goes. It
// reads BatchSize rows from seq, loads them, and reads on, so its memory
// is bounded by the batch whatever the length of seq (and the
// belongs-to and many2many rows it keys, which it keeps until it
// returns, to put their keys back if it fails). Keys are written
// into the values seq yields; a T that is a struct is copied, so only a
// pointer type lets the caller see them.
//
// A failure stops reading seq and rolls everything back, the rows of
// earlier batches too. It puts back what the load wrote into the rows of
// the batch that failed and into every belongs-to and many2many row it
// keyed; the input rows of earlier batches, which CreateSeq no longer
// holds, keep their keys (the package documentation says why that is
// enough for a retry).
func CreateSeq[T any](ctx context.Context, db *gorm.DB, src idtype.Source, rows iter.Seq[T], opts Options) (Result, error) {
	return createSeq(ctx, db, src, rows, opts, defences{})
}

func createSeq[T any](ctx context.Context, db *gorm.DB, src idtype.Source, rows iter.Seq[T], opts Options, d defences) (Result, error) {
	l, err := newLoad[T](ctx, db, src, opts, d, true)
	if err != nil {
		return Result{}, err
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

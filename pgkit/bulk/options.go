package bulk

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/idtype"
)

// DefaultBatchSize is the number of input rows a load keys and sends at a
// time when Options.BatchSize is zero.
const DefaultBatchSize = 10000

// Options configures Create and CreateSeq. The zero value is a load in a
// transaction of its own, in batches of DefaultBatchSize input rows, that
// refuses models with hooks.
type Options struct {
	// BatchSize is how many input rows, each with its associations, a load
	// keys and sends at a time: it takes their IDs with one Source.NextN
	// (and one more for join rows that have keys of their own), sets
	// their foreign keys and copies them, table by table, while it
	// prepares the next batch. The load's own memory grows with it (two
	// batches at a time), and with the input's length only by what it
	// keeps to put the structs back if it fails: for Create, a pointer
	// for each row it writes into that is not an input row; for
	// CreateSeq, the belongs-to and many2many rows it keys. Zero means
	// DefaultBatchSize; negative is an error.
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
	// them. Zero means such a model fails the load with ErrHooks before
	// anything is written: a bulk load calls no hooks, and silently
	// skipping them could write rows that db.Create would not.
	SkipHooks bool
}

// check returns o with its defaults, or an error wrapping
// idtype.ErrInvalidOptions that names the bad field.
func (o Options) check() (Options, error) {
	switch {
	case o.BatchSize < 0:
		return o, fmt.Errorf("%w: bulk.Options.BatchSize %d is negative", idtype.ErrInvalidOptions, o.BatchSize)
	case o.BatchSize == 0:
		o.BatchSize = DefaultBatchSize
	}
	return o, nil
}

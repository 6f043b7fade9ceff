package bulk

import (
	"context"
	"iter"

	"gorm.io/gorm"

	"github.com/snowkeyhq/snowkey/idtype"
)

// The switches of the control runs, which show that a defence is needed
// by turning it off; users cannot reach them.

// createWithout is Create with the defences in off switched off.
func createWithout[T any](ctx context.Context, db *gorm.DB, src idtype.Source, rows []T, opts Options, off defences) (Result, error) {
	return create(ctx, db, src, rows, opts, off)
}

// createSeqWithout is CreateSeq with the defences in off switched off.
func createSeqWithout[T any](ctx context.Context, db *gorm.DB, src idtype.Source, rows iter.Seq[T], opts Options, off defences) (Result, error) {
	return createSeq(ctx, db, src, rows, opts, off)
}

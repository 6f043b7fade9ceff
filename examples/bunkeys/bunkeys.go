// Package bunkeys fills the snowflake primary keys of bun models on
// insert, the way gormplugin does for GORM: a model's BeforeAppendModel
// hook calls Fill with its key fields, and each zero key gets a new ID
// from the idtype.Source that WithSource put in the query's context.
//
//	func (u *User) BeforeAppendModel(ctx context.Context, q bun.Query) error {
//		return bunkeys.Fill(ctx, q, &u.ID)
//	}
//
//	ctx = bunkeys.WithSource(ctx, gen)
//	_, err := db.NewInsert().Model(&users).Exec(ctx)
//
// bun calls the hook for each element of a slice model, so a bulk insert
// keys every row. A key already set is kept; a query other than an
// insert leaves keys alone. An insert with a zero key and no Source in
// its context fails with ErrNoSource instead of writing the key 0.
//
// bun offers no hook on the database that runs before a query is built
// (a bun.QueryHook sees the query after), so the hook is the model's; the
// Source rides in the context because the model has no other way to
// reach it. NewDialect registers the ID types with bun, so that a table
// bun creates from a model has bigint and bigint[] columns for them.
// docs/bun.md explains the recipe.
package bunkeys

import (
	"context"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"github.com/snowkeyhq/snowkey/idtype"
)

// ErrNoSource is the error of an insert whose model has a zero key and
// whose context holds no Source (see WithSource).
var ErrNoSource = errors.New("bunkeys: no idtype.Source in the context to fill a zero key (use bunkeys.WithSource)")

type sourceKey struct{}

// WithSource returns a copy of ctx that carries src, for Fill.
func WithSource(ctx context.Context, src idtype.Source) context.Context {
	return context.WithValue(ctx, sourceKey{}, src)
}

// SourceFrom returns the Source that WithSource put in ctx.
func SourceFrom(ctx context.Context) (idtype.Source, bool) {
	src, ok := ctx.Value(sourceKey{}).(idtype.Source)
	return src, ok && src != nil
}

// Fill sets each zero key among keys to a new ID from the Source in ctx
// when q is an insert, and does nothing for any other query. It fails
// with ErrNoSource when a key is zero and ctx holds no Source, and with
// the Source's error when it cannot issue; then bun sends nothing.
func Fill(ctx context.Context, q bun.Query, keys ...*idtype.ID) error {
	if _, ok := q.(*bun.InsertQuery); !ok {
		return nil
	}
	for _, k := range keys {
		if *k != 0 {
			continue
		}
		src, ok := SourceFrom(ctx)
		if !ok {
			return ErrNoSource
		}
		id, err := src.Next()
		if err != nil {
			return fmt.Errorf("bunkeys: fill a key: %w", err)
		}
		*k = id
	}
	return nil
}

package main

import (
	"context"
	"fmt"

	"github.com/snowkeyhq/snowkey/idtype"
)

// defaultWorker is the fixed worker number of a server that has nowhere
// to lease one from.
const defaultWorker = 1

// newGenerator builds the ID generator of users, posts and sessions.
func (a *App) newGenerator(ctx context.Context, cfg Config, kind dbKind) (*idtype.Generator, error) {
	worker := cfg.Worker
	if worker == 0 {
		worker = defaultWorker
	}
	// A restarted server with a fixed worker must not reissue an ID it
	// issued before its restart (its clock may have been set back): start
	// after the newest ID in the database.
	newest, err := a.newestID(ctx)
	if err != nil {
		return nil, err
	}
	gen, err := idtype.NewGenerator(idtype.Config{Worker: worker, NotBefore: newest.Time()})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	a.log.Info("ids: fixed worker number", "worker", worker, "not_before", newest.Time())
	return gen, nil
}

// newestID returns the largest ID in the database, zero if it is empty.
func (a *App) newestID(ctx context.Context) (idtype.ID, error) {
	var newest idtype.ID
	for _, model := range []any{&User{}, &Post{}} {
		var id idtype.ID
		if err := a.db.WithContext(ctx).Model(model).Select("COALESCE(MAX(id), 0)").Scan(&id).Error; err != nil {
			return 0, fmt.Errorf("read the newest ID: %w", err)
		}
		newest = max(newest, id)
	}
	return newest, nil
}

// useGenerator makes GORM fill zero idtype.ID primary keys on create.
func (a *App) useGenerator() error { return nil }

package main

import (
	"context"
	"fmt"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/idtype/workerid"
)

// defaultWorker is the fixed worker number of a server that has nowhere
// to lease one from.
const defaultWorker = 1

// newGenerator builds the generator of every ID the server issues: users,
// posts and sessions. Its worker number is
//
//   - Config.Worker, when set;
//   - else leased from PostgreSQL, when DATABASE_URL names it: durable,
//     so the lease starts at once;
//   - else leased from Redis, when a real one is configured (a number
//     Redis has no record of waits out one lease TTL before its first ID,
//     since Redis may have lost the record);
//   - else defaultWorker: the embedded defaults serve one process.
//
// A leased number is released on Close; if the lease is lost, the
// generator stops and Done is closed.
func (a *App) newGenerator(ctx context.Context, cfg Config, kind dbKind) (*idtype.Generator, error) {
	var pool *workerid.Pool
	opts := cfg.Leases
	if opts.Logger == nil {
		opts.Logger = a.log
	}
	if cfg.Worker == 0 && kind.postgres {
		sqlDB, err := a.db.DB()
		if err != nil {
			return nil, err
		}
		if pool, err = workerid.Postgres(sqlDB, opts); err != nil {
			return nil, err
		}
	} else if cfg.Worker == 0 && (cfg.Redis != nil || cfg.RedisURL != "") {
		var err error
		if pool, err = workerid.Redis(a.rdb, opts); err != nil {
			return nil, err
		}
	}
	if pool != nil {
		lease, err := pool.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("lease a worker number: %w", err)
		}
		a.onClose(lease.Close)
		a.leaseDone = lease.Done()
		gen, err := lease.NewGenerator()
		if err != nil {
			return nil, err
		}
		a.log.Info("ids: leased worker number", "worker", lease.Worker())
		return gen, nil
	}

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
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: worker, NotBefore: newest.Time()})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if newest == 0 {
		a.log.Info("ids: fixed worker number", "worker", worker)
	} else {
		a.log.Info("ids: fixed worker number, starting after the newest ID in the database", "worker", worker, "newest", newest)
	}
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

// useGenerator makes GORM fill every zero idtype.ID primary key on
// create, from the App's generator.
func (a *App) useGenerator() error {
	if err := a.db.Use(gormplugin.New(a.gen)); err != nil {
		return fmt.Errorf("register gormplugin: %w", err)
	}
	return nil
}

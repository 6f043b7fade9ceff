package main

import (
	"context"
	"fmt"
	"time"

	"github.com/snowkeyhq/snowkey/gormplugin"
	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/workerid"
)

// defaultWorker is the fixed worker number of a server that has nowhere
// to lease one from.
const defaultWorker = 1

// maxFloorWait bounds how long Open waits for the clock to pass a fixed
// worker's restart floor, which lies up to sessionFloorAhead in the future
// after a crash, or further if the clock was set back.
const maxFloorWait = time.Minute

// checkWorker refuses a fixed worker number that the layout cannot hold,
// or that is sqlReservedWorker, the number PostgreSQL's snowflake_id()
// stamps on the IDs it issues: a generator on it would repeat them.
func checkWorker(w int64, l idtype.Layout) error {
	top := l.MaxWorker()
	switch {
	case w < 0:
		return fmt.Errorf("%w: Worker %d is negative; want 1 to %d", ErrConfig, w, workerCeiling(l))
	case w > top:
		return fmt.Errorf("%w: Worker %d does not fit the layout's %d worker bits; want 1 to %d", ErrConfig, w, l.WorkerBits, workerCeiling(l))
	case w == sqlReservedWorker:
		return fmt.Errorf("%w: Worker %d is reserved for PostgreSQL's snowflake_id(); want 1 to %d", ErrConfig, w, workerCeiling(l))
	}
	return nil
}

// workerCeiling is the largest worker number a fixed worker may take.
func workerCeiling(l idtype.Layout) int64 {
	top := l.MaxWorker()
	if top == sqlReservedWorker {
		top--
	}
	return top
}

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
	opts := cfg.Leases
	if opts.Logger == nil {
		opts.Logger = a.log
	}
	if opts.Layout.IsZero() {
		opts.Layout = a.layout
	}
	if opts.Clock == nil {
		opts.Clock = cfg.Clock // nil too: the leases' default, the system clock
	}
	if cfg.Worker == 0 && (kind.postgres || cfg.Redis != nil || cfg.RedisURL != "") {
		var pool *workerid.Pool
		var err error
		if kind.postgres {
			pool, err = postgresPool(a.sqlDB, opts)
		} else {
			pool, err = redisPool(a.rdb, opts)
		}
		if err != nil {
			return nil, err
		}
		lease, err := pool.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("lease a worker number: %w", err)
		}
		a.onClose(lease.Close)
		a.lease = lease
		gen, err := generatorOnLease(lease)
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
	if kind.postgres {
		// The database may have moved snowflake_id() off the default
		// reserved number.
		reserved, err := databaseReservedWorker(ctx, a.sqlDB)
		if err != nil {
			return nil, err
		}
		if worker == reserved {
			return nil, fmt.Errorf("%w: Worker %d is the number this database's snowflake_id() stamps", ErrConfig, worker)
		}
	}
	clock := cfg.Clock
	if clock == nil {
		clock = idtype.SystemClock()
	}
	// A restarted server with a fixed worker must not reissue an ID it
	// issued before its restart (its clock may have been set back): start
	// after the newest ID it can find, in every table and, when sessions
	// outlive the process, in the session floor.
	floor, err := a.restartFloor(ctx, cfg, worker, clock)
	if err != nil {
		return nil, err
	}
	if wait := time.Duration(floor.UnixNano() - clock.UnixNano()); wait > 0 {
		if wait > maxFloorWait {
			return nil, fmt.Errorf("ids: worker %d issued IDs up to %v, %v ahead of this clock; is the clock set back? %w",
				worker, floor.UTC(), wait.Round(time.Millisecond), idtype.ErrClockBehind)
		}
		a.log.Info("ids: waiting for the clock to pass the restart floor", "worker", worker, "wait", wait.Round(time.Millisecond))
		select {
		case <-time.After(wait + time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	gen, err := fixedGenerator(worker, a.layout, floor, clock)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	// A fresh database has no floor: the line then says nothing of one,
	// where a zero time would read as a wrong one.
	attrs := []any{"worker", worker}
	if !floor.IsZero() {
		attrs = append(attrs, "starts_after", floor.UTC())
	}
	a.log.Info("ids: fixed worker number", attrs...)
	return gen, nil
}

// restartFloor returns the time a fixed worker's generator starts after:
// that of the newest ID in any table of snowflakeModels, and, when login
// sessions outlive the process (a real Redis), the session floor that
// every session ID of the worker lies at or below.
func (a *App) restartFloor(ctx context.Context, cfg Config, worker int64, clock idtype.Clock) (time.Time, error) {
	var newest idtype.ID
	for _, model := range snowflakeModels() {
		var id idtype.ID
		if err := a.db.WithContext(ctx).Model(model).Select("COALESCE(MAX(id), 0)").Scan(&id).Error; err != nil {
			return time.Time{}, fmt.Errorf("read the newest ID: %w", err)
		}
		newest = max(newest, id)
	}
	var floor time.Time
	if newest != 0 {
		floor = a.layout.Decode(newest).Time
	}
	if cfg.Redis == nil && cfg.RedisURL == "" {
		return floor, nil
	}
	prefix := cfg.KeyPrefix
	if prefix == "" {
		prefix = defaultKeyPrefix
	}
	a.floor = newSessionFloor(a.rdb, prefix, worker, clock)
	sessions, err := a.floor.load(ctx)
	if err != nil {
		return time.Time{}, err
	}
	a.onClose(a.floor.close)
	if sessions.After(floor) {
		floor = sessions
	}
	return floor, nil
}

// useGenerator makes GORM fill every zero idtype.ID primary key on
// create, from the App's generator.
func (a *App) useGenerator() error {
	if err := a.db.Use(gormplugin.New(a.gen, gormplugin.Options{})); err != nil {
		return fmt.Errorf("register gormplugin: %w", err)
	}
	return nil
}

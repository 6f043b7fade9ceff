package workerid_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/alicebob/miniredis/v2"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/migrations"
	"github.com/snowkeyhq/snowkey/workerid"
)

// An app instance leases its worker number from Redis at start-up and
// builds its generator on the lease. (The example runs on an in-process
// Redis; use your own client, of one server, Sentinel or a Cluster.)
func ExampleRedis() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	pool, err := workerid.Redis(rdb, workerid.Options{
		Namespace: "api",
		TTL:       time.Second, // short for the example; the default is 10s
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	// A number Redis has no record of is waited out for one TTL (see
	// the package doc), so on a fresh Redis this takes a second.
	lease, err := pool.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	defer lease.Close(ctx)

	gen, err := lease.NewGenerator()
	if err != nil {
		panic(err)
	}
	id, err := gen.Next()
	if err != nil {
		panic(err)
	}
	fmt.Println(idtype.DefaultLayout.Decode(id).Worker == lease.Worker())
	fmt.Println(lease.Status().State)
	// Output:
	// true
	// held
}

// With PostgreSQL, run the migrations (they create the lease table) and
// lease from the same database. The example needs a server, so it is
// only compiled.
func ExamplePostgres() {
	ctx := context.Background()
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if err := migrations.Up(ctx, db, migrations.Options{}); err != nil {
		panic(err)
	}
	pool, err := workerid.Postgres(db, workerid.Options{Namespace: "api"})
	if err != nil {
		panic(err)
	}
	lease, err := pool.Acquire(ctx)
	if err != nil {
		panic(err) // workerid.ErrNoFreeWorker: every number is held
	}
	defer lease.Close(ctx) // gives the number back at shutdown

	gen, err := lease.NewGenerator()
	if err != nil {
		panic(err)
	}
	go func() {
		<-lease.Done()
		if errors.Is(lease.Err(), workerid.ErrClosed) {
			return // the deferred Close, at shutdown
		}
		// The lease was taken over while this process could not renew
		// it: gen issues nothing more. Stop serving, or acquire anew.
		slog.Error("worker lease lost", "error", lease.Err())
	}()
	_, _ = gen.Next()
}

// Status tells a health check where the lease stands.
func ExampleLease_Status() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	pool, err := workerid.Redis(rdb, workerid.Options{
		Layout: idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 1, SequenceBits: 12},
		TTL:    time.Second, Holder: "api-1", Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	lease, err := pool.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	s := lease.Status()
	fmt.Println(s.State, s.Holder, s.Store, s.Namespace)
	fmt.Println(s.ValidUntil.Sub(s.LastRenewal)) // TTL - Margin
	_ = lease.Close(ctx)
	fmt.Println(lease.Status().State)
	// Output:
	// held api-1 redis default
	// 800ms
	// closed
}

// A lease has one generator: two on one worker number would issue the
// same IDs, so a second NewGenerator fails.
func ExampleLease_NewGenerator() {
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	pool, err := workerid.Redis(rdb, workerid.Options{
		TTL:      time.Second,           // short for the example; the default is 10s
		MaxDrift: 10 * time.Millisecond, // bursts may run 10ms ahead of the clock
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	lease, err := pool.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	gen, err := lease.NewGenerator()
	if err != nil {
		panic(err)
	}
	ids := make([]idtype.ID, 10_000) // more than one millisecond's 4,096
	fmt.Println(gen.NextN(ids), gen.Worker() == lease.Worker())

	_, err = lease.NewGenerator()
	fmt.Println(errors.Is(err, workerid.ErrLeaseInUse))

	_ = lease.Close(ctx)
	_, err = gen.Next()
	fmt.Println(errors.Is(err, idtype.ErrLeaseLost), errors.Is(err, workerid.ErrClosed))
	// Output:
	// <nil> true
	// true
	// true true
}

package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/migrations"
	"github.com/snowkeyhq/snowkey/workerid"
)

func ExampleFS() {
	// Migrations run in the order of their numbers; the first one makes
	// snowflake_id().
	names, _ := fs.Glob(migrations.FS, "*.sql")
	fmt.Println(names[0])
	b, _ := fs.ReadFile(migrations.FS, names[0])
	fmt.Println(strings.Contains(string(b), "CREATE FUNCTION %1$I.snowflake_id()"))
	// Output:
	// 00001_snowflake_id.sql
	// true
}

// At start-up, every instance of the app migrates; one does the work and
// the others wait for it. Then plain SQL can make IDs that never collide
// with the app's.
func ExampleUp() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://app@localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	if err := migrations.Up(ctx, db, migrations.Options{}); err != nil {
		log.Fatal(err)
	}
	_, err = db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS audit (
		id   bigint PRIMARY KEY DEFAULT snowflake_id(),
		what text NOT NULL)`)
	if err != nil {
		log.Fatal(err)
	}
}

// A fleet whose worker leases need 1023 can move snowflake_id() to another
// number, once, before the first ID; the lease code asks the database which
// number to skip.
func ExampleOptions_reservedWorker() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://app@localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	if err := migrations.Up(ctx, db, migrations.Options{ReservedWorker: 1000}); err != nil {
		log.Fatal(err)
	}
	skip, err := migrations.ReservedWorkerOf(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leases skip worker", skip)
}

// Shards of one app in one cluster share an ID space, each with a reserved
// worker of its own; Up refuses a second shard on a number the first one
// uses. The app's leases then skip every number of the space.
func ExampleOptions_idSpace() {
	ctx := context.Background()
	for i, url := range []string{"postgres://app@localhost/orders_0", "postgres://app@localhost/orders_1"} {
		db, err := sql.Open("pgx", url)
		if err != nil {
			log.Fatal(err)
		}
		err = migrations.Up(ctx, db, migrations.Options{IDSpace: "orders", ReservedWorker: 1023 - int64(i)})
		if errors.Is(err, migrations.ErrWorkerConflict) {
			log.Fatal(err) // names the other shard and a free number
		}
		if err != nil {
			log.Fatal(err)
		}
		reserved, err := migrations.ReservedWorkers(ctx, db)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range reserved {
			fmt.Printf("leases skip worker %d (%s.%s)\n", r.Worker, r.Database, r.Schema)
		}
	}
}

// Shards on several servers, and the app fleet, in one ID space: each
// server claims a worker number of its own from the fleet's lease store,
// at every start, and the fleet's leases never get it.
func ExampleOptions_workerPool() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	pool, err := workerid.Redis(rdb, workerid.Options{Namespace: "api"})
	if err != nil {
		log.Fatal(err)
	}
	for _, url := range []string{"postgres://app@db-eu/app", "postgres://app@db-us/app"} {
		db, err := sql.Open("pgx", url)
		if err != nil {
			log.Fatal(err)
		}
		if err := migrations.Up(ctx, db, migrations.Options{WorkerPool: pool}); err != nil {
			log.Fatal(err)
		}
		w, err := migrations.ReservedWorkerOf(ctx, db)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(url, "issues IDs on worker", w)
	}
}

// Two databases migrated without a pool, both on worker 1023, as ServerOf
// reads them: CheckServers names the clash.
func ExampleCheckServers() {
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	servers := []migrations.Server{
		{Database: "orders", Schema: "public", SystemIdentifier: "7300000000000000001", Timeline: 1,
			Started: started, Worker: 1023, Issues: true},
		{Database: "orders", Schema: "public", SystemIdentifier: "7300000000000000002", Timeline: 1,
			Started: started, Worker: 1023, Issues: true},
	}
	err := migrations.CheckServers(servers, nil)
	fmt.Println(errors.Is(err, migrations.ErrWorkerConflict))
	// Output: true
}

// After a failover, or after adding a server, check every database whose
// IDs meet against the claims of the fleet's namespace, as
// `snowkey servers` does.
func ExampleServers() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	pool, err := workerid.Redis(rdb, workerid.Options{Namespace: "api"})
	if err != nil {
		log.Fatal(err)
	}
	var servers []migrations.Server
	for _, url := range []string{"postgres://app@db-eu/app", "postgres://app@db-us/app"} {
		db, err := sql.Open("pgx", url)
		if err != nil {
			log.Fatal(err)
		}
		s, err := migrations.ServerOf(ctx, db)
		if err != nil {
			log.Fatal(err)
		}
		servers = append(servers, s)
	}
	claims, err := migrations.Servers(ctx, pool)
	if err != nil {
		log.Fatal(err)
	}
	for claimant, next := range migrations.Superseded(claims) {
		fmt.Printf("%s: superseded by timeline %d; release it once its server takes no more writes\n", claimant, next.Timeline)
	}
	if err := migrations.CheckServers(servers, claims); err != nil {
		log.Fatal(err) // each finding names the servers and what to do
	}
}

// A copy of a server started from a disk snapshot runs on its original's
// timeline, and both issue on one number; Fork, once, on the copy, claims
// it a number of its own, which Up keeps at every later start.
func ExampleFork() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	pool, err := workerid.Redis(rdb, workerid.Options{Namespace: "api"})
	if err != nil {
		log.Fatal(err)
	}
	copyDB, err := sql.Open("pgx", "postgres://app@db-copy/app")
	if err != nil {
		log.Fatal(err)
	}
	if err := migrations.Fork(ctx, copyDB, migrations.Options{WorkerPool: pool}); err != nil {
		log.Fatal(err)
	}
}

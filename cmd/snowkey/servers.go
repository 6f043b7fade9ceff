package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/snowkeyhq/snowkey/migrations"
	"github.com/snowkeyhq/snowkey/workerid"
)

const serversHelp = `Usage: snowkey servers [flags] <database URL>...

Lists the database servers whose snowflake_id() issues IDs, with the
worker number each issues on, and fails (exit status 1) when two of them
would repeat each other's IDs (migrations.CheckServers): two databases on
one number (such as two migrated without a pool, both on 1023), a copy of
a server that runs beside it on one timeline, a copy or promoted standby
that refuses to issue until it claims a number of its own. Give the URL of
every database whose IDs meet the others' (default $DATABASE_URL).

With the fleet's lease store (--redis or --leases, and its --namespace and
--key-prefix), it also lists the numbers that servers claimed there
(migrations.Servers), marks each claim that a later timeline of its server
superseded (an old primary after a failover), and checks the databases
against them. --release gives one claim back to the pool, by its claimant,
once the server it was made for takes no more writes.

`

// serversCmd is 'snowkey servers'.
func serversCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("servers", serversHelp)
	redisURL := fs.String("redis", "", "the fleet's Redis, as a redis:// URL")
	leasesURL := fs.String("leases", "", "or the PostgreSQL database that holds the fleet's leases (workerid.Postgres)")
	namespace := fs.String("namespace", workerid.DefaultNamespace, "the fleet's namespace (workerid.Options.Namespace)")
	keyPrefix := fs.String("key-prefix", workerid.DefaultKeyPrefix, "the fleet's Redis key prefix (workerid.Options.KeyPrefix)")
	release := fs.String("release", "", "give back the claim of this claimant (see the claim lines); its server must issue no more IDs")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	dsns, err := parseArgs(fs, args, stdout)
	if err != nil {
		return err
	}
	if *redisURL != "" && *leasesURL != "" {
		return fmt.Errorf("%w: --redis and --leases name two stores; give one", errUsage)
	}
	if *timeout <= 0 {
		return fmt.Errorf("%w: --timeout %v is not positive", errUsage, *timeout)
	}
	if len(dsns) == 0 && *release == "" {
		if env := os.Getenv("DATABASE_URL"); env != "" {
			dsns = []string{env}
		} else {
			return fmt.Errorf("%w: no database: give their URLs or set DATABASE_URL", errUsage)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	opts := workerid.Options{Namespace: *namespace, KeyPrefix: *keyPrefix, Logger: slog.New(slog.NewTextHandler(stderr, nil))}
	var pool *workerid.Pool
	switch {
	case *redisURL != "":
		ro, err := redis.ParseURL(*redisURL)
		if err != nil {
			return fmt.Errorf("%w: --redis: %v", errUsage, err)
		}
		rdb := redis.NewClient(ro)
		defer rdb.Close()
		if pool, err = workerid.Redis(rdb, opts); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	case *leasesURL != "":
		db, err := sql.Open("pgx", *leasesURL)
		if err != nil {
			return fmt.Errorf("%w: --leases: %v", errUsage, err)
		}
		defer db.Close()
		if pool, err = workerid.Postgres(db, opts); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}

	if *release != "" {
		if pool == nil {
			return fmt.Errorf("%w: --release needs the store: --redis or --leases", errUsage)
		}
		w, ok, err := pool.Unclaim(ctx, *release)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("no claim of %q in namespace %q", *release, *namespace)
		}
		fmt.Fprintf(stdout, "released\tworker=%d\t%s\n", w, *release)
		if len(dsns) == 0 {
			return nil
		}
	}

	var servers []migrations.Server
	for _, dsn := range dsns {
		s, err := serverOf(ctx, dsn)
		if err != nil {
			return fmt.Errorf("%s: %w", redact(dsn), err)
		}
		servers = append(servers, s)
		issues := "yes"
		if !s.Issues {
			issues = "no: " + s.Refusal
		}
		claim := s.Claimant
		if claim == "" {
			claim = "-"
		}
		fmt.Fprintf(stdout, "server\t%s\tdatabase=%s schema=%s system=%s timeline=%d started=%s standby=%t worker=%d claim=%s issues=%s\n",
			redact(dsn), s.Database, s.Schema, s.SystemIdentifier, s.Timeline, s.Started.UTC().Format(time.RFC3339Nano),
			s.Standby, s.Worker, claim, issues)
	}
	var claims []migrations.ServerClaim
	if pool != nil {
		if claims, err = migrations.Servers(ctx, pool); err != nil {
			return err
		}
		superseded := migrations.Superseded(claims)
		for _, c := range claims {
			note := ""
			if next, ok := superseded[c.Claimant]; ok {
				note = fmt.Sprintf("\tsuperseded by timeline %d (worker %d): release it once the server it was made for "+
					"takes no more writes (snowkey servers --release '%s')", next.Timeline, next.Worker, c.Claimant)
			}
			fmt.Fprintf(stdout, "claim\tworker=%d\t%s%s\n", c.Worker, c.Claimant, note)
		}
	}
	return migrations.CheckServers(servers, claims)
}

// serverOf reads where the snowflake_id() of the database at dsn stands.
func serverOf(ctx context.Context, dsn string) (migrations.Server, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return migrations.Server{}, fmt.Errorf("%w: %v", errUsage, err)
	}
	defer db.Close()
	return migrations.ServerOf(ctx, db)
}

// redact is a URL without its password, for output.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return "(database)"
	}
	return u.Redacted()
}

package migrations

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/workerid"
)

// This file tells operators which database servers issue IDs, on which
// numbers, and which of them would repeat each other's: ServerOf for one
// database, Servers for the claims of a pool's namespace, CheckServers
// over both, and the warning of Up without a pool.

// Server is where the snowflake_id() of one schema of a database stands,
// as ServerOf reads it from the running server.
type Server struct {
	// Database and Schema say which snowflake_id(): the first schema of
	// the connection's search_path, where Up migrates.
	Database string
	Schema   string
	// SystemIdentifier, Timeline and Started name the running server:
	// pg_control_system()'s system identifier, which every copy and
	// standby of the server shares; the timeline it writes on, which a
	// promotion or a restore to a point in time starts anew and a restart
	// keeps (a standby's is that of its last restartpoint); and
	// pg_postmaster_start_time(), which a restart changes, and which tells
	// apart two copies that run on one timeline.
	SystemIdentifier string
	Timeline         int64
	Started          time.Time
	// Standby is true while the server is in recovery: it issues no IDs.
	Standby bool
	// Worker is the number snowflake_id() puts in its IDs,
	// snowflake_reserved_worker(): workerid.SQLWorker (1023) unless Up
	// was given Options.ReservedWorker or Options.WorkerPool.
	Worker int64
	// Claimant and Namespace are those of the claim Up made for the
	// number with Options.WorkerPool; empty when the number was not
	// claimed. The claim may be another server's (Issues is then false).
	Claimant  string
	Namespace string
	// Issues reports whether snowflake_id() issues on Worker here. When it
	// does not, Refusal is PostgreSQL's message: a standby, or a server
	// that is not the one the number was claimed for (a copy, a promoted
	// standby, a restored dump; SQLStateNoServerWorker).
	Issues  bool
	Refusal string
}

// ServerOf reads where the snowflake_id() of db stands: the running
// server, the number, the claim, and whether it issues. It changes
// nothing, and answers on a standby too. The error wraps ErrNotMigrated
// when db has no snowflake_id(), idtype.ErrInvalidOptions for a nil db.
func ServerOf(ctx context.Context, db *sql.DB) (Server, error) {
	var s Server
	if db == nil {
		return s, fmt.Errorf("%w: nil *sql.DB", idtype.ErrInvalidOptions)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return s, fmt.Errorf("migrations: %w", err)
	}
	defer conn.Close()
	if err := checkMigrated(ctx, conn); err != nil {
		return s, err
	}
	id, err := identify(ctx, conn)
	if err != nil {
		return s, err
	}
	s = Server{Database: id.database, Schema: id.schema, SystemIdentifier: id.system, Timeline: id.timeline,
		Started: id.started, Standby: id.standby}
	rec, has, err := readClaim(ctx, conn, id.schema)
	if err != nil {
		return s, err
	}
	if has {
		s.Claimant, s.Namespace = rec.Claimant, rec.Namespace
	}
	// snowflake_reserved_worker() answers wherever it runs, unless it still
	// holds a claim as Up wrote it before snowflake_server_worker() was
	// made: the record has the number then.
	var w sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT snowflake_reserved_worker()`).Scan(&w); err == nil {
		s.Worker = w.Int64
	} else if has {
		s.Worker = rec.Worker
	} else {
		return s, fmt.Errorf("migrations: read the reserved worker: %w", err)
	}
	fn := "snowflake_server_worker"
	var ok bool
	if err := conn.QueryRowContext(ctx, `SELECT to_regprocedure('snowflake_server_worker()') IS NOT NULL`).Scan(&ok); err != nil {
		return s, fmt.Errorf("migrations: look for snowflake_server_worker(): %w", err)
	}
	if !ok {
		fn = "snowflake_reserved_worker"
	}
	// What snowflake_id() does, asked of the function it asks: the check
	// runs as it runs for every ID.
	err = conn.QueryRowContext(ctx, `SELECT `+fn+`()`).Scan(&w)
	var pgErr *pgconn.PgError
	switch {
	case err == nil && !s.Standby:
		s.Issues = true
	case err == nil:
		s.Refusal = "the server is a standby, in recovery: it issues no IDs"
	case errors.As(err, &pgErr):
		s.Refusal = pgErr.Message
	default:
		return s, fmt.Errorf("migrations: ask %s(): %w", fn, err)
	}
	return s, nil
}

// identity names the server a Server runs on, for messages.
func (s Server) identity() string {
	return fmt.Sprintf("database %q (schema %q) on timeline %d of server %s, started %s",
		s.Database, s.Schema, s.Timeline, s.SystemIdentifier, s.Started.UTC().Format(time.RFC3339Nano))
}

// ServerClaim is a worker number claimed for a database server in a
// pool's namespace (Options.WorkerPool), as Servers lists it.
type ServerClaim struct {
	// Worker is the number, Claimant the claim's name:
	// "postgres:<system identifier>:<timeline>/<database>/<schema>", with
	// "#<name>" after a copy's own name (Fork). A claim Up made before it
	// named timelines has no ":<timeline>" and Timeline 0.
	Worker   int64
	Claimant string
	// SystemIdentifier, Timeline, Database, Schema and Fork are the parts
	// of Claimant.
	SystemIdentifier string
	Timeline         int64
	Database         string
	Schema           string
	Fork             string
}

// parseClaimant reads a database server's claimant; ok is false for
// claimants of anything else.
func parseClaimant(c string) (sc ServerClaim, ok bool) {
	rest, ok := strings.CutPrefix(c, claimantPrefix)
	if !ok {
		return sc, false
	}
	server, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return sc, false
	}
	sc.SystemIdentifier = server
	if sys, tl, found := strings.Cut(server, ":"); found {
		n, err := strconv.ParseInt(tl, 10, 64)
		if err != nil || n <= 0 || strconv.FormatInt(n, 10) != tl {
			return sc, false
		}
		sc.SystemIdentifier, sc.Timeline = sys, n
	}
	// A database's name may hold '/' and '#'; a schema's too. The fork is
	// 16 hex digits after the last '#'.
	if i := strings.LastIndexByte(rest, '#'); i >= 0 && len(rest)-i-1 == 2*forkBytes && isHex(rest[i+1:]) {
		sc.Fork, rest = rest[i+1:], rest[:i]
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return sc, false
	}
	sc.Database, sc.Schema = rest[:i], rest[i+1:]
	sc.Claimant = c
	return sc, true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Servers lists the database servers that claimed a number in the
// namespace of pool (Options.WorkerPool), lowest number first: every
// snowflake_id() of the ID space that issues on a number of its own. A
// server migrated without the pool is not in it: it issues on
// workerid.SQLWorker, or on a number set by hand, and only ServerOf on its
// database tells. The error is Pool.Claims's, or wraps
// idtype.ErrInvalidOptions for a nil pool.
func Servers(ctx context.Context, pool *workerid.Pool) ([]ServerClaim, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil *workerid.Pool", idtype.ErrInvalidOptions)
	}
	claims, err := pool.Claims(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	var out []ServerClaim
	for _, c := range claims {
		if sc, ok := parseClaimant(c.Claimant); ok {
			sc.Worker = c.Worker
			out = append(out, sc)
		}
	}
	return out, nil
}

// CheckServers finds the snowflake_id()s among servers (ServerOf of each
// database whose IDs meet the others') that would repeat each other's IDs,
// and the claims (Servers of the namespace they share, or nil) they break.
// It returns nil when there is none, else every finding joined
// (errors.Join), each naming the servers and what to do:
//
//   - ErrWorkerConflict: two of them issue on one number, such as two
//     databases migrated without a pool, both on workerid.SQLWorker; or
//     two copies of one server that PostgreSQL cannot tell apart (one
//     system identifier and timeline, two start times: a disk snapshot or
//     a base backup started without recovery beside its original), which
//     Fork tells apart; or one issues on a number that claims holds for
//     another server.
//   - ErrNoServerWorker: one refuses to issue, since its number was
//     claimed for the server it is a copy or a promoted standby of; Up
//     with Options.WorkerPool claims it a number of its own.
//
// Two entries of one server (the same database reached twice) count once.
// Standbys issue nothing and are not compared.
func CheckServers(servers []Server, claims []ServerClaim) error {
	return checkServers(servers, claims, defences{})
}

func checkServers(servers []Server, claims []ServerClaim, d defences) error {
	var errs []error
	type key struct {
		system                 string
		timeline               int64
		started                time.Time
		database, schema, fork string
	}
	seen := map[key]bool{}
	var live []Server
	for _, s := range servers {
		k := key{s.SystemIdentifier, s.Timeline, s.Started, s.Database, s.Schema, ""}
		if sc, ok := parseClaimant(s.Claimant); ok {
			k.fork = sc.Fork
		}
		if d.noCopyCheck {
			k.started = time.Time{}
		}
		if seen[k] || s.Standby {
			continue
		}
		seen[k] = true
		if !s.Issues {
			errs = append(errs, fmt.Errorf("%w: %s refuses to issue: %s. Run Up with Options.WorkerPool on it, "+
				"to claim a number of its own", ErrNoServerWorker, s.identity(), s.Refusal))
			continue
		}
		live = append(live, s)
	}
	for i, a := range live {
		for _, b := range live[i+1:] {
			if a.Worker != b.Worker {
				continue
			}
			what := "both issue the same IDs: give each a number of its own, Up with Options.WorkerPool (the app " +
				"fleet's pool) on each, or a different Options.ReservedWorker on each"
			if a.SystemIdentifier == b.SystemIdentifier && a.Timeline == b.Timeline && a.Database == b.Database && a.Schema == b.Schema {
				what = "they share a system identifier and a timeline, which PostgreSQL cannot tell apart from one server " +
					"restarted: one is a copy of the other, started without recovery or promotion (a disk snapshot, a base " +
					"backup). They issue the same IDs: run Fork, with the pool, on the copy, or stop it"
			}
			errs = append(errs, fmt.Errorf("%w: %s and %s issue on worker %d; %s",
				ErrWorkerConflict, a.identity(), b.identity(), a.Worker, what))
		}
	}
	byWorker := map[int64]ServerClaim{}
	for _, c := range claims {
		byWorker[c.Worker] = c
	}
	for _, s := range live {
		c, ok := byWorker[s.Worker]
		if ok && c.Claimant != s.Claimant {
			errs = append(errs, fmt.Errorf("%w: %s issues on worker %d, which the namespace holds claimed for %s: "+
				"both issue the same IDs. Run Up with Options.WorkerPool on it",
				ErrWorkerConflict, s.identity(), s.Worker, c.Claimant))
		}
	}
	return errors.Join(errs...)
}

// Superseded reports, for each claim of claims that a later timeline of
// the same server (system identifier, database, schema and fork) also
// claimed, the claim of the latest such timeline: the claim of an old
// primary after a failover, or of the original a copy was promoted from.
// Such a claim keeps its number out of the pool until it is released
// (workerid.Pool.Unclaim), which is safe only once the server it was made
// for takes no more writes: nothing here can tell.
func Superseded(claims []ServerClaim) map[string]ServerClaim {
	out := map[string]ServerClaim{}
	for _, old := range claims {
		for _, c := range claims {
			if c.SystemIdentifier == old.SystemIdentifier && c.Database == old.Database && c.Schema == old.Schema &&
				c.Fork == old.Fork && max(c.Timeline, 1) > max(old.Timeline, 1) {
				if prev, ok := out[old.Claimant]; !ok || c.Timeline > prev.Timeline {
					out[old.Claimant] = c
				}
			}
		}
	}
	return out
}

// sharingSigns lists what a database shows of sharing its rows with other
// servers, whose snowflake_id()s then meet its own: logical replication
// either way, extensions that spread one database over several servers,
// and claims of other servers in its worker-lease table. Each query reads
// a catalog every role may read; one that fails is skipped.
var sharingSigns = []struct{ what, query string }{
	{"subscriptions (logical replication from other servers)",
		`SELECT subname FROM pg_subscription WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY 1`},
	{"publications (logical replication to other servers)", `SELECT pubname FROM pg_publication ORDER BY 1`},
	{"extensions that replicate or shard across servers",
		`SELECT extname FROM pg_extension WHERE extname IN ('citus', 'pglogical', 'spock', 'bdr', 'pgactive') ORDER BY 1`},
	{"namespaces of the worker-lease table where database servers claimed numbers",
		`SELECT DISTINCT namespace FROM snowkey_worker_leases WHERE starts_with(owner, 'claim/` + claimantPrefix + `') ORDER BY 1`},
}

// warnShared logs, after Up without a pool, when the schema's
// snowflake_id() issues on workerid.SQLWorker and the database shows signs
// of sharing its IDs with other servers: every server migrated without a
// pool or a number of its own issues on that number, and any two of them
// whose IDs meet issue the same IDs.
func warnShared(ctx context.Context, conn *sql.Conn, log *slog.Logger, st serverState) {
	if st.has || st.id.schema == "" {
		return
	}
	// A number set by hand (Options.ReservedWorker) was chosen for this
	// server; the default is the one every server gets.
	var w int64
	call := "SELECT " + pgx.Identifier{st.id.schema, "snowflake_reserved_worker"}.Sanitize() + "()"
	if err := conn.QueryRowContext(ctx, call).Scan(&w); err != nil || w != workerid.SQLWorker {
		return
	}
	var signs []any
	for _, s := range sharingSigns {
		var names []string
		// Each in a transaction of its own, so that one the role may not
		// run (or a table that does not exist) skips only itself.
		err := func() error {
			tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback() }()
			rows, err := tx.QueryContext(ctx, s.query)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					return err
				}
				names = append(names, n)
			}
			return rows.Err()
		}()
		if err == nil && len(names) > 0 {
			signs = append(signs, slog.String(s.what, strings.Join(slices.Compact(names), ", ")))
		}
	}
	if len(signs) == 0 {
		return
	}
	attrs := append([]any{"database", st.id.database, "schema", st.id.schema, "worker", w}, signs...)
	log.Warn(fmt.Sprintf("migrations: snowflake_id() issues on worker %d, claimed from no pool, and this database shares "+
		"rows with other servers. Every server migrated without Options.WorkerPool or Options.ReservedWorker issues on "+
		"that number: if another of them issues IDs that meet these, both issue the same IDs. Pass the app fleet's pool "+
		"in Options.WorkerPool, and check the servers with CheckServers (snowkey servers)", w), attrs...)
}

// forkBytes is the length of a copy's own name (Fork), in random bytes.
const forkBytes = 8

// Fork gives db's server a worker number of its own when it is a copy of
// another server that PostgreSQL cannot tell apart from it: a disk
// snapshot, a stopped server's directory copied, or a base backup started
// without recovery, running beside its original on the same system
// identifier and timeline, where both snowflake_id()s issue on one claimed
// number (CheckServers finds them). It runs Up with opts, which must have
// Options.WorkerPool, under a new name for the copy's claim,
// "...#<16 hex digits>", which the copy keeps: Up goes on claiming under
// it at every call, and a copy of the copy needs a Fork of its own.
//
// Run it once, on the copy only: on the original, it gives the original a
// new number, and its old one stays claimed. A copy that was promoted (a
// new timeline) needs no Fork: Up gives it a number of its own. The errors
// are Up's; opts without a pool wrap idtype.ErrInvalidOptions.
func Fork(ctx context.Context, db *sql.DB, opts Options) error {
	return fork(ctx, db, opts, defences{})
}

func fork(ctx context.Context, db *sql.DB, opts Options, d defences) error {
	if opts.WorkerPool == nil {
		return fmt.Errorf("%w: Fork needs Options.WorkerPool, the pool to claim the copy's number from", idtype.ErrInvalidOptions)
	}
	b := make([]byte, forkBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return up(ctx, db, opts, d, hex.EncodeToString(b))
}

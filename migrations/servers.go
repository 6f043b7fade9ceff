package migrations

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/workerid"
)

// This file gives the snowflake_id() of each database server a worker
// number of its own, claimed from the lease store of the app fleet whose
// IDs its IDs meet (Options.WorkerPool).
//
// A server is known by what runs, as PostgreSQL itself tells histories
// apart: its system identifier, which initdb draws and every copy and
// standby shares, and its timeline, which PostgreSQL starts anew each time
// a server takes writes on a history another server may go on writing:
// a standby promoted (a failover, or a copy made with pg_basebackup and
// promoted), a server restored to a point in time. A restart or a crash
// recovery keeps the timeline. With the database and the schema they name
// one snowflake_id() and its state: the claimant,
// "postgres:<system identifier>:<timeline>/<database>/<schema>".
//
// So a promoted standby, and a promoted copy, claim a number of their
// own, different from the one the server they came from claimed and may
// still issue on: they cannot repeat its IDs, whatever their clocks and
// however far their state lagged. The old number stays claimed, since
// nothing here can tell whether the old server still takes writes.
//
// The claim lives in the body of snowflake_server_worker(), which Up
// replaces with one that returns the number after checking that it runs
// on the server, the timeline and in the database the number was claimed
// for; snowflake_reserved_worker() names the number without the check,
// for worker leases to skip it. The function is IMMUTABLE: the planner
// evaluates it once when it plans a statement that calls snowflake_id(),
// so the check costs nothing per ID. A copy of the database (a restored
// dump, CREATE DATABASE ... TEMPLATE, a server moved by pg_upgrade, a
// standby promoted) carries the function along and fails the check: its
// snowflake_id() refuses with SQLStateNoServerWorker until Up claims a
// number of its own. A session that planned a call on a standby plans it
// again once the standby is promoted (PostgreSQL drops every cached plan
// then), and meets the check. The first line of the body records the
// claim as JSON, for Up to read back.
//
// A copy that takes writes on the same timeline as its original (a disk
// snapshot or a base backup started without recovery, a stopped server's
// directory copied) is the one case PostgreSQL does not tell apart from a
// restart of the original, and neither can this: CheckServers finds it
// from the servers' start times, given both, and Fork gives the copy a
// number of its own.

// serverMarker starts the line of a server body of
// snowflake_server_worker() (or, as Up wrote it before, of
// snowflake_reserved_worker()) that records its claim.
const serverMarker = "-- snowkey server worker: "

// serverQuote is the dollar quote of a server body; nothing in the body
// may hold it.
const serverQuote = "$snowkey_worker$"

// claimantPrefix starts the claimant of every database server.
const claimantPrefix = "postgres:"

// maxServerStartWait bounds how long Up waits for the database's clock
// to pass the high-water mark of a number it claimed.
const maxServerStartWait = 2 * time.Minute

// serverRecord is the claim a server body records.
type serverRecord struct {
	Worker           int64  `json:"worker"`
	SystemIdentifier string `json:"system_identifier"`
	// Timeline is the timeline the number was claimed on; 0 in a record
	// Up wrote before it named timelines, which then holds on timeline 1
	// only.
	Timeline int64  `json:"timeline,omitempty"`
	Database string `json:"database"`
	// Fork is the name Fork gave a copy, "" for none.
	Fork      string `json:"fork,omitempty"`
	Claimant  string `json:"claimant"`
	Namespace string `json:"namespace"`
}

// serverIdentity is where Up runs: the server, its timeline and its
// start, the database and the schema it migrates.
type serverIdentity struct {
	system   string
	timeline int64
	started  time.Time
	standby  bool
	database string
	schema   string
}

// claimant names the claim of a server on its timeline; fork, when not
// empty, is a copy's own name (Fork). Without the timeline defence it is
// the name of before timelines, which a promoted copy shares.
func (id serverIdentity) claimant(fork string, d defences) string {
	var b strings.Builder
	b.WriteString(claimantPrefix + id.system)
	if !d.noTimeline {
		b.WriteString(":" + strconv.FormatInt(id.timeline, 10))
	}
	b.WriteString("/" + id.database + "/" + id.schema)
	if fork != "" {
		b.WriteString("#" + fork)
	}
	return b.String()
}

// matches reports whether r was claimed for this server, timeline and
// database. A record of before timelines holds on the first one.
func (id serverIdentity) matches(r serverRecord, d defences) bool {
	if r.SystemIdentifier != id.system || r.Database != id.database {
		return false
	}
	return d.noTimeline || r.Timeline == id.timeline || r.Timeline == 0 && id.timeline == 1
}

// identifySQL reads where a session runs. The timeline is the one the
// server writes WAL on, from the name of its current WAL file: the
// timeline of the last checkpoint (pg_control_checkpoint()) stays the old
// one for a while after a promotion. A standby writes no WAL; its timeline
// is that of its last restartpoint.
const identifySQL = `SELECT (SELECT system_identifier FROM pg_control_system())::text,
	CASE WHEN pg_is_in_recovery() THEN (SELECT timeline_id FROM pg_control_checkpoint())::bigint
		ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END,
	pg_postmaster_start_time(), pg_is_in_recovery(), current_database(), current_schema()`

// identify reads where q runs. A search_path without a schema leaves
// schema empty (goose then fails with its own error).
func identify(ctx context.Context, q querier) (serverIdentity, error) {
	var (
		id     serverIdentity
		schema sql.NullString
	)
	err := q.QueryRowContext(ctx, identifySQL).Scan(&id.system, &id.timeline, &id.started, &id.standby, &id.database, &schema)
	if err != nil {
		return id, fmt.Errorf("migrations: identify the server: %w", err)
	}
	id.schema = schema.String
	return id, nil
}

// parseServerBody returns the claim that a body of snowflake_server_worker()
// (or snowflake_reserved_worker(), as Up wrote it before) records, if it is
// a server body.
func parseServerBody(src string) (serverRecord, bool, error) {
	var r serverRecord
	i := strings.Index(src, serverMarker)
	if i < 0 {
		return r, false, nil
	}
	line, _, _ := strings.Cut(src[i+len(serverMarker):], "\n")
	dec := json.NewDecoder(strings.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, true, fmt.Errorf("the claim recorded in the schema's snowflake_server_worker() is not the JSON snowkey writes: %v", err)
	}
	if r.Worker <= 0 || r.Worker > idtype.DefaultLayout.MaxWorker() {
		return r, true, fmt.Errorf("the claim recorded in the schema's snowflake_server_worker() names worker %d", r.Worker)
	}
	return r, true, nil
}

// serverBody is the body of snowflake_server_worker() for a claim.
func serverBody(r serverRecord, d defences) (string, error) {
	js, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	w := strconv.FormatInt(r.Worker, 10)
	tl := strconv.FormatInt(r.Timeline, 10)
	timelineCheck := `
            OR tl IS DISTINCT FROM ` + tl
	if d.noTimeline {
		timelineCheck = ""
	}
	body := "\n" + serverMarker + string(js) + `
-- snowflake_id() folds this into the plan of the statement that calls it,
-- so the check runs once per plan, not once per ID.
DECLARE
    tl bigint;
BEGIN
    IF pg_is_in_recovery() THEN
        RAISE EXCEPTION 'snowflake_id: this server is a standby, in recovery; it issues no IDs'
            USING ERRCODE = '25006',
                  HINT = 'Once promoted it is a server of its own: run migrations.Up with Options.WorkerPool on it to claim a worker number.';
    END IF;
    tl := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint;
    IF (SELECT system_identifier FROM pg_control_system()) IS DISTINCT FROM ` + r.SystemIdentifier + `
            OR current_database() IS DISTINCT FROM ` + sqlLiteral(r.Database) + timelineCheck + ` THEN
        RAISE EXCEPTION 'snowflake_id: worker % was claimed for database % on timeline % of the PostgreSQL server whose system identifier is %, not for database % on timeline % of server %',
            ` + w + `, ` + sqlLiteral(r.Database) + `, ` + tl + `, ` + sqlLiteral(r.SystemIdentifier) + `,
            current_database(), tl, (SELECT system_identifier FROM pg_control_system())
            USING ERRCODE = '` + SQLStateNoServerWorker + `',
                  HINT = 'This server is a standby promoted in place of that one, a copy of it, or a restored dump; that server may still issue on worker ` + w + `. Run migrations.Up with Options.WorkerPool here to claim a worker number of its own.';
    END IF;
    RETURN ` + w + `;
END
`
	if strings.Contains(body, serverQuote) {
		return "", fmt.Errorf("%w: database %q: its name holds %s", idtype.ErrInvalidOptions, r.Database, serverQuote)
	}
	return body, nil
}

// serverState is what Up learns of the server before it migrates.
type serverState struct {
	id serverIdentity
	// rec is the claim the schema records, if it has one (has).
	rec serverRecord
	has bool
	// claim is what Options.WorkerPool gave; nil without it.
	claim *workerid.Claim
	// fork is the copy's own name that the claim carries, "" for none.
	fork string
}

// readClaim reads the claim the schema's functions record:
// snowflake_server_worker() holds it, or, as Up wrote it before that
// function was made, snowflake_reserved_worker().
func readClaim(ctx context.Context, q querier, schema string) (serverRecord, bool, error) {
	for _, fn := range []string{"snowflake_server_worker", "snowflake_reserved_worker"} {
		var src sql.NullString
		err := q.QueryRowContext(ctx, `SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
			WHERE p.proname = $1 AND p.pronargs = 0 AND n.nspname = $2`, fn, schema).Scan(&src)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return serverRecord{}, false, fmt.Errorf("migrations: read %s(): %w", fn, err)
		}
		rec, has, err := parseServerBody(src.String)
		if err != nil {
			return rec, has, fmt.Errorf("%w: schema %q: %v", ErrNoServerWorker, schema, err)
		}
		if has {
			return rec, true, nil
		}
	}
	return serverRecord{}, false, nil
}

// prepareServer runs under the migration lock before anything is
// migrated: it claims the server's number with Options.WorkerPool, or,
// without it, refuses a database whose snowflake_id() was claimed for
// another server, timeline or database, which would refuse to issue.
// fork, when not empty, is the copy's new name (Fork).
func prepareServer(ctx context.Context, q queryer, o Options, d defences, fork string) (serverState, error) {
	var st serverState
	id, err := identify(ctx, q)
	if err != nil || id.schema == "" {
		return st, err
	}
	st.id = id
	if st.rec, st.has, err = readClaim(ctx, q, id.schema); err != nil {
		return st, err
	}
	if o.WorkerPool == nil {
		if st.has && !id.matches(st.rec, d) && o.ReservedWorker == 0 {
			return st, fmt.Errorf("%w: worker %d of schema %q was claimed for database %q on timeline %s of the server whose "+
				"system identifier is %s; this is database %q on timeline %d of server %s (a standby promoted in its place, a copy, "+
				"a restored dump), where snowflake_id() refuses to issue (SQLSTATE %s), since that server may still issue on "+
				"worker %d. Run Up with Options.WorkerPool, the app fleet's worker pool, to claim a number of its own",
				ErrNoServerWorker, st.rec.Worker, id.schema, st.rec.Database, recordTimeline(st.rec), st.rec.SystemIdentifier,
				id.database, id.timeline, id.system, SQLStateNoServerWorker, st.rec.Worker)
		}
		return st, nil
	}
	if id.standby {
		return st, fmt.Errorf("migrations: database %q of server %s is a standby, in recovery: it issues no IDs and "+
			"takes no claim; run Up with Options.WorkerPool on its primary, and here once it is promoted", id.database, id.system)
	}
	st.fork = fork
	if fork == "" && st.has && id.matches(st.rec, d) {
		st.fork = st.rec.Fork
	}
	claimant := id.claimant(st.fork, d)
	if fork == "" && st.has && st.rec.Timeline == 0 && id.matches(st.rec, d) {
		// A claim of before timelines, on the first timeline: the
		// server's own, kept under its name.
		claimant = st.rec.Claimant
	}
	c, err := o.WorkerPool.Claim(ctx, claimant)
	if err != nil {
		if errors.Is(err, workerid.ErrTaken) {
			err = fmt.Errorf("%w: %w", ErrWorkerConflict, err)
		}
		return st, fmt.Errorf("migrations: claim a worker number for %s: %w", claimant, err)
	}
	st.claim = &c
	if st.has && c.Worker != st.rec.Worker && o.Logger != nil {
		why := "this server is a standby promoted in place of the server the number was claimed for, a copy of it, or a restored dump"
		if fork != "" {
			why = "Fork: this server is a copy of the server the number was claimed for"
		}
		o.Logger.Warn("migrations: snowflake_id() of this server gets a worker number of its own; the number it had stays "+
			"claimed for the server it came from, which may still issue on it. Once that server takes no more writes, "+
			"release its claim (snowkey servers --release)",
			"why", why, "worker", c.Worker, "claimant", c.Claimant,
			"previous_worker", st.rec.Worker, "previous_claimant", st.rec.Claimant)
	}
	return st, nil
}

// recordTimeline is a record's timeline for a message.
func recordTimeline(r serverRecord) string {
	if r.Timeline == 0 {
		return "1"
	}
	return strconv.FormatInt(r.Timeline, 10)
}

// configureServer makes the schema's snowflake_id() use the claimed
// number, after the number's high-water mark, and waits until the
// database's clock has passed that mark, so that snowflake_id() issues at
// once. conn holds the migration lock.
func configureServer(ctx context.Context, conn *sql.Conn, st serverState, namespace string, d defences) (err error) {
	rec := serverRecord{
		Worker: st.claim.Worker, SystemIdentifier: st.id.system, Timeline: st.id.timeline, Database: st.id.database,
		Fork: st.fork, Claimant: st.claim.Claimant, Namespace: namespace,
	}
	if d.noTimeline {
		rec.Timeline = 0
	}
	body, err := serverBody(rec, d)
	if err != nil {
		return err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrations: set the server's worker: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	schema := pgx.Identifier{st.id.schema}.Sanitize()
	fns := []struct{ name, lang, body string }{
		{"snowflake_reserved_worker", "sql", "SELECT " + strconv.FormatInt(rec.Worker, 10) + "::bigint"},
		{"snowflake_server_worker", "plpgsql", body},
	}
	for _, f := range fns {
		var src string
		err = tx.QueryRowContext(ctx, `SELECT prosrc FROM pg_proc WHERE oid = $1::regprocedure`,
			st.id.schema+"."+f.name+"()").Scan(&src)
		if err != nil {
			return fmt.Errorf("migrations: set the server's worker: %w", err)
		}
		if src == f.body {
			continue
		}
		ddl := "CREATE OR REPLACE FUNCTION " + schema + "." + f.name + "() RETURNS bigint " +
			"LANGUAGE " + f.lang + " IMMUTABLE PARALLEL SAFE AS " + serverQuote + f.body + serverQuote
		if _, err := tx.ExecContext(ctx, ddl); err != nil {
			return fmt.Errorf("migrations: set the server's worker to %d: %w", rec.Worker, err)
		}
	}
	after := st.claim.After
	if !after.IsZero() {
		// Raise both sequences of snowflake_id() to the greatest ID of
		// the mark's millisecond, under the lock that snowflake_id()
		// takes to start a millisecond, so that no call moves them in
		// between (setval would take them back). The next ID is in a
		// later millisecond: a value past the floor fails the fast
		// path's check, which sends the call to the locked path.
		floor := (after.UnixMilli()-idtype.DefaultLayout.Epoch.UnixMilli())<<22 | (1<<22 - 1)
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, SnowflakeLockKey); err != nil {
			return fmt.Errorf("migrations: start the server's worker %d after %v: %w", rec.Worker, after, err)
		}
		// The sequence first, then the state, as snowflake_id() does.
		for _, name := range []string{"snowflake_id_seq", "snowflake_id_state"} {
			seq := schema + "." + name
			_, err := tx.ExecContext(ctx, `SELECT setval($1::regclass, GREATEST((SELECT last_value FROM `+seq+`), $2::bigint))`,
				seq, floor)
			if err != nil {
				return fmt.Errorf("migrations: start the server's worker %d after %v: %w", rec.Worker, after, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrations: set the server's worker to %d: %w", rec.Worker, err)
	}
	if !after.IsZero() {
		return waitClock(ctx, conn, after)
	}
	return nil
}

// waitClock waits until the database's clock is past t, for at most
// maxServerStartWait.
func waitClock(ctx context.Context, q querier, t time.Time) error {
	for {
		var now int64
		err := q.QueryRowContext(ctx, `SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint`).Scan(&now)
		if err != nil {
			return fmt.Errorf("migrations: read the database's clock: %w", err)
		}
		wait := time.Duration(t.UnixMilli()-now+1) * time.Millisecond
		if wait <= 0 {
			return nil
		}
		if wait > maxServerStartWait {
			return fmt.Errorf("%w: the claimed worker's high-water mark %v is %v ahead of the database's clock, "+
				"more than Up waits (%v)", idtype.ErrClockBehind, t, wait, maxServerStartWait)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("migrations: wait for the database's clock to pass %v: %w", t, ctx.Err())
		case <-timer.C:
		}
	}
}

// sameLayout reports whether a and b lay IDs out alike.
func sameLayout(a, b idtype.Layout) bool {
	return a.Epoch.Equal(b.Epoch) && a.WorkerBits == b.WorkerBits && a.SequenceBits == b.SequenceBits
}

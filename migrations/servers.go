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
	"github.com/snowkeyhq/snowkey/idtype/workerid"
)

// This file gives the snowflake_id() of each database server a worker
// number of its own, claimed from the lease store of the app fleet whose
// IDs its IDs meet (Options.WorkerPool).
//
// A server is known by its system identifier, which pg_control_system()
// reports to every role: a physical standby shares it (it takes over the
// primary's IDs when promoted, and issues nothing before), while a new
// cluster gets its own from initdb. With the database and the schema it
// names one snowflake_id() and its state: the claimant,
// "postgres:<system identifier>/<database>/<schema>".
//
// The claim lives in the body of snowflake_reserved_worker(), which Up
// replaces with one that returns the number after checking that it runs
// on the server and in the database the number was claimed for. The
// function is IMMUTABLE: the planner evaluates it once when it plans a
// statement that calls snowflake_id(), so the check costs nothing per
// ID. A copy of the database (a restored dump, CREATE DATABASE ...
// TEMPLATE, a server moved by pg_upgrade) carries the function along and
// fails the check: its snowflake_id() refuses with SQLStateNoServerWorker
// until Up claims a number of its own. The first line of the body records
// the claim as JSON, for Up to read back.

// serverMarker starts the line of a server body of
// snowflake_reserved_worker() that records its claim.
const serverMarker = "-- snowkey server worker: "

// serverQuote is the dollar quote of a server body; nothing in the body
// may hold it.
const serverQuote = "$snowkey_worker$"

// maxServerStartWait bounds how long Up waits for the database's clock
// to pass the high-water mark of a number it claimed.
const maxServerStartWait = 2 * time.Minute

// serverRecord is the claim a server body records.
type serverRecord struct {
	Worker           int64  `json:"worker"`
	SystemIdentifier string `json:"system_identifier"`
	Database         string `json:"database"`
	Claimant         string `json:"claimant"`
	Namespace        string `json:"namespace"`
}

// serverIdentity is where Up runs: the server's system identifier, the
// database and the schema it migrates.
type serverIdentity struct {
	system, database, schema string
}

func (id serverIdentity) claimant() string {
	return "postgres:" + id.system + "/" + id.database + "/" + id.schema
}

// matches reports whether r was claimed for this server and database.
func (id serverIdentity) matches(r serverRecord) bool {
	return r.SystemIdentifier == id.system && r.Database == id.database
}

// identify reads where q runs. A search_path without a schema leaves
// schema empty (goose then fails with its own error).
func identify(ctx context.Context, q querier) (serverIdentity, error) {
	var (
		id     serverIdentity
		schema sql.NullString
	)
	err := q.QueryRowContext(ctx, `SELECT (SELECT system_identifier FROM pg_control_system())::text,
		current_database(), current_schema()`).Scan(&id.system, &id.database, &schema)
	if err != nil {
		return id, fmt.Errorf("migrations: identify the server: %w", err)
	}
	id.schema = schema.String
	return id, nil
}

// parseServerBody returns the claim that a body of
// snowflake_reserved_worker() records, if it is a server body.
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
		return r, true, fmt.Errorf("the claim recorded in snowflake_reserved_worker() is not the JSON snowkey writes: %v", err)
	}
	if r.Worker <= 0 || r.Worker > idtype.DefaultLayout.MaxWorker() {
		return r, true, fmt.Errorf("the claim recorded in snowflake_reserved_worker() names worker %d", r.Worker)
	}
	return r, true, nil
}

// serverBody is the body of snowflake_reserved_worker() for a claim.
func serverBody(r serverRecord) (string, error) {
	js, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	w := strconv.FormatInt(r.Worker, 10)
	body := "\n" + serverMarker + string(js) + `
-- snowflake_id() folds this into the plan of the statement that calls it,
-- so the check runs once per plan, not once per ID.
BEGIN
    IF (SELECT system_identifier FROM pg_control_system()) IS DISTINCT FROM ` + r.SystemIdentifier + `
            OR current_database() IS DISTINCT FROM ` + sqlLiteral(r.Database) + ` THEN
        RAISE EXCEPTION 'snowflake_id: worker % was claimed for database % of the PostgreSQL server whose system identifier is %, not for database % of server %',
            ` + w + `, ` + sqlLiteral(r.Database) + `, ` + sqlLiteral(r.SystemIdentifier) + `,
            current_database(), (SELECT system_identifier FROM pg_control_system())
            USING ERRCODE = '` + SQLStateNoServerWorker + `',
                  HINT = 'This database is a copy (a restored dump, a template, an upgraded server). Run migrations.Up with Options.WorkerPool on it to claim a worker number of its own.';
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
	// rec is the claim the schema's snowflake_reserved_worker() records,
	// if it has a server body (has).
	rec serverRecord
	has bool
	// claim is what Options.WorkerPool gave; nil without it.
	claim *workerid.Claim
}

// prepareServer runs under the migration lock before anything is
// migrated: it claims the server's number with Options.WorkerPool, or,
// without it, refuses a database whose snowflake_id() was claimed for
// another server or database, which would refuse to issue.
func prepareServer(ctx context.Context, q queryer, o Options) (serverState, error) {
	var st serverState
	id, err := identify(ctx, q)
	if err != nil || id.schema == "" {
		return st, err
	}
	st.id = id
	var src sql.NullString
	err = q.QueryRowContext(ctx, `SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE p.proname = 'snowflake_reserved_worker' AND p.pronargs = 0 AND n.nspname = $1`, id.schema).Scan(&src)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return st, fmt.Errorf("migrations: read snowflake_reserved_worker(): %w", err)
	}
	if st.rec, st.has, err = parseServerBody(src.String); err != nil {
		return st, fmt.Errorf("%w: schema %q: %v", ErrNoServerWorker, id.schema, err)
	}
	if o.WorkerPool == nil {
		if st.has && !id.matches(st.rec) && o.ReservedWorker == 0 {
			return st, fmt.Errorf("%w: worker %d of schema %q was claimed for database %q of the server whose system "+
				"identifier is %s; this is database %q of server %s (a copy, a restored dump, an upgraded server), where "+
				"snowflake_id() refuses to issue (SQLSTATE %s). Run Up with Options.WorkerPool, the app fleet's worker pool, "+
				"to claim a number of its own",
				ErrNoServerWorker, st.rec.Worker, id.schema, st.rec.Database, st.rec.SystemIdentifier, id.database, id.system,
				SQLStateNoServerWorker)
		}
		return st, nil
	}
	c, err := o.WorkerPool.Claim(ctx, id.claimant())
	if err != nil {
		if errors.Is(err, workerid.ErrTaken) {
			err = fmt.Errorf("%w: %w", ErrWorkerConflict, err)
		}
		return st, fmt.Errorf("migrations: claim a worker number for %s: %w", id.claimant(), err)
	}
	st.claim = &c
	return st, nil
}

// configureServer makes the schema's snowflake_id() use the claimed
// number, after the number's high-water mark, and waits until the
// database's clock has passed that mark, so that snowflake_id() issues at
// once. conn holds the migration lock.
func configureServer(ctx context.Context, conn *sql.Conn, st serverState, namespace string) (err error) {
	rec := serverRecord{
		Worker: st.claim.Worker, SystemIdentifier: st.id.system, Database: st.id.database,
		Claimant: st.claim.Claimant, Namespace: namespace,
	}
	body, err := serverBody(rec)
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
	var src string
	err = tx.QueryRowContext(ctx, `SELECT prosrc FROM pg_proc WHERE oid = $1::regprocedure`,
		st.id.schema+".snowflake_reserved_worker()").Scan(&src)
	if err != nil {
		return fmt.Errorf("migrations: set the server's worker: %w", err)
	}
	if src != body {
		ddl := "CREATE OR REPLACE FUNCTION " + schema + ".snowflake_reserved_worker() RETURNS bigint " +
			"LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS " + serverQuote + body + serverQuote
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

package migrations

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/workerid"
)

// This file keeps two snowflake_id() functions whose IDs can meet off one
// worker number.
//
// Within a database every schema can meet every other (one query reaches
// both), so Up compares the reserved worker it is about to use with those
// of all the other schemas that have snowflake_reserved_worker().
//
// Databases cannot see each other's functions, and most databases of a
// cluster belong to apps whose IDs never meet. Those that do (shards of one
// app) say so by sharing an ID space (Options.IDSpace). Each database of a
// space records its schemas and their workers in a setting of its own,
// ALTER DATABASE ... SET snowkey.reserved_workers = '{"space":...}', which
// PostgreSQL keeps in the shared catalog pg_db_role_setting, readable from
// every database of the cluster. Up writes its own record first and then
// reads the others: of two Ups that race in two databases, the later
// reader sees the earlier writer, so at least one of them refuses.
//
// Databases in other clusters cannot be seen at all: each shard needs its
// own reserved worker, given by the operator (see the package doc).

// SpaceSetting is the per-database setting in which Up records the ID space
// of a database and the reserved workers of its schemas (Options.IDSpace), as
// JSON: {"space":"orders","schemas":{"public":1023}}.
const SpaceSetting = "snowkey.reserved_workers"

// Reservation is a worker number that a snowflake_id() stamps on its IDs.
type Reservation struct {
	// Database and Schema say where the function is.
	Database string
	Schema   string
	// Worker is the number, snowflake_reserved_worker().
	Worker int64
}

// spaceRecord is the value of SpaceSetting.
type spaceRecord struct {
	Space   string           `json:"space"`
	Schemas map[string]int64 `json:"schemas"`
}

// maxSpaceName bounds an ID space's name.
const maxSpaceName = 63

// checkSpaceName refuses names that would be hard to read back or to type:
// 1 to 63 bytes of letters, digits, '_', '-' and '.'.
func checkSpaceName(name string) error {
	if name == "" || len(name) > maxSpaceName {
		return fmt.Errorf("ID space %q: want 1 to %d bytes", name, maxSpaceName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("ID space %q: byte %q at offset %d; want letters, digits, '_', '-' or '.'", name, c, i)
		}
	}
	return nil
}

// parseRecord reads a SpaceSetting value, as another database may hold it.
func parseRecord(s string) (spaceRecord, error) {
	var r spaceRecord
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("not the JSON snowkey writes: %v", err)
	}
	if dec.More() {
		return r, errors.New("not the JSON snowkey writes: text after the object")
	}
	if err := checkSpaceName(r.Space); err != nil {
		return r, err
	}
	if len(r.Schemas) == 0 {
		return r, errors.New("no schemas")
	}
	max := idtype.DefaultLayout.MaxWorker()
	for schema, w := range r.Schemas {
		if schema == "" || w < 0 || w > max {
			return r, fmt.Errorf("schema %q with worker %d; want a name and 0..%d", schema, w, max)
		}
	}
	return r, nil
}

// encode writes the record as JSON; map keys come out sorted, so equal
// records encode equally.
func (r spaceRecord) encode() string {
	b, _ := json.Marshal(r) // strings and integers: cannot fail
	return string(b)
}

// queryer is what *sql.DB, *sql.Conn and *sql.Tx share.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// workerSource matches the body migrations and Options.ReservedWorker give
// snowflake_reserved_worker().
var workerSource = regexp.MustCompile(`^\s*(?i:select)\s+(\d{1,4})\s*::\s*bigint\s*;?\s*$`)

// schemaWorkers lists the schemas of the connection's database that have
// snowflake_reserved_worker(), with their workers. It reads each function's
// body from pg_proc, which every role may read; a body changed by hand is
// called instead.
func schemaWorkers(ctx context.Context, q queryer) (db string, out []Reservation, err error) {
	rows, err := q.QueryContext(ctx, `SELECT current_database(), n.nspname, p.prosrc
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE p.proname = 'snowflake_reserved_worker' AND p.pronargs = 0
		ORDER BY n.nspname`)
	if err != nil {
		return "", nil, fmt.Errorf("migrations: list snowflake_reserved_worker() functions: %w", err)
	}
	type fn struct{ schema, src string }
	var fns []fn
	for rows.Next() {
		var f fn
		if err := rows.Scan(&db, &f.schema, &f.src); err != nil {
			rows.Close()
			return "", nil, fmt.Errorf("migrations: list snowflake_reserved_worker() functions: %w", err)
		}
		fns = append(fns, f)
	}
	if err := rows.Close(); err != nil {
		return "", nil, fmt.Errorf("migrations: list snowflake_reserved_worker() functions: %w", err)
	}
	if err := rows.Err(); err != nil {
		return "", nil, fmt.Errorf("migrations: list snowflake_reserved_worker() functions: %w", err)
	}
	for _, f := range fns {
		r := Reservation{Database: db, Schema: f.schema}
		if m := workerSource.FindStringSubmatch(f.src); m != nil {
			r.Worker, _ = strconv.ParseInt(m[1], 10, 64)
		} else if rec, ok, err := parseServerBody(f.src); ok && err == nil {
			r.Worker = rec.Worker
		} else {
			call := "SELECT " + pgx.Identifier{f.schema, "snowflake_reserved_worker"}.Sanitize() + "()"
			if err := q.QueryRowContext(ctx, call).Scan(&r.Worker); err != nil {
				return "", nil, fmt.Errorf("%w: cannot read the reserved worker of schema %q to compare it (%v); "+
					"grant this role USAGE on the schema and EXECUTE on its snowflake_reserved_worker()",
					ErrWorkerConflict, f.schema, err)
			}
		}
		out = append(out, r)
	}
	return db, out, nil
}

// records reads every database's SpaceSetting from the shared catalog.
func records(ctx context.Context, q queryer) (map[string]spaceRecord, error) {
	rows, err := q.QueryContext(ctx, `SELECT d.datname, substr(c, length($1) + 2)
		FROM pg_db_role_setting s
		JOIN pg_database d ON d.oid = s.setdatabase
		CROSS JOIN LATERAL unnest(s.setconfig) AS c
		WHERE s.setrole = 0 AND starts_with(c, $1 || '=')`, SpaceSetting)
	if err != nil {
		return nil, fmt.Errorf("%w: read the records of other databases from pg_db_role_setting: %w", ErrIDSpace, err)
	}
	defer rows.Close()
	out := map[string]spaceRecord{}
	for rows.Next() {
		var db, v string
		if err := rows.Scan(&db, &v); err != nil {
			return nil, fmt.Errorf("%w: read the records of other databases: %w", ErrIDSpace, err)
		}
		r, err := parseRecord(v)
		if err != nil {
			return nil, fmt.Errorf("%w: database %q holds %s = %q: %v; fix or remove it "+
				"(ALTER DATABASE %s RESET %s; its next Up writes it again)",
				ErrIDSpace, db, SpaceSetting, v, err, pgx.Identifier{db}.Sanitize(), SpaceSetting)
		}
		out[db] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: read the records of other databases: %w", ErrIDSpace, err)
	}
	return out, nil
}

// writeRecord sets (r != nil) or removes (r == nil) the database's record.
// A role that may not is told how to be allowed.
func writeRecord(ctx context.Context, q queryer, db string, r *spaceRecord) error {
	ident := pgx.Identifier{db}.Sanitize()
	stmt := "ALTER DATABASE " + ident + " RESET " + SpaceSetting
	if r != nil {
		// A utility statement takes no parameters: the value is a literal.
		stmt = "ALTER DATABASE " + ident + " SET " + SpaceSetting + " = " + sqlLiteral(r.encode())
	}
	if _, err := q.ExecContext(ctx, stmt); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
			return fmt.Errorf("%w: this role may not record database %q in its ID space (%v). "+
				"PostgreSQL lets only superusers set a setting it does not know, unless granted: "+
				"a superuser runs once, on PostgreSQL 15 or later, GRANT SET ON PARAMETER %s TO <this role>; "+
				"the role must also own the database. Or run Up for this database once as a superuser",
				ErrIDSpace, db, err, SpaceSetting)
		}
		return fmt.Errorf("%w: record database %q: %w", ErrIDSpace, db, err)
	}
	return nil
}

// sqlLiteral quotes s as an escape string, E'...', which reads the same
// whatever standard_conforming_strings says.
func sqlLiteral(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

// freeWorker suggests a number for an error message: the largest one that
// none of used takes (never 0, which Options.ReservedWorker cannot set).
func freeWorker(used []int64) int64 {
	for w := idtype.DefaultLayout.MaxWorker(); w > 0; w-- {
		if !slices.Contains(used, w) {
			return w
		}
	}
	return -1
}

// checkWorkers runs inside Up's migration lock, before anything is
// migrated: it refuses a reserved worker that another snowflake_id() whose
// IDs can meet these uses, and records the database in its ID space.
func checkWorkers(ctx context.Context, q queryer, o Options) error {
	var target sql.NullString
	if err := q.QueryRowContext(ctx, "SELECT current_schema()").Scan(&target); err != nil {
		return fmt.Errorf("migrations: find the schema to migrate: %w", err)
	}
	if !target.Valid {
		return nil // no schema on the search_path: goose fails with its own error
	}
	db, schemas, err := schemaWorkers(ctx, q)
	if err != nil {
		return err
	}
	if db == "" {
		if err := q.QueryRowContext(ctx, "SELECT current_database()").Scan(&db); err != nil {
			return fmt.Errorf("migrations: %w", err)
		}
	}

	w := workerid.SQLWorker
	var used []int64
	for _, r := range schemas {
		used = append(used, r.Worker)
		if r.Schema == target.String {
			w = r.Worker
		}
	}
	if o.ReservedWorker != 0 {
		w = o.ReservedWorker
	}
	for _, r := range schemas {
		if r.Schema != target.String && r.Worker == w {
			return fmt.Errorf("%w: schema %q of database %q would get worker %d, which schema %q uses already: "+
				"both would issue the same IDs. Up migrates the first schema of the connection's search_path; "+
				"if the migrations belong in %q, put it first in search_path. If %q needs a snowflake_id() of its own, "+
				"run Up with Options{ReservedWorker: %d}, a number no other schema, database or worker lease of these IDs uses, "+
				"and keep app leases off it (workerid.Options.Reserved)",
				ErrWorkerConflict, target.String, db, w, r.Schema, r.Schema, target.String, freeWorker(append(used, w)))
		}
	}

	recs, err := records(ctx, q)
	if err != nil {
		return err
	}
	own, recorded := recs[db]
	space := o.IDSpace
	switch {
	case recorded && space == "":
		space = own.Space
	case recorded && space != own.Space:
		return fmt.Errorf("%w: database %q is recorded in ID space %q, and Up was given Options{IDSpace: %q}. "+
			"A database belongs to one space; to move it, ALTER DATABASE %s RESET %s and run Up again",
			ErrIDSpace, db, own.Space, space, pgx.Identifier{db}.Sanitize(), SpaceSetting)
	}
	if space == "" {
		return nil
	}

	mine := spaceRecord{Space: space, Schemas: map[string]int64{target.String: w}}
	for _, r := range schemas {
		if r.Schema != target.String {
			mine.Schemas[r.Schema] = r.Worker
		}
	}
	if !recorded || own.encode() != mine.encode() {
		if err := writeRecord(ctx, q, db, &mine); err != nil {
			return err
		}
	}
	// Read the others only now that this record is visible to them.
	if recs, err = records(ctx, q); err != nil {
		return err
	}
	var spaceUsed []int64
	for name, r := range recs {
		if name == db || r.Space != space {
			continue
		}
		for _, x := range r.Schemas {
			spaceUsed = append(spaceUsed, x)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(recs)) {
		r := recs[name]
		if name == db || r.Space != space {
			continue
		}
		for _, schema := range slices.Sorted(maps.Keys(r.Schemas)) {
			if r.Schemas[schema] != w {
				continue
			}
			restore := &own
			if !recorded {
				restore = nil
			}
			err := fmt.Errorf("%w: database %q (schema %q) of ID space %q would get worker %d, which database %q "+
				"(schema %q) of the space uses already: both would issue the same IDs. Run Up with "+
				"Options{ReservedWorker: %d}, a number no schema, database or worker lease of the space uses, and keep "+
				"app leases off it (workerid.Options.Reserved)",
				ErrWorkerConflict, db, target.String, space, w, name, schema, freeWorker(append(append(used, w), spaceUsed...)))
			if werr := writeRecord(ctx, q, db, restore); werr != nil {
				err = errors.Join(err, fmt.Errorf("and restoring this database's record failed: %w", werr))
			}
			return err
		}
	}
	return nil
}

// ReservedWorkers lists the reserved workers of every snowflake_id() whose
// IDs can meet those of db's database: the one of every schema of the
// database that has one, and, when the database is in an ID space
// (Options.IDSpace), those that the other databases of the cluster recorded in
// that space. An app's worker leases must skip every number in it: pass
// them in workerid.Options.Reserved. Databases in other clusters are not
// in it.
func ReservedWorkers(ctx context.Context, db *sql.DB) ([]Reservation, error) {
	name, out, err := schemaWorkers(ctx, db)
	if err != nil {
		return nil, err
	}
	if name == "" {
		if err := db.QueryRowContext(ctx, "SELECT current_database()").Scan(&name); err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
	}
	recs, err := records(ctx, db)
	if err != nil {
		return nil, err
	}
	own, ok := recs[name]
	if !ok {
		return out, nil
	}
	for _, other := range slices.Sorted(maps.Keys(recs)) {
		r := recs[other]
		if other == name || r.Space != own.Space {
			continue
		}
		for _, schema := range slices.Sorted(maps.Keys(r.Schemas)) {
			out = append(out, Reservation{Database: other, Schema: schema, Worker: r.Schemas[schema]})
		}
	}
	return out, nil
}

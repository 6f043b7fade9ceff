package workerid

import (
	"embed"
	"io/fs"
)

// sqlFiles is the DDL of the table that pgStore's queries (postgres.go)
// run on, kept beside them.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

// Migrations returns the SQL of the table in which a Postgres pool keeps
// its leases, snowkey_worker_leases: files NNNNN_name.sql at the root, in
// goose format, numbered in one sequence with package migrations' own.
// Apply it with migrations.Up, which applies these with the rest, in
// order; migrations.FS holds them too.
func Migrations() fs.FS {
	sub, _ := fs.Sub(sqlFiles, "sql") // "sql" is a valid name: Sub cannot fail
	return sub
}

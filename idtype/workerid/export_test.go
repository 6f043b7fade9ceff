package workerid

import (
	"context"
	"database/sql"
)

// MigrateDB applies snowkey's migrations to db with migrations.Up, giving
// reservedWorker as migrations.Options.ReservedWorker (zero leaves it).
//
// Package migrations imports this one (for SQLWorker and the lease
// table's SQL), so this package's own tests cannot import it. migrations_test.go,
// an external test file of the same test binary, can: it sets MigrateDB
// before any test runs.
var MigrateDB func(ctx context.Context, db *sql.DB, reservedWorker int64) error

// setDefences replaces p's defences, for control runs that must find the
// violation a defence prevents; each test that proves a defence turns
// that one off alone. The stores read the pool's defences, so this takes
// effect at their next request.
func (p *Pool) setDefences(d defences) { p.defences = d }

package workerid_test

import (
	"context"
	"database/sql"

	"github.com/snowkeyhq/snowkey/migrations"
	"github.com/snowkeyhq/snowkey/workerid"
)

// The tests of package workerid migrate through this (see MigrateDB).
func init() {
	workerid.MigrateDB = func(ctx context.Context, db *sql.DB, reservedWorker int64) error {
		return migrations.Up(ctx, db, migrations.Options{ReservedWorker: reservedWorker})
	}
}

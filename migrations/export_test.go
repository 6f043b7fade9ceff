package migrations

import (
	"context"
	"database/sql"
)

// The seam of the control runs, which show that a defence is needed by
// switching it off (see defences in up.go); users cannot reach it.

// upWithout is Up with the defences in off switched off.
func upWithout(ctx context.Context, db *sql.DB, opts Options, off defences) error {
	return up(ctx, db, opts, off, "")
}

// checkServersWithout is CheckServers with the defences in off switched
// off.
func checkServersWithout(servers []Server, claims []ServerClaim, off defences) error {
	return checkServers(servers, claims, off)
}

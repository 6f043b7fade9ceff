package migrations

import (
	"context"
	"database/sql"
)

// The switches of the control runs, which show that a defence is needed
// by turning it off (see defences in up.go); users cannot reach them.

// UpWithoutTimeline is Up naming a server's claim, and checking where
// snowflake_id() runs, by system identifier and database alone: a
// promoted standby or copy keeps the number of the server it came from.
func UpWithoutTimeline(ctx context.Context, db *sql.DB, opts Options) error {
	return up(ctx, db, opts, defences{noTimeline: true}, "")
}

// UpWithoutSharedWarning is Up that says nothing of a database's signs of
// sharing its IDs with other servers.
func UpWithoutSharedWarning(ctx context.Context, db *sql.DB, opts Options) error {
	return up(ctx, db, opts, defences{noSharedWarning: true}, "")
}

// CheckServersWithoutCopyCheck is CheckServers that counts two servers of
// one system identifier and timeline as one, whatever their start times.
func CheckServersWithoutCopyCheck(servers []Server, claims []ServerClaim) error {
	return checkServers(servers, claims, defences{noCopyCheck: true})
}

// UpWithoutPrivileges is Up without 00007_snowflake_id_privileges.sql: a
// role calls snowflake_id() only with grants on its sequences, and a role
// granted UPDATE on them keeps it.
func UpWithoutPrivileges(ctx context.Context, db *sql.DB, opts Options) error {
	return up(ctx, db, opts, defences{noPrivileges: true}, "")
}

// UpWithoutPinnedPath is Up whose snowflake_id_slow() runs as its owner
// with the caller's search_path.
func UpWithoutPinnedPath(ctx context.Context, db *sql.DB, opts Options) error {
	return up(ctx, db, opts, defences{noPinnedPath: true}, "")
}

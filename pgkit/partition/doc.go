// Package partition cuts a table keyed by snowflakes into partitions by
// the time in its keys, and keeps them: periods made ahead, expired ones
// removed, on the database's clock, from every app instance at once,
// without touching a row it was not asked to remove.
//
// A snowflake carries its creation time, so a table keyed by snowflakes
// can be cut by time on its key alone, with no created_at column or
// index: a range partition whose bounds are the first IDs
// (idtype.Layout.FirstID) of a day, a week or a month holds exactly that
// period's rows. A Table makes such a table for a GORM model, and keeps
// it:
//
//	parts, err := partition.New("events", gen.Layout(), partition.Options{
//		Period:    partition.Day,
//		Retention: 90 * 24 * time.Hour,
//	})
//	err = parts.Create(ctx, gormDB, &Event{}) // PARTITION BY RANGE (id), a default partition, today and 4 days ahead
//	go parts.Run(ctx, sqlDB)                  // every hour: days ahead made, days past 90 removed
//
// What it gives:
//
//   - A query that bounds the key by time reads only the partitions of
//     that time: WHERE id >= FirstID(from) AND id < FirstID(to), and
//     WHERE id = ?, are pruned by the planner to the partitions they can
//     touch (Table.Bounds gives one period's range).
//   - Retention removes a partition per period, not a DELETE of millions
//     of rows that leaves the table to VACUUM: Maintain detaches and drops
//     the partitions whose whole period is older than Retention, on a
//     table that others refer to too.
//   - Periods are made ahead (Options.Premake, four by default), so rows
//     find their partition from the first one and the default partition
//     stays empty. Rows that land there all the same (a clock ahead,
//     maintenance that did not run, rows copied from a plain table) are
//     moved when their period's partition is made.
//
// Maintain is idempotent and safe to call from every app instance at once
// (each step takes an advisory lock and reads the database's clock); Run
// calls it in a loop until its context ends. Periods start at midnight
// UTC, weeks on Monday.
//
// # Rows it leaves
//
// Maintain never deletes, changes or unlinks a row it was not asked to
// remove, and fires no trigger of the user's and no foreign-key action.
// Where it cannot do a step that way, it leaves the rows where they are,
// names the period, its rows and why in Report.Left or Report.Kept (Run
// logs each once), and does every other step:
//
//   - Rows in the default partition that other rows refer to by foreign
//     key move only for a role that may set session_replication_role (a
//     superuser, or one granted it with GRANT SET ON PARAMETER
//     session_replication_role, PostgreSQL 15): without it, moving them
//     would delete or unlink the rows that refer to them, or fail. Their
//     period keeps no partition, and later rows of it land in the default
//     partition too (ErrReferenced). Premake keeps this from happening.
//   - An expired partition whose rows other rows still refer to stays,
//     attached, with its rows (ErrReferenced), until those rows are gone
//     (deleted by the app, or by their own table's retention). Removing
//     it would break the foreign keys, and deleting the rows that refer
//     to it is the app's to decide.
//   - Rows in the default partition of an expired period stay there
//     (ErrExpired): Maintain deletes no row.
//   - Maintain decides only on what it sees whole. Each step reads with
//     row_security off, under which PostgreSQL refuses a read that a
//     policy of row-level security would filter, as it refuses one the
//     role has no privilege for; so a period whose referring rows the
//     role cannot count whole stays in the default partition (Left), and
//     an expired partition stays (Kept), and Maintain fails with
//     ErrRowSecurity or ErrPrivilege, naming the table and what to grant.
//
// How to run it (the role and its rights, what to do with what the
// report names) is in the repository's docs/partitions.md.
//
// # What PostgreSQL requires
//
// PostgreSQL enforces a unique constraint per partition, so the primary
// key and every unique constraint or index must include the partition
// key; Create checks the model first and says which does not (ErrKey). A
// foreign key into a partitioned table needs PostgreSQL 12; PostgreSQL 11
// is the least for any of this (ErrServer). GORM's AutoMigrate makes
// plain tables, and a plain table cannot be partitioned in place
// (ErrNotPartitioned): call Create first; AutoMigrate afterwards finds the
// table and only adds what the model gained.
//
// # When not to partition
//
// Partitions pay off for big tables that are read and expired by time
// (events, messages, audit logs). A lookup by anything but the key (a
// user's email) reads every partition's index, and each partition costs
// planning time and a file set; a table of a few million rows, or one
// whose rows are kept for ever and read by other columns, is better left
// whole, with a plain B-tree on the key for time ranges.
package partition

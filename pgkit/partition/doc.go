// Package partition cuts a table keyed by snowflakes into partitions by
// the time in its keys, and keeps them.
//
// A snowflake carries its creation time, so a table keyed by snowflakes
// can be cut by time on its key alone, with no created_at column or
// index: a range partition whose bounds are the first IDs
// (idtype.Layout.FirstID) of a day, a week or a month holds exactly that
// period's rows. A Table makes such a table for a GORM model, and
// keeps it:
//
//	parts, err := partition.New("events", gen.Layout(), partition.Options{
//		Period:    partition.Day,
//		Retention: 90 * 24 * time.Hour,
//	})
//	err = parts.Create(ctx, gormDB, &Event{}) // PARTITION BY RANGE (id), a default partition, today and 4 days ahead
//	go parts.Run(ctx, sqlDB)                       // every hour: days ahead made, days past 90 dropped
//
// What it gives:
//
//   - A query that bounds the key by time reads only the partitions of
//     that time: WHERE id >= FirstID(from) AND id < FirstID(to), and
//     WHERE id = ?, are pruned by the planner to the partitions they can
//     touch (Table.Bounds gives one period's range).
//   - Retention is a DROP TABLE per period, not a DELETE of millions of
//     rows that leaves the table to VACUUM: Maintain removes the
//     partitions whose whole period is older than Retention.
//   - Rows whose period has no partition yet (a clock ahead, maintenance
//     that did not run) land in the default partition, and Maintain moves
//     them when it makes their partition.
//
// Maintain is idempotent and safe to call from every app instance at once
// (each step takes an advisory lock); Run calls it in a loop until its
// context ends. Periods start at midnight UTC, weeks on Monday.
//
// # What PostgreSQL requires
//
// PostgreSQL enforces a unique constraint per partition, so the primary
// key and every unique constraint or index must include the partition key;
// Create checks the model first and says which does not
// (ErrKey). A foreign key into a partitioned table needs
// PostgreSQL 12; PostgreSQL 11 is the least for any of this
// (ErrServer). GORM's AutoMigrate makes plain tables, and a plain
// table cannot be partitioned in place (ErrNotPartitioned): call
// Create first; AutoMigrate afterwards finds the table and only adds
// what the model gained.
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

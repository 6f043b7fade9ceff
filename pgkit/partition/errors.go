package partition

import "errors"

// Errors of the package. Each is wrapped with detail that names the table,
// partition or field at fault; match with errors.Is. Bad options wrap
// idtype.ErrInvalidOptions instead, the one sentinel of every snowkey
// constructor.
var (
	// ErrNotPartitioned means the table does not exist, or is not what
	// Maintain works on: a table partitioned BY RANGE on one bigint
	// column. A plain table cannot be partitioned in place; PostgreSQL
	// needs a new partitioned table and the rows moved into it.
	ErrNotPartitioned = errors.New("partition: not a table partitioned by range on a bigint key")
	// ErrKey means the model cannot be partitioned by its key as
	// PostgreSQL requires: the key is not a 64-bit integer column, or the
	// primary key or a unique constraint or index does not include it
	// (PostgreSQL enforces uniqueness per partition, so it refuses any
	// unique constraint that leaves out the partition key).
	ErrKey = errors.New("partition: model cannot be partitioned by its key")
	// ErrOverlap means a partition that Maintain did not make covers part
	// of a period it must create, so it can neither create the period nor
	// count it as there. Maintain never splits or merges partitions; this
	// happens when the table was partitioned by hand or with another
	// Period.
	ErrOverlap = errors.New("partition: partition overlaps a period")
	// ErrServer means the PostgreSQL server is too old for what is asked:
	// a default partition needs PostgreSQL 11, a foreign key into a
	// partitioned table PostgreSQL 12.
	ErrServer = errors.New("partition: PostgreSQL too old for this partitioning")
	// ErrReferenced means rows of a period are referenced by foreign keys
	// of other rows, so Maintain leaves them where they are: rows in the
	// default partition that it cannot move without firing those foreign
	// keys' actions (Report.Left), or an expired partition it cannot drop
	// without breaking them (Report.Kept). The Left or Kept entry names
	// the referring columns and how many rows refer.
	ErrReferenced = errors.New("partition: rows are referenced by other rows")
	// ErrExpired means rows of a period that ended more than Retention ago
	// are in the default partition: Maintain makes no partition for an
	// expired period and deletes no row, so they stay there
	// (Report.Left).
	ErrExpired = errors.New("partition: rows of an expired period are in the default partition")
	// ErrOutsideLayout means rows in the default partition have keys of no
	// time the layout holds (below 0), so no period can hold them
	// (Report.Left).
	ErrOutsideLayout = errors.New("partition: keys outside the layout")
	// ErrRowSecurity means a policy of row-level security would hide,
	// from the role that maintains, rows that a decision of Maintain
	// rests on: rows in the default partition, or rows of another table
	// that refer to the rows it would move or remove. Maintain reads
	// those under row_security = off, so PostgreSQL refuses the read
	// instead of filtering it, and Maintain does not act on it: the rows
	// stay where they were (Report.Left, Report.Kept). The error names
	// the table and what lets the role read every row of it: the
	// BYPASSRLS attribute, or owning the table when it does not FORCE
	// ROW LEVEL SECURITY.
	ErrRowSecurity = errors.New("partition: rows hidden by row-level security")
	// ErrPrivilege means the role that maintains lacks a privilege on a
	// table that Maintain reads or locks to decide (SELECT on a table
	// whose foreign keys refer to the table, USAGE on its schema, UPDATE
	// for the lock), so PostgreSQL refused it, and Maintain did not act:
	// the rows stay where they were. The error names the table and the
	// GRANT that gives the privilege.
	ErrPrivilege = errors.New("partition: the maintaining role lacks a privilege")
)

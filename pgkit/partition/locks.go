package partition

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// referrerLockWait bounds a step's wait for the tables that refer to the
// table, well under PostgreSQL's deadlock_timeout (1 s by default).
const referrerLockWait = 100

// errBusy means a table that refers to the table was in use when a step
// needed it: the step gives up its locks and is tried again.
var errBusy = errors.New("a table that refers to it is in use")

// lockTables takes the locks of a step that changes the table's
// partitions, and returns the foreign keys that refer to the table.
//
// Making or detaching a partition of a table that others refer to also
// changes the referring tables' foreign keys, which takes a SHARE ROW
// EXCLUSIVE lock on each. A row written to a referring table holds that
// table and then needs this one (its foreign key's check); a transaction
// that writes a row here and then one there holds them the other way
// round. So a step that held either and waited for the other could
// deadlock with a writer, and PostgreSQL would break the deadlock by
// failing one of them, perhaps the app's write; and a step that held this
// table while writers of a referring table kept coming would wait for
// ever, each of them holding the referring table while it waits for this
// one. The step takes the referring tables' locks first, then this
// table's (ACCESS EXCLUSIVE), each with a brief wait (referrerLockWait,
// well under PostgreSQL's deadlock_timeout): when one is not free, it
// gives up every lock (errBusy) to be tried again, and the app's writes
// go on. A table that nothing refers to is locked alone, within
// LockTimeout.
func (m *maintenance) lockTables(ctx context.Context, tx *sql.Tx, st *tableState) ([]foreignKey, error) {
	fks, err := referringKeys(ctx, tx, st)
	if err != nil {
		return nil, err
	}
	var tables []string
	// A refused lock names all the role lacks on the tables: the lock,
	// and what the step reads of them next.
	var targets []target
	for _, fk := range fks {
		if fk.table == st.ident() {
			continue
		}
		i := slices.Index(tables, fk.table)
		if i < 0 {
			i = len(tables)
			tables = append(tables, fk.table)
			targets = append(targets, target{rel: fk.rel, lock: true})
		}
		for _, c := range fk.cols {
			if !slices.Contains(targets[i].cols, c) {
				targets[i].cols = append(targets[i].cols, c)
			}
		}
	}
	parent := "LOCK TABLE ONLY " + st.ident() + " IN ACCESS EXCLUSIVE MODE"
	if len(tables) == 0 || m.p.defences.parentFirst {
		_, err := tx.ExecContext(ctx, parent)
		return fks, err
	}
	exec := func(q string) error { _, err := tx.ExecContext(ctx, q); return err }
	err = exec("SET LOCAL lock_timeout = " + strconv.Itoa(referrerLockWait))
	if err == nil {
		// A role that may not lock a referring table is told which, and
		// what to grant (access.go).
		err = m.guarded(ctx, tx, targets, func() error {
			return exec("LOCK TABLE " + strings.Join(tables, ", ") + " IN SHARE ROW EXCLUSIVE MODE")
		})
	}
	if err == nil {
		err = exec(parent)
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
			return nil, fmt.Errorf("%w: %w", errBusy, err)
		}
		return nil, err
	}
	restore := strconv.FormatInt(m.p.lockTimeout.Milliseconds(), 10)
	if _, err := tx.ExecContext(ctx, "SET LOCAL lock_timeout = "+restore); err != nil {
		return nil, err
	}
	return fks, nil
}

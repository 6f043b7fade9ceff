package partition

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// makePeriod makes the partition of act's period, and moves the period's
// rows out of the default partition into it: PostgreSQL refuses to make a
// partition whose range has rows in the default partition, so they are
// taken out into a temporary table, the partition made, and they are put
// in. Generated columns are left for PostgreSQL to compute again from
// the same values; identity columns keep theirs.
//
// A DELETE and an INSERT fire what they always fire: the user's row
// triggers (an audit trigger would log a delete and an insert, a BEFORE
// INSERT trigger could change the row) and the actions of the foreign
// keys that refer to the rows (ON DELETE CASCADE deletes the rows that
// refer to them, SET NULL unlinks them, NO ACTION and RESTRICT fail). So
// the move switches off, in its own transaction, the user's triggers that
// would fire on the two partitions, and puts them back as they were
// before it commits; and it moves rows that other rows refer to only
// under session_replication_role = replica, in which PostgreSQL fires no
// foreign-key action and no trigger but those enabled REPLICA or ALWAYS
// (switched off too). That keeps every foreign key true: each row taken
// out is put back in the same transaction with the same values, no
// other transaction can see the table in between (the lock below keeps
// out every writer of the table, and every reader or writer of a table
// that refers to it needs a lock on it to check a key), and the rows the
// moved rows refer to cannot go meanwhile (deleting them would need the
// same lock to fire their actions on this table). Without the right to
// set session_replication_role, such a period is left, and nothing
// changes (result.left, ErrReferenced); and so it is when a count of the
// rows that refer to the period's is refused (access.go): a DELETE
// would fire the foreign keys' actions on the rows it could not see.
func (m *maintenance) makePeriod(ctx context.Context, tx *sql.Tx, st *tableState, act *action) (result, error) {
	p := m.p
	parent := st.ident()
	exec := func(q string, args ...any) (int64, error) {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	// Writers of the table wait from here to the commit: the rows of the
	// period in the default partition cannot change between the look and
	// the move, and none can arrive there after it (CREATE TABLE ...
	// PARTITION OF takes this lock anyway).
	fks, err := m.lockTables(ctx, tx, st)
	if refused(err) && st.def != nil && !p.defences.noMove {
		// The period's rows, if it has some in the default partition,
		// stay there, named.
		l, derr := m.describe(ctx, tx, st, act.lo, act.hi)
		if derr != nil || l.Rows == 0 {
			return result{}, err
		}
		l.Partition, l.From, l.To = act.name, act.start, p.period.next(act.start)
		l.Err = fmt.Errorf("the tables that refer to them could not be locked, so they are not moved: %w", err)
		return result{left: &l, refused: err}, nil
	}
	if err != nil {
		return result{}, err
	}
	part := pgx.Identifier{st.schema, act.name}.Sanitize()
	create := "CREATE TABLE " + part + " PARTITION OF " + parent + " FOR VALUES FROM (" + act.lo.sql() + ") TO (" + act.hi.sql() + ")"
	if st.def == nil || p.defences.noMove {
		_, err := exec(create)
		return result{}, err
	}
	def := st.def.ident()
	where := rangeCond(quoteIdent(st.key), act.lo, act.hi)
	var n int64
	if err := m.guarded(ctx, tx, st.defaultTarget(), func() error {
		return tx.QueryRowContext(ctx, "SELECT count(*) FROM ONLY "+def+where).Scan(&n)
	}); err != nil {
		return result{}, err
	}
	if n == 0 {
		_, err := exec(create)
		return result{}, err
	}

	replica := st.replica && !p.defences.noRefCheck
	if !replica && !p.defences.noRefCheck {
		labels, refs, refusal := m.referrers(ctx, tx, fks, act.lo, act.hi)
		if refusal != nil && !refused(refusal) {
			return result{}, refusal
		}
		if refs > 0 || refusal != nil {
			l, err := m.describe(ctx, tx, st, act.lo, act.hi)
			if err != nil {
				return result{}, err
			}
			l.Partition, l.From, l.To, l.Referrers = act.name, act.start, p.period.next(act.start), labels
			l.Err = fmt.Errorf("%w: moving them out of the default partition would fire the foreign keys' actions; "+
				"the current user may not set session_replication_role, under which PostgreSQL fires none", ErrReferenced)
			if refusal != nil {
				// Not seen whole, so not moved: a DELETE would fire
				// the actions of the foreign keys on what was not seen.
				l.Err = fmt.Errorf("the rows that refer to them could not all be counted, so they are not moved: %w", refusal)
			}
			return result{left: &l, refused: refusal}, nil
		}
	}
	if replica {
		if _, err := exec("SET LOCAL session_replication_role = replica"); err != nil {
			return result{}, err
		}
	}
	var guarded []trigger
	guard := func(rel int64, ident string) error {
		if p.defences.noTriggerGuard {
			return nil
		}
		ts, err := firingTriggers(ctx, tx, rel, ident, replica)
		if err != nil {
			return err
		}
		for _, t := range ts {
			if _, err := exec("ALTER TABLE " + t.table + " DISABLE TRIGGER " + t.name); err != nil {
				return fmt.Errorf("switch trigger %s off for the move: %w", t.name, err)
			}
			guarded = append(guarded, t)
		}
		return nil
	}
	if err := guard(st.def.oid, def); err != nil {
		return result{}, err
	}

	cols, err := columns(ctx, tx, st)
	if err != nil {
		return result{}, err
	}
	const tmp = "pg_temp.snowkey_partition_move"
	if _, err := exec("CREATE TEMP TABLE snowkey_partition_move (LIKE " + parent + ") ON COMMIT DROP"); err != nil {
		return result{}, err
	}
	out, err := exec("WITH moved AS (DELETE FROM ONLY " + def + where + " RETURNING " + cols + ") " +
		"INSERT INTO " + tmp + " (" + cols + ") SELECT " + cols + " FROM moved")
	if err != nil {
		return result{}, err
	}
	if _, err := exec(create); err != nil {
		return result{}, err
	}
	var partOID int64
	if err := tx.QueryRowContext(ctx, "SELECT $1::regclass::oid::int8", part).Scan(&partOID); err != nil {
		return result{}, err
	}
	if err := guard(partOID, part); err != nil {
		return result{}, err
	}
	in, err := exec("INSERT INTO " + part + " (" + cols + ") OVERRIDING SYSTEM VALUE SELECT " + cols + " FROM " + tmp)
	if err != nil {
		return result{}, err
	}
	if in != out || out != n {
		return result{}, fmt.Errorf("counted %d rows, moved %d out of %s and %d into %s; rolled back", n, out, st.def.name, in, act.name)
	}
	for _, t := range guarded {
		if _, err := exec(t.enable()); err != nil {
			return result{}, fmt.Errorf("put trigger %s back: %w", t.name, err)
		}
	}
	if replica {
		if _, err := exec("SET LOCAL session_replication_role = DEFAULT"); err != nil {
			return result{}, err
		}
	}
	return result{moved: in}, nil
}

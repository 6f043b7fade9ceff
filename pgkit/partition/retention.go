package partition

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/snowkeyhq/snowkey/idtype"
)

// removeExpired removes the expired partitions of act that no row refers
// to: it detaches each, then drops it (or keeps it as a table of its own,
// with Detach). DROP TABLE alone fails on a table that others refer to
// (2BP01, the referring foreign keys depend on each partition), even when
// no row refers to the partition's rows; DETACH PARTITION takes the
// partition out of those foreign keys, after PostgreSQL checked that no
// row refers to it (23503 otherwise). So a partition whose rows are still
// referred to is kept, attached, with its rows (Kept, ErrReferenced):
// retention deletes no row of another table, and breaks no foreign key.
// The look and the removal are in one transaction, under a lock that
// keeps every writer of a referring table waiting (each needs it to check
// its keys), so that no reference can come between them.
func (m *maintenance) removeExpired(ctx context.Context, tx *sql.Tx, st *tableState, act *action) (result, error) {
	p := m.p
	parent := st.ident()
	if _, err := tx.ExecContext(ctx, "LOCK TABLE ONLY "+parent+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return result{}, err
	}
	var fks []foreignKey
	if !p.d.noKeepCheck {
		var err error
		if fks, err = referringKeys(ctx, tx, st); err != nil {
			return result{}, err
		}
	}
	var res result
	for _, pt := range act.parts {
		if len(fks) > 0 {
			labels, n, err := referrers(ctx, tx, fks, pt.lo, pt.hi)
			if err != nil {
				return result{}, err
			}
			if n > 0 {
				from := p.period.start(p.layout.Decode(idtype.ID(pt.lo.v)).Time)
				res.kept = append(res.kept, Kept{Partition: pt.name, From: from, To: p.period.next(from), Referrers: labels,
					Err: fmt.Errorf("%w: removing the partition would break the foreign keys that refer to its rows", ErrReferenced)})
				continue
			}
		}
		stmts := []string{"ALTER TABLE " + parent + " DETACH PARTITION " + pt.ident(), "DROP TABLE " + pt.ident()}
		switch {
		case p.d.plainDrop:
			stmts = stmts[1:]
		case p.detach:
			stmts = stmts[:1]
		}
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return result{}, fmt.Errorf("%s: %w", pt.name, err)
			}
		}
		res.removed = append(res.removed, pt)
	}
	return res, nil
}

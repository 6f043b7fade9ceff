package partition

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/snowkeyhq/snowkey/idtype"
)

// removeExpired removes the expired partitions of act that no row refers
// to: it detaches each, then drops them (or keeps them as tables of their
// own, with Detach); a table that no foreign key refers to has its
// expired partitions dropped in one statement. DROP TABLE alone fails on
// a table that others refer to
// (2BP01, the referring foreign keys depend on each partition), even when
// no row refers to the partition's rows; DETACH PARTITION takes the
// partition out of those foreign keys, after PostgreSQL checked that no
// row refers to it (23503 otherwise). So a partition whose rows are still
// referred to is kept, attached, with its rows (Kept, ErrReferenced):
// retention deletes no row of another table, and breaks no foreign key.
// A partition whose referring rows could not all be counted (a policy
// would filter the count, or a privilege is missing: access.go) is kept
// too, and so are the partitions after it, with the refusal as Err:
// PostgreSQL's own check of DETACH PARTITION reads under the same
// policies, and would pass with the rows they hide still referring.
// The look and the removal are in one transaction, under locks that keep
// every writer of a referring table waiting (lockTables), so that no
// reference can come between them.
func (m *maintenance) removeExpired(ctx context.Context, tx *sql.Tx, st *tableState, act *action) (result, error) {
	p := m.p
	parent := st.ident()
	fks, err := m.lockTables(ctx, tx, st)
	var res result
	if refused(err) {
		for _, pt := range act.parts {
			res.kept = append(res.kept, m.kept(pt, err))
		}
		res.refused = err
		return res, nil
	}
	if err != nil {
		return result{}, err
	}
	var drop []string
	for i, pt := range act.parts {
		if len(fks) > 0 && !p.defences.noKeepCheck {
			labels, n, refusal := m.referrers(ctx, tx, fks, pt.lo, pt.hi)
			if refusal != nil && !refused(refusal) {
				return result{}, refusal
			}
			if refusal != nil {
				// The same tables refer to every partition: none of the
				// rest can be looked at either.
				for j, pt := range act.parts[i:] {
					k := m.kept(pt, refusal)
					if j == 0 {
						k.Referrers = labels
					}
					res.kept = append(res.kept, k)
				}
				res.refused = refusal
				break
			}
			if n > 0 {
				k := m.kept(pt, fmt.Errorf("%w: removing the partition would break the foreign keys that refer to its rows", ErrReferenced))
				k.Referrers = labels
				res.kept = append(res.kept, k)
				continue
			}
		}
		// Detached first when others refer to the table, or to keep it;
		// a table nothing refers to has its partitions dropped at once.
		if (len(fks) > 0 && !p.defences.plainDrop) || p.detach {
			if _, err := tx.ExecContext(ctx, "ALTER TABLE "+parent+" DETACH PARTITION "+pt.ident()); err != nil {
				return result{}, fmt.Errorf("%s: %w", pt.name, err)
			}
		}
		drop = append(drop, pt.ident())
		res.removed = append(res.removed, pt)
	}
	if len(drop) > 0 && !p.detach {
		if _, err := tx.ExecContext(ctx, "DROP TABLE "+strings.Join(drop, ", ")); err != nil {
			return result{}, err
		}
	}
	return res, nil
}

// kept is the Kept entry of expired partition pt, kept for err.
func (m *maintenance) kept(pt partition, err error) Kept {
	from := m.p.period.start(m.p.layout.Decode(idtype.ID(pt.lo.v)).Time)
	return Kept{Partition: pt.name, From: from, To: m.p.period.next(from), Err: err}
}

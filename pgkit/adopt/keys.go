package adopt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowkeyhq/snowkey/idtype"
)

// checkKeys reads each table's largest key and refuses (ErrKeyRange) a
// table whose keys are not all below the first key new rows would get now:
// snowflake_id()'s, on the database's clock, unless AppKeys; and the
// app's, in Options.Layout on this clock, always (gormplugin inserts its
// own keys either way).
//
// The largest key is read with row_security off, so that PostgreSQL
// raises instead of leaving out the rows a policy hides from the current
// user; before it, a user who lacks SELECT on the table, or to whom its
// policies apply, is refused by name (ErrHidden), so that no decision
// rests on a count that a policy or a grant cut short.
func (b *planner) checkKeys(ctx context.Context) error {
	if b.defences.noKeyRange {
		return nil
	}
	if !b.defences.noRowSecurity {
		var prev string
		if err := b.q.QueryRowContext(ctx, `SELECT pg_catalog.current_setting('row_security'),
			pg_catalog.set_config('row_security', 'off', true)`).Scan(&prev, new(string)); err != nil {
			return fmt.Errorf("adopt: %w", err)
		}
		defer func() {
			_, _ = b.q.ExecContext(context.WithoutCancel(ctx), "SELECT pg_catalog.set_config('row_security', $1, true)", prev)
		}()
	}
	type bound struct {
		first idtype.ID
		what  string
	}
	var bounds []bound
	if !b.o.AppKeys && !b.defences.appLayoutOnly {
		bounds = append(bounds, bound{idtype.DefaultLayout.FirstID(b.dbNow),
			"the first key snowflake_id() makes now (idtype.DefaultLayout, on the database's clock)"})
	}
	bounds = append(bounds, bound{b.o.Layout.FirstID(time.Now()),
		fmt.Sprintf("the first key of Options.Layout (epoch %s) now", b.o.Layout.Epoch.UTC().Format(time.RFC3339))})
	for _, t := range b.targets {
		if !b.defences.noRowSecurity {
			why, err := b.hidden(ctx, t)
			if err != nil {
				return err
			}
			if why != "" {
				b.refuse(fmt.Errorf("%w: %s: %s", ErrHidden, t.name, why))
				continue
			}
		}
		if _, err := b.q.ExecContext(ctx, "SAVEPOINT adopt_keys"); err != nil {
			return fmt.Errorf("adopt: %w", err)
		}
		err := b.q.QueryRowContext(ctx, fmt.Sprintf("SELECT coalesce(max(%s), 0)::int8 FROM %s", t.key.name, t.name)).Scan(&t.maxKey)
		if _, rerr := b.q.ExecContext(ctx, "ROLLBACK TO SAVEPOINT adopt_keys"); rerr != nil {
			return fmt.Errorf("adopt: %w", rerr)
		}
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "42501":
			b.refuse(fmt.Errorf("%w: %s: PostgreSQL will not show %s every row of it (%s): adopt as the table's owner, "+
				"or as a role with BYPASSRLS", ErrHidden, t.name, b.user, pgErr.Message))
			continue
		case err != nil:
			return fmt.Errorf("adopt: largest key of %s: %w", t.name, err)
		}
		for _, bd := range bounds {
			if t.maxKey >= int64(bd.first) {
				b.refuse(fmt.Errorf("%w: %s holds key %d, not below %d, %s: new keys would not all be "+
					"greater than the old ones", ErrKeyRange, t.key.table, t.maxKey, bd.first, bd.what))
				break
			}
		}
	}
	return nil
}

// hidden says why the current user may not read every row of t's table,
// or "": it lacks SELECT on it, or row-level security applies to it there
// (the table has policies on, and the user is not its owner, or it forces
// them on its owner, and the user does not have BYPASSRLS).
func (b *planner) hidden(ctx context.Context, t *target) (string, error) {
	var canSelect, active, owns bool
	var owner string
	if err := b.q.QueryRowContext(ctx, `SELECT pg_catalog.has_table_privilege(c.oid, 'SELECT'),
			pg_catalog.row_security_active(c.oid), pg_catalog.pg_has_role(c.relowner, 'USAGE'), pg_catalog.pg_get_userbyid(c.relowner)
		FROM pg_catalog.pg_class c WHERE c.oid = $1`, t.oid).Scan(&canSelect, &active, &owns, &owner); err != nil {
		return "", fmt.Errorf("adopt: %s: %w", t.name, err)
	}
	switch {
	case !canSelect:
		return fmt.Sprintf("role %s lacks SELECT on it, and adopt reads its largest key: grant SELECT, or adopt as its owner", b.user), nil
	case active && owns:
		return fmt.Sprintf("its row-level security is forced on its owner (FORCE ROW LEVEL SECURITY), so its policies "+
			"may hide rows from role %s, and adopt reads its largest key: adopt as a role with BYPASSRLS, or turn FORCE off "+
			"while adopting", b.user), nil
	case active:
		return fmt.Sprintf("its row-level security policies apply to role %s, which is not its owner (%s) and lacks "+
			"BYPASSRLS, and may hide rows from it, and adopt reads its largest key: adopt as its owner or as a role with BYPASSRLS",
			b.user, owner), nil
	}
	return "", nil
}

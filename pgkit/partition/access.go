package partition

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Maintain decides on what it reads: the rows in the default partition
// that a new partition would hold, and the rows of other tables that
// refer to the rows it would move or remove. A policy of row-level
// security filters such a read without a word, and a decision on a
// filtered count deletes or unlinks the rows it did not see (a move's
// DELETE fires ON DELETE CASCADE, which PostgreSQL runs as the referring
// table's owner, past the policy) or breaks a foreign key (PostgreSQL's
// own check of DETACH PARTITION reads under the same policy). So every
// step runs with row_security = off, as pg_dump does: PostgreSQL then
// refuses a read that a policy would filter (SQLSTATE 42501) instead of
// filtering it, as it refuses a read the role has no privilege for. Each
// such read or lock runs in a savepoint (guarded): a refusal is rolled
// back to it, the catalog says why (readAccess), and the step reports an
// error wrapping ErrRowSecurity or ErrPrivilege that names the table and
// what to grant, with what it left undone, instead of acting on what it
// could see.

// target is a table that a statement of a step reads or locks.
type target struct {
	rel  int64    // its OID
	cols []string // the columns it reads, unquoted (a lock's: those the step reads next)
	lock bool     // it locks the table IN SHARE ROW EXCLUSIVE MODE
}

// access is what the catalog says of the current role's rights on a
// table, each name as SQL takes it.
type access struct {
	table, schema, owner, role string
	usage                      bool // USAGE on the table's schema
	read                       bool // SELECT on every column the statement reads
	lock                       bool // a privilege that lets it LOCK the table in SHARE ROW EXCLUSIVE mode
	// policies says row-level security applies to the role on the table:
	// the table has it enabled, and the role has no BYPASSRLS (nor is a
	// superuser) and either does not own the table or owns it and the
	// table forces it on its owner (forced). PostgreSQL's own test
	// (check_enable_rls) is the same; the owner is anyone with the
	// privileges of the owning role.
	policies, forced bool
}

// lockPrivileges are the privileges any one of which lets a role lock a
// table in SHARE ROW EXCLUSIVE mode: UPDATE, DELETE or TRUNCATE, and
// from PostgreSQL 17 MAINTAIN.
func lockPrivileges(version int) string {
	if version >= 170000 {
		return "UPDATE, DELETE, TRUNCATE, MAINTAIN"
	}
	return "UPDATE, DELETE, TRUNCATE"
}

// readAccess reads from the catalog what the current role may do with
// table rel, reading the columns cols.
func readAccess(ctx context.Context, q querier, rel int64, cols []string, version int) (access, error) {
	var a access
	if cols == nil {
		cols = []string{} // a NULL array would read as no column
	}
	err := q.QueryRowContext(ctx, `
		SELECT format('%I.%I', n.nspname, c.relname), quote_ident(n.nspname), quote_ident(pg_catalog.pg_get_userbyid(c.relowner)),
		       quote_ident(current_user), pg_catalog.has_schema_privilege(n.oid, 'USAGE'),
		       coalesce((SELECT bool_and(pg_catalog.has_column_privilege(c.oid, col, 'SELECT')) FROM unnest($2::text[]) col),
		                pg_catalog.has_table_privilege(c.oid, 'SELECT')),
		       pg_catalog.has_table_privilege(c.oid, $3),
		       c.relrowsecurity AND NOT r.rolsuper AND NOT r.rolbypassrls
		         AND (c.relforcerowsecurity OR NOT pg_catalog.pg_has_role(c.relowner, 'USAGE')),
		       c.relforcerowsecurity AND pg_catalog.pg_has_role(c.relowner, 'USAGE')
		FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_catalog.pg_roles r ON r.rolname = current_user
		WHERE c.oid = $1::int8::oid`, rel, cols, lockPrivileges(version)).Scan(
		&a.table, &a.schema, &a.owner, &a.role, &a.usage, &a.read, &a.lock, &a.policies, &a.forced)
	if err != nil {
		return a, fmt.Errorf("the role's rights on table %d: %w", rel, err)
	}
	return a, nil
}

// denial returns the error that says what the role lacks to do with the
// table what t does, or nil when the catalog shows nothing in the way.
func (a access) denial(t target) error {
	var errs []error
	var lacks, privs, grants []string
	if !a.usage {
		lacks = append(lacks, "USAGE on schema "+a.schema)
		grants = append(grants, "GRANT USAGE ON SCHEMA "+a.schema+" TO "+a.role)
	}
	if len(t.cols) > 0 && !a.read {
		lacks = append(lacks, "SELECT on table "+a.table+" (Maintain reads its rows to decide)")
		privs = append(privs, "SELECT")
	}
	if t.lock && !a.lock {
		lacks = append(lacks, "UPDATE, DELETE or TRUNCATE on table "+a.table+" (to LOCK it in SHARE ROW EXCLUSIVE mode, "+
			"which MAINTAIN allows too from PostgreSQL 17)")
		privs = append(privs, "UPDATE")
	}
	if len(privs) > 0 {
		grants = append(grants, "GRANT "+strings.Join(privs, ", ")+" ON "+a.table+" TO "+a.role)
	}
	if len(lacks) > 0 {
		errs = append(errs, fmt.Errorf("%w: role %s lacks %s: %s", ErrPrivilege, a.role, strings.Join(lacks, " and "),
			strings.Join(grants, "; ")))
	}
	switch {
	case len(t.cols) == 0 || !a.policies:
	case a.forced:
		errs = append(errs, fmt.Errorf("%w: table %s forces row-level security on its owner, so its policies would let role %s, "+
			"which owns it, read only some of its rows, and Maintain decides only on every row: "+
			"ALTER TABLE %s NO FORCE ROW LEVEL SECURITY (its owner then reads every row), or ALTER ROLE %s BYPASSRLS",
			ErrRowSecurity, a.table, a.role, a.table, a.role))
	default:
		errs = append(errs, fmt.Errorf("%w: table %s has row-level security, whose policies would let role %s read only some "+
			"of its rows, and Maintain decides only on every row: ALTER ROLE %s BYPASSRLS, or GRANT %s TO %s "+
			"(a member of the owning role reads every row unless the table forces row-level security)",
			ErrRowSecurity, a.table, a.role, a.role, a.owner, a.role))
	}
	if len(errs) == 0 {
		return nil
	}
	return joinLine(errs)
}

// refused reports whether err says the role may not read or lock what a
// step needs whole: it wraps ErrRowSecurity or ErrPrivilege.
func refused(err error) bool {
	return errors.Is(err, ErrRowSecurity) || errors.Is(err, ErrPrivilege)
}

// guarded runs stmt, a statement that reads or locks targets, in a
// savepoint of q. When PostgreSQL refuses it (42501: a policy would
// filter a read under row_security = off, or a privilege is missing), it
// rolls back to the savepoint, so that the step can still say what it
// leaves, and returns the refusal as an error wrapping ErrRowSecurity or
// ErrPrivilege that names each target the role lacks something on.
func (m *maintenance) guarded(ctx context.Context, q querier, targets []target, stmt func() error) error {
	if _, err := q.ExecContext(ctx, "SAVEPOINT snowkey_partition_read"); err != nil {
		return err
	}
	err := stmt()
	if err == nil {
		_, err = q.ExecContext(ctx, "RELEASE SAVEPOINT snowkey_partition_read")
		return err
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		return err
	}
	if _, rerr := q.ExecContext(ctx, "ROLLBACK TO SAVEPOINT snowkey_partition_read; RELEASE SAVEPOINT snowkey_partition_read"); rerr != nil {
		return errors.Join(err, rerr)
	}
	if m.p.defences.rawRefusals {
		return err
	}
	return m.explain(ctx, q, targets, err)
}

// explain turns PostgreSQL's refusal cause of a statement on targets
// into the error that names what the role lacks on each.
func (m *maintenance) explain(ctx context.Context, q querier, targets []target, cause error) error {
	var errs []error
	var first access
	for i, t := range targets {
		a, err := readAccess(ctx, q, t.rel, t.cols, m.version)
		if err != nil {
			return errors.Join(cause, err)
		}
		if i == 0 {
			first = a
		}
		if e := a.denial(t); e != nil {
			errs = append(errs, e)
		}
	}
	if len(errs) == 0 {
		return fmt.Errorf("%w: PostgreSQL refused role %s a read or lock of table %s, though the catalog shows no missing "+
			"privilege or policy in the way (its rights may have changed while the step ran): %w", ErrPrivilege, first.role,
			first.table, cause)
	}
	return fmt.Errorf("%w (PostgreSQL: %w)", joinLine(errs), cause)
}

// joinLine wraps errs in one error of one line, each matched by
// errors.Is and errors.As.
func joinLine(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	args := make([]any, len(errs))
	for i, e := range errs {
		args[i] = e
	}
	return fmt.Errorf(strings.TrimSuffix(strings.Repeat("%w; ", len(errs)), "; "), args...)
}

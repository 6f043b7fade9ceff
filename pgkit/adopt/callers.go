package adopt

import (
	"context"
	"fmt"
	"strings"
)

// checkCallers refuses (ErrFunction) a plan whose new default a role that
// may insert into a table to adopt could not run: a role needs EXECUTE on
// snowflake_id(), which PostgreSQL gives PUBLIC unless an operator took it
// away (REVOKE, or default privileges), and without it every insert of
// such a role that leaves the key to the default would fail with 42501
// once adopted. The roles are the table's owner and every role granted
// INSERT on it (and PUBLIC, when it is); superusers need nothing. The
// error names each with the GRANT that lets it.
func (b *planner) checkCallers(ctx context.Context) error {
	if b.o.AppKeys || b.fn == "" || b.defences.noCallerCheck || len(b.targets) == 0 {
		return nil
	}
	var oids []int64
	for _, t := range b.targets {
		if !snowflakeDefault.MatchString(t.def) && (t.def != "" || t.identity) {
			oids = append(oids, t.oid)
		}
	}
	missing, err := queryStrings(ctx, b.q, `WITH fn(oid) AS (SELECT pg_catalog.to_regprocedure($1::text || '()')),
			inserter(rel, role) AS (
				SELECT c.oid, c.relowner FROM pg_catalog.pg_class c WHERE c.oid = ANY ($2::int8[]::oid[])
				UNION
				SELECT c.oid, a.grantee FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
				WHERE c.oid = ANY ($2::int8[]::oid[]) AND a.privilege_type = 'INSERT')
		SELECT DISTINCT CASE WHEN i.role = 0 THEN 'PUBLIC' ELSE quote_ident(pg_catalog.pg_get_userbyid(i.role)) END
		FROM inserter i, fn
		WHERE fn.oid IS NOT NULL
			AND NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.oid = i.role), false)
			AND NOT pg_catalog.has_function_privilege(CASE WHEN i.role = 0 THEN 'public' ELSE pg_catalog.pg_get_userbyid(i.role) END,
				fn.oid, 'EXECUTE')
		ORDER BY 1`, b.fn, oids)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		b.refuse(fmt.Errorf("%w: roles that may insert into the tables may not run %s(), their new default: %s; "+
			"let them first: GRANT EXECUTE ON FUNCTION %s() TO %s",
			ErrFunction, b.fn, strings.Join(missing, ", "), b.fn, strings.Join(missing, ", ")))
	}
	return nil
}

package adopt

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// grants returns the statements that give an object the plan creates
// exactly the privileges of the one it stands for (the object of oid in
// catalog, pg_class, pg_proc or pg_type), whatever default privileges the
// role that runs the plan has: a view that a reporting role could not
// read stays unreadable. on names the new object as GRANT takes it
// ("public.v", "FUNCTION public.f(bigint)", "DOMAIN public.d").
//
// A new object gets the privileges PostgreSQL gives its kind (EXECUTE to
// PUBLIC for a function, USAGE for a type) and those of ALTER DEFAULT
// PRIVILEGES of the role that creates it; so every role those may name is
// revoked first, then each privilege the original had is granted again,
// the owner's too when a default touched them.
func (b *planner) grants(ctx context.Context, catalog string, oid int64, on string) ([]string, error) {
	rows, err := b.q.QueryContext(ctx, `WITH o AS (
			SELECT c.relowner AS owner, c.relnamespace AS nsp, CASE c.relkind WHEN 'S' THEN 's' ELSE 'r' END AS kind, c.relacl AS acl
			FROM pg_catalog.pg_class c WHERE $1 = 'pg_class' AND c.oid = $2
			UNION ALL
			SELECT f.proowner, f.pronamespace, 'f', f.proacl FROM pg_catalog.pg_proc f WHERE $1 = 'pg_proc' AND f.oid = $2
			UNION ALL
			SELECT t.typowner, t.typnamespace, 'T', t.typacl FROM pg_catalog.pg_type t WHERE $1 = 'pg_type' AND t.oid = $2),
		role AS (SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END AS name,
				a.grantee = o.owner AS owner, a.privilege_type, a.is_grantable, a.grantee, 'has' AS what
			FROM o, pg_catalog.aclexplode(coalesce(o.acl, pg_catalog.acldefault(o.kind::"char", o.owner))) a
			UNION ALL
			SELECT '', true, a.privilege_type, false, a.grantee, 'owner default'
			FROM o, pg_catalog.aclexplode(pg_catalog.acldefault(o.kind::"char", o.owner)) a WHERE a.grantee = o.owner
			UNION ALL
			SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END,
				a.grantee = o.owner, a.privilege_type, a.is_grantable, a.grantee, 'default'
			FROM o, pg_catalog.pg_default_acl d, pg_catalog.aclexplode(d.defaclacl) a
			WHERE d.defaclrole = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)
				AND d.defaclobjtype = CASE o.kind WHEN 's' THEN 'S' ELSE o.kind END
				AND d.defaclnamespace IN (0, o.nsp) AND a.grantee <> d.defaclrole)
		SELECT what, name, owner, privilege_type, is_grantable FROM role ORDER BY what, grantee, privilege_type`, catalog, oid)
	if err != nil {
		return nil, fmt.Errorf("adopt: privileges of %s: %w", on, err)
	}
	defer rows.Close()
	type grant struct {
		role      string
		grantable bool
	}
	has := map[grant][]string{}
	var order []grant
	var ownerName string
	var ownerHas, ownerDefault []string
	revoke := []string{"PUBLIC"}
	for rows.Next() {
		var what, name, priv string
		var owner, grantable bool
		if err := rows.Scan(&what, &name, &owner, &priv, &grantable); err != nil {
			return nil, err
		}
		switch {
		case what == "owner default":
			ownerDefault = append(ownerDefault, priv)
		case what == "default":
			if !slices.Contains(revoke, name) {
				revoke = append(revoke, name)
			}
		case owner:
			ownerName = name
			ownerHas = append(ownerHas, priv)
			fallthrough
		default:
			g := grant{name, grantable}
			if has[g] == nil {
				order = append(order, g)
			}
			has[g] = append(has[g], priv)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []string
	if b.defences.noExactPrivileges {
		for _, g := range order {
			if g.role != ownerName && g.role != "PUBLIC" {
				out = append(out, grantStmt(has[g], on, g.role, g.grantable))
			}
		}
		return out, nil
	}
	regrantOwner := ownerName != "" && (slices.Contains(revoke, ownerName) || !slices.Equal(ownerHas, ownerDefault))
	if regrantOwner && !slices.Contains(revoke, ownerName) {
		revoke = append(revoke, ownerName)
	}
	out = append(out, "REVOKE ALL ON "+on+" FROM "+strings.Join(revoke, ", "))
	for _, g := range order {
		if g.role == ownerName && !regrantOwner {
			continue
		}
		out = append(out, grantStmt(has[g], on, g.role, g.grantable))
	}
	return out, nil
}

// grantStmt is GRANT privs ON on TO role.
func grantStmt(privs []string, on, role string, grantable bool) string {
	s := "GRANT " + strings.Join(privs, ", ") + " ON " + on + " TO " + role
	if grantable {
		s += " WITH GRANT OPTION"
	}
	return s
}

// columnGrants returns the statements that give the columns of a view the
// plan creates again the privileges they had (no default privilege
// touches columns).
func (b *planner) columnGrants(ctx context.Context, rel int64, on string) ([]string, error) {
	return queryStrings(ctx, b.q, `SELECT format('GRANT %s (%I) ON %s TO %s%s', a.privilege_type, att.attname, $2::text,
			CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_catalog.pg_get_userbyid(a.grantee)) END,
			CASE WHEN a.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END)
		FROM pg_catalog.pg_attribute att, pg_catalog.aclexplode(att.attacl) a
		WHERE att.attrelid = $1 AND att.attacl IS NOT NULL
		ORDER BY att.attnum, a.grantee, a.privilege_type`, rel, on)
}

package adopt

import (
	"context"
	"fmt"
	"strings"
)

// view reads what it takes to create view or materialized view rel
// again: its definition (read under the plan's pinned search_path, so
// that every name in it is schema-qualified, with the scan's casts
// widened), options, owner, comments, column defaults and privileges; a
// materialized view's access method, indexes (with their comments and
// CLUSTER), column statistics targets, and whether it was populated,
// which it is again by REFRESH, as its owner, once everything is created.
// It refuses one in a tablespace of its own, or with an index in one.
func (f *finder) view(ctx context.Context, rel int64) (*object, error) {
	return f.add("pg_class", rel, func() (*object, string, error) {
		b := f.b
		var (
			name, def, kind, reloptions, owner, comment, am, tablespace string
			populated                                                   bool
			indexSpaces                                                 int
		)
		err := b.q.QueryRowContext(ctx, `SELECT format('%I.%I', n.nspname, c.relname), c.relkind::text,
				pg_catalog.rtrim(pg_catalog.pg_get_viewdef(c.oid), ';'),
				coalesce(pg_catalog.array_to_string(c.reloptions, ', '), ''),
				CASE WHEN c.relowner = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN ''
					ELSE quote_ident(pg_catalog.pg_get_userbyid(c.relowner)) END,
				coalesce(pg_catalog.obj_description(c.oid, 'pg_class'), ''),
				coalesce((SELECT quote_ident(am.amname) FROM pg_catalog.pg_am am WHERE am.oid = c.relam AND am.amname <> 'heap'), ''),
				coalesce((SELECT quote_ident(ts.spcname) FROM pg_catalog.pg_tablespace ts WHERE ts.oid = c.reltablespace), ''),
				c.relispopulated,
				(SELECT count(*) FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
					WHERE i.indrelid = c.oid AND ic.reltablespace <> 0)
			FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1`, rel).Scan(
			&name, &kind, &def, &reloptions, &owner, &comment, &am, &tablespace, &populated, &indexSpaces)
		if err != nil {
			return nil, "", fmt.Errorf("adopt: view %d: %w", rel, err)
		}
		o := &object{kind: objView, name: "view " + name, lock: name}
		word := "VIEW"
		if kind == "m" {
			// LOCK TABLE takes no materialized view: DROP locks it.
			o.kind, o.name, o.lock, word = objMatview, "materialized view "+name, "", "MATERIALIZED VIEW"
		}
		switch {
		case tablespace != "":
			return nil, fmt.Sprintf("%s (it is in tablespace %s, which adopt does not create it again in)", o.name, tablespace), nil
		case indexSpaces > 0:
			return nil, fmt.Sprintf("%s (an index of it is in a tablespace of its own, which adopt does not create it again in)", o.name), nil
		}
		if edits := b.texts[fmt.Sprintf("view:%d", rel)]; len(edits) > 0 {
			// The scan read the definition as pg_get_viewdef prints it,
			// with its semicolon.
			def = trimSemicolon(applyEdits(def+";", edits))
			o.why = "casts to integer compared with keys widened to bigint"
		}
		o.drop = []string{"DROP " + word + " " + name}
		create := "CREATE " + word + " " + name
		if am != "" {
			create += " USING " + am
		}
		if reloptions != "" {
			create += " WITH (" + reloptions + ")"
		}
		create += " AS" + def
		if kind == "m" {
			create += " WITH NO DATA"
		}
		o.create = append(o.create, create)
		if owner != "" {
			o.create = append(o.create, fmt.Sprintf("ALTER %s %s OWNER TO %s", word, name, owner))
		}
		if comment != "" {
			o.create = append(o.create, fmt.Sprintf("COMMENT ON %s %s IS %s", word, name, literal(comment)))
		}
		more, err := queryStrings(ctx, b.q, `SELECT format('COMMENT ON COLUMN %s.%I IS %s', $2::text, a.attname, quote_literal(ds.description))
			FROM pg_catalog.pg_description ds JOIN pg_catalog.pg_attribute a ON a.attrelid = ds.objoid AND a.attnum = ds.objsubid
			WHERE ds.classoid = 'pg_catalog.pg_class'::pg_catalog.regclass AND ds.objoid = $1 AND ds.objsubid > 0
			UNION ALL
			SELECT format('ALTER %s %s ALTER COLUMN %I SET DEFAULT %s', $3::text, $2::text, a.attname, pg_catalog.pg_get_expr(d.adbin, d.adrelid))
			FROM pg_catalog.pg_attrdef d JOIN pg_catalog.pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
			WHERE d.adrelid = $1
			UNION ALL
			SELECT format('ALTER %s %s ALTER COLUMN %I SET STATISTICS %s', $3::text, $2::text, a.attname, a.attstattarget)
			FROM pg_catalog.pg_attribute a WHERE a.attrelid = $1 AND a.attnum > 0 AND a.attstattarget >= 0
			ORDER BY 1`, rel, name, word)
		if err != nil {
			return nil, "", err
		}
		o.create = append(o.create, more...)
		grants, err := b.grants(ctx, "pg_class", rel, name)
		if err != nil {
			return nil, "", err
		}
		o.create = append(o.create, grants...)
		cols, err := b.columnGrants(ctx, rel, name)
		if err != nil {
			return nil, "", err
		}
		o.create = append(o.create, cols...)
		if kind == "m" {
			indexes, err := queryStrings(ctx, b.q, `SELECT s FROM (
					SELECT i.indexrelid, 0 AS n, pg_catalog.pg_get_indexdef(i.indexrelid) AS s
					FROM pg_catalog.pg_index i WHERE i.indrelid = $1
					UNION ALL
					SELECT i.indexrelid, 1, format('COMMENT ON INDEX %s IS %s', i.indexrelid::pg_catalog.regclass,
						quote_literal(pg_catalog.obj_description(i.indexrelid, 'pg_class')))
					FROM pg_catalog.pg_index i WHERE i.indrelid = $1 AND pg_catalog.obj_description(i.indexrelid, 'pg_class') IS NOT NULL
					UNION ALL
					SELECT i.indexrelid, 2, format('ALTER MATERIALIZED VIEW %s CLUSTER ON %I', $2::text, ic.relname)
					FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid WHERE i.indrelid = $1 AND i.indisclustered
				) x ORDER BY indexrelid, n`, rel, name)
			if err != nil {
				return nil, "", err
			}
			o.create = append(o.create, indexes...)
			if populated && !b.defences.noRefresh {
				o.refresh = "REFRESH MATERIALIZED VIEW " + name
			}
		}
		return o, "", nil
	})
}

// trimSemicolon drops a definition's last semicolon.
func trimSemicolon(s string) string {
	for len(s) > 0 && (s[len(s)-1] == ';' || s[len(s)-1] == ' ' || s[len(s)-1] == '\n') {
		s = s[:len(s)-1]
	}
	return s
}

// policy reads what it takes to create policy oid again: its command,
// roles, whether it is permissive, and its expressions (read under the
// pinned search_path, with the scan's casts widened), and its comment.
func (f *finder) policy(ctx context.Context, oid int64) (*object, error) {
	return f.add("pg_policy", oid, func() (*object, string, error) {
		b := f.b
		var name, table, cmd, roles, using, check, comment string
		var permissive bool
		err := b.q.QueryRowContext(ctx, `SELECT quote_ident(p.polname), p.polrelid::pg_catalog.regclass::text,
				CASE p.polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE' WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
				(SELECT string_agg(CASE WHEN r = 0 THEN 'PUBLIC' ELSE quote_ident(pg_catalog.pg_get_userbyid(r)) END, ', ' ORDER BY r)
					FROM unnest(p.polroles) r),
				p.polpermissive,
				coalesce(pg_catalog.pg_get_expr(p.polqual, p.polrelid), ''), coalesce(pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid), ''),
				coalesce(pg_catalog.obj_description(p.oid, 'pg_policy'), '')
			FROM pg_catalog.pg_policy p WHERE p.oid = $1`, oid).Scan(&name, &table, &cmd, &roles, &permissive, &using, &check, &comment)
		if err != nil {
			return nil, "", fmt.Errorf("adopt: policy %d: %w", oid, err)
		}
		o := &object{kind: objPolicy, name: "policy " + name + " on " + table, lock: table}
		if edits := b.texts[fmt.Sprintf("policy:%d:using", oid)]; len(edits) > 0 {
			using = applyEdits(using, edits)
			o.why = "casts to integer compared with keys widened to bigint"
		}
		if edits := b.texts[fmt.Sprintf("policy:%d:check", oid)]; len(edits) > 0 {
			check = applyEdits(check, edits)
			o.why = "casts to integer compared with keys widened to bigint"
		}
		o.drop = []string{fmt.Sprintf("DROP POLICY %s ON %s", name, table)}
		as := "PERMISSIVE"
		if !permissive {
			as = "RESTRICTIVE"
		}
		create := fmt.Sprintf("CREATE POLICY %s ON %s AS %s FOR %s TO %s", name, table, as, cmd, roles)
		if using != "" {
			create += " USING (" + using + ")"
		}
		if check != "" {
			create += " WITH CHECK (" + check + ")"
		}
		o.create = []string{create}
		if comment != "" {
			o.create = append(o.create, fmt.Sprintf("COMMENT ON POLICY %s ON %s IS %s", name, table, literal(comment)))
		}
		return o, "", nil
	})
}

// trigger reads what it takes to create trigger oid again: its
// definition, whether and when it is enabled, its comment. A partition's
// clone of its table's trigger is the table's trigger.
func (f *finder) trigger(ctx context.Context, oid, parent int64) (*object, error) {
	if parent != 0 {
		var up int64
		if err := f.b.q.QueryRowContext(ctx, "SELECT tgparentid::int8 FROM pg_catalog.pg_trigger WHERE oid = $1", parent).Scan(&up); err != nil {
			return nil, fmt.Errorf("adopt: trigger %d: %w", parent, err)
		}
		return f.trigger(ctx, parent, up)
	}
	return f.add("pg_trigger", oid, func() (*object, string, error) {
		b := f.b
		var name, table, def, enabled, comment, relkind string
		err := b.q.QueryRowContext(ctx, `SELECT quote_ident(t.tgname), t.tgrelid::pg_catalog.regclass::text,
				pg_catalog.pg_get_triggerdef(t.oid), t.tgenabled::text, coalesce(pg_catalog.obj_description(t.oid, 'pg_trigger'), ''),
				c.relkind::text
			FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid WHERE t.oid = $1`, oid).Scan(
			&name, &table, &def, &enabled, &comment, &relkind)
		if err != nil {
			return nil, "", fmt.Errorf("adopt: trigger %d: %w", oid, err)
		}
		o := &object{kind: objTrigger, name: "trigger " + name + " on " + table, lock: table}
		o.drop = []string{fmt.Sprintf("DROP TRIGGER %s ON %s", name, table)}
		o.create = []string{def}
		word := "TABLE"
		if relkind == "v" {
			word = "VIEW"
		}
		switch enabled {
		case "D":
			if word == "VIEW" {
				return nil, fmt.Sprintf("%s (disabled, which adopt cannot make it again on a view)", o.name), nil
			}
			o.create = append(o.create, fmt.Sprintf("ALTER TABLE %s DISABLE TRIGGER %s", table, name))
		case "R":
			o.create = append(o.create, fmt.Sprintf("ALTER TABLE %s ENABLE REPLICA TRIGGER %s", table, name))
		case "A":
			o.create = append(o.create, fmt.Sprintf("ALTER TABLE %s ENABLE ALWAYS TRIGGER %s", table, name))
		}
		if comment != "" {
			o.create = append(o.create, fmt.Sprintf("COMMENT ON TRIGGER %s ON %s IS %s", name, table, literal(comment)))
		}
		return o, "", nil
	})
}

// function returns the object of function oid: widened as the scan
// found (b.funcs), or created again as it is when only its SQL-standard
// body ties it to what changes. A function whose arguments and result
// stay as they are, and whose body PostgreSQL does not track, is replaced
// in place: nothing is dropped.
func (f *finder) function(ctx context.Context, oid int64) (*object, error) {
	return f.add("pg_proc", oid, func() (*object, string, error) {
		b := f.b
		fn := b.funcs[oid]
		if fn == nil {
			fns, err := b.readFunctions(ctx, []int64{oid})
			if err != nil {
				return nil, "", err
			}
			if len(fns) != 1 {
				return nil, fmt.Sprintf("function %d (an extension's, or in a language adopt does not read)", oid), nil
			}
			fn = fns[0]
		}
		def, err := b.functionDef(ctx, fn)
		if err != nil {
			return nil, "", err
		}
		word := "FUNCTION"
		if fn.kind == "p" {
			word = "PROCEDURE"
		}
		o := &object{kind: objFunction, name: fmt.Sprintf("%s %s(%s)", map[string]string{"f": "function", "p": "procedure"}[fn.kind],
			fn.name, fn.identity)}
		if def == "" {
			return nil, fmt.Sprintf("%s (its definition is not as PostgreSQL prints one)", o.name), nil
		}
		var why []string
		for _, s := range fn.widened() {
			why = append(why, fmt.Sprintf("%s to bigint (%s)", s, s.holds))
		}
		if fn.body != nil && len(fn.body.edits) > 0 {
			why = append(why, fmt.Sprintf("%d casts to integer of keys widened to bigint", len(fn.body.edits)))
		}
		if len(why) == 0 {
			why = append(why, "its SQL-standard body reads what changes")
		}
		o.why = joinComma(why)
		o.fix = def
		if !fn.signature() && !fn.sqlStd {
			o.create = []string{def}
			return o, "", nil
		}
		o.drop = []string{fmt.Sprintf("DROP %s %s(%s)", word, fn.name, fn.identity)}
		on := fmt.Sprintf("%s %s(%s)", word, fn.name, fn.newIdentity())
		o.create = []string{strings.Replace(def, "CREATE OR REPLACE ", "CREATE ", 1)}
		var owner, comment string
		if err := b.q.QueryRowContext(ctx, `SELECT CASE WHEN f.proowner = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
				THEN '' ELSE quote_ident(pg_catalog.pg_get_userbyid(f.proowner)) END, coalesce(pg_catalog.obj_description(f.oid, 'pg_proc'), '')
			FROM pg_catalog.pg_proc f WHERE f.oid = $1`, oid).Scan(&owner, &comment); err != nil {
			return nil, "", fmt.Errorf("adopt: %s: %w", o.name, err)
		}
		if owner != "" {
			o.create = append(o.create, fmt.Sprintf("ALTER %s OWNER TO %s", on, owner))
		}
		if comment != "" {
			o.create = append(o.create, fmt.Sprintf("COMMENT ON %s IS %s", on, literal(comment)))
		}
		grants, err := b.grants(ctx, "pg_proc", oid, on)
		if err != nil {
			return nil, "", err
		}
		o.create = append(o.create, grants...)
		return o, "", nil
	})
}

func joinComma(s []string) string { return strings.Join(s, ", ") }

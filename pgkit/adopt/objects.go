package adopt

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// objKind is what an object the plan drops and creates again is.
type objKind int

const (
	objView objKind = iota
	objMatview
	objFunction
	objPolicy
	objTrigger
)

// object is something the plan drops before the columns change and
// creates again after, as it was (with the changes that keys as bigint
// need): a view or a materialized view on a widened column, a function
// whose arguments or result are widened, or whose SQL-standard body reads
// a widened column, and what depends on those: views, policies,
// triggers. A function whose variables alone are widened is replaced in
// place (CREATE OR REPLACE), and nothing that depends on it is touched.
type object struct {
	kind    objKind
	catalog string // pg_class, pg_proc, pg_policy, pg_trigger
	oid     int64
	name    string // as messages name it: view public.v
	lock    string // the relation dropping it locks (the view, the policy's table), "" for none
	drop    []string
	create  []string
	refresh string    // REFRESH MATERIALIZED VIEW, after every object is created
	why     string    // what it changes, for the plan's comments
	fix     string    // for a function: the statement that creates it widened
	needs   []*object // objects to create before it
	order   int
}

// findObjects finds what the plan drops and creates again: what depends on
// the widened columns and PostgreSQL will not keep across the change of
// type (views, materialized views, policies, triggers that name a column,
// SQL-standard functions), the functions to widen, what depends on those
// in turn, and views and policies whose casts are widened; and refuses
// (ErrDependents) what it cannot create again (rules, generated columns,
// publications that list columns, anything that uses a view's row type),
// naming each.
func (b *planner) findObjects(ctx context.Context) error {
	if b.defences.noDependents {
		return nil
	}
	f := &finder{b: b, byKey: map[string]*object{}}
	for _, c := range b.widen {
		for _, m := range c.family {
			if err := f.dependents(ctx, nil, "pg_class", m.rel, m.attnum, fmt.Sprintf("%s.%s", m.table, c.name)); err != nil {
				return err
			}
		}
	}
	for _, oid := range sortedKeys(b.funcs) {
		if _, err := f.function(ctx, oid); err != nil {
			return err
		}
	}
	for _, key := range sortedKeys(b.texts) {
		kind, rest, _ := strings.Cut(key, ":")
		id, _, _ := strings.Cut(rest, ":")
		oid, _ := strconv.ParseInt(id, 10, 64)
		var err error
		switch kind {
		case "view":
			_, err = f.view(ctx, oid)
		case "policy":
			_, err = f.policy(ctx, oid)
		}
		if err != nil {
			return err
		}
	}
	// What depends on each object dropped, until none is new.
	for i := 0; i < len(f.all); i++ {
		o := f.all[i]
		if len(o.drop) == 0 {
			continue
		}
		if err := f.dependents(ctx, o, o.catalog, o.oid, -1, o.name); err != nil {
			return err
		}
		if o.kind == objView || o.kind == objMatview {
			if err := f.rowTypeUsers(ctx, o); err != nil {
				return err
			}
		}
	}
	if len(f.refused) > 0 {
		slices.Sort(f.refused)
		b.refuse(fmt.Errorf("%w: PostgreSQL cannot change the type of a column under these, and adopt does not create them again: %s",
			ErrDependents, strings.Join(slices.Compact(f.refused), "; ")))
		return nil
	}
	objects, err := sortObjects(f.all)
	if err != nil {
		b.refuse(err)
		return nil
	}
	b.objects = objects
	return nil
}

// finder collects the objects of findObjects.
type finder struct {
	b       *planner
	all     []*object
	byKey   map[string]*object
	refused []string
}

func sortedKeys[K int64 | string, V any](m map[K]V) []K {
	keys := mapKeys(m)
	slices.Sort(keys)
	return keys
}

// add returns the object of catalog and oid, made by make the first time.
func (f *finder) add(catalog string, oid int64, make func() (*object, string, error)) (*object, error) {
	key := fmt.Sprintf("%s/%d", catalog, oid)
	if o, ok := f.byKey[key]; ok {
		return o, nil
	}
	o, why, err := make()
	if err != nil {
		return nil, err
	}
	if why != "" {
		f.refused = append(f.refused, why)
		f.byKey[key] = nil
		return nil, nil
	}
	o.catalog, o.oid, o.order = catalog, oid, len(f.all)
	f.byKey[key] = o
	f.all = append(f.all, o)
	return o, nil
}

// dep is a row of pg_depend: an object that depends on another.
type dep struct {
	catalog       string
	objid, objsub int64
	refCatalog    string
	deptype       string
	detail        string
	desc          string
}

// dependents looks at what depends on the object (catalog, oid) (column
// sub of a table; -1 for any), which parent drops or whose type changes:
// what PostgreSQL carries across a change of type is left to it; what it
// does not is an object to create again, or a refusal.
func (f *finder) dependents(ctx context.Context, parent *object, catalog string, oid, sub int64, what string) error {
	rows, err := f.b.q.QueryContext(ctx, `SELECT d.classid::pg_catalog.regclass::text, d.objid::int8, d.objsubid::int8,
			d.refclassid::pg_catalog.regclass::text, d.deptype::text,
			coalesce(CASE d.classid
			WHEN 'pg_catalog.pg_rewrite'::pg_catalog.regclass THEN (SELECT format('%s|%s|%s', r.ev_class::int8, r.rulename, v.relkind)
				FROM pg_catalog.pg_rewrite r JOIN pg_catalog.pg_class v ON v.oid = r.ev_class WHERE r.oid = d.objid)
			WHEN 'pg_catalog.pg_class'::pg_catalog.regclass THEN (SELECT format('%s|%s', k.relkind,
				(SELECT i.indrelid::int8 FROM pg_catalog.pg_index i WHERE i.indexrelid = k.oid)) FROM pg_catalog.pg_class k WHERE k.oid = d.objid)
			WHEN 'pg_catalog.pg_trigger'::pg_catalog.regclass THEN (SELECT format('%s|%s', t.tgrelid::int8, t.tgparentid::int8)
				FROM pg_catalog.pg_trigger t WHERE t.oid = d.objid)
			WHEN 'pg_catalog.pg_proc'::pg_catalog.regclass THEN (SELECT (f.prosqlbody IS NOT NULL)::text FROM pg_catalog.pg_proc f WHERE f.oid = d.objid)
			WHEN 'pg_catalog.pg_type'::pg_catalog.regclass THEN (SELECT format('%s|%s', t.typrelid::int8, t.typelem::int8)
				FROM pg_catalog.pg_type t WHERE t.oid = d.objid)
			WHEN 'pg_catalog.pg_attrdef'::pg_catalog.regclass THEN (SELECT format('%s|%s|%s', ad.adrelid::int8, a.attgenerated, quote_ident(a.attname))
				FROM pg_catalog.pg_attrdef ad JOIN pg_catalog.pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
				WHERE ad.oid = d.objid)
			END, ''),
			coalesce(pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid), '')
		FROM pg_catalog.pg_depend d
		WHERE d.refclassid = $1::pg_catalog.regclass AND d.refobjid = $2 AND (d.refobjsubid = $3 OR $3 < 0)
			AND d.deptype IN ('n', 'a')
		ORDER BY 1, 2, 3`, "pg_catalog."+catalog, oid, sub)
	if err != nil {
		return fmt.Errorf("adopt: what depends on %s: %w", what, err)
	}
	var deps []dep
	for rows.Next() {
		var d dep
		if err := rows.Scan(&d.catalog, &d.objid, &d.objsub, &d.refCatalog, &d.deptype, &d.detail, &d.desc); err != nil {
			rows.Close()
			return err
		}
		d.catalog = strings.TrimPrefix(d.catalog, "pg_catalog.")
		deps = append(deps, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	column := parent == nil
	for _, d := range deps {
		parts := strings.Split(d.detail, "|")
		num := func(i int) int64 {
			if i >= len(parts) {
				return 0
			}
			n, _ := strconv.ParseInt(parts[i], 10, 64)
			return n
		}
		refuse := func() {
			if parent != nil && parent.kind == objFunction {
				f.refused = append(f.refused, fmt.Sprintf("%s (on %s, which holds keys as integer: drop what depends on it "+
					"and it, and create it again widened, before adopting: %s)", d.desc, what, parent.fix))
				return
			}
			f.refused = append(f.refused, fmt.Sprintf("%s (on %s)", d.desc, what))
		}
		var o *object
		var err error
		switch d.catalog {
		case "pg_attrdef":
			switch {
			case column && len(parts) == 3 && parts[1] != "":
				f.refused = append(f.refused, fmt.Sprintf("generated column %s of %s (on %s)", parts[2], tableOf(what), what))
			case !column && num(0) != oid:
				refuse()
			}
		case "pg_constraint", "pg_statistic_ext":
			if !column {
				refuse()
			}
		case "pg_class":
			switch {
			case d.objid == oid:
			case len(parts) == 2 && (parts[0] == "i" || parts[0] == "I") && (column || num(1) == oid):
			case column && len(parts) > 0 && parts[0] == "S":
			default:
				refuse()
			}
		case "pg_rewrite":
			switch {
			case len(parts) == 3 && num(0) == oid:
				// The view's own rule; its other rules are refused below.
				if parts[1] != "_RETURN" {
					refuse()
				}
			case len(parts) == 3 && parts[1] == "_RETURN" && (parts[2] == "v" || parts[2] == "m"):
				o, err = f.view(ctx, num(0))
			default:
				refuse()
			}
		case "pg_policy":
			o, err = f.policy(ctx, d.objid)
		case "pg_trigger":
			o, err = f.trigger(ctx, d.objid, num(1))
		case "pg_proc":
			if parts[0] == "true" && d.objid != oid {
				o, err = f.function(ctx, d.objid)
			} else if d.objid != oid {
				refuse()
			}
		case "pg_type":
			if num(0) != oid {
				refuse()
			}
		default:
			refuse()
		}
		if err != nil {
			return err
		}
		if o != nil && parent != nil && o != parent && !slices.Contains(o.needs, parent) {
			o.needs = append(o.needs, parent)
		}
	}
	return nil
}

// rowTypeUsers refuses what uses the row type of view o, or of its array
// type: a function that takes or returns it, a column, another type.
// Dropping the view would drop them, or fail.
func (f *finder) rowTypeUsers(ctx context.Context, o *object) error {
	if f.b.defences.noRowTypeCheck {
		return nil
	}
	users, err := queryStrings(ctx, f.b.q, `SELECT DISTINCT pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_type t ON t.oid = c.reltype OR t.typelem = c.reltype AND t.typelem <> 0
			JOIN pg_catalog.pg_depend d ON d.refclassid = 'pg_catalog.pg_type'::pg_catalog.regclass AND d.refobjid = t.oid
		WHERE c.oid = $1 AND d.deptype IN ('n', 'a') AND NOT (d.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND d.objid IN
			(SELECT t2.oid FROM pg_catalog.pg_type t2 WHERE t2.typelem = c.reltype OR t2.oid = c.reltype))
			AND NOT (d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid)
		ORDER BY 1`, o.oid)
	if err != nil {
		return err
	}
	for _, u := range users {
		f.refused = append(f.refused, fmt.Sprintf("%s (it uses the row type of %s, which adopt drops and creates again)", u, o.name))
	}
	return nil
}

// sortObjects orders objects so that each comes after those it needs,
// and otherwise as found: the order to create them (and, reversed, to drop
// them).
func sortObjects(all []*object) ([]*object, error) {
	var out []*object
	done := map[*object]bool{}
	for len(out) < len(all) {
		progress := false
		for _, o := range all {
			if done[o] || slices.ContainsFunc(o.needs, func(n *object) bool { return !done[n] }) {
				continue
			}
			done[o] = true
			out = append(out, o)
			progress = true
		}
		if !progress {
			var left []string
			for _, o := range all {
				if !done[o] {
					left = append(left, o.name)
				}
			}
			return nil, fmt.Errorf("%w: these depend on each other in a cycle: %s", ErrDependents, strings.Join(left, ", "))
		}
	}
	return out, nil
}

// tableOf is the table of a column named table.column.
func tableOf(column string) string {
	if i := strings.LastIndex(column, "."); i > 0 {
		return column[:i]
	}
	return column
}

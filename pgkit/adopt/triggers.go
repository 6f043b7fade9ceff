package adopt

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// checkTriggers refuses a table with a BEFORE INSERT row trigger that is
// not proven to leave its key alone (ErrTrigger), unless the caller vouches
// for the trigger by name (Options.AllowTriggers): adopting changes the
// key's default, which such a trigger may override, so that the table
// would go on issuing the trigger's keys. So does a rule that rewrites the
// table's inserts. A trigger of a partition counts as one of its table.
func (b *planner) checkTriggers(ctx context.Context) error {
	if b.defences.noTriggerCheck {
		return nil
	}
	allowed := b.allowed
	used := map[string]bool{}
	for _, t := range b.targets {
		found, err := b.keyTriggers(ctx, t, allowed, used)
		if err != nil {
			return err
		}
		if len(found) > 0 {
			b.refuse(fmt.Errorf("%w: %s: %s: the table would go on issuing the keys such a trigger or rule makes; drop it, make it "+
				"leave %s alone, or, once you have read it, vouch for the trigger by name (Options.AllowTriggers, --allow-trigger)",
				ErrTrigger, t.name, strings.Join(found, "; "), t.key.name))
		}
	}
	for name, key := range allowed {
		if !used[key] {
			b.refuse(fmt.Errorf("%w: Options.AllowTriggers names %s, which is no BEFORE INSERT row trigger of the tables adopted",
				ErrTrigger, name))
		}
	}
	return nil
}

// allowTriggers resolves Options.AllowTriggers, "table.trigger" or
// "schema.table.trigger" with the table found on the caller's
// search_path as the tables are, to "table oid/trigger name", and names
// each schema-qualified for Apply's second look.
func (b *planner) allowTriggers(ctx context.Context) error {
	out := map[string]string{}
	b.allowed = out
	for _, name := range b.o.AllowTriggers {
		toks, err := lex(name)
		parts := []string{}
		ok := err == nil && len(toks)%2 == 1
		for i, t := range toks {
			switch {
			case !ok:
			case i%2 == 0 && t.isName():
				parts = append(parts, t.val)
			case i%2 == 1 && t.isPunct("."):
			default:
				ok = false
			}
		}
		if !ok || len(parts) < 2 || len(parts) > 3 {
			b.refuse(fmt.Errorf("%w: Options.AllowTriggers: %q is not table.trigger or schema.table.trigger", ErrTrigger, name))
			continue
		}
		table := name[:toks[len(toks)-2].pos]
		var oid int64
		var qualified string
		if err := b.q.QueryRowContext(ctx, `SELECT coalesce(c.oid, 0)::int8, coalesce(format('%I.%I.%I', n.nspname, c.relname, $2::text), '')
			FROM (SELECT pg_catalog.to_regclass($1) AS oid) r LEFT JOIN pg_catalog.pg_class c ON c.oid = r.oid
				LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace`, table, parts[len(parts)-1]).Scan(&oid, &qualified); err != nil {
			return fmt.Errorf("adopt: %w", err)
		}
		if oid == 0 {
			b.refuse(fmt.Errorf("%w: Options.AllowTriggers: %q: no such table %s", ErrTrigger, name, table))
			continue
		}
		out[qualified] = fmt.Sprintf("%d/%s", oid, parts[len(parts)-1])
	}
	return nil
}

// keyTriggers returns what may set t's key on insert: each enabled BEFORE
// INSERT row trigger of the table or of its partitions that is neither
// proven to leave the key alone nor allowed, and each rule on INSERT.
func (b *planner) keyTriggers(ctx context.Context, t *target, allowed map[string]string, used map[string]bool) ([]string, error) {
	rows, err := b.q.QueryContext(ctx, `WITH RECURSIVE family(rel) AS (
			SELECT $1::oid UNION SELECT i.inhrelid FROM family JOIN pg_catalog.pg_inherits i ON i.inhparent = family.rel)
		SELECT format('%s %I', 'trigger', t.tgname), t.tgrelid::pg_catalog.regclass::text, t.tgrelid::int8, t.tgname::text,
			format('%I.%I', fn.nspname, f.proname), l.lanname::text, f.prosrc,
			coalesce((SELECT e.extname::text FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
				WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = f.oid AND d.deptype = 'e'), ''),
			pg_catalog.encode(t.tgargs, 'escape')
		FROM family JOIN pg_catalog.pg_trigger t ON t.tgrelid = family.rel
			JOIN pg_catalog.pg_proc f ON f.oid = t.tgfoid
			JOIN pg_catalog.pg_namespace fn ON fn.oid = f.pronamespace
			JOIN pg_catalog.pg_language l ON l.oid = f.prolang
		WHERE NOT t.tgisinternal AND t.tgenabled <> 'D'
			AND t.tgtype & 1 = 1 AND t.tgtype & 2 = 2 AND t.tgtype & 4 = 4
		UNION ALL
		SELECT format('rule %I', r.rulename), r.ev_class::pg_catalog.regclass::text, r.ev_class::int8, r.rulename::text,
			'', 'rule', '', '', ''
		FROM family JOIN pg_catalog.pg_rewrite r ON r.ev_class = family.rel
		WHERE r.ev_type = '3' AND r.ev_enabled <> 'D'
		ORDER BY 2, 1`, t.oid)
	if err != nil {
		return nil, fmt.Errorf("adopt: triggers of %s: %w", t.name, err)
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		var what, table, name, fn, lang, src, ext, args string
		var rel int64
		if err := rows.Scan(&what, &table, &rel, &name, &fn, &lang, &src, &ext, &args); err != nil {
			return nil, err
		}
		on := ""
		if rel != t.oid {
			on = " of partition " + table
		}
		if lang == "rule" {
			found = append(found, fmt.Sprintf("%s%s rewrites its inserts", what, on))
			continue
		}
		if k := fmt.Sprintf("%d/%s", rel, name); slices.Contains(mapValues(allowed), k) {
			used[k] = true
			continue
		}
		why := b.leavesKey(lang, src, ext, args, t.key.attname)
		if why != "" {
			found = append(found, fmt.Sprintf("%s%s (function %s) %s", what, on, fn, why))
		}
	}
	return found, rows.Err()
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// keyAssignment matches, in a PL/pgSQL function's source, what sets a
// trigger's new row or the column named by the one %s: an assignment to
// NEW.col or to NEW, or SELECT ... INTO NEW.col or INTO NEW. It is the
// check before the proof, which the control runs alone.
const keyAssignment = `(?is)(\bnew\s*\.\s*(?:"%[1]s"|%[1]s)\s*:?=[^=]|\bnew\s*:?=[^=]|\binto\s+(?:strict\s+)?new\s*(?:\.\s*(?:"%[1]s"|%[1]s)\b|[^.\w]|$))`

// leavesKey returns "" when a trigger function is proven to leave the
// column key of the rows it is given alone, or what it may do to it.
//
// A PL/pgSQL function is proven to when every RETURN in it returns NEW,
// OLD or NULL, and NEW appears nowhere else but as NEW.column of another
// column (or NEW.*): it then returns the row it was given, whose key
// nothing in it can reach. PostgreSQL's own full-text triggers
// (tsvector_update_trigger) set the text column they are given. A
// function in any other language is not read, and so not proven.
func (b *planner) leavesKey(lang, src, ext, args, key string) string {
	switch {
	case lang == "internal" && (src == "tsvector_update_trigger_byid" || src == "tsvector_update_trigger_bycolumn"):
		if first, _, _ := strings.Cut(args, `\000`); first == key {
			return "sets the key (it is the text column the trigger is given)"
		}
		return ""
	case lang == "internal" && src == "suppress_redundant_updates_trigger":
		return ""
	case lang != "plpgsql":
		return fmt.Sprintf("is in language %s, which adopt cannot read, and so may set the key", lang)
	case b.defences.noTriggerProof:
		if regexp.MustCompile(fmt.Sprintf(keyAssignment, regexp.QuoteMeta(key))).MatchString(src) {
			return "sets the key"
		}
		return ""
	}
	toks, err := lex(src)
	if err != nil {
		return fmt.Sprintf("cannot be read (%v), and so may set the key", err)
	}
	for i, t := range toks {
		next := func(k int) token {
			if i+k < len(toks) {
				return toks[i+k]
			}
			return token{kind: tokPunct, val: ";", pos: len(src), end: len(src)}
		}
		switch {
		case t.is("return"):
			if !(next(1).is("new") || next(1).is("old") || next(1).is("null")) || !next(2).isPunct(";") {
				return fmt.Sprintf("returns %s, not NEW as given, and so may set the key", strings.TrimSpace(src[t.pos:next(2).end]))
			}
		case t.isName() && t.val == "new":
			switch {
			case i > 0 && toks[i-1].is("return"):
			case next(1).isPunct(".") && next(2).isName() && next(2).val == key:
				return fmt.Sprintf("names NEW.%s, and so may set the key", key)
			case next(1).isPunct(".") && (next(2).isName() || next(2).isOp("*")):
			default:
				end := next(1).end
				return fmt.Sprintf("uses NEW as a whole (%s), and so may set the key", strings.TrimSpace(src[max(0, t.pos-12):end]))
			}
		}
	}
	return ""
}

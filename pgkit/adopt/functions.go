package adopt

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// function is a function or procedure of the user's, as the scan reads it
// (funcscan.go) and the plan changes it.
type function struct {
	oid      int64
	name     string // schema-qualified, quoted as needed
	schema   string // its schema's name
	proname  string // its name alone
	kind     string // f or p
	lang     string
	sqlStd   bool // a SQL-standard body (BEGIN ATOMIC, RETURN), which PostgreSQL parses and tracks
	trigger  bool // returns trigger
	defaults int  // how many of its arguments have defaults
	// args, identity and result are as pg_get_function_arguments,
	// pg_get_function_identity_arguments and pg_get_function_result
	// print them.
	args, identity, returns string
	def                     string // pg_get_functiondef, read when it changes or has a SQL-standard body
	slots                   []*slot
	body                    *scanText // nil for a language adopt does not read
}

// inputs are the arguments a call passes, in order.
func (f *function) inputs() []*slot {
	var out []*slot
	for _, s := range f.slots {
		if s.kind == slotParam && (s.mode == "i" || s.mode == "b" || s.mode == "v") {
			out = append(out, s)
		}
	}
	return out
}

// outputs are what a row of its result is made of: the columns of
// RETURNS TABLE, else the OUT and INOUT arguments, else the result.
func (f *function) outputs() []*slot {
	var cols, outs []*slot
	for _, s := range f.slots {
		switch {
		case s.kind == slotColumn:
			cols = append(cols, s)
		case s.kind == slotParam && (s.mode == "o" || s.mode == "b"):
			outs = append(outs, s)
		}
	}
	switch {
	case len(cols) > 0:
		return cols
	case len(outs) > 0:
		return outs
	case f.result() != nil:
		return []*slot{f.result()}
	}
	return nil
}

// result is its result, for a function that returns one value (SETOF or
// not); nil otherwise.
func (f *function) result() *slot {
	for _, s := range f.slots {
		if s.kind == slotResult {
			return s
		}
	}
	return nil
}

// param is its argument $n.
func (f *function) param(n int) *slot {
	for _, s := range f.slots {
		if s.kind == slotParam && s.index == n {
			return s
		}
	}
	return nil
}

// slot is its argument, result column or variable of that name.
func (f *function) slot(name string) *slot {
	if name == "" {
		return nil
	}
	for _, s := range f.slots {
		if s.name == name && s.kind != slotResult {
			return s
		}
	}
	return nil
}

// widened are the slots to widen: smallint or integer, holding keys.
func (f *function) widened() []*slot {
	var out []*slot
	for _, s := range f.slots {
		if s.narrow && s.holds != "" {
			out = append(out, s)
		}
	}
	return out
}

// signature reports whether widening changes its arguments or result:
// it must then be dropped and created again, with what depends on it.
func (f *function) signature() bool {
	return slices.ContainsFunc(f.widened(), func(s *slot) bool { return s.kind != slotVariable })
}

// findFunctions reads the user's functions and procedures, and view
// definitions and policies, and finds the integers of functions that hold
// keys (funcscan.go): those it can widen become the plan's, each with why;
// those it cannot (a language it does not read, a domain) are refused,
// with the statement that widens them.
func (b *planner) findFunctions(ctx context.Context) error {
	b.funcs = map[int64]*function{}
	b.texts = map[string][]edit{}
	if b.defences.noFunctions || len(b.holders) == 0 {
		return nil
	}
	fns, err := b.readFunctions(ctx, []int64{})
	if err != nil {
		return err
	}
	a := &scan{holders: b.holders, funcs: fns, byName: map[string][]*function{}}
	for _, f := range fns {
		a.byName[f.proname] = append(a.byName[f.proname], f)
		if f.body != nil {
			a.texts = append(a.texts, f.body)
		}
	}
	others, err := b.readTexts(ctx)
	if err != nil {
		return err
	}
	a.texts = append(a.texts, others...)
	a.run()
	for _, t := range others {
		if len(t.edits) > 0 && t.key != "" {
			b.texts[t.key] = t.edits
		}
	}
	for _, f := range fns {
		widened := f.widened()
		var domains []string
		for _, s := range f.slots {
			if s.domain && s.holds != "" {
				domains = append(domains, fmt.Sprintf("%s of domain %s (%s)", s, s.typ, s.holds))
			}
		}
		var edits []edit
		if f.body != nil {
			edits = f.body.edits
		}
		if len(widened) == 0 && len(edits) == 0 && len(domains) == 0 {
			continue
		}
		stmt, err := b.functionDef(ctx, f)
		if err != nil {
			return err
		}
		var why []string
		for _, s := range widened {
			why = append(why, fmt.Sprintf("%s %s (%s)", s, s.typ, s.holds))
		}
		switch {
		case len(domains) > 0:
			b.refuse(fmt.Errorf("%w: %s holds keys in %s: adopt widens the domains of columns only: drop it and create it "+
				"again taking bigint, or a domain over bigint, before adopting: DROP %s %s(%s)", ErrFunctionKeys, f.name,
				strings.Join(domains, ", "), map[string]string{"f": "FUNCTION", "p": "PROCEDURE"}[f.kind], f.name, f.identity))
		case f.body == nil:
			b.refuse(fmt.Errorf("%w: %s is in language %s, which adopt does not read, and holds keys as integer: %s; "+
				"widen it yourself before adopting: %s", ErrFunctionKeys, f.name, f.lang, strings.Join(why, ", "), stmt))
		case stmt == "":
			b.refuse(fmt.Errorf("%w: %s holds keys as integer: %s; adopt cannot read its definition to widen it: widen it yourself",
				ErrFunctionKeys, f.name, strings.Join(why, ", ")))
		default:
			b.funcs[f.oid] = f
		}
	}
	return nil
}

// readFunctions reads every function and procedure of the user's (not
// PostgreSQL's, not an extension's), or those of only if it is not empty,
// with its arguments, result and, for SQL and PL/pgSQL, its body, lexed.
func (b *planner) readFunctions(ctx context.Context, only []int64) ([]*function, error) {
	rows, err := b.q.QueryContext(ctx, `SELECT f.oid::int8, format('%I.%I', n.nspname, f.proname), n.nspname::text, f.proname::text,
			f.prokind::text, l.lanname::text, f.prosqlbody IS NOT NULL, f.prorettype = 'pg_catalog.trigger'::pg_catalog.regtype,
			f.pronargdefaults::int8, f.prosrc,
			pg_catalog.pg_get_function_arguments(f.oid), pg_catalog.pg_get_function_identity_arguments(f.oid),
			coalesce(pg_catalog.pg_get_function_result(f.oid), ''),
			CASE WHEN f.prosqlbody IS NOT NULL THEN pg_catalog.pg_get_functiondef(f.oid) ELSE '' END,
			f.proretset, pg_catalog.format_type(f.prorettype, NULL),
			CASE WHEN rt.typtype = 'd' AND rt.typbasetype IN (21, 23) THEN 'd' WHEN rt.oid IN (21, 23, 1005, 1007) THEN 'n' ELSE '' END,
			EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid
				WHERE t.tgfoid = f.oid AND c.relname = ANY ($1::text[]))
		FROM pg_catalog.pg_proc f JOIN pg_catalog.pg_namespace n ON n.oid = f.pronamespace
			JOIN pg_catalog.pg_language l ON l.oid = f.prolang
			JOIN pg_catalog.pg_type rt ON rt.oid = f.prorettype
		WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%' AND n.nspname NOT LIKE 'pg\_temp%'
			AND f.prokind IN ('f', 'p')
			AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
				AND d.objid = f.oid AND d.deptype = 'e')
			AND (cardinality($2::int8[]) = 0 OR f.oid = ANY ($2::int8[]))
		ORDER BY 2, 1`, mapKeys(b.holderRels), only)
	if err != nil {
		return nil, fmt.Errorf("adopt: functions: %w", err)
	}
	byOID := map[int64]*function{}
	var fns []*function
	for rows.Next() {
		f := &function{}
		var src, resType, resKind string
		var retset, ofHolder bool
		if err := rows.Scan(&f.oid, &f.name, &f.schema, &f.proname, &f.kind, &f.lang, &f.sqlStd, &f.trigger, &f.defaults, &src,
			&f.args, &f.identity, &f.returns, &f.def, &retset, &resType, &resKind, &ofHolder); err != nil {
			rows.Close()
			return nil, err
		}
		if f.kind == "f" && !strings.HasPrefix(f.returns, "TABLE(") && resType != "record" && resType != "void" && !f.trigger {
			f.slots = append(f.slots, &slot{kind: slotResult, typ: f.returns, narrow: resKind == "n", domain: resKind == "d"})
		}
		if f.lang == "sql" || f.lang == "plpgsql" {
			text := src
			if f.sqlStd {
				text = f.def
			}
			f.body = &scanText{where: f.name, text: text, fn: f, gated: ofHolder}
			if toks, err := lex(text); err == nil {
				if f.sqlStd {
					toks = bodyTokens(text, toks)
				}
				f.body.toks = toks
			} else {
				f.body = nil // refused below if it holds keys
			}
		}
		byOID[f.oid] = f
		fns = append(fns, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = b.q.QueryContext(ctx, `SELECT f.oid::int8, a.ord::int8, coalesce(f.proargnames[a.ord], ''),
			coalesce(f.proargmodes[a.ord]::text, 'i'), pg_catalog.format_type(a.typ, NULL),
			CASE WHEN t.typtype = 'd' AND t.typbasetype IN (21, 23) THEN 'd' WHEN t.oid IN (21, 23, 1005, 1007) THEN 'n' ELSE '' END
		FROM pg_catalog.pg_proc f, unnest(coalesce(f.proallargtypes, f.proargtypes::oid[])) WITH ORDINALITY AS a(typ, ord),
			pg_catalog.pg_type t
		WHERE f.oid = ANY ($1::int8[]) AND t.oid = a.typ
		ORDER BY 1, 2`, mapKeys(byOID))
	if err != nil {
		return nil, fmt.Errorf("adopt: arguments of functions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var oid int64
		var kind string
		s := &slot{kind: slotParam}
		if err := rows.Scan(&oid, &s.index, &s.name, &s.mode, &s.typ, &kind); err != nil {
			return nil, err
		}
		s.narrow, s.domain = kind == "n", kind == "d"
		if s.mode == "t" {
			s.kind = slotColumn
		}
		byOID[oid].slots = append(byOID[oid].slots, s)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, f := range fns {
		if slices.ContainsFunc(f.slots, func(s *slot) bool { return s.kind == slotParam && (s.mode == "o" || s.mode == "b") }) {
			// Its result is made of its OUT arguments.
			f.slots = slices.DeleteFunc(f.slots, func(s *slot) bool { return s.kind == slotResult })
		}
		if f.body == nil {
			continue
		}
		if f.lang == "plpgsql" {
			f.slots = append(f.slots, declarations(f.body.text, f.body.toks)...)
		}
		if !f.body.gated {
			f.body.gated = slices.ContainsFunc(f.body.toks, func(t token) bool { return t.isName() && b.holderRels[t.val] })
		}
	}
	return fns, nil
}

// bodyTokens keeps the tokens of a SQL-standard body (BEGIN ATOMIC ... END
// or RETURN ...) of a function's definition, leaving out its header.
func bodyTokens(def string, toks []token) []token {
	at := max(strings.LastIndex(def, "\nBEGIN ATOMIC"), strings.LastIndex(def, "\nRETURN "))
	if at < 0 {
		return toks
	}
	return slices.DeleteFunc(toks, func(t token) bool { return t.pos < at })
}

// readTexts reads, for the scan, what else calls functions and compares
// keys: the definition of every view and materialized view, every
// policy's expressions, and the check constraints, defaults and index
// expressions of the tables that hold keys.
func (b *planner) readTexts(ctx context.Context) ([]*scanText, error) {
	rows, err := b.q.QueryContext(ctx, `SELECT 'view:' || c.oid, format('%s %I.%I', CASE c.relkind WHEN 'm' THEN 'materialized view' ELSE 'view' END,
			n.nspname, c.relname), pg_catalog.pg_get_viewdef(c.oid)
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('v', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		UNION ALL
		SELECT 'policy:' || p.oid || ':' || e.part, format('policy %I on %s', p.polname, p.polrelid::pg_catalog.regclass),
			pg_catalog.pg_get_expr(e.expr, p.polrelid)
		FROM pg_catalog.pg_policy p, LATERAL (VALUES ('using', p.polqual), ('check', p.polwithcheck)) AS e(part, expr)
		WHERE e.expr IS NOT NULL
		UNION ALL
		SELECT '', format('constraint %I of %s', con.conname, con.conrelid::pg_catalog.regclass), pg_catalog.pg_get_constraintdef(con.oid)
		FROM pg_catalog.pg_constraint con JOIN pg_catalog.pg_class c ON c.oid = con.conrelid
		WHERE con.contype = 'c' AND c.relname = ANY ($1::text[])
		UNION ALL
		SELECT '', format('default of %s.%I', d.adrelid::pg_catalog.regclass, a.attname), pg_catalog.pg_get_expr(d.adbin, d.adrelid)
		FROM pg_catalog.pg_attrdef d JOIN pg_catalog.pg_class c ON c.oid = d.adrelid
			JOIN pg_catalog.pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
		WHERE c.relname = ANY ($1::text[])
		UNION ALL
		SELECT '', format('index %s', i.indexrelid::pg_catalog.regclass), pg_catalog.pg_get_indexdef(i.indexrelid)
		FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indrelid
		WHERE c.relname = ANY ($1::text[]) AND (i.indexprs IS NOT NULL OR i.indpred IS NOT NULL)
		ORDER BY 2`, mapKeys(b.holderRels))
	if err != nil {
		return nil, fmt.Errorf("adopt: views and policies: %w", err)
	}
	defer rows.Close()
	var out []*scanText
	for rows.Next() {
		t := &scanText{}
		if err := rows.Scan(&t.key, &t.where, &t.text); err != nil {
			return nil, err
		}
		toks, err := lex(t.text)
		if err != nil {
			continue // PostgreSQL printed it: it lexes; a text that does not is no evidence
		}
		t.toks = toks
		t.gated = slices.ContainsFunc(toks, func(x token) bool { return x.isName() && b.holderRels[x.val] }) ||
			strings.HasPrefix(t.where, "policy ") || strings.HasPrefix(t.where, "constraint ") ||
			strings.HasPrefix(t.where, "default ") || strings.HasPrefix(t.where, "index ")
		out = append(out, t)
	}
	return out, rows.Err()
}

func mapKeys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// functionDef returns the statement that creates f with its integers that
// hold keys widened (its arguments, result and variables, and the casts
// the scan found), and sets f.def; "" when f's definition is not as
// PostgreSQL prints one.
func (b *planner) functionDef(ctx context.Context, f *function) (string, error) {
	if f.def == "" {
		if err := b.q.QueryRowContext(ctx, "SELECT pg_catalog.pg_get_functiondef($1)", f.oid).Scan(&f.def); err != nil {
			return "", fmt.Errorf("adopt: definition of %s: %w", f.name, err)
		}
	}
	word := "FUNCTION"
	if f.kind == "p" {
		word = "PROCEDURE"
	}
	header := "CREATE OR REPLACE " + word + " " + f.name + "(" + f.args + ")\n"
	if f.kind == "f" {
		header += " RETURNS " + f.returns + "\n"
	}
	if !strings.HasPrefix(f.def, header) {
		return "", nil
	}
	args, ok := rewriteArgs(f.args, f, true)
	if !ok {
		return "", nil
	}
	create := "CREATE OR REPLACE "
	if f.signature() {
		create = "CREATE "
	}
	newHeader := create + word + " " + f.name + "(" + args + ")\n"
	if f.kind == "f" {
		res, ok := rewriteResult(f.returns, f)
		if !ok {
			return "", nil
		}
		newHeader += " RETURNS " + res + "\n"
	}
	rest := f.def[len(header):]
	var edits []edit
	for _, s := range f.widened() {
		if s.kind == slotVariable {
			edits = append(edits, s.at...)
		}
	}
	if f.body != nil {
		edits = append(edits, f.body.edits...)
	}
	if len(edits) > 0 {
		switch {
		case f.sqlStd:
			var shifted []edit
			for _, e := range edits {
				if e.pos < len(header) {
					return "", nil
				}
				shifted = append(shifted, edit{e.pos - len(header), e.end - len(header), e.with})
			}
			rest = applyEdits(rest, shifted)
		default:
			src := f.body.text
			at := strings.LastIndex(rest, src)
			if at < 0 {
				return "", nil
			}
			rest = rest[:at] + applyEdits(src, edits) + rest[at+len(src):]
		}
	}
	return strings.TrimRight(newHeader+rest, "\n"), nil
}

// newIdentity returns f's identity arguments with its widened arguments
// bigint: how the function is named once widened.
func (f *function) newIdentity() string {
	out, ok := rewriteArgs(f.identity, f, false)
	if !ok {
		return f.identity
	}
	return out
}

// rewriteArgs writes bigint for the type of every widened argument in
// args, a list as pg_get_function_arguments (withDefaults) or
// pg_get_function_identity_arguments prints it: [mode] [name] type
// [DEFAULT expr], separated by commas. An argument is matched to its slot
// by name, or by place among the unnamed.
func rewriteArgs(args string, f *function, withDefaults bool) (string, bool) {
	if strings.TrimSpace(args) == "" {
		return args, true
	}
	toks, err := lex(args)
	if err != nil {
		return "", false
	}
	var params []*slot
	for _, s := range f.slots {
		if s.kind == slotParam {
			params = append(params, s)
		}
	}
	var edits []edit
	used := map[*slot]bool{}
	for _, piece := range splitTop(toks, ",") {
		if len(piece) == 0 {
			return "", false
		}
		k := 0
		mode := "i"
		if len(piece) > 1 {
			switch piece[0].val {
			case "out":
				mode, k = "o", 1
			case "inout":
				mode, k = "b", 1
			case "variadic":
				mode, k = "v", 1
			case "in":
				k = 1
			}
		}
		var s *slot
		if k+1 < len(piece) {
			for _, p := range params {
				if !used[p] && p.name != "" && p.name == piece[k].val && p.mode == mode {
					s = p
					break
				}
			}
		}
		if s != nil {
			k++
		} else {
			for _, p := range params {
				if !used[p] && p.name == "" && p.mode == mode {
					s = p
					break
				}
			}
		}
		if s == nil {
			return "", false
		}
		used[s] = true
		if s.narrow && s.holds != "" {
			if k >= len(piece) || piece[k].kind != tokIdent || !slices.Contains(intTypes, piece[k].val) {
				return "", false
			}
			edits = append(edits, edit{piece[k].pos, piece[k].end, "bigint"})
		}
	}
	return applyEdits(args, edits), true
}

// rewriteResult writes bigint for a widened result, or for the widened
// columns of RETURNS TABLE, in result as pg_get_function_result prints
// it.
func rewriteResult(result string, f *function) (string, bool) {
	toks, err := lex(result)
	if err != nil || len(toks) == 0 {
		return "", false
	}
	var edits []edit
	if toks[0].is("table") {
		var cols []*slot
		for _, s := range f.slots {
			if s.kind == slotColumn {
				cols = append(cols, s)
			}
		}
		c := closing(toks, 1)
		if len(toks) < 3 || !toks[1].isPunct("(") || c < 0 {
			return "", false
		}
		pieces := splitTop(toks[2:c], ",")
		if len(pieces) != len(cols) {
			return "", false
		}
		for j, p := range pieces {
			if cols[j].narrow && cols[j].holds != "" {
				if len(p) < 2 || p[1].kind != tokIdent || !slices.Contains(intTypes, p[1].val) {
					return "", false
				}
				edits = append(edits, edit{p[1].pos, p[1].end, "bigint"})
			}
		}
		return applyEdits(result, edits), true
	}
	r := f.result()
	if outs := f.outputs(); r == nil && len(outs) == 1 && outs[0].kind == slotParam {
		// One OUT argument is the result: RETURNS its type.
		r = outs[0]
	}
	if r != nil && r.narrow && r.holds != "" {
		k := 0
		if toks[0].is("setof") {
			k = 1
		}
		if k >= len(toks) || toks[k].kind != tokIdent || !slices.Contains(intTypes, toks[k].val) {
			return "", false
		}
		edits = append(edits, edit{toks[k].pos, toks[k].end, "bigint"})
	}
	return applyEdits(result, edits), true
}

package adopt

import (
	"fmt"
	"slices"
	"strings"
)

// Which integers of a function hold keys.
//
// adopt cannot run a function to see what it holds, and PostgreSQL does
// not record what a PL/pgSQL body or a string SQL body reads. So it reads
// them: a scan finds, in each body, each view definition and each
// policy, where a function's integer argument, result or variable meets
// a column that will hold snowflakes (a holder: a key adopted, or a
// column that refers to one), and marks it as holding keys, giving why.
// It meets one when:
//
//   - it is named as one (p_customer_id, in_customer_id, v_customer_id
//     and customer_id all name customer_id);
//   - it is compared with one, or assigned to or from one (=, <>, <, >,
//     <=, >=, :=, SET col = x);
//   - it is a target of SELECT ... INTO, RETURNING ... INTO or FOR ... IN
//     SELECT whose select list item at its place names one;
//   - it is the value an INSERT gives one (VALUES or SELECT, by place);
//   - it is returned where the result holds keys, or what it returns is
//     one or holds keys (RETURN, RETURN NEXT, RETURN QUERY, a SQL
//     function's last SELECT);
//   - it is passed, by place, to a function's argument that holds keys,
//     or a function's argument is passed one or an integer that holds keys.
//   - it is compared with, or assigned, a function's result that holds
//     keys.
//
// Marks spread until nothing changes. A cast to integer met the same way
// (current_setting('app.tenant')::integer = tenant_id) is widened where it
// stands. Evidence that rests on a holder's name alone is taken only from
// a text that names a table that holds keys (or from a trigger function of
// one), since names such as id are everywhere. What the scan cannot see
// (a key that passes through a string, dynamic SQL, a cast elsewhere) is
// left as it is; docs/adopt.md says so.

// slotKind is what a slot of a function is.
type slotKind int

const (
	slotParam    slotKind = iota // an argument (IN, OUT, INOUT, VARIADIC)
	slotColumn                   // a column of RETURNS TABLE
	slotResult                   // the result of a function that returns one value (or SETOF, or an array)
	slotVariable                 // a PL/pgSQL variable
)

// slot is an argument, result or variable of a function.
type slot struct {
	kind  slotKind
	name  string // lower-cased or as quoted; "" for the result or an unnamed argument
	index int    // an argument's place, from 1 (for $n)
	mode  string // an argument's mode: i, o, b, v, t
	typ   string // its type, as format_type prints it
	// narrow says the type is smallint or integer, or an array of them:
	// a slot that holds keys is widened.
	narrow bool
	// domain says the type is a domain: a slot of a domain that holds
	// keys is refused, since adopt widens domains of columns only.
	domain bool
	// at is where a variable's type is written in the body.
	at   []edit
	pass int // the pass that found what it holds
	// holds says why it holds keys, "" while nothing says so.
	holds string
}

func (s *slot) String() string {
	switch s.kind {
	case slotResult:
		return "its result"
	case slotVariable:
		return "variable " + s.name
	case slotColumn:
		return "result column " + s.name
	}
	if s.name == "" {
		return fmt.Sprintf("argument $%d", s.index)
	}
	return "argument " + s.name
}

// scanText is a text the scan reads: a function's body, a view's
// definition, a policy's expression.
type scanText struct {
	key   string // what its edits are kept under: view:oid, policy:oid:using, policy:oid:check; "" for none
	where string // names it, for why
	text  string
	toks  []token
	fn    *function // the function whose body it is; nil for others
	gated bool      // it names a table that holds keys: evidence on names counts
	// edits are the casts to widen in text.
	edits []edit
}

// scan is one run of the scan over a database's functions and texts.
type scan struct {
	holders map[string]bool        // names of the columns that hold keys
	funcs   []*function            // every function read (SQL and PL/pgSQL)
	byName  map[string][]*function // by proname
	texts   []*scanText
	pass    int
	changed bool
}

// mark notes that s holds keys, for why.
func (a *scan) mark(s *slot, why string) {
	if s == nil || s.holds != "" {
		return
	}
	s.holds, s.pass, a.changed = why, a.pass, true
}

// widenCast notes a cast to integer to widen in t.
func (a *scan) widenCast(t *scanText, spans []edit) {
	for _, e := range spans {
		if !slices.Contains(t.edits, e) {
			t.edits = append(t.edits, e)
			a.changed = true
		}
	}
}

// run reads every text until nothing more holds keys.
func (a *scan) run() {
	for _, f := range a.funcs {
		if f.slots == nil {
			continue
		}
		for _, s := range f.slots {
			if why := a.namedLike(s, f.body != nil && f.body.gated); why != "" {
				a.mark(s, why)
			}
		}
	}
	for a.pass = 1; a.pass < 100; a.pass++ {
		a.changed = false
		for _, t := range a.texts {
			a.read(t)
		}
		if !a.changed {
			return
		}
	}
}

// prefixes are the prefixes of names for arguments and variables.
var prefixes = []string{"p_", "in_", "i_", "v_", "l_", "a_", "arg_", "o_", "out_", "_"}

// namedLike says why slot s holds keys by its name alone, or "".
func (a *scan) namedLike(s *slot, gated bool) string {
	if !s.narrow && !s.domain || s.name == "" {
		return ""
	}
	name := s.name
	for _, p := range prefixes {
		if rest, ok := strings.CutPrefix(name, p); ok && rest != "" {
			name = rest
			break
		}
	}
	if !a.holders[name] || name == "id" && !gated {
		return ""
	}
	return "named like the key column " + name
}

// operand is one side of a comparison or an assignment.
type operand struct {
	from, to int // its tokens
	slot     *slot
	column   string // a column that holds keys, as written
	call     []*function
	casts    []edit // casts to integer around it, to widen
}

// read reads one text once.
func (a *scan) read(t *scanText) {
	toks := t.toks
	for i, tok := range toks {
		switch {
		case tok.kind == tokOp && slices.Contains([]string{"=", "<>", "!=", "<", ">", "<=", ">=", ":="}, tok.val):
			l, r := a.before(t, i), a.after(t, i+1)
			if (tok.val == ":=" || tok.val == "=") && l.slot == nil && l.column == "" && t.fn != nil {
				// v integer := x, in a DECLARE: the name is before the type.
				l = a.declared(t, i)
			}
			a.meet(t, l, r, tok.val)
			a.meet(t, r, l, tok.val)
		case tok.isName() && i+1 < len(toks) && toks[i+1].isPunct("(") && !isKeyword(tok):
			a.call(t, i)
		case tok.is("into") && (i == 0 || !toks[i-1].is("insert") && !toks[i-1].is("merge")):
			a.into(t, i)
		case tok.is("insert") && i+1 < len(toks) && toks[i+1].is("into"):
			a.insert(t, i)
		case tok.is("return") && t.fn != nil:
			a.ret(t, i)
		case tok.is("default") && t.fn != nil:
			l, r := a.declared(t, i), a.after(t, i+1)
			a.meet(t, l, r, ":=")
			a.meet(t, r, l, ":=")
		}
	}
	if t.fn != nil && t.fn.lang == "sql" && t.fn.kind == "f" {
		a.sqlResult(t)
	}
}

// meet applies what operand x says about operand y across op.
func (a *scan) meet(t *scanText, x, y operand, op string) {
	what := x.text(t)
	via := "compared with"
	if op == ":=" {
		via = "assigned"
	}
	switch {
	case x.column != "" && t.gated:
		a.mark(y.slot, fmt.Sprintf("%s %s in %s", via, what, t.where))
		a.widenCast(t, y.casts)
		for _, f := range y.call {
			a.mark(f.result(), fmt.Sprintf("%s %s in %s", via, what, t.where))
		}
	case x.slot != nil && x.slot.holds != "":
		a.mark(y.slot, fmt.Sprintf("%s %s in %s", via, what, t.where))
		a.widenCast(t, y.casts)
		for _, f := range y.call {
			a.mark(f.result(), fmt.Sprintf("%s %s in %s", via, what, t.where))
		}
	case len(x.call) > 0 && slices.ContainsFunc(x.call, func(f *function) bool { return f.result() != nil && f.result().holds != "" }):
		a.mark(y.slot, fmt.Sprintf("%s %s in %s", via, what, t.where))
		a.widenCast(t, y.casts)
	}
}

// text is the operand as written.
func (o operand) text(t *scanText) string {
	if o.from < 0 || o.to > len(t.toks) || o.from >= o.to {
		return ""
	}
	return strings.TrimSpace(t.text[t.toks[o.from].pos:t.toks[o.to-1].end])
}

// holds reports whether operand o holds keys.
func (a *scan) holds(t *scanText, o operand) bool {
	switch {
	case o.column != "" && t.gated, o.slot != nil && o.slot.holds != "":
		return true
	}
	return slices.ContainsFunc(o.call, func(f *function) bool { return f.result() != nil && f.result().holds != "" })
}

// isKeyword reports whether a name before a parenthesis is SQL's, not a
// function's.
func isKeyword(t token) bool {
	if t.kind != tokIdent {
		return false
	}
	switch t.val {
	case "in", "values", "and", "or", "not", "exists", "any", "all", "some", "as", "on", "using", "select", "from",
		"where", "returns", "table", "over", "filter", "within", "if", "elsif", "when", "then", "else", "into", "loop":
		return true
	}
	return false
}

// intTypes are the names of smallint and integer, as written.
var intTypes = []string{"integer", "int", "int4", "smallint", "int2"}

// castsAt returns the casts to integer that end at toks[end-1], and where
// the expression they cast ends.
func castsAt(toks []token, from, end int) (int, []edit) {
	var casts []edit
	for {
		k := end
		for k-2 > from && toks[k-1].isPunct("]") && toks[k-2].isPunct("[") {
			k -= 2
		}
		if k-2 <= from || !toks[k-1].isName() || !toks[k-2].isOp("::") {
			return end, casts
		}
		if slices.Contains(intTypes, toks[k-1].val) && toks[k-1].kind == tokIdent {
			casts = append(casts, edit{toks[k-1].pos, toks[k-1].end, "bigint"})
		}
		end = k - 2
	}
}

// before reads the operand that ends just before toks[i].
func (a *scan) before(t *scanText, i int) operand {
	toks := t.toks
	o := operand{to: i}
	end, casts := castsAt(toks, -1, i)
	o.casts = casts
	if end <= 0 {
		o.from = i
		if o.from >= o.to {
			o.from = max(0, i-1)
		}
		return o
	}
	start := end - 1
	switch {
	case toks[start].isPunct(")"):
		open := opening(toks, start)
		if open < 0 {
			o.from = start
			return o
		}
		start = open
		if start > 0 && toks[start-1].isName() && !isKeyword(toks[start-1]) {
			start = a.chainStart(toks, start-1)
			o.call = a.callees(toks, start, open)
		} else if start > 0 && toks[start-1].is("cast") {
			start--
			o.casts = append(o.casts, castInside(toks, open)...)
		} else {
			inner := a.after(t, open+1)
			if inner.to == closing(toks, open) {
				o.slot, o.column, o.call = inner.slot, inner.column, inner.call
				o.casts = append(o.casts, inner.casts...)
			}
		}
	case toks[start].isName() || toks[start].kind == tokParam:
		start = a.chainStart(toks, start)
		a.name(t, &o, start, end)
	}
	o.from = start
	return o
}

// after reads the operand that starts at toks[i].
func (a *scan) after(t *scanText, i int) operand {
	toks := t.toks
	o := operand{from: i, to: i}
	if i >= len(toks) {
		o.from = len(toks) - 1
		o.to = len(toks)
		return o
	}
	end := i
	switch {
	case toks[i].isPunct("("):
		c := closing(toks, i)
		if c < 0 {
			o.to = i + 1
			return o
		}
		inner := a.after(t, i+1)
		if inner.to == c {
			o.slot, o.column, o.call, o.casts = inner.slot, inner.column, inner.call, inner.casts
		}
		end = c + 1
	case toks[i].is("cast") && i+1 < len(toks) && toks[i+1].isPunct("("):
		c := closing(toks, i+1)
		if c < 0 {
			o.to = i + 1
			return o
		}
		o.casts = castInside(toks, i+1)
		end = c + 1
	case toks[i].isName() || toks[i].kind == tokParam:
		end = i + 1
		for end+1 < len(toks) && toks[end].isPunct(".") && (toks[end+1].isName() || toks[end+1].isOp("*")) {
			end += 2
		}
		if end < len(toks) && toks[end].isPunct("(") && !isKeyword(toks[end-1]) {
			c := closing(toks, end)
			if c < 0 {
				o.to = end
				return o
			}
			o.call = a.callees(toks, i, end)
			end = c + 1
		} else {
			a.name(t, &o, i, end)
		}
	default:
		end = i + 1
	}
	// Casts after it.
	for end+1 < len(toks) && toks[end].isOp("::") && toks[end+1].isName() {
		if slices.Contains(intTypes, toks[end+1].val) && toks[end+1].kind == tokIdent {
			o.casts = append(o.casts, edit{toks[end+1].pos, toks[end+1].end, "bigint"})
		}
		end += 2
		for end+1 < len(toks) && toks[end].isPunct("[") && toks[end+1].isPunct("]") {
			end += 2
		}
	}
	o.to = end
	return o
}

// castInside returns the cast to integer of CAST(x AS integer) whose
// parenthesis opens at toks[open].
func castInside(toks []token, open int) []edit {
	c := closing(toks, open)
	if c < 2 || !toks[c-2].is("as") {
		return nil
	}
	if t := toks[c-1]; t.kind == tokIdent && slices.Contains(intTypes, t.val) {
		return []edit{{t.pos, t.end, "bigint"}}
	}
	return nil
}

// chainStart returns where the chain of names a.b.c that ends at
// toks[i] starts.
func (a *scan) chainStart(toks []token, i int) int {
	for i >= 2 && toks[i-1].isPunct(".") && toks[i-2].isName() {
		i -= 2
	}
	return i
}

// name reads the chain of names toks[from:to] into o: a slot of the
// function whose body t is (by name, qualified by the function's name or
// not, or $n), or a column that holds keys (by its last name).
func (a *scan) name(t *scanText, o *operand, from, to int) {
	toks := t.toks
	last := toks[to-1]
	if t.fn != nil {
		switch {
		case to-from == 1 && last.kind == tokParam:
			var n int
			fmt.Sscanf(last.val, "$%d", &n)
			o.slot = t.fn.param(n)
		case to-from == 1, to-from == 3 && toks[from].val == t.fn.proname:
			o.slot = t.fn.slot(last.val)
		}
		if o.slot != nil {
			return
		}
	}
	if last.isName() && a.holders[last.val] {
		o.column = last.val
	}
}

// declared reads, for := at toks[i] in a DECLARE, the variable declared.
func (a *scan) declared(t *scanText, i int) operand {
	o := operand{from: i, to: i}
	if t.fn == nil {
		return o
	}
	for k := i - 1; k >= 0 && !t.toks[k].isPunct(";") && !t.toks[k].is("declare"); k-- {
		if k == 0 || t.toks[k-1].isPunct(";") || t.toks[k-1].is("declare") {
			if s := t.fn.slot(t.toks[k].val); s != nil && s.kind == slotVariable {
				o.slot, o.from = s, k
			}
		}
	}
	return o
}

// callees returns the functions that the call whose name runs from
// toks[from] to the parenthesis at toks[open] may be.
func (a *scan) callees(toks []token, from, open int) []*function {
	name := toks[open-1].val
	c := closing(toks, open)
	if c < 0 {
		return nil
	}
	nargs := 0
	if c > open+1 {
		nargs = len(splitTop(toks[open+1:c], ","))
	}
	var out []*function
	for _, f := range a.byName[name] {
		if open-from == 3 && toks[from].val != f.schema {
			continue
		}
		if in := len(f.inputs()); nargs <= in && nargs >= in-f.defaults {
			out = append(out, f)
		}
	}
	return out
}

// call reads the call whose name is toks[i]: what its arguments and the
// called function's arguments say of each other.
func (a *scan) call(t *scanText, i int) {
	toks := t.toks
	from := a.chainStart(toks, i)
	fns := a.callees(toks, from, i+1)
	if len(fns) == 0 {
		return
	}
	c := closing(toks, i+1)
	args := splitTop(toks[i+2:c], ",")
	off := i + 2
	for j, arg := range args {
		if len(arg) == 0 {
			continue
		}
		start := off
		off += len(arg) + 1
		if slices.ContainsFunc(arg, func(x token) bool { return x.isOp("=>") }) {
			continue
		}
		o := a.after(t, start)
		if o.to != start+len(arg) {
			o = operand{from: start, to: start + len(arg)}
		}
		for _, f := range fns {
			p := f.inputs()[j]
			switch {
			case a.holds(t, o):
				a.mark(p, fmt.Sprintf("passed %s in %s", strings.TrimSpace(t.text[arg[0].pos:arg[len(arg)-1].end]), t.where))
			case p.holds != "":
				a.mark(o.slot, fmt.Sprintf("passed to %s of %s", p, f.name))
				a.widenCast(t, o.casts)
				for _, g := range o.call {
					a.mark(g.result(), fmt.Sprintf("passed to %s of %s", p, f.name))
				}
			}
		}
	}
}

// statement returns the bounds of the statement toks[i] is in: between
// the semicolons around it (or the text's ends).
func statement(toks []token, i int) (int, int) {
	from, to := i, i
	for from > 0 && !toks[from-1].isPunct(";") {
		from--
	}
	for to < len(toks) && !toks[to].isPunct(";") {
		to++
	}
	return from, to
}

// selectList returns the items of the select list that ends before
// toks[end] (at INTO, FROM or the end): those of the last SELECT at the
// depth of end, or of RETURNING.
func selectList(toks []token, from, end int) [][]token {
	start := -1
	depth := 0
	for k := end - 1; k >= from; k-- {
		switch {
		case toks[k].isPunct(")"):
			depth++
		case toks[k].isPunct("("):
			depth--
		case depth == 0 && (toks[k].is("select") || toks[k].is("returning")):
			start = k + 1
		}
		if start >= 0 {
			break
		}
	}
	if start < 0 {
		return nil
	}
	if start < end && (toks[start].is("distinct") || toks[start].is("all")) {
		start++
	}
	stop := end
	depth = 0
	for k := start; k < end; k++ {
		switch {
		case toks[k].isPunct("("):
			depth++
		case toks[k].isPunct(")"):
			depth--
		case depth == 0 && (toks[k].is("from") || toks[k].is("into")):
			stop = k
		}
		if stop != end {
			break
		}
	}
	return splitTop(toks[start:stop], ",")
}

// itemHolds reports whether a select list item holds keys: it names a
// column that does (in a text that names a table that does), or a slot
// or a function's result that does.
func (a *scan) itemHolds(t *scanText, item []token) bool {
	for k, x := range item {
		switch {
		case !x.isName() && x.kind != tokParam:
		case t.gated && a.holders[x.val] && (k+1 == len(item) || !item[k+1].isPunct("(")):
			return true
		case t.fn != nil:
			if s := t.fn.slot(x.val); x.kind != tokParam && s != nil && s.holds != "" && (k == 0 || !item[k-1].isPunct(".")) {
				return true
			}
		}
		if k+1 < len(item) && item[k+1].isPunct("(") {
			for _, f := range a.byName[x.val] {
				if r := f.result(); r != nil && r.holds != "" {
					return true
				}
			}
		}
	}
	return false
}

// into reads the targets of INTO at toks[i] against the select list
// before it, place by place.
func (a *scan) into(t *scanText, i int) {
	if t.fn == nil {
		return
	}
	toks := t.toks
	from, to := statement(toks, i)
	var targets []*slot
	k := i + 1
	if k < to && toks[k].is("strict") {
		k++
	}
	for ; k < to && toks[k].isName(); k += 2 {
		targets = append(targets, t.fn.slot(toks[k].val))
		if k+1 >= to || !toks[k+1].isPunct(",") {
			break
		}
	}
	items := selectList(toks, from, i)
	if len(items) == 0 {
		// SELECT ... FROM t INTO x: the list ends at FROM.
		for f := i - 1; f >= from; f-- {
			if toks[f].is("from") {
				items = selectList(toks, from, f)
				break
			}
		}
	}
	if len(items) != len(targets) {
		return
	}
	for j, item := range items {
		if a.itemHolds(t, item) {
			a.mark(targets[j], fmt.Sprintf("selected into from %s in %s",
				strings.TrimSpace(t.text[item[0].pos:item[len(item)-1].end]), t.where))
		}
	}
}

// insert reads INSERT INTO table (columns) VALUES (...) or SELECT ...,
// place by place.
func (a *scan) insert(t *scanText, i int) {
	toks := t.toks
	_, to := statement(toks, i)
	k := i + 2
	for k < to && !toks[k].isPunct("(") && !toks[k].is("values") && !toks[k].is("select") {
		k++
	}
	if k >= to || !toks[k].isPunct("(") || !t.gated {
		return
	}
	c := closing(toks, k)
	if c < 0 {
		return
	}
	cols := splitTop(toks[k+1:c], ",")
	var values [][]token
	var starts []int
	switch {
	case c+2 < to && toks[c+1].is("values") && toks[c+2].isPunct("("):
		e := closing(toks, c+2)
		if e < 0 {
			return
		}
		values = splitTop(toks[c+3:e], ",")
		off := c + 3
		for _, v := range values {
			starts = append(starts, off)
			off += len(v) + 1
		}
	case c+1 < to && toks[c+1].is("select"):
		values = selectList(toks, c+1, to)
		for _, v := range values {
			if len(v) > 0 {
				starts = append(starts, slices.IndexFunc(toks, func(x token) bool { return x.pos == v[0].pos }))
			} else {
				starts = append(starts, -1)
			}
		}
	}
	if len(values) != len(cols) {
		return
	}
	for j, col := range cols {
		if len(col) != 1 || !a.holders[col[0].val] || len(values[j]) == 0 || starts[j] < 0 {
			continue
		}
		o := a.after(t, starts[j])
		if o.to != starts[j]+len(values[j]) {
			continue
		}
		a.mark(o.slot, fmt.Sprintf("inserted into %s in %s", col[0].val, t.where))
		a.widenCast(t, o.casts)
		for _, f := range o.call {
			a.mark(f.result(), fmt.Sprintf("inserted into %s in %s", col[0].val, t.where))
		}
	}
}

// ret reads RETURN at toks[i] of a PL/pgSQL body.
func (a *scan) ret(t *scanText, i int) {
	f, toks := t.fn, t.toks
	_, to := statement(toks, i)
	k := i + 1
	if k >= to {
		return
	}
	switch {
	case toks[k].is("query"):
		items := selectList(toks, k, to)
		a.results(t, f, items)
		return
	case toks[k].is("next"):
		k++
	}
	r := f.result()
	if r == nil || k >= to {
		return
	}
	o := a.after(t, k)
	whole := o.to == to
	switch {
	case whole && a.holds(t, o):
		a.mark(r, fmt.Sprintf("returns %s", strings.TrimSpace(t.text[toks[k].pos:toks[to-1].end])))
	case !whole && a.itemHolds(t, toks[k:to]):
		a.mark(r, fmt.Sprintf("returns %s", strings.TrimSpace(t.text[toks[k].pos:toks[to-1].end])))
	case r.holds != "" && whole:
		a.mark(o.slot, "returned as "+f.name+"'s result")
		a.widenCast(t, o.casts)
	}
}

// sqlResult reads the last statement of a SQL function's body: a SELECT
// or a RETURNING whose list gives the result.
func (a *scan) sqlResult(t *scanText) {
	toks := t.toks
	stmts := splitTop(toks, ";")
	for len(stmts) > 0 && len(stmts[len(stmts)-1]) == 0 {
		stmts = stmts[:len(stmts)-1]
	}
	if len(stmts) == 0 {
		return
	}
	last := stmts[len(stmts)-1]
	from := slices.IndexFunc(toks, func(x token) bool { return x.pos == last[0].pos })
	items := selectList(toks, from, from+len(last))
	a.results(t, t.fn, items)
}

// results reads a list of what a function returns against its result or
// its result columns (RETURNS TABLE, OUT arguments), place by place.
func (a *scan) results(t *scanText, f *function, items [][]token) {
	outs := f.outputs()
	if len(outs) != len(items) {
		return
	}
	for j, item := range items {
		if len(item) == 0 {
			continue
		}
		if a.itemHolds(t, item) {
			a.mark(outs[j], fmt.Sprintf("returns %s", strings.TrimSpace(t.text[item[0].pos:item[len(item)-1].end])))
			continue
		}
		if outs[j].holds != "" {
			start := slices.IndexFunc(t.toks, func(x token) bool { return x.pos == item[0].pos })
			o := a.after(t, start)
			if o.to == start+len(item) {
				a.mark(o.slot, "returned as "+f.name+"'s "+outs[j].String())
				a.widenCast(t, o.casts)
			}
		}
	}
}

// declarations finds the variables a PL/pgSQL body declares, with where
// each one's type is written.
func declarations(src string, toks []token) []*slot {
	var out []*slot
	for i := 0; i < len(toks); i++ {
		if !toks[i].is("declare") {
			continue
		}
		k := i + 1
		for k < len(toks) && !toks[k].is("begin") {
			e := k
			depth := 0
			for e < len(toks) && (depth > 0 || !toks[e].isPunct(";")) {
				switch {
				case toks[e].isPunct("("):
					depth++
				case toks[e].isPunct(")"):
					depth--
				}
				e++
			}
			if s := declaration(toks[k:e]); s != nil {
				out = append(out, s)
			}
			k = e + 1
		}
		i = k
	}
	return out
}

// declaration reads one declaration: name [CONSTANT] type [COLLATE ...]
// [NOT NULL] [DEFAULT | := | = ...]. Aliases and cursors are no variables
// of a type.
func declaration(d []token) *slot {
	if len(d) < 2 || !d[0].isName() {
		return nil
	}
	k := 1
	if d[k].is("constant") {
		k++
	}
	if k >= len(d) || d[k].is("alias") || d[k].is("cursor") || d[k].is("no") || d[k].is("scroll") {
		return nil
	}
	s := &slot{kind: slotVariable, name: d[0].val}
	start := k
	if k+2 < len(d) && d[k].is("pg_catalog") && d[k+1].isPunct(".") {
		k += 2
	}
	end := k
	for end < len(d) && !d[end].is("collate") && !d[end].is("not") && !d[end].is("default") &&
		!d[end].isOp(":=") && !d[end].isOp("=") {
		end++
	}
	typ := d[start:end]
	s.typ = "?"
	if len(typ) > 0 {
		s.typ = d[k].val
	}
	if k < len(d) && d[k].kind == tokIdent && slices.Contains(intTypes, d[k].val) {
		rest := d[k+1 : end]
		arr := true
		for j := 0; j < len(rest); j++ {
			if !(rest[j].isPunct("[") || rest[j].isPunct("]") || rest[j].kind == tokNumber) {
				arr = false
			}
		}
		if arr {
			s.narrow = true
			s.at = []edit{{d[start].pos, d[k].end, "bigint"}}
		}
	}
	return s
}

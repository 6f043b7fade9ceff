package adopt

import (
	"errors"
	"strings"
	"testing"
)

// lexSeeds are texts of every shape the lexer meets: PostgreSQL's own
// printing of views and policies, PL/pgSQL bodies, argument lists, and
// broken ones.
var lexSeeds = []string{
	"SELECT a.id, upper(a.name) AS name FROM public.accounts a WHERE (a.id > 0);",
	"(customer_id = (current_setting('app.customer'::text))::integer)",
	"DECLARE\n\tv_id integer := NEW.customer_id;\n\tr record;\nBEGIN\n\tSELECT id INTO v_id FROM t WHERE x = $1;\n\tRETURN NEW;\nEND",
	"p_customer_id integer, OUT p_count bigint, INOUT c text DEFAULT 'x,y'::text",
	"TABLE(rental integer, film integer, days integer)",
	`E'it''s \' here' || $tag$ a $ b $tag$ || U&"d\0061t" || B'101' || X'ff' /* a /* nested */ comment */ -- end`,
	"1..10 1.5e3 .5 ::int[] := => <> != <= >=",
	"'unterminated", `"unterminated`, "/* open", "$a$ open", "$ lone", `""`,
	"CREATE FUNCTION f() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT CASE WHEN 1 = 1 THEN 1 END; SELECT 2; END; SELECT 3",
}

// FuzzLex: the lexer never panics; on any text it either fails with
// errLex or gives tokens in order, within the text, each its own slice of
// it; and what reads tokens (statements, declarations, argument lists,
// the trigger proof, the scan, CHECK replacement) never panics on them.
func FuzzLex(f *testing.F) {
	for _, s := range lexSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		toks, err := lex(text)
		if err != nil {
			if !errors.Is(err, errLex) {
				t.Fatalf("lex(%q) = %v, not errLex", text, err)
			}
			return
		}
		at := 0
		for _, tok := range toks {
			if tok.pos < at || tok.end <= tok.pos || tok.end > len(text) {
				t.Fatalf("lex(%q): token %+v out of place (after byte %d)", text, tok, at)
			}
			if tok.kind == tokIdent && tok.val != strings.ToLower(text[tok.pos:tok.end]) {
				t.Fatalf("lex(%q): name %q read as %q", text, text[tok.pos:tok.end], tok.val)
			}
			at = tok.end
		}
		_, _ = splitStatements(text)
		for _, s := range declarations(text, toks) {
			for _, e := range s.at {
				if e.pos < 0 || e.end > len(text) || e.pos > e.end {
					t.Fatalf("declarations(%q): edit %+v out of the text", text, e)
				}
			}
		}
		f := &function{name: "public.f", proname: "f", kind: "f", lang: "plpgsql",
			slots: []*slot{{kind: slotParam, name: "p_id", index: 1, mode: "i", typ: "integer", narrow: true},
				{kind: slotResult, typ: "integer", narrow: true}}}
		f.slots = append(f.slots, declarations(text, toks)...)
		f.body = &scanText{where: f.name, text: text, toks: toks, fn: f, gated: true}
		view := &scanText{key: "view:1", where: "view", text: text, toks: toks, gated: true}
		a := &scan{holders: map[string]bool{"id": true, "customer_id": true}, funcs: []*function{f},
			byName: map[string][]*function{"f": {f}}, texts: []*scanText{f.body, view}}
		a.run()
		_ = applyEdits(text, f.body.edits)
		_ = applyEdits(text, view.edits)
		_, _ = rewriteArgs(text, f, true)
		_, _ = rewriteResult(text, f)
		b := &planner{}
		_ = b.leavesKey("plpgsql", text, "", "", "id")
	})
}

// TestLexTokens: the lexer reads names, quoted names, strings of every
// spelling, numbers, parameters and operators as PostgreSQL does.
func TestLexTokens(t *testing.T) {
	toks, err := lex(`SELECT "Mixed""Q", x::INT4, $1, E'a\'b', $f$;$f$, 1.5e3 -- c
		/* c /* c */ */ FROM t WHERE a <> b AND c := d`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tk := range toks {
		got = append(got, tk.val)
	}
	want := []string{"select", `Mixed"Q`, ",", "x", "::", "int4", ",", "$1", ",", "", ",", "", ",", "", "from", "t", "where", "a", "<>", "b",
		"and", "c", ":=", "d"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("tokens %q; want %q", got, want)
	}
	for _, bad := range []string{"'open", `"open`, "/* open", "$$ open", "$ x", `""`} {
		if _, err := lex(bad); !errors.Is(err, errLex) {
			t.Errorf("lex(%q) = %v; want errLex", bad, err)
		}
	}
}

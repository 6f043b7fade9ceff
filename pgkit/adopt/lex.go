package adopt

import (
	"errors"
	"fmt"
	"strings"
)

// errLex means a text that adopt reads as SQL or PL/pgSQL (a function's
// body, a view's definition, an argument list) does not lex: an
// unterminated string, quoted name or comment. The plan refuses what it
// cannot read rather than guess.
var errLex = errors.New("adopt: cannot read SQL")

// tokKind is the kind of a token.
type tokKind int

const (
	tokIdent  tokKind = iota // a name or a keyword, unquoted; val is folded to lower case
	tokQuoted                // a "quoted name"; val is the name
	tokString                // a string constant of any spelling ('', E'', $$ $$, B'', X'', U&'')
	tokNumber                // a numeric constant
	tokParam                 // a positional parameter, $1
	tokOp                    // an operator: a run of + - * / < > = ~ ! @ # % ^ & | ` ?, or :=, ::, =>
	tokPunct                 // one of ( ) [ ] , ; . :
)

// token is one token of a text, with its place in it.
type token struct {
	kind     tokKind
	val      string // the name (folded, or unquoted), the operator or punctuation; "" for constants
	pos, end int    // the token is text[pos:end]
}

// is reports whether t is the unquoted keyword or name word (lower case).
func (t token) is(word string) bool { return t.kind == tokIdent && t.val == word }

// isName reports whether t names something: a name, quoted or not.
func (t token) isName() bool { return t.kind == tokIdent || t.kind == tokQuoted }

// isPunct reports whether t is the punctuation p.
func (t token) isPunct(p string) bool { return t.kind == tokPunct && t.val == p }

// isOp reports whether t is the operator op.
func (t token) isOp(op string) bool { return t.kind == tokOp && t.val == op }

const opChars = "+-*/<>=~!@#%^&|`?"

// lex splits text into PostgreSQL's tokens, leaving out white space and
// comments. It never panics; a text that does not lex is an error
// wrapping errLex that says where.
func lex(text string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(text) {
		c := text[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '-' && strings.HasPrefix(text[i:], "--"):
			j := strings.IndexByte(text[i:], '\n')
			if j < 0 {
				return toks, nil
			}
			i += j + 1
		case c == '/' && strings.HasPrefix(text[i:], "/*"):
			end, err := skipComment(text, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '\'':
			end, err := skipString(text, i, false)
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{kind: tokString, pos: i, end: end})
			i = end
		case (c == 'e' || c == 'E') && i+1 < len(text) && text[i+1] == '\'':
			end, err := skipString(text, i+1, true)
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{kind: tokString, pos: i, end: end})
			i = end
		case (c == 'b' || c == 'B' || c == 'x' || c == 'X' || c == 'n' || c == 'N') && i+1 < len(text) && text[i+1] == '\'':
			end, err := skipString(text, i+1, false)
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{kind: tokString, pos: i, end: end})
			i = end
		case (c == 'u' || c == 'U') && strings.HasPrefix(text[i+1:], "&'"):
			end, err := skipString(text, i+2, false)
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{kind: tokString, pos: i, end: end})
			i = end
		case (c == 'u' || c == 'U') && strings.HasPrefix(text[i+1:], "&\""):
			end, val, err := quotedName(text, i+2)
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{kind: tokQuoted, val: val, pos: i, end: end})
			i = end
		case c == '"':
			end, val, err := quotedName(text, i)
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{kind: tokQuoted, val: val, pos: i, end: end})
			i = end
		case c == '$':
			j := i + 1
			for j < len(text) && isDigit(text[j]) {
				j++
			}
			if j > i+1 {
				toks = append(toks, token{kind: tokParam, val: text[i:j], pos: i, end: j})
				i = j
				continue
			}
			for j < len(text) && isIdentChar(text[j]) && text[j] != '$' {
				j++
			}
			if j >= len(text) || text[j] != '$' {
				return nil, fmt.Errorf("%w: a lone $ at byte %d", errLex, i)
			}
			delim := text[i : j+1]
			k := strings.Index(text[j+1:], delim)
			if k < 0 {
				return nil, fmt.Errorf("%w: the string opened by %s at byte %d does not end", errLex, delim, i)
			}
			end := j + 1 + k + len(delim)
			toks = append(toks, token{kind: tokString, pos: i, end: end})
			i = end
		case isIdentStart(c):
			j := i + 1
			for j < len(text) && isIdentChar(text[j]) {
				j++
			}
			toks = append(toks, token{kind: tokIdent, val: strings.ToLower(text[i:j]), pos: i, end: j})
			i = j
		case isDigit(c) || c == '.' && i+1 < len(text) && isDigit(text[i+1]):
			j := i
			for j < len(text) && (isDigit(text[j]) || text[j] == '_') {
				j++
			}
			if j+1 < len(text) && text[j] == '.' && isDigit(text[j+1]) {
				j += 2
				for j < len(text) && isDigit(text[j]) {
					j++
				}
			}
			if j < len(text) && (text[j] == 'e' || text[j] == 'E') {
				k := j + 1
				if k < len(text) && (text[k] == '+' || text[k] == '-') {
					k++
				}
				if k < len(text) && isDigit(text[k]) {
					for k < len(text) && isDigit(text[k]) {
						k++
					}
					j = k
				}
			}
			toks = append(toks, token{kind: tokNumber, pos: i, end: j})
			i = j
		case c == ':' && strings.HasPrefix(text[i:], ":="), c == ':' && strings.HasPrefix(text[i:], "::"):
			toks = append(toks, token{kind: tokOp, val: text[i : i+2], pos: i, end: i + 2})
			i += 2
		case strings.IndexByte("()[],;.:", c) >= 0:
			toks = append(toks, token{kind: tokPunct, val: text[i : i+1], pos: i, end: i + 1})
			i++
		case strings.IndexByte(opChars, c) >= 0:
			j := i + 1
			for j < len(text) && strings.IndexByte(opChars, text[j]) >= 0 &&
				!strings.HasPrefix(text[j:], "--") && !strings.HasPrefix(text[j:], "/*") {
				j++
			}
			toks = append(toks, token{kind: tokOp, val: text[i:j], pos: i, end: j})
			i = j
		default:
			return nil, fmt.Errorf("%w: unexpected byte %q at %d", errLex, c, i)
		}
	}
	return toks, nil
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) || c == '$' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// skipComment returns the end of the /* comment */ at i, which may nest.
func skipComment(text string, i int) (int, error) {
	depth := 0
	for j := i; j+1 < len(text); {
		switch {
		case text[j] == '/' && text[j+1] == '*':
			depth++
			j += 2
		case text[j] == '*' && text[j+1] == '/':
			depth--
			j += 2
			if depth == 0 {
				return j, nil
			}
		default:
			j++
		}
	}
	return 0, fmt.Errorf("%w: the comment at byte %d does not end", errLex, i)
}

// skipString returns the end of the string constant whose opening quote
// is at i; backslash escapes count in an E-string (E'...').
func skipString(text string, i int, backslash bool) (int, error) {
	for j := i + 1; j < len(text); j++ {
		switch text[j] {
		case '\\':
			if backslash {
				j++
			}
		case '\'':
			if j+1 < len(text) && text[j+1] == '\'' {
				j++
				continue
			}
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("%w: the string at byte %d does not end", errLex, i)
}

// quotedName returns the end and the name of the "quoted name" whose
// opening quote is at i.
func quotedName(text string, i int) (int, string, error) {
	var b strings.Builder
	for j := i + 1; j < len(text); j++ {
		if text[j] == '"' {
			if j+1 < len(text) && text[j+1] == '"' {
				b.WriteByte('"')
				j++
				continue
			}
			if b.Len() == 0 {
				return 0, "", fmt.Errorf("%w: an empty quoted name at byte %d", errLex, i)
			}
			return j + 1, b.String(), nil
		}
		b.WriteByte(text[j])
	}
	return 0, "", fmt.Errorf("%w: the quoted name at byte %d does not end", errLex, i)
}

// splitTop splits toks at the punctuation sep outside parentheses and
// brackets: the arguments of a list, the statements of a script.
func splitTop(toks []token, sep string) [][]token {
	var out [][]token
	depth, start := 0, 0
	for i, t := range toks {
		switch {
		case t.isPunct("(") || t.isPunct("["):
			depth++
		case t.isPunct(")") || t.isPunct("]"):
			depth--
		case depth == 0 && t.isPunct(sep):
			out = append(out, toks[start:i])
			start = i + 1
		}
	}
	return append(out, toks[start:])
}

// closing returns the index of the parenthesis or bracket that closes the
// one at toks[i], or -1.
func closing(toks []token, i int) int {
	depth := 0
	for j := i; j < len(toks); j++ {
		switch {
		case toks[j].isPunct("(") || toks[j].isPunct("["):
			depth++
		case toks[j].isPunct(")") || toks[j].isPunct("]"):
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// opening returns the index of the parenthesis or bracket that opens the
// one that closes at toks[i], or -1.
func opening(toks []token, i int) int {
	depth := 0
	for j := i; j >= 0; j-- {
		switch {
		case toks[j].isPunct(")") || toks[j].isPunct("]"):
			depth++
		case toks[j].isPunct("(") || toks[j].isPunct("["):
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// edit is a change to a text: text[pos:end] becomes with.
type edit struct {
	pos, end int
	with     string
}

// applyEdits returns text with edits made; edits that overlap one made
// already are left out.
func applyEdits(text string, edits []edit) string {
	if len(edits) == 0 {
		return text
	}
	sorted := append([]edit(nil), edits...)
	for i := 1; i < len(sorted); i++ {
		for j := i; j > 0 && sorted[j].pos < sorted[j-1].pos; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	var b strings.Builder
	at := 0
	for _, e := range sorted {
		if e.pos < at || e.end > len(text) || e.end < e.pos {
			continue
		}
		b.WriteString(text[at:e.pos])
		b.WriteString(e.with)
		at = e.end
	}
	b.WriteString(text[at:])
	return b.String()
}

// splitStatements splits a script into its statements, without the
// semicolons, leaving out empty ones. A BEGIN ATOMIC body (up to its END)
// is one statement with the CREATE it ends.
func splitStatements(script string) ([]string, error) {
	toks, err := lex(script)
	if err != nil {
		return nil, err
	}
	var out []string
	depth, atomic, start := 0, 0, 0
	for i, t := range toks {
		switch {
		case t.isPunct("(") || t.isPunct("["):
			depth++
		case t.isPunct(")") || t.isPunct("]"):
			depth--
		case t.is("atomic") && i > 0 && toks[i-1].is("begin"):
			atomic = 1
		case atomic > 0 && t.is("case"):
			atomic++
		case atomic > 0 && t.is("end"):
			atomic--
		case depth == 0 && atomic == 0 && t.isPunct(";"):
			if i > start {
				out = append(out, script[toks[start].pos:toks[i-1].end])
			}
			start = i + 1
		}
	}
	if start < len(toks) {
		out = append(out, script[toks[start].pos:toks[len(toks)-1].end])
	}
	return out, nil
}

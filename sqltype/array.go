package sqltype

import (
	"database/sql/driver"
	"fmt"
	"strconv"

	"github.com/snowkeyhq/snowkey/idtype"
)

// This file is the text form of a PostgreSQL bigint[]: what database/sql
// drivers hand to Scan and take from Value. The binary form, which pgx
// hands to Scan, is read in binary.go; pgx writes IDs through pgx.go.
//
// PostgreSQL writes a bigint[] as {1,2,3}, the empty array as {}, a NULL
// element as NULL, and prefixes [lower:upper]= when the lower bound is not
// 1. On input it also allows spaces around elements and elements in double
// quotes; all of these are read here.

// Scan reads a bigint[] column (sql.Scanner) from its text form, as
// string or []byte, or from PostgreSQL's binary form (what pgx passes), and
// SQL NULL as a nil IDs. An element that is NULL, negative, out of range or
// not a number, an array of more than one dimension, and a binary array of
// floats or numerics, are errors (*idtype.Error) that name the input and
// the element. The array is read into a new IDs that is stored in ids only
// when every element was read: on error ids is unchanged, on every path.
func (ids *IDs) Scan(src any) error {
	var (
		out IDs
		err error
	)
	switch v := src.(type) {
	case nil:
		*ids = nil
		return nil
	case string:
		out, err = parseArray(v)
	case []byte:
		if isBinaryArray(v) {
			out, err = parseBinaryArray(v)
		} else {
			out, err = parseArray(v)
		}
	default:
		return &idtype.Error{Op: "scan sqltype.IDs", Input: describeInput(src), Err: idtype.ErrUnsupportedType}
	}
	if err != nil {
		return err
	}
	*ids = out
	return nil
}

// Value writes the IDs as the text of a bigint[], {1,2,3}, and a nil IDs
// as NULL (driver.Valuer). pgx does not call it: it writes the binary
// array itself (see IndexType). A negative element is refused with
// idtype.ErrNegative.
func (ids IDs) Value() (driver.Value, error) {
	if ids == nil {
		return nil, nil
	}
	b := make([]byte, 0, 2+len(ids)*20)
	b = append(b, '{')
	for i, id := range ids {
		if id < 0 {
			return nil, &idtype.Error{Op: "write sqltype.IDs", Input: fmt.Sprintf("element %d ID(%d)", i, int64(id)),
				Err: idtype.ErrNegative}
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	return string(append(b, '}')), nil
}

// parseArray reads the text form of a one-dimensional bigint[].
func parseArray[T string | []byte](src T) (IDs, error) {
	p := arrayParser[T]{src: src}
	return p.parse()
}

type arrayParser[T string | []byte] struct {
	src T
	pos int
}

func (p *arrayParser[T]) fail(kind error, format string, args ...any) error {
	detail := fmt.Sprintf(format, args...)
	return &idtype.Error{Op: "scan sqltype.IDs", Input: describeInput(p.src),
		Err: fmt.Errorf("%w: %s", kind, detail)}
}

func (p *arrayParser[T]) skipSpace() {
	for p.pos < len(p.src) && isArraySpace(p.src[p.pos]) {
		p.pos++
	}
}

// isArraySpace reports the bytes PostgreSQL's array_in skips as space.
func isArraySpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func (p *arrayParser[T]) parse() (IDs, error) {
	p.skipSpace()
	want := -1 // element count from a [lower:upper]= prefix
	if p.pos < len(p.src) && p.src[p.pos] == '[' {
		n, err := p.bounds()
		if err != nil {
			return nil, err
		}
		want = n
	}
	if p.pos >= len(p.src) || p.src[p.pos] != '{' {
		return nil, p.fail(ErrArraySyntax, "want '{' at offset %d", p.pos)
	}
	p.pos++
	p.skipSpace()

	// Commas bound the element count from above; one pass to count saves
	// the appends' copies on long arrays.
	n := 1
	for i := p.pos; i < len(p.src); i++ {
		if p.src[i] == ',' {
			n++
		}
	}
	out := make(IDs, 0, n)
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
	} else {
		for {
			id, err := p.element(len(out))
			if err != nil {
				return nil, err
			}
			out = append(out, id)
			p.skipSpace()
			if p.pos >= len(p.src) {
				return nil, p.fail(ErrArraySyntax, "missing '}' at the end")
			}
			c := p.src[p.pos]
			p.pos++
			if c == '}' {
				break
			}
			if c != ',' {
				return nil, p.fail(ErrArraySyntax, "byte %q at offset %d after element %d", c, p.pos-1, len(out)-1)
			}
		}
	}
	p.skipSpace()
	if p.pos != len(p.src) {
		return nil, p.fail(ErrArraySyntax, "byte %q at offset %d after the closing '}'", p.src[p.pos], p.pos)
	}
	if want >= 0 && want != len(out) {
		return nil, p.fail(ErrArraySyntax, "bounds say %d elements, the array has %d", want, len(out))
	}
	return out, nil
}

// bounds reads a "[lower:upper]=" prefix and returns the element count it
// announces.
func (p *arrayParser[T]) bounds() (int, error) {
	p.pos++ // '['
	lower, ok1 := p.integer()
	colon := p.pos < len(p.src) && p.src[p.pos] == ':'
	p.pos++
	upper, ok2 := p.integer()
	if !ok1 || !colon || !ok2 || p.pos+1 >= len(p.src) || p.src[p.pos] != ']' || p.src[p.pos+1] != '=' {
		if ok1 && colon && ok2 && p.pos+1 < len(p.src) && p.src[p.pos] == ']' && p.src[p.pos+1] == '[' {
			return 0, p.fail(ErrDimensions, "bounds of a second dimension at offset %d", p.pos+1)
		}
		return 0, p.fail(ErrArraySyntax, "bad dimension bounds; want [lower:upper]=")
	}
	p.pos += 2
	if upper < lower-1 || upper-lower >= 1<<31 {
		return 0, p.fail(ErrArraySyntax, "bounds [%d:%d] give no element count", lower, upper)
	}
	return int(upper - lower + 1), nil
}

// integer reads an optionally negative decimal of at most 10 digits, the
// range of PostgreSQL's array bounds.
func (p *arrayParser[T]) integer() (int64, bool) {
	neg := p.pos < len(p.src) && p.src[p.pos] == '-'
	if neg {
		p.pos++
	}
	start := p.pos
	var v int64
	for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' && p.pos-start < 10 {
		v = v*10 + int64(p.src[p.pos]-'0')
		p.pos++
	}
	if p.pos == start {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// element reads element i at p.pos, quoted or not, and parses it with
// idtype's own decimal parser.
func (p *arrayParser[T]) element(i int) (idtype.ID, error) {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return 0, p.fail(ErrArraySyntax, "missing element %d and '}'", i)
	}
	var text []byte
	switch c := p.src[p.pos]; {
	case c == '{':
		return 0, p.fail(ErrDimensions, "nested array at offset %d", p.pos)
	case c == '"':
		p.pos++
		for {
			if p.pos >= len(p.src) {
				return 0, p.fail(ErrArraySyntax, "unterminated quoted element %d", i)
			}
			c := p.src[p.pos]
			p.pos++
			if c == '"' {
				break
			}
			if c == '\\' {
				if p.pos >= len(p.src) {
					return 0, p.fail(ErrArraySyntax, "unterminated quoted element %d", i)
				}
				c = p.src[p.pos]
				p.pos++
			}
			text = append(text, c)
		}
	case c == ',' || c == '}':
		return 0, p.fail(ErrArraySyntax, "empty element %d at offset %d", i, p.pos)
	default:
		start := p.pos
		for p.pos < len(p.src) {
			c := p.src[p.pos]
			if c == ',' || c == '}' || c == '"' || c == '{' || c == '\\' || isArraySpace(c) {
				break
			}
			p.pos++
		}
		raw := p.src[start:p.pos]
		if len(raw) == 4 && (raw[0]|0x20) == 'n' && (raw[1]|0x20) == 'u' && (raw[2]|0x20) == 'l' && (raw[3]|0x20) == 'l' {
			return 0, &idtype.Error{Op: "scan sqltype.IDs", Input: describeInput(p.src),
				Err: fmt.Errorf("element %d: %w", i, idtype.ErrNull)}
		}
		var id idtype.ID
		if err := unmarshalElement(&id, raw); err != nil {
			return 0, &idtype.Error{Op: "scan sqltype.IDs", Input: describeInput(p.src),
				Err: fmt.Errorf("element %d %s: %w", i, describeInput(raw), kindOf(err))}
		}
		return id, nil
	}
	var id idtype.ID
	if err := id.UnmarshalText(text); err != nil {
		return 0, &idtype.Error{Op: "scan sqltype.IDs", Input: describeInput(p.src),
			Err: fmt.Errorf("element %d %s: %w", i, describeInput(text), kindOf(err))}
	}
	return id, nil
}

// unmarshalElement parses an unquoted element without copying it when the
// source is already a []byte.
func unmarshalElement[T string | []byte](id *idtype.ID, raw T) error {
	switch v := any(raw).(type) {
	case []byte:
		return id.UnmarshalText(v)
	case string:
		// Scan is idtype's parser for strings, without a conversion to
		// []byte.
		return id.Scan(v)
	}
	return nil
}

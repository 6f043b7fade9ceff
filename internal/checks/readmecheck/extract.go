package readmecheck

import (
	"fmt"
	"regexp"
	"strings"
)

// Kind is how a Go block is checked.
type Kind int

const (
	// File is a block without a marker: a complete Go file, package
	// clause and imports included. It must be gofmt-formatted, and is
	// built and vetted as written.
	File Kind = iota
	// program is a block marked <!-- snippet: run -->: a complete file of
	// package main that is built, vetted and run, and must exit 0.
	Program
	// Fragment is a block marked <!-- snippet: fragment --> or
	// <!-- snippet: fragment(NAME TYPE, ...) -->: statements, which are
	// wrapped in a function, or declarations, which stand at the top of
	// a file. The variables in parentheses are declared for it, and the
	// packages it names are imported (see Source). A block marked
	// <!-- snippet: continue --> is not a Block of its own but a Part of
	// the fragment before it, so that a README can explain a program
	// between its pieces and a later piece can use what an earlier one
	// declared.
	Fragment
)

func (k Kind) String() string {
	switch k {
	case File:
		return "file"
	case Program:
		return "program"
	case Fragment:
		return "fragment"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// A Block is one ```go block of a Markdown file, with the blocks that
// continue it.
type Block struct {
	// Line is the line of the Markdown file (from 1) that holds the
	// block's first line of code; Source maps compiler positions to it.
	Line int
	// Code is the block's text, without the fences, ending in a newline
	// unless empty.
	Code string
	Kind Kind
	// Given is, for a Fragment, the Go parameter list in its marker's
	// parentheses, such as "ctx context.Context, db *gorm.DB"; empty if
	// none.
	Given string
	// MarkerLine is the line of the block's marker; zero without one.
	MarkerLine int
	// More are the blocks marked <!-- snippet: continue --> that follow a
	// Fragment, in order: its code goes on with theirs.
	More []Part
}

// A Part is a block that continues a Fragment.
type Part struct {
	Line int // as Block.Line
	Code string
}

var (
	markerRe = regexp.MustCompile(`^\s*<!--\s*snippet:\s*(.*?)\s*-->\s*$`)
	fenceRe  = regexp.MustCompile("^( {0,3})(`{3,}|~{3,})\\s*([^\\s`]*)")
	// directiveRe reads a marker's directive: fragment, fragment(...),
	// continue, run.
	directiveRe = regexp.MustCompile(`^(fragment|continue|run)\s*(?:\((.*)\))?$`)
)

// extract returns the ```go blocks of a Markdown document, in order, with
// the marker each carries: an HTML comment on the last non-blank line
// before the opening fence, invisible when the Markdown is rendered:
//
//	<!-- snippet: fragment -->
//	<!-- snippet: fragment(ctx context.Context, r *http.Request) -->
//	<!-- snippet: continue -->
//	<!-- snippet: run -->
//
// It fails, naming the line, on a marker it does not know, a marker that
// no ```go block follows, a run or continue marker with a parameter list,
// a continue marker with no fragment before it, and a go block without a
// closing fence. Blocks in other languages, and lines
// inside them, are skipped.
func Extract(md string) ([]Block, error) {
	lines := strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n")
	var blocks []Block
	var pending *Block // the marker waiting for its block
	cont := false      // whether pending continues the last fragment
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" {
			continue
		}
		if m := markerRe.FindStringSubmatch(line); m != nil {
			if pending != nil {
				return nil, fmt.Errorf("line %d: snippet marker not followed by a ```go block (another marker at line %d)", pending.MarkerLine, i+1)
			}
			d := directiveRe.FindStringSubmatch(m[1])
			switch {
			case d == nil:
				return nil, fmt.Errorf("line %d: unknown snippet marker %q: want fragment, fragment(NAME TYPE, ...), continue or run", i+1, m[1])
			case d[1] != "fragment" && strings.Contains(m[1], "("):
				return nil, fmt.Errorf("line %d: snippet marker %q: %s takes no parameters", i+1, m[1], d[1])
			case d[1] == "continue" && (len(blocks) == 0 || blocks[len(blocks)-1].Kind != Fragment):
				return nil, fmt.Errorf("line %d: snippet marker continue: no fragment before it to continue", i+1)
			case d[1] == "continue":
				pending, cont = &Block{Kind: Fragment, MarkerLine: i + 1}, true
			case d[1] == "run":
				pending = &Block{Kind: Program, MarkerLine: i + 1}
			default:
				pending = &Block{Kind: Fragment, Given: strings.TrimSpace(d[2]), MarkerLine: i + 1}
			}
			continue
		}
		f := fenceRe.FindStringSubmatch(line)
		if f == nil {
			if pending != nil {
				return nil, fmt.Errorf("line %d: snippet marker not followed by a ```go block", pending.MarkerLine)
			}
			continue
		}
		indent, fence, info := len(f[1]), f[2], strings.ToLower(f[3])
		end := closingFence(lines, i+1, fence)
		isGo := info == "go" || info == "golang"
		if !isGo {
			if pending != nil {
				return nil, fmt.Errorf("line %d: snippet marker followed by a %q block, not go", pending.MarkerLine, info)
			}
			i = end // CommonMark: an unclosed block runs to the end
			continue
		}
		if end == len(lines) {
			return nil, fmt.Errorf("line %d: ```go block without a closing fence", i+1)
		}
		b := Block{Kind: File, Line: i + 2}
		if pending != nil {
			b.Kind, b.Given, b.MarkerLine = pending.Kind, pending.Given, pending.MarkerLine
			pending = nil
		}
		var code strings.Builder
		for _, l := range lines[i+1 : end] {
			// Content lines lose up to the opening fence's indentation.
			for n := 0; n < indent && strings.HasPrefix(l, " "); n++ {
				l = l[1:]
			}
			code.WriteString(l)
			code.WriteByte('\n')
		}
		b.Code = code.String()
		if cont {
			prev := &blocks[len(blocks)-1]
			prev.More = append(prev.More, Part{Line: b.Line, Code: b.Code})
			cont = false
		} else {
			blocks = append(blocks, b)
		}
		i = end
	}
	if pending != nil {
		return nil, fmt.Errorf("line %d: snippet marker not followed by a ```go block", pending.MarkerLine)
	}
	return blocks, nil
}

// closingFence returns the index of the line that closes a block opened
// by fence, searching from line from, or len(lines) if none does.
func closingFence(lines []string, from int, fence string) int {
	for j := from; j < len(lines); j++ {
		t := strings.TrimLeft(lines[j], " ")
		if len(lines[j])-len(t) > 3 {
			continue
		}
		t = strings.TrimRight(t, " \t")
		if len(t) >= len(fence) && strings.Trim(t, fence[:1]) == "" {
			return j
		}
	}
	return len(lines)
}

package idtype

import "fmt"

// maxInput bounds how much of a bad input an Error's Input repeats, so a
// megabyte of junk does not become a megabyte of log line.
const maxInput = 64

// quoteInput renders bad text input for an Error's Input: quoted, cut to
// maxInput bytes with its length when cut.
func quoteInput(s string) string {
	if len(s) > maxInput {
		return fmt.Sprintf("%q... (%d bytes)", s[:maxInput], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// typedInput renders a bad non-text value for an Error's Input: its Go
// type and value, as in "float64(1.5)", cut to maxInput bytes.
func typedInput(v any) string {
	s := fmt.Sprintf("%T(%v)", v, v)
	if len(s) > maxInput {
		s = s[:maxInput] + "..."
	}
	return s
}

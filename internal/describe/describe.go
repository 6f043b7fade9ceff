// Package describe renders bad input for snowkey's error messages, so that
// every package that reads IDs (idtype, and sqltype's arrays) names its
// input alike in an idtype.Error's Input.
package describe

import "fmt"

// MaxLen bounds how much of a bad input an error message repeats, so a
// megabyte of junk does not become a megabyte of log line.
const MaxLen = 64

// Input renders bad input: text (a string or []byte) as Text does; any
// other value as Value does.
func Input(v any) string {
	switch v := v.(type) {
	case string:
		return Text(v)
	case []byte:
		return Text(string(v))
	}
	return Value(v)
}

// Text quotes s, cut to MaxLen bytes with its length when cut.
func Text(s string) string {
	if len(s) > MaxLen {
		return fmt.Sprintf("%q... (%d bytes)", s[:MaxLen], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// Value names v's Go type and value, as in "float64(1.5)", cut to MaxLen
// bytes.
func Value(v any) string {
	s := fmt.Sprintf("%T(%v)", v, v)
	if len(s) > MaxLen {
		s = s[:MaxLen] + "..."
	}
	return s
}

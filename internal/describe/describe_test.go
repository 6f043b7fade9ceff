package describe

import (
	"strings"
	"testing"
)

func TestInput(t *testing.T) {
	long := strings.Repeat("7", 100)
	for _, tc := range []struct {
		in   any
		want string
	}{
		{"12x", `"12x"`},
		{[]byte("12x"), `"12x"`},
		{long, `"` + long[:64] + `"... (100 bytes)`},
		{[]byte(long), `"` + long[:64] + `"... (100 bytes)`},
		{1.5, "float64(1.5)"},
		{int64(-1), "int64(-1)"},
		{[]int64{1, 2}, "[]int64([1 2])"},
		{[]string{long}, "[]string([" + long[:64-len("[]string([")] + "..."},
	} {
		if got := Input(tc.in); got != tc.want {
			t.Errorf("Input(%#v) = %s; want %s", tc.in, got, tc.want)
		}
	}
}

package idtype

import (
	"strings"
	"testing"
)

func TestInputRendering(t *testing.T) {
	long := strings.Repeat("7", 100)
	for _, tc := range []struct {
		got, want string
	}{
		{quoteInput("12x"), `"12x"`},
		{quoteInput(long), `"` + long[:64] + `"... (100 bytes)`},
		{typedInput(1.5), "float64(1.5)"},
		{typedInput(int64(-1)), "int64(-1)"},
		{typedInput([]int64{1, 2}), "[]int64([1 2])"},
		{typedInput([]string{long}), "[]string([" + long[:64-len("[]string([")] + "..."},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s; want %s", tc.got, tc.want)
		}
	}
}

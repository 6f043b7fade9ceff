package main

import (
	"strings"
	"testing"
)

func TestPasswordPolicy(t *testing.T) {
	const email, name = "dora.maar@example.com", "Dora Maar"
	for _, tc := range []struct {
		password string
		refused  string // in the message; "" if accepted
	}{
		{"12345678", "too easy to guess"},
		{"password1", "too easy to guess"},
		{"qwertyuiop", "too easy to guess"},
		{"iloveyou123", "too easy to guess"},
		{"correct horse", "too easy to guess"},
		{"snowkey-example", "too easy to guess"},
		{"Tr0ub4dor", "too easy to guess"},
		{email, "must not contain your email"},
		{"DORA.MAAR@EXAMPLE.COM", "must not contain your email"},
		{"dora.maar2024", "must not contain your email"},
		{"xx dora maar xx", "must not contain your email address or name"},
		{"maar.dora@example", "too easy to guess"}, // the pieces, rearranged
		{"examplemaar1", "too easy to guess"},
		{strings.Repeat("a", 1000), "too easy to guess"},
		{strings.Repeat("ab", 500), "too easy to guess"},
		{goodPassword, ""},
		{otherPassword, ""},
		{"correct horse battery staple", ""},
		{"kV9#mQ2!xZ", ""},
		// Scored by its first 64 characters, which are strong.
		{strings.Repeat("plum-kite-orbit-93 ", 4) + strings.Repeat("a", 900), ""},
	} {
		e := checkPasswordPolicy(tc.password, email, name)
		switch {
		case tc.refused == "" && e != nil:
			t.Errorf("%.40q refused: %s", tc.password, e.msg)
		case tc.refused != "" && e == nil:
			t.Errorf("%.40q accepted", tc.password)
		case e != nil && !strings.Contains(e.msg, tc.refused):
			t.Errorf("%.40q: %q does not say %q", tc.password, e.msg, tc.refused)
		case e != nil && e.status != 400:
			t.Errorf("%.40q: status %d", tc.password, e.status)
		}
	}
}

package main

import (
	"strings"
	"testing"

	"github.com/ccojocar/zxcvbn-go"
)

func TestPasswordPolicy(t *testing.T) {
	t.Parallel()
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
		// Judged by its first 32 characters, which are strong.
		{strings.Repeat("plum-kite-orbit-93 ", 4) + strings.Repeat("a", 900), ""},
		{"kettle-ribbon-oyster-gl" + strings.Repeat("1", 1000), ""},
		// l33t, read by the policy itself.
		{"p@ssw0rd", "too easy to guess"},
		{"m0nk3yb4n4n4", "too easy to guess"},
		{"dr4g0n-p4$$", "too easy to guess"},
		{"l1ghth0us3", "too easy to guess"},
		{"$up3rm4n", "too easy to guess"},
		{"7ru5tn0one", "too easy to guess"},
		{"l33t-but-r4nd0m-q9!zK", ""},
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

// leetPasswords are guessable once read as l33t, and strong to zxcvbn
// without its l33t matcher.
var leetPasswords = []string{"p@ssw0rd", "P@$$w0rd1", "m0nk3yb4n4n4", "dr4g0n-p4$$", "5unsh1n3", "b4s3b4ll!", "f00tb4ll",
	"pr1nc3ss", "4ss4ss1n", "$up3rm4n", "w4t3rm3l0n", "c0mput3r12", "l0ng-p@$$w0rd", "dr@g0nfly", "bl4ckh0l3", "3l3ph4nt"}

// TestPasswordPolicyLeet reads l33t as the port's own l33t matcher did,
// which the policy leaves out for its cost: every password above is
// refused. The control judges them as strength does, but without the
// l33t readings, and accepts every one, so each needed the readings.
func TestPasswordPolicyLeet(t *testing.T) {
	t.Parallel()
	inputs := []string{"dora.maar@example.com", "dora.maar", "example.com", "Dora Maar", "snowkey", "example"}
	for _, pw := range leetPasswords {
		if r := strength(pw, inputs); r.Score >= minPasswordScore {
			t.Errorf("%q scores %d with its l33t readings", pw, r.Score)
		}
		judged, _ := policyInputs(pw)
		if r := zxcvbn.PasswordStrength(string(judged), inputs, noLeetMatcher); r.Score < minPasswordScore {
			t.Errorf("control: %q scores %d without l33t readings, so it proves nothing about them", pw, r.Score)
		}
	}
}

// TestPasswordPolicyBound checks the bound on what the strength check
// judges, for the inputs that cost most (see BenchmarkPasswordPolicy): at
// most policyRunes characters, and at most 8 l33t readings, however long
// the password and however many l33t characters it holds.
func TestPasswordPolicyBound(t *testing.T) {
	t.Parallel()
	for name, pw := range policyWorstInputs() {
		judged, readings := policyInputs(strings.Repeat(pw, 40))
		if len(judged) > policyRunes || len(readings) > 8 {
			t.Errorf("%s: %d characters judged, %d readings", name, len(judged), len(readings))
		}
		for _, r := range readings {
			if len(r) != len(judged) {
				t.Errorf("%s: a reading of %d characters for %d judged", name, len(r), len(judged))
			}
		}
	}
	all := []rune("4@8({[<369!|1705$+%2")
	_, readings := policyInputs(string(all))
	if len(readings) != 8 {
		t.Errorf("every l33t character: %d readings, want the 2^3 of '1', '|' and '7'", len(readings))
	}
	seen := map[string]bool{}
	for _, r := range readings {
		seen[string(r)] = true
	}
	if len(seen) != 8 || !seen["aabcccceggiiilosstxz"] || !seen["aabcccceggilltosstxz"] {
		t.Errorf("readings %v", seen)
	}
}

// policyWorstInputs are the costliest passwords found for the strength
// check: a password of l33t characters after a common one, every l33t character zxcvbn knows
// (the most substitutions to combine), and the worst of a random search
// over keyboard walks, shifted keys, l33t characters, words and dates
// (the keyboard-pattern matcher's cost grows with the walks it finds).
func policyWorstInputs() map[string]string {
	// The 20 forwards, backwards and rotated: a repeat would be judged by
	// its unit alone (see repeatUnit).
	every := "4@8({[<369!|1705$+%2" + "2%+$5071|!963<[{(8@4" + "369!|1705$+%24@8({[<" + "(2@9"
	return map[string]string{
		"leet-password":    ("p@$$w0rd1|7!8({[<369%2+" + strings.Repeat("x", 64))[:64],
		"every-l33t":       every,
		"keyboard-l33t":    "741lkjASD!!QA|fghfghrty@%QWE2ws7",
		"keyboard-shift":   "QWER7892wswsx@14712341qazzxc@WS1",
		"keyboard-dates":   "(620012ws1qamnblove3%3poimnbmnb5",
		"plain-passphrase": "plum-kite-orbit-93",
	}
}

// cpuPerOp reports the process's CPU time per op as cpu-ns/op: on a busy
// machine a run's wall time says how long it waited as much as how much
// it cost. Each benchmark runs alone, so the process's CPU is its own.
func cpuPerOp(b *testing.B, run func()) {
	start, ok := processCPU()
	n := 0
	for b.Loop() {
		run()
		n++
	}
	if end, ok2 := processCPU(); ok && ok2 && n > 0 {
		b.ReportMetric(float64(end-start)/float64(n), "cpu-ns/op")
	}
}

// BenchmarkPasswordPolicy measures the strength check on its costliest
// inputs, beside BenchmarkArgon2id, one password hash: "bounded" is the
// policy's check; "library" is zxcvbn with its own l33t matcher on the
// first 64 characters, what the check costs without the bound.
func BenchmarkPasswordPolicy(b *testing.B) {
	inputs := []string{"dora.maar@example.com", "dora.maar", "example.com", "Dora Maar", "snowkey", "example", "dora", "maar"}
	for name, pw := range policyWorstInputs() {
		b.Run("bounded/"+name, func(b *testing.B) {
			cpuPerOp(b, func() { checkPasswordPolicy(pw, "dora.maar@example.com", "Dora Maar") })
		})
		if name == "plain-passphrase" || strings.HasPrefix(name, "keyboard") {
			continue
		}
		b.Run("library/"+name, func(b *testing.B) {
			cpuPerOp(b, func() { zxcvbn.PasswordStrength(string([]rune(pw)[:min(64, len([]rune(pw)))]), inputs) })
		})
	}
}

// BenchmarkArgon2id is one password hash at the example's cost: the unit
// of the hash pool's work.
func BenchmarkArgon2id(b *testing.B) {
	cpuPerOp(b, func() {
		if _, err := hashPassword(goodPassword, DefaultArgon2()); err != nil {
			b.Fatal(err)
		}
	})
}

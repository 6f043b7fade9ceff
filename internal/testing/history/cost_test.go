package history

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/chaos"
)

// shape is the kind of random token history randomHistory makes.
type shape struct {
	users, managers int
	// mix weighs the operations: Issue, Validate, Revoke, RevokeSession,
	// RevokeAll, Rotate.
	mix [6]int
	// inOrder: operations begin in the order of their index, as a History
	// records them; else at random, as a history built by hand may.
	inOrder bool
	// repeats: now and then an Issue makes a session ID already made, a
	// Validate names a session never made or returns another user, a
	// Rotate returns no user.
	repeats bool
	windows int // spans where reads must work, some left open
	// failing: a third of the operations fail with Unavailable.
	failing bool
	// grace: now and then a Validate serves a rotated-out token as its
	// successor (Op.Served), or a Rotate returns the successor an
	// earlier Rotate of the token made.
	grace bool
}

// chaosShape is the mix of tokens' TestChaosSlotMigration: 16 users, and
// RevokeAlls each of which covers every session of its user.
var chaosShape = shape{users: 16, managers: 3, mix: [6]int{10, 70, 3, 3, 6, 3}, inOrder: true, windows: 1}

// randomHistory returns n operations of shape sh drawn from rng, with
// times after t0: every operation ends no earlier than it begins, as in
// a recorded History; some are pending (no end).
func randomHistory(rng *rand.Rand, t0 time.Time, n int, sh shape) ([]Op, []window) {
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	var sessions []int64
	owner := map[int64]int64{}
	byUser := map[int64][]int64{}
	successor := map[int64]int64{} // the session a Rotate of each made
	next := int64(1000)
	newSession := func(user int64) int64 {
		if sh.repeats && len(sessions) > 0 && rng.IntN(20) == 0 {
			return sessions[rng.IntN(len(sessions))]
		}
		next++
		return next
	}
	known := func() int64 {
		if len(sessions) == 0 || (sh.repeats && rng.IntN(10) == 0) {
			return 1 + rng.Int64N(next+10)
		}
		// Mostly one of the newest, as the chaos traffic picks them.
		if rng.IntN(2) == 0 {
			return sessions[len(sessions)-1-rng.IntN(min(len(sessions), 16))]
		}
		return sessions[rng.IntN(len(sessions))]
	}
	ops := make([]Op, 0, n)
	clock := 0
	for i := range n {
		var start int
		if sh.inOrder {
			clock += rng.IntN(3) * 100
			start = clock
		} else {
			start = rng.IntN(100 * n)
		}
		var dur int
		switch x := rng.IntN(100); {
		case x < 3:
			dur = 0
		case x < 8:
			dur = rng.IntN(2_000_000)
		case x < 50:
			dur = rng.IntN(200) * 100 // on the starts' grid: ends that tie with starts
		default:
			dur = rng.IntN(20_000)
		}
		op := Op{Index: i, Manager: rng.IntN(sh.managers), Start: at(start), End: at(start + dur)}
		x := rng.IntN(100)
		if sh.failing && x >= 50 {
			x = 91 + x%6
		}
		switch {
		case x < 3:
			op.Outcome, op.End = Pending, time.Time{}
		case x < 83:
			op.Outcome = OK
		case x < 91:
			op.Outcome = Invalid
		case x < 97:
			op.Outcome = Unavailable
		default:
			op.Outcome = OtherError
		}
		user := 1 + rng.Int64N(int64(sh.users))
		total := 0
		for _, w := range sh.mix {
			total += w
		}
		k, x := 0, rng.IntN(total)
		for ; x >= sh.mix[k]; k++ {
			x -= sh.mix[k]
		}
		if len(sessions) == 0 {
			k = 0
		}
		switch k {
		case 0:
			op.Kind, op.User = Issue, user
			if op.Outcome == OK || rng.IntN(2) == 0 {
				op.Session = newSession(user)
				sessions = append(sessions, op.Session)
				owner[op.Session] = user
				byUser[user] = append(byUser[user], op.Session)
			}
		case 1:
			op.Kind, op.Session = Validate, known()
			switch y := rng.IntN(10); {
			case y < 4:
				op.User = owner[op.Session]
			case y == 4 && sh.repeats:
				op.User = 1 + rng.Int64N(int64(sh.users))
			}
			if sh.grace && rng.IntN(4) == 0 {
				if next, ok := successor[op.Session]; ok && rng.IntN(4) > 0 {
					op.Served = next
				} else {
					op.Served = known()
				}
			}
		case 2:
			op.Kind, op.Session = Revoke, known()
		case 3:
			op.Kind, op.Session = RevokeSession, known()
			op.User = owner[op.Session]
		case 4:
			op.Kind, op.User = RevokeAll, user
			for range rng.IntN(3) {
				if own := byUser[user]; len(own) > 0 && rng.IntN(4) > 0 {
					op.Keep = append(op.Keep, own[len(own)-1-rng.IntN(min(len(own), 8))])
				} else {
					op.Keep = append(op.Keep, known())
				}
			}
		default:
			op.Kind, op.Session = Rotate, known()
			u := owner[op.Session]
			if op.Outcome == OK {
				if next, ok := successor[op.Session]; sh.grace && ok && rng.IntN(2) == 0 {
					op.NewSession = next // a Rotate within the grace window
				} else {
					op.NewSession = newSession(u)
					sessions = append(sessions, op.NewSession)
					owner[op.NewSession] = u
					byUser[u] = append(byUser[u], op.NewSession)
					successor[op.Session] = op.NewSession
				}
				if !sh.repeats || rng.IntN(2) == 0 {
					op.User = u
				}
			}
		}
		ops = append(ops, op)
	}
	var windows []window
	for range sh.windows {
		from := rng.IntN(max(clock, 100*n))
		w := window{from: at(from)}
		if rng.IntN(3) > 0 {
			w.to = at(from + rng.IntN(max(clock, 100*n)/2))
		}
		windows = append(windows, w)
	}
	return ops, windows
}

// randomTTLs returns a CacheTTL for each of n Managers, some zero, and
// now and then a negative one, which tokens refuses and CheckTokens
// judges as the rules read all the same.
func randomTTLs(rng *rand.Rand, n int) func(int) time.Duration {
	ttls := make([]time.Duration, n)
	for i := range ttls {
		switch rng.IntN(8) {
		case 0, 1:
		case 2:
			ttls[i] = -time.Duration(rng.IntN(50)) * 100 * time.Microsecond
		default:
			ttls[i] = time.Duration(rng.IntN(500)) * 100 * time.Microsecond
		}
	}
	return func(m int) time.Duration { return ttls[m] }
}

// TestCheckTokensAgainstReference: on random histories of every shape,
// from a few operations to a few thousand, CheckTokens finds exactly the
// violations that the reference (the rules applied one revocation and one
// session at a time) finds, in the same order, naming the same
// operations.
func TestCheckTokensAgainstReference(t *testing.T) {
	shapes := []struct {
		name string
		shape
	}{
		{"chaos", chaosShape},
		{"few users", shape{users: 2, managers: 3, mix: [6]int{15, 50, 8, 7, 12, 8}, inOrder: true, windows: 2}},
		{"repeats", shape{users: 4, managers: 3, mix: [6]int{15, 50, 8, 7, 12, 8}, inOrder: true, repeats: true, windows: 3}},
		{"out of order", shape{users: 3, managers: 2, mix: [6]int{20, 40, 10, 10, 10, 10}, repeats: true, windows: 4}},
		{"one manager", shape{users: 5, managers: 1, mix: [6]int{15, 55, 8, 7, 8, 7}, inOrder: true, windows: 1}},
		{"many revocations", shape{users: 3, managers: 4, mix: [6]int{20, 30, 10, 10, 20, 10}, repeats: true, windows: 2}},
		{"reads must work", shape{users: 6, managers: 3, mix: [6]int{25, 60, 1, 1, 12, 1}, inOrder: true, windows: 3, failing: true}},
		{"rotation grace", shape{users: 3, managers: 3, mix: [6]int{15, 45, 8, 7, 10, 15}, inOrder: true, windows: 1, grace: true}},
		{"rotation grace, lost rotations", shape{users: 3, managers: 2, mix: [6]int{15, 45, 5, 5, 10, 20}, repeats: true, windows: 1,
			failing: true, grace: true}},
	}
	rng := chaos.Rand(chaos.Seed(t))
	compared := 0
	rules := map[string]int{}
	// served: the violations of a Validate that served a rotated-out
	// token as its successor (Op.Served), judged against the successor.
	served := map[string]int{}
	for _, sh := range shapes {
		name := sh.name
		for _, n := range []int{1, 3, 10, 30, 100, 300, 1000, 3000} {
			for range max(2, 12-n/100) {
				t0 := time.Now()
				ops, windows := randomHistory(rng, t0, n, sh.shape)
				ttl := randomTTLs(rng, sh.managers)
				want := checkTokensReference(&work{}, ops, windows, t0, ttl)
				got := checkTokens(&work{}, ops, windows, t0, ttl)
				compared++
				for _, v := range want {
					rules[v.rule]++
					if slices.ContainsFunc(v.ops, func(op Op) bool { return op.Kind == Validate && op.Served != 0 }) {
						served[v.rule]++
					}
				}
				if !reflect.DeepEqual(got, want) {
					path := filepath.Join(t.TempDir(), "history")
					h := &History{t0: t0, ops: ops, windows: windows}
					if err := h.Dump(path); err != nil {
						t.Fatal(err)
					}
					t.Fatalf("%s, %d operations: CheckTokens found %d violations, the reference %d (history in %s):\n%s",
						name, n, len(got), len(want), path, firstDifference(got, want))
				}
			}
		}
	}
	t.Logf("%d random histories, each with the same violations: %v; of a Validate that served its successor: %v", compared, rules, served)
	for _, rule := range []string{ruleRevoked, ruleNeverIssued, ruleWrongUser, ruleUnavailable} {
		if rules[rule] == 0 {
			t.Errorf("no random history breaks %q: the comparison proves nothing of it", rule)
		}
	}
	for _, rule := range []string{ruleRevoked, ruleNeverIssued} {
		if served[rule] == 0 {
			t.Errorf("no random history breaks %q with a Validate that served its successor: the comparison proves nothing of Op.Served", rule)
		}
	}
}

// firstDifference shows the first violation that two lists disagree on.
func firstDifference(got, want []Violation) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i].String()
		}
		if i < len(want) {
			w = want[i].String()
		}
		if g != w || (i < len(got) && i < len(want) && !reflect.DeepEqual(got[i], want[i])) {
			return fmt.Sprintf("violation %d:\ngot:  %s\nwant: %s", i, g, w)
		}
	}
	return "(the lists print alike)"
}

// maxGrowth bounds how many times the steps of a checker may grow on a
// history 8 times longer: an O(n log n) count grows 8·log(8m)/log(m)
// times for the groups of m ≥ 64 operations it sorts and searches, at
// most 12, and a quadratic one 64 times.
const maxGrowth = 16

// TestCheckTokensCost: the steps CheckTokens takes on a history 8 times
// longer grow as O(n log n) predicts, not as the square of the history,
// on the chaos suite's mix and on one of few users and many RevokeAlls.
// The reference's steps, counted alike, grow past the bound: the count
// sees quadratic growth. Steps, not seconds: the verdict does not depend
// on the machine's speed.
func TestCheckTokensCost(t *testing.T) {
	shapes := []struct {
		name string
		n    int
		shape
	}{
		{"chaos", 4000, chaosShape},
		{"many revocations", 1000, shape{users: 2, managers: 3, mix: [6]int{15, 50, 8, 7, 12, 8}, inOrder: true, windows: 4}},
	}
	for _, sh := range shapes {
		name, n := sh.name, sh.n
		steps := func(check func(*work, []Op, []window, time.Time, func(int) time.Duration) []Violation, size int) int64 {
			rng := rand.New(rand.NewPCG(1, 2)) // the same histories every run: the counts are exact
			t0 := time.Now()
			ops, windows := randomHistory(rng, t0, size, sh.shape)
			var w work
			check(&w, ops, windows, t0, randomTTLs(rng, sh.managers))
			return w.steps
		}
		small, large := steps(checkTokens, n), steps(checkTokens, 8*n)
		refSmall, refLarge := steps(checkTokensReference, n), steps(checkTokensReference, 8*n)
		t.Logf("%s: CheckTokens %d steps for %d operations, %d for %d (%.1f×); the reference %d, %d (%.1f×); bound %d×",
			name, small, n, large, 8*n, float64(large)/float64(small), refSmall, refLarge, float64(refLarge)/float64(refSmall), maxGrowth)
		if r := float64(large) / float64(small); r > maxGrowth {
			t.Errorf("%s: CheckTokens took %.1f times the steps on 8 times the operations, more than %d", name, r, maxGrowth)
		}
		if r := float64(refLarge) / float64(refSmall); r <= maxGrowth {
			t.Errorf("%s: the reference took %.1f times the steps on 8 times the operations, within the bound %d: "+
				"the histories do not show quadratic growth", name, r, maxGrowth)
		}
	}
}

// TestCheckUniqueCost: the steps of checkUnique and CheckUniqueFiles on 8
// times the IDs grow as O(n log n) predicts.
func TestCheckUniqueCost(t *testing.T) {
	const n = 20000
	ids := func(size int) []int64 {
		rng := rand.New(rand.NewPCG(3, 4))
		out := make([]int64, size)
		for i := range out {
			if i > 0 && rng.IntN(100) == 0 {
				out[i] = out[rng.IntN(i)]
			} else {
				out[i] = rng.Int64()
			}
		}
		return out
	}
	memory := func(size int) int64 {
		all := ids(size)
		var w work
		checkUnique(&w, map[string][]int64{"a": all[:size/2], "b": all[size/2:]})
		return w.steps
	}
	files := func(size int) int64 {
		all := ids(size)
		dir := t.TempDir()
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		writeIDs(t, a, all[:size/3], true)
		writeIDs(t, b, all[size/3:], false)
		var w work
		if _, _, err := checkUniqueFiles(&w, a, b); err != nil {
			t.Fatal(err)
		}
		return w.steps
	}
	for name, steps := range map[string]func(int) int64{"CheckUnique": memory, "CheckUniqueFiles": files} {
		small, large := steps(n), steps(8*n)
		r := float64(large) / float64(small)
		t.Logf("%s: %d steps for %d IDs, %d for %d (%.1f×); bound %d×", name, small, n, large, 8*n, r, maxGrowth)
		if r > maxGrowth {
			t.Errorf("%s took %.1f times the steps on 8 times the IDs, more than %d", name, r, maxGrowth)
		}
	}
}

// BenchmarkCheckTokensChaos measures CheckTokens, and the reference, on a
// history of the chaos suite's mix of CHECK_OPS operations (default
// 100,000): the time, the steps and the CPU seconds of the process (user
// and system, which a busy machine changes far less than the time) per
// check.
func BenchmarkCheckTokensChaos(b *testing.B) {
	n := 100_000
	if s := os.Getenv("CHECK_OPS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatalf("CHECK_OPS=%q: %v", s, err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Now()
	ops, windows := randomHistory(rng, t0, n, chaosShape)
	ttl := randomTTLs(rng, chaosShape.managers)
	for _, c := range []struct {
		name  string
		check func(*work, []Op, []window, time.Time, func(int) time.Duration) []Violation
	}{{"CheckTokens", checkTokens}, {"Reference", checkTokensReference}} {
		b.Run(c.name, func(b *testing.B) {
			var w work
			cpu0 := cpuSeconds(b)
			for b.Loop() {
				c.check(&w, ops, windows, t0, ttl)
			}
			b.ReportMetric(float64(w.steps)/float64(b.N), "steps/op")
			b.ReportMetric((cpuSeconds(b)-cpu0)/float64(b.N), "cpu-s/op")
		})
	}
}

// cpuSeconds returns the CPU time, user and system, this process has used.
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

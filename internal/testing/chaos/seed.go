package chaos

import (
	"crypto/rand"
	"encoding/binary"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// The environment variables that steer chaos tests.
const (
	// envSeed fixes the seed of Seed and repeat, to rerun a failure.
	envSeed = "CHAOS_SEED"
	// envTime is the time budget of the long schedule (`make chaos`), a
	// Go duration such as "10m". Unset, tests run the short schedule.
	envTime = "CHAOS_TIME"
	// envReport names a file to which report appends one JSON line per
	// row.
	envReport = "CHAOS_REPORT"
)

// shortBudget is Budget's value without CHAOS_TIME: the time one package's
// chaos tests may take in all within `make test`, where the packages run
// in parallel and the whole suite must stay within two minutes.
const shortBudget = 45 * time.Second

// Seed returns the seed for t's randomness: CHAOS_SEED if set, else a
// random one. It logs the seed and, if t fails, says how to rerun with it.
func Seed(t testing.TB) int64 {
	t.Helper()
	seed := baseSeed(t)
	t.Logf("chaos seed %d", seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rerun with %s=%d go test -race -run '^%s$'", envSeed, seed, runPattern(t.Name()))
		}
	})
	return seed
}

// baseSeed reads CHAOS_SEED or draws a random seed. CHAOS_SEED is for
// replaying a failure by hand: with CI set it fails the test, since a seed
// left in CI's environment would run one schedule for ever.
func baseSeed(t testing.TB) int64 {
	t.Helper()
	if s := strings.TrimSpace(os.Getenv(envSeed)); s != "" {
		if testenv.InCI() {
			t.Fatalf("chaos: %s=%s is set with CI=true: a seed replays one failure by hand and has no place in CI", envSeed, s)
		}
		seed, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("chaos: %s=%q is not an integer", envSeed, s)
		}
		return seed
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("chaos: draw a seed: %v", err)
	}
	return int64(binary.LittleEndian.Uint64(b[:]) >> 1) // positive, so it reads well
}

// runPattern turns a test name into a -run pattern that selects it: each
// level of a subtest name anchored on its own.
func runPattern(name string) string {
	return strings.Join(strings.Split(name, "/"), "$/^")
}

// Rand returns a random source determined by seed alone.
func Rand(seed int64) *mrand.Rand {
	return mrand.New(mrand.NewPCG(uint64(seed), uint64(seed)^0x9e3779b97f4a7c15))
}

// Budget returns how long a package's chaos tests may run in all:
// CHAOS_TIME when set (the long schedule of `make chaos`), else
// shortBudget. A package with several chaos tests shares it among them.
// A CHAOS_TIME that is not a positive duration fails the test.
func Budget(t testing.TB) time.Duration {
	t.Helper()
	s := strings.TrimSpace(os.Getenv(envTime))
	if s == "" {
		return shortBudget
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("chaos: %s=%q is not a positive duration such as 10m", envTime, s)
	}
	return d
}

// MainBudget returns the testenv.Main budget of a package with chaos
// tests: base, the package's budget on the short schedule, plus, on the
// long one, twice CHAOS_TIME (its chaos tests share CHAOS_TIME, and each
// may overrun its share by some runs). A CHAOS_TIME that is not a
// positive duration adds nothing here; Budget fails the tests for it.
func MainBudget(base time.Duration) time.Duration {
	d, err := time.ParseDuration(strings.TrimSpace(os.Getenv(envTime)))
	if err != nil || d <= 0 {
		return base
	}
	return base + 2*d
}

// Long reports whether CHAOS_TIME asks for the long schedule.
func Long() bool {
	return strings.TrimSpace(os.Getenv(envTime)) != ""
}

// repeat runs run as subtests name+"0", name+"1", … (name such as "on"
// for the defence on, "off" for the control) until budget has passed
// since it began (the run under way finishes) and at least minRuns ran;
// it stops early when a run fails, and after the one run that go test
// -run picks (such as -run '^TestX$/^on2$').
// Each run gets a random source of its own seed: the first run's seed is
// CHAOS_SEED if set, and every later seed follows from the one before, so
// one seed replays a whole sequence, and a failed run prints the seed and
// -run pattern that replay it alone. It returns the number of runs.
// Scenario.Run is repeat for both sides of a scenario, with the runs'
// faults recorded and judged; new scenarios use it.
func repeat(t *testing.T, name string, budget time.Duration, minRuns int, run func(t *testing.T, rng *mrand.Rand)) int {
	t.Helper()
	seed := baseSeed(t)
	t.Logf("chaos seed %d, budget %v", seed, budget)
	start := time.Now()
	n, filtered := 0, 0
	for i := 0; i < minRuns || time.Since(start) < budget || (filtered > 0 && n == 0); i++ {
		ran, ok := runSeeded(t, name, i, seed, run)
		seed = nextSeed(seed)
		if !ran {
			// go test -run left this run out. Skip on (keeping the seed
			// chain) to the run it picks, but not for ever.
			if filtered++; n > 0 || filtered >= maxFiltered {
				break
			}
			continue
		}
		n++
		if !ok || filtered > 0 {
			break
		}
	}
	return n
}

// runSeeded runs f as t's subtest name+i with the random source of seed;
// if it fails, it logs the CHAOS_SEED and -run pattern that replay it (the
// first run of the name replays that seed). It reports whether go test
// -run let the subtest run, and whether it passed.
func runSeeded(t *testing.T, name string, i int, seed int64, f func(t *testing.T, rng *mrand.Rand)) (ran, ok bool) {
	t.Helper()
	parent := t.Name()
	ok = t.Run(name+strconv.Itoa(i), func(t *testing.T) {
		ran = true
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("rerun with %s=%d go test -race -run '^%s$/^%s0$'", envSeed, seed, runPattern(parent), name)
			}
		})
		f(t, Rand(seed))
	})
	return ran, ok
}

// maxFiltered bounds how many runs repeat skips looking for the one that
// go test -run picks.
const maxFiltered = 1000

// nextSeed is one step of splitmix64, so consecutive seeds are unrelated.
func nextSeed(s int64) int64 {
	z := uint64(s) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return int64((z ^ (z >> 31)) >> 1)
}

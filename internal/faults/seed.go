package faults

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The environment variables that steer chaos tests.
const (
	// EnvSeed fixes the seed of Seed and Repeat, to rerun a failure.
	EnvSeed = "CHAOS_SEED"
	// EnvTime is the time budget of the long schedule (`make chaos`), a
	// Go duration such as "10m". Unset, tests run the short schedule.
	EnvTime = "CHAOS_TIME"
	// EnvReport names a file to which Report appends one JSON line per
	// row.
	EnvReport = "CHAOS_REPORT"
)

// ShortBudget is Budget's value without CHAOS_TIME: the time one package's
// chaos tests may take in all within `make test`, where the packages run
// in parallel and the whole suite must stay within two minutes.
const ShortBudget = 45 * time.Second

// Seed returns the seed for t's randomness: CHAOS_SEED if set, else a
// random one. It logs the seed and, if t fails, says how to rerun with it.
func Seed(t testing.TB) int64 {
	t.Helper()
	seed := baseSeed(t)
	t.Logf("chaos seed %d", seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("rerun with %s=%d go test -race -run '^%s$'", EnvSeed, seed, runPattern(t.Name()))
		}
	})
	return seed
}

// baseSeed reads CHAOS_SEED or draws a random seed.
func baseSeed(t testing.TB) int64 {
	t.Helper()
	if s := strings.TrimSpace(os.Getenv(EnvSeed)); s != "" {
		seed, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("faults: %s=%q is not an integer", EnvSeed, s)
		}
		return seed
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("faults: draw a seed: %v", err)
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
// ShortBudget. A package with several chaos tests shares it among them.
// A CHAOS_TIME that is not a positive duration fails the test.
func Budget(t testing.TB) time.Duration {
	t.Helper()
	s := strings.TrimSpace(os.Getenv(EnvTime))
	if s == "" {
		return ShortBudget
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("faults: %s=%q is not a positive duration such as 10m", EnvTime, s)
	}
	return d
}

// Long reports whether CHAOS_TIME asks for the long schedule.
func Long() bool {
	return strings.TrimSpace(os.Getenv(EnvTime)) != ""
}

// Repeat runs run as subtests name+"0", name+"1", … (name such as "on"
// for the defence on, "off" for the control) until budget has passed
// since it began (the run under way finishes) and at least minRuns ran;
// it stops early when a run fails, and after the one run that go test
// -run picks (such as -run '^TestX$/^on2$').
// Each run gets a random source of its own seed: the first run's seed is
// CHAOS_SEED if set, and every later seed follows from the one before, so
// one seed replays a whole sequence, and a failed run prints the seed and
// -run pattern that replay it alone. It returns the number of runs.
func Repeat(t *testing.T, name string, budget time.Duration, minRuns int, run func(t *testing.T, rng *mrand.Rand)) int {
	t.Helper()
	seed := baseSeed(t)
	t.Logf("chaos seed %d, budget %v", seed, budget)
	parent := t.Name()
	start := time.Now()
	n, filtered := 0, 0
	for i := 0; i < minRuns || time.Since(start) < budget || (filtered > 0 && n == 0); i++ {
		runSeed := seed
		ran := false
		ok := t.Run(name+strconv.Itoa(i), func(t *testing.T) {
			ran = true
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("rerun with %s=%d go test -race -run '^%s$/^%s0$'", EnvSeed, runSeed, runPattern(parent), name)
				}
			})
			run(t, Rand(runSeed))
		})
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

// maxFiltered bounds how many runs Repeat skips looking for the one that
// go test -run picks.
const maxFiltered = 1000

// nextSeed is one step of splitmix64, so consecutive seeds are unrelated.
func nextSeed(s int64) int64 {
	z := uint64(s) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return int64((z ^ (z >> 31)) >> 1)
}

// Row is one line of the chaos table: what one fault kind's scenario did.
type Row struct {
	// Package is the package under test, such as "idtype/workerid".
	Package string `json:"package"`
	// Fault names the fault kind, such as "lost reply to take-back".
	Fault string `json:"fault"`
	// Runs counts the runs with the defence on.
	Runs int `json:"runs"`
	// IDs counts the IDs checked for uniqueness, in all runs.
	IDs int64 `json:"ids"`
	// Tokens counts the sessions (or histories) checked, in all runs.
	Tokens int64 `json:"tokens"`
	// Rows counts the table rows checked (for kinds whose promise is
	// about rows, such as partition maintenance), in all runs.
	Rows int64 `json:"rows,omitempty"`
	// Violations counts the breaches found with the defence on.
	Violations int `json:"violations"`
	// ControlRuns counts the runs with the defence switched off.
	ControlRuns int `json:"control_runs"`
	// ControlViolations counts the breaches the control runs found.
	ControlViolations int `json:"control_violations"`
	// Seed is the seed the scenario began with.
	Seed int64 `json:"seed"`
	// Seconds is how long the scenario ran.
	Seconds float64 `json:"seconds"`
}

// Report logs row and, when CHAOS_REPORT names a file, appends row to it
// as one JSON line. It fails t if the row breaks the suite's promise: a
// violation with the defence on, no control run, or control runs that
// found no violation (so the scenario never reached the fault). With
// CHAOS_SEED set, a replay, only the first is checked: replaying one run
// with -run leaves the other side out.
func Report(t testing.TB, row Row) {
	t.Helper()
	t.Logf("chaos %s / %s: runs=%d ids=%d tokens=%d rows=%d violations=%d control_runs=%d control_violations=%d seed=%d %.1fs",
		row.Package, row.Fault, row.Runs, row.IDs, row.Tokens, row.Rows, row.Violations, row.ControlRuns,
		row.ControlViolations, row.Seed, row.Seconds)
	if path := os.Getenv(EnvReport); path != "" {
		line, err := json.Marshal(row)
		if err != nil {
			t.Fatalf("faults: report: %v", err)
		}
		// One write of one line with O_APPEND: lines from packages running
		// in parallel do not interleave.
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatalf("faults: report to %s=%s: %v", EnvReport, path, err)
		}
		_, err = f.Write(append(line, '\n'))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("faults: report to %s=%s: %v", EnvReport, path, err)
		}
	}
	if row.Violations > 0 {
		t.Errorf("chaos %s / %s: %d violations with the defence on", row.Package, row.Fault, row.Violations)
	}
	if os.Getenv(EnvSeed) != "" && (row.ControlRuns == 0 || row.ControlViolations == 0) {
		// A replay (usually of one run, chosen with -run) need not reach
		// the control; make chaos's table still flags a real gap.
		t.Logf("chaos %s / %s: %d control runs, %d control violations (not checked when %s is set)",
			row.Package, row.Fault, row.ControlRuns, row.ControlViolations, EnvSeed)
		return
	}
	switch {
	case row.ControlRuns == 0:
		t.Errorf("chaos %s / %s: no control run, so nothing shows the fault was reached", row.Package, row.Fault)
	case row.ControlViolations == 0:
		t.Errorf("chaos %s / %s: %d control runs found no violation: the fault was not reached",
			row.Package, row.Fault, row.ControlRuns)
	}
}

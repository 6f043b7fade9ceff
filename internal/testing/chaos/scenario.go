package chaos

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// defaultRetries is how many more runs a side of a Scenario makes past
// its share of the budget to reach its goal, when Scenario.retries is
// zero. A side whose runs meet their fault half the time misses its goal
// in all of them about once in 2,000 scenarios.
const defaultRetries = 10

// OneRun is a Scenario.Budget that every run outlasts: each side makes
// one run, and more only while it has not reached its goal (up to
// retries). The short schedule of a package whose runs take seconds each
// uses it, so that make test proves each side once without a budget to
// fill.
const OneRun = time.Nanosecond

// maxShown bounds the violations a run prints; it counts them all.
const maxShown = 10

// Scenario is one fault kind on one store, against one defence: Run runs
// the fault with the defence switched off (the control side) and on (the
// defended side), as many times as the budget allows, and writes its Row.
//
// Every run records whether it met its fault, from what it observed (a
// key evicted, a reply dropped, a replica promoted behind its primary, a
// slot moved while a revocation ran): Run.Met. A run is judged only on
// what it met; each side has a goal:
//
//   - the control side must have a run that met its fault and found a
//     violation (a violation is itself proof that the run met its fault):
//     that shows the scenario reaches the fault and the check sees its
//     breach;
//   - the defended side must find no violation in any run, and must have
//     met its fault in at least as many runs as the control side needed
//     to find its first violation: a retry that strengthens the control
//     strengthens the defended side as much.
//
// A side runs for its half of Budget and then on, up to retries more
// runs, until it reaches its goal; it stops at once when a run fails.
// The control side runs first, since its count sets the defended side's
// goal. A side that `go test -run` leaves out entirely is not judged (Run
// says so in the log); a seed never turns a check off.
//
// One Scenario has one store and one defence: a fault kind defended in
// two ways, or run on two stores, is two Scenarios with a row each, so
// that no control's violations stand in for another's.
type Scenario struct {
	// Package is the package under test, such as "tokens".
	Package string
	// Fault names the fault kind, such as "maxmemory, allkeys-lru".
	Fault string
	// Store names the store the runs use, such as "redis", "postgres" or
	// "cluster".
	Store string
	// Defence names the one defence that the control side switches off,
	// such as "index check".
	Defence string
	// Budget is the time both sides may take, half each, before they stop
	// at their goals; zero means Budget(t), the package's whole budget.
	Budget time.Duration
	// retries bounds the runs a side makes past its half of the budget
	// while it has not reached its goal; zero means DefaultRetries.
	retries int
}

// Run is one run of a Scenario: which side it is on, its random source,
// and what the scenario observed in it. Its methods may be called from any
// goroutine until the run function returns.
type Run struct {
	// Control is true on the control side, where the scenario must
	// switch the Scenario's Defence off.
	Control bool
	// Rand is the run's random source, determined by the run's seed: take
	// every random choice from it so that the seed replays the run.
	Rand *rand.Rand

	mu         sync.Mutex
	met        []string
	violations int
	shown      []string
	ids        int64
	tokens     int64
	rows       int64
}

// Met records that the run met its fault, with what the scenario observed
// that shows it, such as "3 session keys outlived their evicted index".
// A run that never calls Met (nor Violation) missed its fault.
func (r *Run) Met(format string, args ...any) {
	what := fmt.Sprintf(format, args...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.met = append(r.met, what)
}

// Violation records one breach of the promise that the run found, such as
// an ID issued twice. On the defended side it fails the run; on the
// control side it is what the run is for. A violation shows that the run
// met its fault. Only the first few are formatted and printed.
func (r *Run) Violation(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.violations++
	if len(r.shown) < maxShown {
		r.shown = append(r.shown, fmt.Sprintf(format, args...))
	}
}

// CountIDs adds n to the IDs the run checked for uniqueness.
func (r *Run) CountIDs(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids += int64(n)
}

// CountTokens adds n to the sessions (or histories) the run checked.
func (r *Run) CountTokens(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens += int64(n)
}

// CountRows adds n to the table rows the run checked.
func (r *Run) CountRows(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows += int64(n)
}

// side is what one side of a Scenario did.
type side struct {
	runs, met, violations int
	// needed is, on the control side, how many runs that met the fault it
	// took to find the first violation (0 if none did).
	needed  int
	ids     int64
	tokens  int64
	rows    int64
	leftOut bool // go test -run picked none of its runs
}

// Run runs the scenario's control side, then its defended side, each run
// as a subtest ("off0", "off1", … and "on0", …) that calls run with a
// fresh Run, then judges both sides and reports the row as report does.
// It returns the row.
//
// Each run gets a random source of its own seed: a side's first run uses
// CHAOS_SEED if set, and every later seed follows from the one before; a
// failed run prints the CHAOS_SEED and -run pattern that replay it alone.
// The package doc shows a scenario.
func (s Scenario) Run(t *testing.T, run func(t *testing.T, r *Run)) Row {
	t.Helper()
	budget, retries := s.bounds(t)
	seed := Seed(t)
	start := time.Now()
	off := s.side(t, "off", true, seed, budget/2, retries, 0, run)
	on := s.side(t, "on", false, seed, budget/2, retries, max(1, off.needed), run)
	row := Row{
		Package: s.Package, Fault: s.Fault, Store: s.Store, Server: serverFor(s.Store), Defence: s.Defence,
		Runs: on.runs, Met: on.met, Violations: on.violations,
		ControlRuns: off.runs, ControlMet: off.met, ControlViolations: off.violations, ControlNeeded: off.needed,
		IDs: on.ids + off.ids, Tokens: on.tokens + off.tokens, Rows: on.rows + off.rows,
		Seed: seed, Seconds: time.Since(start).Seconds(),
	}
	logRow(t, row)
	if err := writeRow(row); err != nil {
		t.Fatal(err)
	}
	for _, p := range row.problems() {
		switch {
		case p.control && off.leftOut, !p.control && on.leftOut:
			t.Logf("chaos %s: %s: not judged, since go test -run left that side out", row.name(), p.text)
		default:
			t.Errorf("chaos %s: %s", row.name(), p.text)
		}
	}
	return row
}

// bounds checks s and returns its budget and retries, defaults filled in.
func (s Scenario) bounds(t testing.TB) (time.Duration, int) {
	t.Helper()
	if s.Package == "" || s.Fault == "" || s.Defence == "" {
		t.Fatalf("chaos: Scenario %+v: Package, Fault and Defence must be set", s)
	}
	if s.Budget < 0 || s.retries < 0 {
		t.Fatalf("chaos: Scenario %s / %s: Budget %v and Retries %d must not be negative", s.Package, s.Fault, s.Budget, s.retries)
	}
	budget, retries := s.Budget, s.retries
	if budget == 0 {
		budget = Budget(t)
	}
	if retries == 0 {
		retries = defaultRetries
	}
	return budget, retries
}

// side runs one side of s: runs named name0, name1, … until share has
// passed and the side reached its goal (the control side: a violation;
// the defended side: need runs that met the fault), or retries more runs
// past share did not reach it, or a run failed.
func (s Scenario) side(t *testing.T, name string, control bool, seed int64, share time.Duration, retries, need int,
	run func(t *testing.T, r *Run)) side {
	t.Helper()
	var res side
	goal := func() bool {
		if control {
			return res.violations > 0
		}
		return res.met >= need
	}
	start := time.Now()
	filtered, extra := 0, 0
	for i := 0; ; i++ {
		if res.runs > 0 && time.Since(start) >= share {
			if goal() || extra >= retries {
				break
			}
			extra++
		}
		ran, ok := runSeeded(t, name, i, seed, func(t *testing.T, rng *rand.Rand) {
			r := &Run{Control: control, Rand: rng}
			run(t, r)
			r.mu.Lock()
			defer r.mu.Unlock()
			res.runs++
			res.ids += r.ids
			res.tokens += r.tokens
			res.rows += r.rows
			met := len(r.met) > 0 || r.violations > 0
			if met {
				res.met++
			}
			if control && r.violations > 0 && res.needed == 0 {
				res.needed = res.met
			}
			res.violations += r.violations
			switch {
			case len(r.met) > 0:
				t.Logf("met its fault: %s", r.met[0])
			case met:
				t.Logf("met its fault: it found a violation")
			default:
				t.Logf("missed its fault: nothing the scenario observed shows it")
			}
			for _, v := range r.shown {
				if control {
					t.Logf("control violation: %s", v)
				} else {
					t.Errorf("violation: %s", v)
				}
			}
			if r.violations > len(r.shown) {
				t.Logf("… %d violations in all", r.violations)
			}
		})
		seed = nextSeed(seed)
		if !ran {
			// go test -run left this run out. Go on (keeping the seed
			// chain) to the run it picks, but not for ever.
			if filtered++; res.runs > 0 || filtered >= maxFiltered {
				break
			}
			continue
		}
		if !ok || filtered > 0 {
			break
		}
	}
	res.leftOut = res.runs == 0 && filtered > 0
	return res
}

package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// Row is one line of the chaos table: what one Scenario (a fault kind on
// one store, against one defence) did on each side. A run met its fault
// when the scenario observed the fault happen (Run.Met) or a violation;
// the runs that missed it are Runs-Met and ControlRuns-ControlMet.
type Row struct {
	// Package is the package under test, such as "workerid".
	Package string `json:"package"`
	// Fault names the fault kind, such as "lost reply to take-back".
	Fault string `json:"fault"`
	// Store names the store the runs used, such as "redis".
	Store string `json:"store,omitempty"`
	// Server names the server program that a Redis-backed store ran on,
	// the base name of testenv.EnvRedisServer (which testservers sets):
	// "redis-server", or "valkey-server" in make test's Valkey pass.
	// Empty when that is unset, and for PostgreSQL stores.
	Server string `json:"server,omitempty"`
	// Defence names the defence the control runs switched off.
	Defence string `json:"defence,omitempty"`
	// Runs counts the runs with the defence on; Met those that met their
	// fault; Violations the breaches they found (the promise allows none).
	Runs       int `json:"runs"`
	Met        int `json:"met"`
	Violations int `json:"violations"`
	// ControlRuns counts the runs with the defence switched off;
	// ControlMet those that met their fault; ControlViolations the
	// breaches they found; ControlNeeded how many runs that met the fault
	// the control took to find its first violation (0: none found one),
	// the least number of defended runs that must meet the fault.
	ControlRuns       int `json:"control_runs"`
	ControlMet        int `json:"control_met"`
	ControlViolations int `json:"control_violations"`
	ControlNeeded     int `json:"control_needed"`
	// IDs counts the IDs checked for uniqueness, in all runs.
	IDs int64 `json:"ids"`
	// Tokens counts the sessions (or histories) checked, in all runs.
	Tokens int64 `json:"tokens"`
	// Rows counts the table rows checked, in all runs, for kinds whose
	// promise is about rows (partition maintenance).
	Rows int64 `json:"rows,omitempty"`
	// Seed is the seed the scenario began with.
	Seed int64 `json:"seed"`
	// Seconds is how long the scenario ran.
	Seconds float64 `json:"seconds"`
}

// problem is one way a row breaks the suite's rules; control says which
// side it is about.
type problem struct {
	text    string
	control bool
}

// Problems returns what is wrong with the row, one sentence each, or
// nothing when it keeps the rules of a Scenario: no violation with the
// defence on; a control run that met the fault and found a violation; and
// at least as many defended runs that met the fault as the control needed
// (at least one). Command chaosreport judges the table's rows by it.
func (r Row) Problems() []string {
	var out []string
	for _, p := range r.problems() {
		out = append(out, p.text)
	}
	return out
}

func (r Row) problems() []problem {
	var ps []problem
	add := func(control bool, format string, args ...any) {
		ps = append(ps, problem{fmt.Sprintf(format, args...), control})
	}
	if r.Violations > 0 {
		add(false, "%d violations with the defence on", r.Violations)
	}
	switch {
	case r.ControlRuns == 0:
		add(true, "no control run, so nothing shows the fault was reached")
	case r.ControlMet == 0:
		add(true, "none of %d control runs met the fault", r.ControlRuns)
	case r.ControlViolations == 0:
		add(true, "%d of %d control runs met the fault and found no violation", r.ControlMet, r.ControlRuns)
	}
	need := max(1, r.ControlNeeded)
	switch {
	case r.Runs == 0:
		add(false, "no run with the defence on")
	case r.Met < need:
		add(false, "%d of %d runs with the defence on met the fault; the control needed %d to find a violation",
			r.Met, r.Runs, need)
	}
	return ps
}

// name is the row's name in messages: package / fault [store, defence].
func (r Row) name() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s / %s", r.Package, r.Fault)
	if r.Store != "" || r.Defence != "" {
		fmt.Fprintf(&b, " [%s, %s]", r.StoreName(), r.Defence)
	}
	return b.String()
}

// StoreName is the store with the server it ran on, when the row names
// one: "redis on valkey-server".
func (r Row) StoreName() string {
	if r.Server == "" {
		return r.Store
	}
	return r.Store + " on " + r.Server
}

// serverFor returns what Row.Server holds for a row of store: the base
// name of testenv.EnvRedisServer when it is set and the row names a store
// that is not a PostgreSQL one.
func serverFor(store string) string {
	bin := os.Getenv(testenv.EnvRedisServer)
	if bin == "" || store == "" || strings.HasPrefix(store, "postgres") {
		return ""
	}
	return filepath.Base(bin)
}

// report logs a row that a scenario counted itself, writes it to
// CHAOS_REPORT as Scenario.Run does, and fails t on a violation with the
// defence on, no control run, or control runs that found no violation.
// It cannot tell which runs met their fault, which only Scenario.Run
// records, so it leaves that unchecked here; command chaosreport judges
// every row in full (Row.Problems) and so fails a row without met counts.
// New scenarios use Scenario.
func report(t testing.TB, row Row) {
	t.Helper()
	if row.Server == "" {
		row.Server = serverFor(row.Store)
	}
	logRow(t, row)
	if err := writeRow(row); err != nil {
		t.Fatal(err)
	}
	if row.Violations > 0 {
		t.Errorf("chaos %s: %d violations with the defence on", row.name(), row.Violations)
	}
	switch {
	case row.ControlRuns == 0:
		t.Errorf("chaos %s: no control run, so nothing shows the fault was reached", row.name())
	case row.ControlViolations == 0:
		t.Errorf("chaos %s: %d control runs found no violation: the fault was not reached", row.name(), row.ControlRuns)
	}
}

// logRow logs the row's counts.
func logRow(t testing.TB, r Row) {
	t.Helper()
	t.Logf("chaos %s: runs=%d met=%d violations=%d control_runs=%d control_met=%d control_violations=%d "+
		"control_needed=%d ids=%d tokens=%d rows=%d seed=%d %.1fs",
		r.name(), r.Runs, r.Met, r.Violations, r.ControlRuns, r.ControlMet, r.ControlViolations, r.ControlNeeded,
		r.IDs, r.Tokens, r.Rows, r.Seed, r.Seconds)
}

// writeRow appends row as one JSON line to the file CHAOS_REPORT names,
// if it is set.
func writeRow(row Row) error {
	path := os.Getenv(envReport)
	if path == "" {
		return nil
	}
	line, err := json.Marshal(row)
	if err != nil {
		return fmt.Errorf("chaos: report: %w", err)
	}
	// One write of one line with O_APPEND: lines from packages running in
	// parallel do not interleave.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaos: report to %s=%s: %w", envReport, path, err)
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("chaos: report to %s=%s: %w", envReport, path, err)
	}
	return nil
}

package chaos

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/recorder"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// replayByHand sets CHAOS_SEED as someone replaying a failure does, away
// from CI (which refuses a seed).
func replayByHand(t *testing.T, seed string) {
	t.Setenv("CI", "")
	t.Setenv(envSeed, seed)
}

func TestSeed(t *testing.T) {
	replayByHand(t, "12345")
	r := recorder.New(t)
	r.TestName = "TestX/sub"
	if got := Seed(r); got != 12345 {
		t.Fatalf("Seed = %d with %s=12345", got, envSeed)
	}
	r.Errorf("the test failed")
	r.RunCleanups()
	if got := strings.Join(r.Logs(), "\n"); !strings.Contains(got, "rerun with CHAOS_SEED=12345 go test -race -run '^TestX$/^sub$'") {
		t.Errorf("logs lack the rerun line:\n%s", got)
	}

	t.Setenv(envSeed, "")
	a, b := Seed(t), Seed(t)
	if a == b || a < 0 || b < 0 {
		t.Errorf("two random seeds %d, %d", a, b)
	}

	replayByHand(t, "x1")
	r = recorder.New(t)
	if !r.Run(func() { Seed(r) }) || !strings.Contains(r.Errors()[0], `CHAOS_SEED="x1"`) {
		t.Errorf("bad CHAOS_SEED: %v", r.Errors())
	}
}

func TestRandDeterministic(t *testing.T) {
	a, b := Rand(42), Rand(42)
	for range 100 {
		if a.Uint64() != b.Uint64() {
			t.Fatal("one seed, two sequences")
		}
	}
	if Rand(42).Uint64() == Rand(43).Uint64() {
		t.Error("seeds 42 and 43 begin alike")
	}
}

func TestBudget(t *testing.T) {
	t.Setenv(envTime, "")
	if got := Budget(t); got != shortBudget || Long() {
		t.Errorf("Budget %v, Long %v without %s", got, Long(), envTime)
	}
	t.Setenv(envTime, "10m")
	if got := Budget(t); got != 10*time.Minute || !Long() {
		t.Errorf("Budget %v, Long %v with 10m", got, Long())
	}
	for _, bad := range []string{"10", "-1m", "0s", "soon"} {
		t.Setenv(envTime, bad)
		r := recorder.New(t)
		if !r.Run(func() { Budget(r) }) || !strings.Contains(r.Errors()[0], bad) {
			t.Errorf("%s=%q: %v", envTime, bad, r.Errors())
		}
	}
}

func TestRepeat(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	replayByHand(t, "99")
	draws := func() []uint64 {
		var got []uint64
		n := repeat(t, "on", 0, 3, func(t *testing.T, rng *rand.Rand) { got = append(got, rng.Uint64()) })
		if n != 3 {
			t.Errorf("Repeat ran %d times, want 3", n)
		}
		return got
	}
	a := draws()
	if b := draws(); !reflect.DeepEqual(a, b) {
		t.Errorf("one seed, two schedules: %v, %v", a, b)
	}
	if a[0] != Rand(99).Uint64() {
		t.Error("run0 does not use CHAOS_SEED")
	}
	if a[1] != Rand(nextSeed(99)).Uint64() || a[1] == a[2] {
		t.Errorf("later runs do not follow the seed chain: %v", a)
	}

	start := time.Now()
	n := repeat(t, "off", 100*time.Millisecond, 1, func(t *testing.T, rng *rand.Rand) { time.Sleep(20 * time.Millisecond) })
	if took := time.Since(start); n < 2 || took < 100*time.Millisecond {
		t.Errorf("budget 100ms: %d runs in %v", n, took)
	}
}

func TestReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chaos.jsonl")
	t.Setenv(envReport, path)
	t.Setenv(envSeed, "")
	t.Setenv(testenv.EnvRedisServer, "")
	good := Row{Package: "p", Fault: "lost reply", Runs: 3, IDs: 1000, Violations: 0, ControlRuns: 2,
		ControlViolations: 7, Seed: 5, Seconds: 1.5}
	rows := []struct {
		row  Row
		errs string
	}{
		{good, ""},
		{Row{Package: "p", Fault: "bad", Runs: 1, Violations: 2, ControlRuns: 1, ControlViolations: 1}, "2 violations with the defence on"},
		{Row{Package: "p", Fault: "no control", Runs: 1}, "no control run"},
		{Row{Package: "p", Fault: "blind control", Runs: 1, ControlRuns: 4}, "4 control runs found no violation"},
	}
	for _, seed := range []string{"", "1"} {
		// A seed replays a schedule; it never turns a check off.
		replayByHand(t, seed)
		for _, tt := range rows {
			r := recorder.New(t)
			report(r, tt.row)
			got := strings.Join(r.Errors(), "\n")
			if (tt.errs == "") != (got == "") || !strings.Contains(got, tt.errs) {
				t.Errorf("CHAOS_SEED=%q, %s: errors %q, want %q", seed, tt.row.Fault, got, tt.errs)
			}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []Row
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var row Row
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, row)
	}
	if len(lines) != 8 || !reflect.DeepEqual(lines[0], good) {
		t.Errorf("report file holds %+v", lines)
	}
}

// TestSeedRefusedInCI: CHAOS_SEED replays a failure by hand; with CI set
// it fails the test instead of running one schedule for ever.
func TestSeedRefusedInCI(t *testing.T) {
	t.Setenv("CI", "true")
	t.Setenv(envSeed, "42")
	for name, f := range map[string]func(testing.TB){
		"Seed":   func(tb testing.TB) { Seed(tb) },
		"Repeat": func(tb testing.TB) { baseSeed(tb) },
	} {
		r := recorder.New(t)
		if !r.Run(func() { f(r) }) || !strings.Contains(strings.Join(r.Errors(), ""), "CI=true") {
			t.Errorf("%s with CHAOS_SEED and CI=true: %v; want it refused", name, r.Errors())
		}
	}
	t.Setenv("CI", "")
	r := recorder.New(t)
	if got := Seed(r); got != 42 || r.Failed() {
		t.Errorf("CHAOS_SEED=42 outside CI: %d, %v", got, r.Errors())
	}
}

// TestRepeatFiltered: when -run picks one run, repeat runs it and stops,
// instead of spinning through the budget. The test runs itself again
// with such a -run, and a budget of an hour: a repeat that spun through
// it would meet the test's deadline instead of returning.
func TestRepeatFiltered(t *testing.T) {
	if os.Getenv("FAULTS_TEST_FILTERED") != "" {
		var ran []string
		n := repeat(t, "on", time.Hour, 1, func(t *testing.T, _ *rand.Rand) { ran = append(ran, t.Name()) })
		t.Logf("Repeat returned %d after %v", n, ran)
		return
	}
	ctx := testenv.Deadline(t, time.Minute)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, self, "-test.run=^TestRepeatFiltered$/^on2$", "-test.v")
	cmd.Env = append(os.Environ(), "FAULTS_TEST_FILTERED=1", envSeed+"=5", "CI=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the filtered run, with an hour of budget: %v (the test's context: %v)\n%s", err, ctx.Err(), out)
	}
	if !strings.Contains(string(out), "Repeat returned 1 after [TestRepeatFiltered/on2]") {
		t.Errorf("output:\n%s", out)
	}
}

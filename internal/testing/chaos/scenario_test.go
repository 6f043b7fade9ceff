package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/recorder"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// fakeScenario is a scenario whose runs do what its two functions say,
// given the run's index on its side: for testing Scenario.Run's judgement.
type fakeScenario struct {
	retries           int
	control, defended func(i int, r *Run)
}

// run runs the fake under t and returns its row.
func (f fakeScenario) run(t *testing.T) Row {
	var offs, ons int
	return Scenario{Package: "p", Fault: "fake", Store: "memory", Defence: "guard", Budget: time.Nanosecond,
		retries: f.retries}.Run(t, func(t *testing.T, r *Run) {
		r.CountIDs(10)
		if r.Control {
			f.control(offs, r)
			offs++
			return
		}
		f.defended(ons, r)
		ons++
	})
}

func always(i int, r *Run) { r.Met("run %d met it", i) }

func never(int, *Run) {}

// scenarioCases are the fakes that TestScenarioJudged runs in a child
// test binary, with the exit status and output each must give.
var scenarioCases = map[string]struct {
	fake fakeScenario
	ok   bool
	want []string
}{
	"defended missed": {
		fakeScenario{retries: 2, control: func(i int, r *Run) { r.Violation("v%d", i) }, defended: never},
		false, []string{"0 of 3 runs with the defence on met the fault; the control needed 1", "missed its fault"},
	},
	"defended met less than the control needed": {
		fakeScenario{retries: 2,
			control: func(i int, r *Run) {
				r.Met("m")
				if i == 2 {
					r.Violation("found it on the third")
				}
			},
			defended: func(i int, r *Run) {
				if i%2 == 0 {
					r.Met("m")
				}
			}},
		false, []string{"2 of 3 runs with the defence on met the fault; the control needed 3"},
	},
	"control never met": {
		fakeScenario{retries: 2, control: never, defended: always},
		false, []string{"none of 3 control runs met the fault"},
	},
	"control met, found nothing": {
		fakeScenario{retries: 2, control: always, defended: always},
		false, []string{"3 of 3 control runs met the fault and found no violation"},
	},
	"violation with the defence on": {
		fakeScenario{control: func(i int, r *Run) { r.Violation("v") },
			defended: func(i int, r *Run) { r.Met("m"); r.Violation("ID 7 issued twice") }},
		false, []string{"violation: ID 7 issued twice", "1 violations with the defence on", "rerun with CHAOS_SEED="},
	},
	"replay of one defended run": {
		fakeScenario{control: never, defended: func(i int, r *Run) {
			r.Met("m")
			fmt.Printf("on run %d drew %d\n", i, r.Rand.Uint64())
		}},
		true, []string{"not judged, since go test -run left that side out",
			fmt.Sprintf("on run 0 drew %d\n", Rand(7).Uint64())},
	},
}

// scenarioEnv, set in a child test binary, names the scenarioCases entry
// that TestScenarioJudged runs there.
const scenarioEnv = "FAULTS_TEST_SCENARIO"

// TestScenarioJudged runs each of scenarioCases in a child test binary,
// where it fails or passes as a real chaos test would, and checks the
// verdict and the messages.
func TestScenarioJudged(t *testing.T) {
	if name := os.Getenv(scenarioEnv); name != "" {
		scenarioCases[name].fake.run(t)
		return
	}
	ctx := testenv.Deadline(t, 2*time.Minute)
	for name, tc := range scenarioCases {
		t.Run(name, func(t *testing.T) {
			run := "^TestScenarioJudged$"
			env := []string{scenarioEnv + "=" + name, "CI=", envReport + "="}
			if strings.HasPrefix(name, "replay") {
				run += "/^on0$"
				env = append(env, envSeed+"=7")
			}
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.v")
			cmd.Env = append(os.Environ(), env...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if tc.ok && err != nil || !tc.ok && !errors.As(err, &exit) {
				t.Errorf("exit %v, want ok=%v\n%s", err, tc.ok, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestScenario: a control that finds its violation on its second run
// that met the fault makes the defended side meet it twice; the row
// counts both sides and goes to CHAOS_REPORT.
func TestScenario(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chaos.jsonl")
	t.Setenv(envReport, path)
	t.Setenv(envSeed, "")
	t.Setenv(testenv.EnvRedisServer, "")
	var defendedRuns int
	row := fakeScenario{
		control: func(i int, r *Run) {
			if i > 0 {
				r.Met("m")
			}
			if i == 2 {
				r.Violation("v")
			}
		},
		defended: func(i int, r *Run) {
			defendedRuns++
			if i != 1 {
				r.Met("m")
			}
		},
	}.run(t)
	want := Row{Package: "p", Fault: "fake", Store: "memory", Defence: "guard",
		Runs: 3, Met: 2, ControlRuns: 3, ControlMet: 2, ControlViolations: 1, ControlNeeded: 2, IDs: 60,
		Seed: row.Seed, Seconds: row.Seconds}
	if row != want || defendedRuns != 3 {
		t.Errorf("row %+v, %d defended runs\nwant %+v, 3", row, defendedRuns, want)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var got []Row
	for sc.Scan() {
		var r Row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if len(got) != 1 || got[0] != row {
		t.Errorf("CHAOS_REPORT holds %+v", got)
	}
	if p := row.Problems(); len(p) != 0 {
		t.Errorf("problems of a good row: %q", p)
	}
}

// TestRowServer: in a pass that chose its Redis server program (make
// test's Valkey pass), a row names it beside its store, in the report's
// line, its messages and the table's store; a PostgreSQL store's row
// names none.
func TestRowServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chaos.jsonl")
	t.Setenv(envReport, path)
	t.Setenv(envSeed, "")
	t.Setenv(testenv.EnvRedisServer, "/usr/bin/valkey-server")
	row := fakeScenario{control: func(_ int, r *Run) { r.Violation("v") }, defended: always}.run(t)
	if row.Server != "valkey-server" || row.StoreName() != "memory on valkey-server" ||
		!strings.Contains(row.name(), "[memory on valkey-server, guard]") {
		t.Errorf("row %+v: store %q, name %q; want it run on valkey-server", row, row.StoreName(), row.name())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"server":"valkey-server"`) {
		t.Errorf("CHAOS_REPORT holds %s; want the server named", data)
	}
	for store, want := range map[string]string{"": "", "postgres": "", "postgres standby": "", "redis": "valkey-server"} {
		if got := serverFor(store); got != want {
			t.Errorf("serverFor(%q) = %q, want %q", store, got, want)
		}
	}
	t.Setenv(testenv.EnvRedisServer, "")
	if got := serverFor("redis"); got != "" {
		t.Errorf("serverFor(redis) = %q without %s; want none", got, testenv.EnvRedisServer)
	}
}

// TestScenarioFields: a Scenario without its names or with a negative
// bound fails at once.
func TestScenarioFields(t *testing.T) {
	for _, s := range []Scenario{
		{Fault: "f", Defence: "d"},
		{Package: "p", Defence: "d"},
		{Package: "p", Fault: "f"},
		{Package: "p", Fault: "f", Defence: "d", Budget: -1},
		{Package: "p", Fault: "f", Defence: "d", retries: -1},
	} {
		r := recorder.New(t)
		if !r.Run(func() { s.bounds(r) }) {
			t.Errorf("%+v: no fatal error", s)
		}
	}
}

// TestRowProblems: the judgement of rows that command chaosreport reads.
func TestRowProblems(t *testing.T) {
	for _, tt := range []struct {
		row  Row
		want string
	}{
		{Row{Runs: 2, Met: 2, ControlRuns: 1, ControlMet: 1, ControlViolations: 4, ControlNeeded: 1}, ""},
		{Row{Runs: 2, Met: 2, Violations: 1, ControlRuns: 1, ControlMet: 1, ControlViolations: 4, ControlNeeded: 1},
			"1 violations with the defence on"},
		{Row{Runs: 2, Met: 1, ControlRuns: 3, ControlMet: 3, ControlViolations: 4, ControlNeeded: 2},
			"1 of 2 runs with the defence on met the fault; the control needed 2"},
		{Row{Runs: 2, ControlRuns: 1, ControlViolations: 4}, "none of 1 control runs met the fault"},
		{Row{Runs: 1, Met: 1}, "no control run"},
		{Row{ControlRuns: 1, ControlMet: 1, ControlViolations: 1, ControlNeeded: 1}, "no run with the defence on"},
	} {
		if got := strings.Join(tt.row.Problems(), "; "); got != tt.want && !strings.Contains(got, tt.want) ||
			(tt.want == "") != (got == "") {
			t.Errorf("%+v: %q, want %q", tt.row, got, tt.want)
		}
	}
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

const goodRows = `{"package":"workerid","fault":"lost reply","store":"redis","defence":"take-back","runs":3,"met":3,"ids":1000,"tokens":0,"violations":0,"control_runs":1,"control_met":1,"control_violations":400,"control_needed":1,"seed":7,"seconds":20}
{"package":"tokens","fault":"failover","store":"redis","defence":"WaitReplicas","runs":2,"met":2,"ids":0,"tokens":50,"violations":0,"control_runs":3,"control_met":2,"control_violations":3,"control_needed":2,"seed":9,"seconds":30}
{"package":"pgkit/partition","fault":"moves","store":"postgres","defence":"lock order","runs":1,"met":1,"rows":700,"violations":0,"control_runs":1,"control_met":1,"control_violations":9,"control_needed":1,"seed":5,"seconds":8}

{"package":"workerid","fault":"lost reply","store":"redis","defence":"take-back","runs":2,"met":1,"ids":500,"tokens":0,"violations":0,"control_runs":1,"control_met":1,"control_violations":1,"control_needed":1,"seed":8,"seconds":10}
{"package":"workerid","fault":"lost reply","store":"postgres","defence":"take-back","runs":1,"met":1,"ids":70,"violations":0,"control_runs":1,"control_met":1,"control_violations":2,"control_needed":1,"seed":8,"seconds":10}
{"package":"workerid","fault":"lost reply","store":"redis","server":"valkey-server","defence":"take-back","runs":1,"met":1,"ids":90,"violations":0,"control_runs":1,"control_met":1,"control_violations":6,"control_needed":1,"seed":4,"seconds":5}
`

func TestRunGood(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(nil, strings.NewReader(goodRows), &out, &errOut); code != exitOK {
		t.Fatalf("exit %d; stderr %s", code, errOut.String())
	}
	// The stores of one fault kind stay apart, and so do the servers of
	// one store; runs of one store on one server add up.
	want := "| pgkit/partition | moves | postgres | lock order | 1 | 1 | 0 | 0 | 1 | 1 | 0 | 9 | 0 | 0 | 700 | 8 | ok |\n" +
		"| tokens | failover | redis | WaitReplicas | 2 | 2 | 0 | 0 | 3 | 2 | 1 | 3 | 0 | 50 | 0 | 30 | ok |\n" +
		"| workerid | lost reply | postgres | take-back | 1 | 1 | 0 | 0 | 1 | 1 | 0 | 2 | 70 | 0 | 0 | 10 | ok |\n" +
		"| workerid | lost reply | redis | take-back | 5 | 4 | 1 | 0 | 2 | 2 | 0 | 401 | 1500 | 0 | 0 | 30 | ok |\n" +
		"| workerid | lost reply | redis on valkey-server | take-back | 1 | 1 | 0 | 0 | 1 | 1 | 0 | 6 | 90 | 0 | 0 | 5 | ok |\n" +
		"| **all** | 5 rows, 0 broken | | | 10 | 9 | 1 | | 8 | 7 | 1 | | 1660 | 50 | 700 | | |\n"
	if !strings.HasSuffix(out.String(), want) {
		t.Errorf("table:\n%s\nwant it to end with:\n%s", out.String(), want)
	}
}

func TestRunBroken(t *testing.T) {
	for _, tt := range []struct{ row, want string }{
		{`{"package":"p","fault":"f","runs":1,"met":1,"violations":2,"control_runs":1,"control_met":1,"control_violations":1,"control_needed":1}`,
			"2 violations with the defence on"},
		{`{"package":"p","fault":"f","runs":1,"met":1}`, "no control run"},
		{`{"package":"p","fault":"f","runs":1,"met":1,"control_runs":3}`, "none of 3 control runs met the fault"},
		{`{"package":"p","fault":"f","runs":1,"met":1,"control_runs":3,"control_met":2}`,
			"2 of 3 control runs met the fault and found no violation"},
		{`{"package":"p","fault":"f","runs":4,"met":1,"control_runs":3,"control_met":2,"control_violations":5,"control_needed":2}`,
			"1 of 4 runs with the defence on met the fault; the control needed 2"},
		// A row counted without met runs (chaos.Report) is not evidence.
		{`{"package":"p","fault":"f","runs":4,"control_runs":3,"control_violations":5}`,
			"0 of 4 runs with the defence on met the fault"},
	} {
		var out, errOut bytes.Buffer
		if code := run(nil, strings.NewReader(tt.row), &out, &errOut); code != exitBroken {
			t.Errorf("%s: exit %d, want %d", tt.row, code, exitBroken)
		}
		if !strings.Contains(errOut.String(), tt.want) || !strings.Contains(out.String(), tt.want) {
			t.Errorf("%s: stdout %q, stderr %q; want %q", tt.row, out.String(), errOut.String(), tt.want)
		}
	}
}

func TestRunBadInput(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	if err := os.WriteFile(good, []byte(goodRows), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{"empty", nil, "", "no rows"},
		{"junk", nil, "not json\n", "<stdin>"},
		{"unknown field", nil, `{"fault":"f","violation":1}`, "unknown field"},
		{"no fault", nil, `{"package":"p"}`, "without a fault kind"},
		{"missing file", []string{good, filepath.Join(dir, "missing")}, "", "missing"},
		{"flag", []string{"-x"}, "", "usage"},
	} {
		var out, errOut bytes.Buffer
		if code := run(tt.args, strings.NewReader(tt.stdin), &out, &errOut); code != exitInput {
			t.Errorf("%s: exit %d, want %d", tt.name, code, exitInput)
		}
		if want := strings.ReplaceAll(tt.want, "<stdin>", "standard input:1"); !strings.Contains(errOut.String(), want) {
			t.Errorf("%s: stderr %q; want %q", tt.name, errOut.String(), want)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{good, good}, nil, &out, &errOut); code != exitOK || !strings.Contains(out.String(), "| 3000 | 0 | 0 |") {
		t.Errorf("two files: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

// TestMain bounds the package's tests as a whole (testenv.Main): several
// times their usual time on a busy machine.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 2*time.Minute))
}

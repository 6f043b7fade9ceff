package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodRows = `{"package":"idtype/workerid","fault":"lost reply","runs":3,"ids":1000,"tokens":0,"violations":0,"control_runs":1,"control_violations":400,"seed":7,"seconds":20}
{"package":"tokens","fault":"failover","runs":2,"ids":0,"tokens":50,"violations":0,"control_runs":2,"control_violations":3,"seed":9,"seconds":30}
{"package":"pgkit/partition","fault":"moves","runs":1,"ids":0,"tokens":0,"rows":700,"violations":0,"control_runs":1,"control_violations":9,"seed":5,"seconds":8}

{"package":"idtype/workerid","fault":"lost reply","runs":2,"ids":500,"tokens":0,"violations":0,"control_runs":1,"control_violations":1,"seed":8,"seconds":10}
`

func TestRunGood(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(nil, strings.NewReader(goodRows), &out, &errOut); code != exitOK {
		t.Fatalf("exit %d; stderr %s", code, errOut.String())
	}
	want := "| idtype/workerid | lost reply | 5 | 1500 | 0 | 0 | 0 | 2 | 401 | 30 | ok |\n" +
		"| pgkit/partition | moves | 1 | 0 | 0 | 700 | 0 | 1 | 9 | 8 | ok |\n" +
		"| tokens | failover | 2 | 0 | 50 | 0 | 0 | 2 | 3 | 30 | ok |\n" +
		"| **all** | 3 fault kinds in all | 8 | 1500 | 50 | 700 | 0 | 5 | 413 | | |\n"
	if !strings.HasSuffix(out.String(), want) {
		t.Errorf("table:\n%s\nwant it to end with:\n%s", out.String(), want)
	}
}

func TestRunBroken(t *testing.T) {
	for _, tt := range []struct{ row, want string }{
		{`{"package":"p","fault":"f","runs":1,"violations":2,"control_runs":1,"control_violations":1}`, "2 violations with the defence on"},
		{`{"package":"p","fault":"f","runs":1}`, "no control run"},
		{`{"package":"p","fault":"f","runs":1,"control_runs":3}`, "control found no violation"},
	} {
		var out, errOut bytes.Buffer
		if code := run(nil, strings.NewReader(tt.row), &out, &errOut); code != exitBroken {
			t.Errorf("%s: exit %d, want %d", tt.row, code, exitBroken)
		}
		if !strings.Contains(errOut.String(), tt.want) || !strings.Contains(out.String(), "**"+tt.want+"**") {
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
	if code := run([]string{good, good}, nil, &out, &errOut); code != exitOK || !strings.Contains(out.String(), "| 10 | 3000 |") {
		t.Errorf("two files: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/snowkeyhq/snowkey/idtype"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestDecode(t *testing.T) {
	code, out, errOut := runCLI("decode", "1541815603606036480")
	if code != 0 || out != "1541815603606036480\ttime=2022-06-28T16:07:40.105Z\tworker=378\tsequence=0\n" {
		t.Errorf("decode = %d, %q, %q", code, out, errOut)
	}
	code, out, _ = runCLI("decode", "--json", "1541815603606036480")
	var d struct {
		ID       string `json:"id"`
		Worker   int64  `json:"worker"`
		Sequence int64  `json:"sequence"`
	}
	if err := json.Unmarshal([]byte(out), &d); code != 0 || err != nil || d.ID != "1541815603606036480" || d.Worker != 378 {
		t.Errorf("decode --json = %d, %q (%v)", code, out, err)
	}
	// Another layout: 8 worker bits, 14 sequence bits, epoch 2020.
	l := idtype.Layout{Epoch: idtype.DefaultLayout.Epoch.AddDate(10, 0, 0), WorkerBits: 8, SequenceBits: 14}
	id, err := l.Compose(l.Epoch.AddDate(1, 0, 0), 200, 9000)
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI("decode", "--epoch", l.Epoch.Format("2006-01-02T15:04:05.000Z07:00"), "--worker-bits", "8", "--sequence-bits", "14", id.String())
	if code != 0 || !strings.Contains(out, "worker=200\tsequence=9000") {
		t.Errorf("decode with a layout = %d, %q", code, out)
	}
}

func TestDecodeBadInput(t *testing.T) {
	code, out, errOut := runCLI("decode", "12x", "5")
	if code != 1 || !strings.Contains(errOut, `"12x"`) || !strings.Contains(out, "5\t") {
		t.Errorf("decode 12x 5 = %d, %q, %q; want exit 1, the bad ID named, the good one decoded", code, out, errOut)
	}
	for _, args := range [][]string{
		{"decode"},
		{"decode", "--worker-bits", "60", "1"},
		{"decode", "--epoch", "yesterday", "1"},
		{"gen", "-n", "-1"},
		{"gen", "--worker", "5000"},
		{"gen", "extra"},
		{"at"},
		{"at", "not-a-time"},
		{"frobnicate"},
		{},
	} {
		if code, _, errOut := runCLI(args...); code != 2 || errOut == "" && len(args) > 0 {
			t.Errorf("%q = exit %d, stderr %q; want exit 2 and a message", args, code, errOut)
		}
	}
}

func TestGen(t *testing.T) {
	code, out, errOut := runCLI("gen", "-n", "10000", "--worker", "3")
	lines := strings.Fields(out)
	if code != 0 || len(lines) != 10000 {
		t.Fatalf("gen = %d, %d lines, %q", code, len(lines), errOut)
	}
	var last idtype.ID
	for _, s := range lines {
		id, err := idtype.Parse(s)
		if err != nil || id <= last || idtype.DefaultLayout.Decode(id).Worker != 3 {
			t.Fatalf("gen line %q: %d, %v", s, id, err)
		}
		last = id
	}
}

// Flags may follow the arguments, as users type them; "--" ends the flags.
func TestFlagsAfterArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string // a part of stdout
	}{
		{[]string{"decode", "1541815603606036480", "--json"}, 0, `"worker":378`},
		{[]string{"decode", "1541815603606036480", "--worker-bits", "10", "5", "--json"}, 0, `"id":"5"`},
		{[]string{"decode", "--", "1541815603606036480"}, 0, "worker=378"},
		{[]string{"decode", "--", "--json"}, 1, ""},
		{[]string{"at", "2026-11-01T00:00:00Z", "--worker-bits", "10"}, 0, "2116681624581046272\n"},
		{[]string{"gen", "--worker", "3", "-n", "2"}, 0, "\n"},
		{[]string{"gen", "--worker", "3", "extra", "-n", "2"}, 2, ""},
	} {
		code, out, errOut := runCLI(tc.args...)
		if code != tc.code || !strings.Contains(out, tc.out) {
			t.Errorf("%q = exit %d, %q, %q; want exit %d and %q", tc.args, code, out, errOut, tc.code, tc.out)
		}
	}
}

func TestAt(t *testing.T) {
	code, out, _ := runCLI("at", "2026-11-01T00:00:00Z")
	if code != 0 || out != "2116681624581046272\n" {
		t.Errorf("at = %d, %q", code, out)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"decode", "--help"}, {"gen", "-h"}} {
		code, out, errOut := runCLI(args...)
		if code != 0 || out+errOut == "" {
			t.Errorf("%q = exit %d with no help", args, code)
		}
	}
}

// TestGenNeedsWorker: gen without --worker is a usage error, not worker 0.
// Two runs sharing a number issue the same IDs, and 0 is also the first
// number an app's lease takes, so no number is safe to assume.
func TestGenNeedsWorker(t *testing.T) {
	for _, args := range [][]string{{"gen"}, {"gen", "-n", "5"}, {"gen", "-n", "5", "--worker-bits", "8"}} {
		code, out, errOut := runCLI(args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "--worker is required") {
			t.Errorf("%q = exit %d, stdout %q, stderr %q; want exit 2, no IDs and a message that --worker is required",
				args, code, out, errOut)
		}
	}
	// An explicit 0 is the caller's choice, and works.
	if code, out, errOut := runCLI("gen", "--worker", "0", "-n", "2"); code != 0 || len(strings.Fields(out)) != 2 {
		t.Errorf("gen --worker 0 = exit %d, %q, %q", code, out, errOut)
	}
}

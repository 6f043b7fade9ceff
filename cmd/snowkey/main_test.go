package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
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

// TestUsageErrorsOnce: a usage error exits 2 and is printed once, with a
// pointer to the help, not the help itself.
func TestUsageErrorsOnce(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"decode", "--bogus", "1"}, "flag provided but not defined: -bogus"},
		{[]string{"gen", "--worker"}, "flag needs an argument: -worker"},
		{[]string{"gen", "--worker", "x"}, `invalid value "x" for flag -worker`},
		{[]string{"at", "--epoch"}, "flag needs an argument: -epoch"},
		{[]string{"gen", "-n", "5"}, "--worker is required"},
	} {
		code, out, errOut := runCLI(tc.args...)
		if code != 2 || out != "" || strings.Count(errOut, tc.msg) != 1 || strings.Contains(errOut, "Usage:") {
			t.Errorf("%q = exit %d, stdout %q, stderr %q; want exit 2 and %q once, without the help", tc.args, code, out, errOut, tc.msg)
		}
	}
}

// TestDecodeNegative: "-1" is an ID to refuse as negative, not a flag.
func TestDecodeNegative(t *testing.T) {
	for _, args := range [][]string{{"decode", "-1"}, {"decode", "5", "-1", "--json"}, {"decode", "--", "-1"}} {
		code, _, errOut := runCLI(args...)
		if code != 1 || !strings.Contains(errOut, `"-1": negative`) || strings.Contains(errOut, "flag") {
			t.Errorf("%q = exit %d, stderr %q; want exit 1 reporting a negative ID", args, code, errOut)
		}
	}
	// A flag's negative value is still the flag's.
	if code, _, errOut := runCLI("gen", "--worker", "1", "-n", "-1"); code != 2 || !strings.Contains(errOut, "-n -1 is negative") {
		t.Errorf("gen -n -1 = exit %d, %q; want exit 2, -n -1 is negative", code, errOut)
	}
}

// TestGenSmallSequence: with no sequence bits a millisecond holds one ID,
// and gen still prints all it was asked for, taking one NextN per
// millisecond. The control shows the fault it avoids: one NextN of the
// whole batch must wait 1.5 s for the clock, past the default MaxWait. It
// runs on a clock that each sleep moves on by exactly what was asked, as
// an idle machine's would: on a busy one a sleep lasts longer, the call
// asks for less (up to the next millisecond from wherever it woke), and
// the control's asked-for sleeps had added up to less than MaxWait.
func TestGenSmallSequence(t *testing.T) {
	testenv.Deadline(t, 2*time.Minute)
	code, out, errOut := runCLI("gen", "--worker", "5", "--sequence-bits", "0", "-n", "1500")
	lines := strings.Fields(out)
	if code != 0 || len(lines) != 1500 {
		t.Fatalf("gen --sequence-bits 0 -n 1500 = exit %d, %d IDs, %q", code, len(lines), errOut)
	}
	l := idtype.Layout{Epoch: idtype.DefaultLayout.Epoch, WorkerBits: 10, SequenceBits: 0}
	var last idtype.ID
	for _, s := range lines {
		id, err := idtype.Parse(s)
		if err != nil || id <= last || l.Decode(id).Worker != 5 {
			t.Fatalf("line %q: %d, %v", s, id, err)
		}
		last = id
	}
	clock := &exactClock{}
	clock.ns.Store(time.Now().UnixNano())
	g, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 5, Layout: l, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	start := clock.UnixNano()
	if err := g.NextN(make([]idtype.ID, 1500)); !errors.Is(err, idtype.ErrClockBehind) {
		t.Fatalf("control: one NextN of 1,500 one-a-millisecond IDs: %v after %v of sleeps, want ErrClockBehind",
			err, time.Duration(clock.UnixNano()-start))
	}
}

// exactClock is an idtype.Clock that only a sleep moves on, by exactly
// the time asked for.
type exactClock struct{ ns atomic.Int64 }

func (c *exactClock) UnixNano() int64       { return c.ns.Load() }
func (c *exactClock) Sleep(d time.Duration) { c.ns.Add(int64(d)) }

// writeCounter counts the writes that reach it.
type writeCounter struct {
	bytes.Buffer
	writes int
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// TestGenBuffersOutput: gen writes its lines in buffers of 64 KiB, not one
// write (a system call on a pipe) per ID, and every line arrives.
func TestGenBuffersOutput(t *testing.T) {
	var out writeCounter
	var errb bytes.Buffer
	if code := run([]string{"gen", "--worker", "3", "-n", "100000"}, &out, &errb); code != 0 {
		t.Fatalf("gen = exit %d, %q", code, errb.String())
	}
	if n := strings.Count(out.String(), "\n"); n != 100000 {
		t.Fatalf("%d lines, want 100000", n)
	}
	// 100,000 lines of 20 bytes: 2 MB, 31 buffers of 64 KiB.
	if want := out.Len()/(64<<10) + 1; out.writes > want {
		t.Fatalf("%d writes for %d bytes; want at most %d", out.writes, out.Len(), want)
	}
}

// failWriter fails every write, as a closed pipe does.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("write |1: broken pipe") }

// TestGenWriteError: a failed write ends gen with exit 1 and the error.
func TestGenWriteError(t *testing.T) {
	var errb bytes.Buffer
	if code := run([]string{"gen", "--worker", "3", "-n", "100000"}, failWriter{}, &errb); code != 1 ||
		!strings.Contains(errb.String(), "broken pipe") {
		t.Fatalf("gen into a failing writer = exit %d, %q; want exit 1 and the write error", code, errb.String())
	}
	if code := run([]string{"decode", "5"}, failWriter{}, &errb); code != 1 {
		t.Fatalf("decode into a failing writer = exit %d; want 1, the error of the final flush", code)
	}
}

// TestMain bounds the package's tests as a whole (testenv.Main): several
// times their usual time on a busy machine.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, 3*time.Minute))
}

// TestVersion: `snowkey version` and `snowkey --version` print the module
// version of the build information, "(devel)" without one. That `go
// install .../cmd/snowkey@vX.Y.Z` records vX.Y.Z is shown by
// internal/checks/release's TestInstallFromTags.
func TestVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		code, out, errOut := runCLI(arg)
		info, ok := debug.ReadBuildInfo()
		if code != 0 || out != version(info, ok) || !strings.HasPrefix(out, "snowkey ") || errOut != "" {
			t.Errorf("snowkey %s = %d, %q, %q", arg, code, out, errOut)
		}
	}
	for _, c := range []struct {
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/snowkeyhq/snowkey", Version: "v0.1.0"}}, true, "snowkey v0.1.0 go1.26.8\n"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/snowkeyhq/snowkey", Version: "(devel)"}}, true, "snowkey (devel) go1.26.8\n"},
		{&debug.BuildInfo{GoVersion: "go1.26.8"}, true, "snowkey (devel) go1.26.8\n"},
		{nil, false, "snowkey (devel)\n"},
	} {
		if got := version(c.info, c.ok); got != c.want {
			t.Errorf("version(%+v) = %q, want %q", c.info, got, c.want)
		}
	}
}

package recorder_test

import (
	"slices"
	"testing"

	"github.com/snowkeyhq/snowkey/internal/testing/recorder"
)

// helper stands for a test helper that logs, and fails or skips when
// told to.
func helper(tb testing.TB, do string) {
	tb.Helper()
	tb.Logf("helper %s", do)
	switch do {
	case "fatal":
		tb.Fatalf("cannot go on: %d", 1)
	case "skip":
		tb.Skip("no server")
	case "error":
		tb.Errorf("wrong: %d", 2)
	}
}

func TestRecords(t *testing.T) {
	for _, tt := range []struct {
		do            string
		ended, failed bool
		errs          []string
		skipped       bool
		skipMsg       string
		logs          []string
	}{
		{do: "fatal", ended: true, failed: true, errs: []string{"cannot go on: 1"}, logs: []string{"helper fatal"}},
		{do: "skip", ended: true, skipped: true, skipMsg: "no server", logs: []string{"helper skip"}},
		{do: "error", errs: []string{"wrong: 2"}, failed: true, logs: []string{"helper error"}},
		{do: "nothing", logs: []string{"helper nothing"}},
	} {
		r := recorder.New(t)
		ended := r.Run(func() { helper(r, tt.do) })
		msg, skipped := r.SkipMessage()
		if ended != tt.ended || r.Failed() != tt.failed || !slices.Equal(r.Errors(), tt.errs) ||
			skipped != tt.skipped || r.Skipped() != tt.skipped || msg != tt.skipMsg || !slices.Equal(r.Logs(), tt.logs) {
			t.Errorf("%s: ended %v, failed %v, errors %q, skipped %v %q, logs %q; want %v, %v, %q, %v %q, %q", tt.do,
				ended, r.Failed(), r.Errors(), skipped, msg, r.Logs(), tt.ended, tt.failed, tt.errs, tt.skipped, tt.skipMsg, tt.logs)
		}
	}
}

func TestCleanupsLastFirst(t *testing.T) {
	r := recorder.New(t)
	var order []int
	for i := range 3 {
		r.Cleanup(func() { order = append(order, i) })
	}
	r.RunCleanups()
	r.RunCleanups() // forgotten once run
	if !slices.Equal(order, []int{2, 1, 0}) {
		t.Errorf("cleanups ran in order %v, want [2 1 0]", order)
	}
}

func TestName(t *testing.T) {
	r := recorder.New(t)
	if got := r.Name(); got != t.Name() {
		t.Errorf("Name %q, want the wrapped test's %q", got, t.Name())
	}
	r.TestName = "TestX/sub"
	if got := r.Name(); got != "TestX/sub" {
		t.Errorf("Name %q, want TestName", got)
	}
}

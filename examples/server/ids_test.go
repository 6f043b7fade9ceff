package main

import (
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snowkeyhq/snowkey/internal/testing/testenv"
)

// TestFixedWorkerLogsNoZeroFloor: a fixed worker on a fresh database has
// no restart floor, and its log line names none (a zero time there reads
// as a wrong time, not as "none"); restarted on the same database after
// issuing IDs, the line names the floor it starts after, so the check can
// see one.
func TestFixedWorkerLogsNoZeroFloor(t *testing.T) {
	t.Parallel()
	ctx := testenv.Deadline(t, 2*time.Minute)
	cfg := realServers().config(t)
	cfg.Worker = 5
	cfg.Throttle = generous()
	fixedLine := func(log *testenv.LogBuffer) string {
		t.Helper()
		for _, l := range strings.Split(log.String(), "\n") {
			if strings.Contains(l, `msg="ids: fixed worker number"`) {
				return l
			}
		}
		t.Fatalf("no fixed worker line in:\n%s", log.String())
		return ""
	}

	// open opens the App on cfg, logging to log, and runs f on it
	// before closing it: the two Apps share worker 5 one after the
	// other, never at once.
	open := func(log *testenv.LogBuffer, f func(srv *httptest.Server)) {
		t.Helper()
		cfg.Logger = slog.New(slog.NewTextHandler(log, nil))
		app, err := Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(app.Handler())
		f(srv)
		srv.Close()
		if err := app.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}

	var first, second testenv.LogBuffer
	open(&first, func(srv *httptest.Server) {
		if line := fixedLine(&first); strings.Contains(line, "starts_after") {
			t.Errorf("a fresh database logs a restart floor: %s", line)
		}
		signupLogin(t, srv, "floor@example.com", goodPassword)
	})
	open(&second, func(*httptest.Server) {
		if line := fixedLine(&second); !strings.Contains(line, "starts_after="+strconv.Itoa(time.Now().Year())) {
			t.Errorf("a restart after issuing IDs logs no floor of this year: %s", line)
		}
	})
}

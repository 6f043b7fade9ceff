package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/snowkeyhq/snowkey/workerid"
)

// readyTimeout bounds each readiness check: a dependency that does not
// answer within it is not ready.
const readyTimeout = 2 * time.Second

// healthz: GET /healthz -> 200 while the process serves HTTP. It checks
// nothing else: a liveness probe that failed on a database outage would
// restart every instance at once and cure nothing.
func (a *App) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Status string `json:"status"`
	}{"ok"})
}

// readyzPublic: GET /readyz on the public listener -> the status of
// readyz alone, {"status": "ready"} or 503 {"status": "not ready"}: what a
// load balancer needs, and nothing of the worker number or the lease,
// which OpsHandler's /readyz shows.
func (a *App) readyzPublic(w http.ResponseWriter, r *http.Request) {
	status, word, _ := a.readiness(r)
	writeJSON(w, status, struct {
		Status string `json:"status"`
	}{word})
}

// readyCheck is one dependency's answer in /readyz.
type readyCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// readyz: GET /readyz -> 200 when the database and Redis answer and the
// worker lease is confirmed, so that the instance can serve every
// request; else 503, naming what failed. A load balancer sends traffic
// only to ready instances. The checks run at once, each bounded by
// readyTimeout; the answer says no more than "unreachable" of an error,
// which goes to the log.
func (a *App) readyz(w http.ResponseWriter, r *http.Request) {
	status, word, checks := a.readiness(r)
	writeJSON(w, status, struct {
		Status string       `json:"status"`
		Checks []readyCheck `json:"checks"`
	}{word, checks})
}

// readiness runs the checks of readyz.
func (a *App) readiness(r *http.Request) (int, string, []readyCheck) {
	checks := []readyCheck{{Name: "database"}, {Name: "redis"}, {Name: "lease"}}
	ping := []func(context.Context) error{
		a.sqlDB.PingContext,
		func(ctx context.Context) error { return a.rdb.Ping(ctx).Err() },
	}
	var wg sync.WaitGroup
	for i, f := range ping {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
			defer cancel()
			if err := f(ctx); err != nil {
				a.log.WarnContext(r.Context(), "readyz: "+checks[i].Name+" unreachable", "error", err)
				checks[i].Detail = "unreachable"
				return
			}
			checks[i].OK, checks[i].Detail = true, "ok"
		})
	}
	checks[2].OK, checks[2].Detail = a.leaseReady()
	wg.Wait()
	status, word := http.StatusOK, "ready"
	for _, c := range checks {
		if !c.OK {
			status, word = http.StatusServiceUnavailable, "not ready"
		}
	}
	return status, word, checks
}

// leaseReady reports whether the generator may issue IDs: with a fixed
// worker always; with a lease while it is held.
func (a *App) leaseReady() (bool, string) {
	if a.lease == nil {
		return true, fmt.Sprintf("fixed worker %d", a.gen.Worker())
	}
	st := a.lease.Status()
	since := time.Since(st.LastRenewal).Round(100 * time.Millisecond)
	switch st.State {
	case workerid.Held:
		return true, fmt.Sprintf("worker %d held, renewed %v ago", st.Worker, since)
	case workerid.Expired:
		return false, fmt.Sprintf("worker %d expired: no renewal confirmed for %v", st.Worker, since)
	default:
		return false, fmt.Sprintf("worker %d %s", st.Worker, st.State)
	}
}

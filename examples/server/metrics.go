package main

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/snowkeyhq/snowkey/idtype/workerid"
)

// metrics is what GET /metrics serves, in the Prometheus text format, from
// a registry of the App's own (no global state): the HTTP requests by
// route pattern and status, and, read at each scrape, the generator's,
// the lease's and the token manager's own counters, the rate limits and
// the password-hash queue.
//
// Every label has a bounded set of values: a route is one of the
// ServeMux's patterns (the method is part of it) or "unmatched", never a
// path, which a client chooses; a status is a number from 100 to 599 or
// "other".
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
}

func newMetrics(a *App) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snowkey_example_http_requests_total",
			Help: "HTTP requests served, by route pattern and status.",
		}, []string{"route", "status"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "snowkey_example_http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by route pattern and status.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "status"}),
	}
	m.reg.MustRegister(m.requests, m.durations, appCollector{a},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// handler serves the registry.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, MaxRequestsInFlight: 4})
}

// request counts one request.
func (m *metrics) request(pattern string, status int, took time.Duration) {
	route := pattern
	if route == "" {
		route = "unmatched"
	}
	st := "other"
	switch {
	case status == 0: // nothing written: net/http sends 200
		st = "200"
	case status >= 100 && status <= 599:
		st = strconv.Itoa(status)
	}
	m.requests.WithLabelValues(route, st).Inc()
	m.durations.WithLabelValues(route, st).Observe(took.Seconds())
}

// The metrics read at each scrape.
var (
	descIDs = prometheus.NewDesc("snowkey_ids_issued_total",
		"IDs the generator has issued (idtype.Stats.IDs).", nil, nil)
	descWaits = prometheus.NewDesc("snowkey_id_clock_waits_total",
		"Times the generator waited for the clock (idtype.Stats.Waits).", nil, nil)
	descBackward = prometheus.NewDesc("snowkey_id_clock_backward_steps_total",
		"Times the generator found the clock earlier than before (idtype.Stats.BackwardSteps).", nil, nil)
	descMaxBackward = prometheus.NewDesc("snowkey_id_clock_max_backward_seconds",
		"Largest backward step of the clock seen (idtype.Stats.MaxBackward).", nil, nil)
	descMaxDrift = prometheus.NewDesc("snowkey_id_max_drift_seconds",
		"Furthest ahead of its clock the generator has issued an ID (idtype.Stats.MaxDrift).", nil, nil)
	descWorker = prometheus.NewDesc("snowkey_id_worker",
		"The generator's worker number.", []string{"source"}, nil)
	descLeaseState = prometheus.NewDesc("snowkey_lease_state",
		"1 for the worker lease's current state, 0 for the others.", []string{"state"}, nil)
	descLeaseRenewal = prometheus.NewDesc("snowkey_lease_last_renewal_timestamp_seconds",
		"When the lease's last confirmed renewal (or its acquisition) was sent, Unix time.", nil, nil)
	descLeaseValid = prometheus.NewDesc("snowkey_lease_valid_until_timestamp_seconds",
		"The last moment the generator may issue without a further renewal, Unix time.", nil, nil)
	descLeaseRenewals = prometheus.NewDesc("snowkey_lease_renewals_total",
		"Confirmed renewals of the lease.", nil, nil)
	descLeaseFailures = prometheus.NewDesc("snowkey_lease_renewal_failures",
		"Renewals that have failed since the last confirmed one.", nil, nil)
	descRefreshFailures = prometheus.NewDesc("snowkey_tokens_refresh_failures_total",
		"Idle-timeout refreshes Redis did not take (tokens.Stats.RefreshFailures).", nil, nil)
	descValidations = prometheus.NewDesc("snowkey_tokens_validations_total",
		"Token validations by result: ok, invalid, unavailable (tokens.Stats).", []string{"result"}, nil)
	descCache = prometheus.NewDesc("snowkey_tokens_cache_lookups_total",
		"Lookups in the Manager's in-process cache by result: hit, miss (tokens.Stats).", []string{"result"}, nil)
	descRefreshes = prometheus.NewDesc("snowkey_tokens_refreshes_total",
		"Idle-timeout refreshes written (tokens.Stats.Refreshes).", nil, nil)
	descRevocations = prometheus.NewDesc("snowkey_tokens_revocations_total",
		"Sessions ended by a revocation or rotation (tokens.Stats.Revocations).", nil, nil)
	descIssued = prometheus.NewDesc("snowkey_tokens_issued_total",
		"Sessions issued (tokens.Stats.Issued).", nil, nil)
	descThrottled = prometheus.NewDesc("snowkey_example_throttled_total",
		"Requests answered 429 by a rate limit.", []string{"limit"}, nil)
	descHashes = prometheus.NewDesc("snowkey_example_password_hashes_total",
		"Password hashes computed (signups and logins that reached the hash pool).", nil, nil)
	descHashRejected = prometheus.NewDesc("snowkey_example_password_hash_rejected_total",
		"Requests answered 503 because the hash pool and its queue were full.", nil, nil)
	descHashPending = prometheus.NewDesc("snowkey_example_password_hash_pending",
		"Requests hashing a password or waiting for a slot now.", nil, nil)
)

// appCollector reads the App's counters at each scrape.
type appCollector struct{ a *App }

func (c appCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descIDs, descWaits, descBackward, descMaxBackward, descMaxDrift, descWorker,
		descLeaseState, descLeaseRenewal, descLeaseValid, descLeaseRenewals, descLeaseFailures,
		descRefreshFailures, descValidations, descCache, descRefreshes, descRevocations, descIssued, descThrottled, descHashes, descHashRejected, descHashPending} {
		ch <- d
	}
}

func (c appCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	s := a.gen.Stats()
	counter(descIDs, float64(s.IDs))
	counter(descWaits, float64(s.Waits))
	counter(descBackward, float64(s.BackwardSteps))
	gauge(descMaxBackward, s.MaxBackward.Seconds())
	gauge(descMaxDrift, s.MaxDrift.Seconds())
	source := "fixed"
	if a.lease != nil {
		source = "lease"
		st := a.lease.Status()
		for _, state := range []workerid.State{workerid.Held, workerid.Expired, workerid.Lost, workerid.Closed} {
			v := 0.0
			if st.State == state {
				v = 1
			}
			gauge(descLeaseState, v, state.String())
		}
		gauge(descLeaseRenewal, unixSeconds(st.LastRenewal))
		gauge(descLeaseValid, unixSeconds(st.ValidUntil))
		counter(descLeaseRenewals, float64(st.Renewals))
		gauge(descLeaseFailures, float64(st.Failures))
	}
	gauge(descWorker, float64(a.gen.Worker()), source)
	ts := a.tokens.Stats()
	counter(descRefreshFailures, float64(ts.RefreshFailures))
	counter(descValidations, float64(ts.ValidationsOK), "ok")
	counter(descValidations, float64(ts.ValidationsInvalid), "invalid")
	counter(descValidations, float64(ts.ValidationsUnavailable), "unavailable")
	counter(descCache, float64(ts.CacheHits), "hit")
	counter(descCache, float64(ts.CacheMisses), "miss")
	counter(descRefreshes, float64(ts.Refreshes))
	counter(descRevocations, float64(ts.Revocations))
	counter(descIssued, float64(ts.Issued))
	for r := range numRules {
		counter(descThrottled, float64(a.limits.denied[r].Load()), r.name())
	}
	counter(descHashes, float64(a.hashes.hashes.Load()))
	counter(descHashRejected, float64(a.hashes.rejected.Load()))
	gauge(descHashPending, float64(a.hashes.pending.Load()))
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

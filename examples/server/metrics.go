package main

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/snowkeyhq/snowkey/extra/snowkeyprom"
)

// metrics is what GET /metrics serves, in the Prometheus text format, from
// a registry of the App's own (no global state): the HTTP requests by
// route pattern and status; the generator's, the lease's and the token
// manager's own counters, read at each scrape by snowkeyprom's
// collector; and the rate limits and the password-hash queue.
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

func newMetrics(a *App) (*metrics, error) {
	snowkey, err := snowkeyprom.NewCollector(snowkeyprom.Options{Generator: a.gen, Lease: a.lease, Tokens: a.tokens})
	if err != nil {
		return nil, err
	}
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
	m.reg.MustRegister(m.requests, m.durations, snowkey, appCollector{a},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m, nil
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

// The example's own metrics read at each scrape.
var (
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
	for _, d := range []*prometheus.Desc{descThrottled, descHashes, descHashRejected, descHashPending} {
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
	for r := range numRules {
		counter(descThrottled, float64(a.limits.denied[r].Load()), r.name())
	}
	counter(descHashes, float64(a.hashes.hashes.Load()))
	counter(descHashRejected, float64(a.hashes.rejected.Load()))
	gauge(descHashPending, float64(a.hashes.pending.Load()))
}

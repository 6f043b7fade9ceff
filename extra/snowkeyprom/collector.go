// Package snowkeyprom exports snowkey's statistics to Prometheus: a
// Collector reads, at each scrape, a generator's Stats, a worker lease's
// Status and a token Manager's Stats, and reports them as metrics.
//
//	c, err := snowkeyprom.NewCollector(snowkeyprom.Options{Generator: gen, Lease: lease, Tokens: manager})
//	if err != nil {
//		return err
//	}
//	registry.MustRegister(c)
//
// It is a module of its own (github.com/snowkeyhq/snowkey/extra/snowkeyprom),
// so that snowkey's own module does not depend on the Prometheus client.
// Reading costs what Stats and Status cost: a few atomic loads, and the
// lease's lock for a moment.
//
// The metrics, with the default Namespace "snowkey":
//
//	snowkey_ids_issued_total                          counter  Generator: IDs issued
//	snowkey_id_clock_waits_total                      counter  Generator: waits for the clock
//	snowkey_id_clock_backward_steps_total             counter  Generator: backward clock steps seen
//	snowkey_id_clock_max_backward_seconds             gauge    Generator: largest backward step
//	snowkey_id_max_drift_seconds                      gauge    Generator: furthest ahead of its clock
//	snowkey_id_worker{source="fixed"|"lease"}         gauge    Generator: its worker number
//	snowkey_lease_state{state}                        gauge    Lease: 1 for its state, 0 for the others
//	snowkey_lease_last_renewal_timestamp_seconds      gauge    Lease: last confirmed renewal, Unix time
//	snowkey_lease_valid_until_timestamp_seconds       gauge    Lease: last moment it covers, Unix time
//	snowkey_lease_renewals_total                      counter  Lease: confirmed renewals
//	snowkey_lease_renewal_failures                    gauge    Lease: failed renewals since the last confirmed one
//	snowkey_tokens_issued_total                       counter  Tokens: sessions issued
//	snowkey_tokens_revocations_total                  counter  Tokens: sessions revoked
//	snowkey_tokens_validations_total{result}          counter  Tokens: validations, by ok, invalid, unavailable
//	snowkey_tokens_cache_lookups_total{result}        counter  Tokens: cache lookups, by hit, miss
//	snowkey_tokens_refreshes_total                    counter  Tokens: idle-timeout refreshes written
//	snowkey_tokens_refresh_failures_total             counter  Tokens: refreshes Redis did not take
//
// A timestamp that has not happened yet (a lease never renewed) is
// reported as 0.
package snowkeyprom

import (
	"fmt"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowkeyhq/snowkey/idtype"
	"github.com/snowkeyhq/snowkey/tokens"
	"github.com/snowkeyhq/snowkey/workerid"
)

// DefaultNamespace is the first word of every metric name when
// Options.Namespace is empty.
const DefaultNamespace = "snowkey"

// Options says what a Collector reads. Each of Generator, Lease and
// Tokens is optional, and what is nil is not reported; at least one must
// be set.
type Options struct {
	// Generator is the ID generator whose Stats and worker number are
	// reported.
	Generator *idtype.Generator
	// Lease is the worker lease the generator runs on, whose Status is
	// reported; nil for a fixed worker number (snowkey_id_worker's
	// source label then says "fixed").
	Lease *workerid.Lease
	// Tokens is the session Manager whose Stats are reported.
	Tokens *tokens.Manager
	// Namespace is the first word of every metric name, before "_".
	// Empty means DefaultNamespace. It must be a Prometheus metric name
	// of its own: letters, digits and underscores, not starting with a
	// digit.
	Namespace string
	// ConstLabels are added to every metric, such as the name of the
	// service when several share a registry. Nil adds none.
	ConstLabels prometheus.Labels
}

// A Collector is a prometheus.Collector of snowkey's statistics. It is
// safe for concurrent scrapes.
type Collector struct {
	opts Options

	ids, waits, backward, maxBackward, maxDrift, worker      *prometheus.Desc
	leaseState, leaseRenewal, leaseValid, leaseRenewals      *prometheus.Desc
	leaseFailures                                            *prometheus.Desc
	issued, revocations, validations, cache, refreshes, refs *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

var namespaceRe = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// NewCollector returns a Collector of what opts names. The error wraps
// idtype.ErrInvalidOptions when opts names nothing to collect or its
// Namespace is not a metric name.
func NewCollector(opts Options) (*Collector, error) {
	if opts.Generator == nil && opts.Lease == nil && opts.Tokens == nil {
		return nil, fmt.Errorf("%w: snowkeyprom: Options names no Generator, Lease or Tokens to collect", idtype.ErrInvalidOptions)
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if !namespaceRe.MatchString(opts.Namespace) {
		return nil, fmt.Errorf("%w: snowkeyprom: Namespace %q is not a metric name", idtype.ErrInvalidOptions, opts.Namespace)
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(opts.Namespace+"_"+name, help, labels, opts.ConstLabels)
	}
	return &Collector{
		opts:        opts,
		ids:         desc("ids_issued_total", "IDs the generator has issued (idtype.Stats.IDs)."),
		waits:       desc("id_clock_waits_total", "Times the generator waited for the clock (idtype.Stats.Waits)."),
		backward:    desc("id_clock_backward_steps_total", "Times the generator found the clock earlier than before (idtype.Stats.BackwardSteps)."),
		maxBackward: desc("id_clock_max_backward_seconds", "Largest backward step of the clock seen (idtype.Stats.MaxBackward)."),
		maxDrift:    desc("id_max_drift_seconds", "Furthest ahead of its clock the generator has issued an ID (idtype.Stats.MaxDrift)."),
		worker:      desc("id_worker", "The generator's worker number; source is lease or fixed.", "source"),
		leaseState:  desc("lease_state", "1 for the worker lease's current state, 0 for the others.", "state"),
		leaseRenewal: desc("lease_last_renewal_timestamp_seconds",
			"When the lease's last confirmed renewal (or its acquisition) was sent, Unix time."),
		leaseValid: desc("lease_valid_until_timestamp_seconds",
			"The last moment the generator may issue without a further renewal, Unix time."),
		leaseRenewals: desc("lease_renewals_total", "Confirmed renewals of the lease."),
		leaseFailures: desc("lease_renewal_failures", "Renewals that have failed since the last confirmed one."),
		issued:        desc("tokens_issued_total", "Sessions issued (tokens.Stats.Issued)."),
		revocations:   desc("tokens_revocations_total", "Sessions ended by a revocation or rotation (tokens.Stats.Revocations)."),
		validations: desc("tokens_validations_total",
			"Token validations by result: ok, invalid, unavailable (tokens.Stats).", "result"),
		cache: desc("tokens_cache_lookups_total",
			"Lookups in the Manager's in-process cache by result: hit, miss (tokens.Stats).", "result"),
		refreshes: desc("tokens_refreshes_total", "Idle-timeout refreshes written (tokens.Stats.Refreshes)."),
		refs:      desc("tokens_refresh_failures_total", "Idle-timeout refreshes Redis did not take (tokens.Stats.RefreshFailures)."),
	}, nil
}

// Describe sends the descriptions of the metrics of what Options names.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	if c.opts.Generator != nil {
		for _, d := range []*prometheus.Desc{c.ids, c.waits, c.backward, c.maxBackward, c.maxDrift, c.worker} {
			ch <- d
		}
	}
	if c.opts.Lease != nil {
		for _, d := range []*prometheus.Desc{c.leaseState, c.leaseRenewal, c.leaseValid, c.leaseRenewals, c.leaseFailures} {
			ch <- d
		}
	}
	if c.opts.Tokens != nil {
		for _, d := range []*prometheus.Desc{c.issued, c.revocations, c.validations, c.cache, c.refreshes, c.refs} {
			ch <- d
		}
	}
}

// leaseStates are the states snowkey_lease_state reports, each a label.
var leaseStates = []workerid.State{workerid.Held, workerid.Expired, workerid.Lost, workerid.Closed}

// Collect reads the statistics and sends them as metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if g := c.opts.Generator; g != nil {
		s := g.Stats()
		counter(c.ids, float64(s.IDs))
		counter(c.waits, float64(s.Waits))
		counter(c.backward, float64(s.BackwardSteps))
		gauge(c.maxBackward, s.MaxBackward.Seconds())
		gauge(c.maxDrift, s.MaxDrift.Seconds())
		source := "fixed"
		if c.opts.Lease != nil {
			source = "lease"
		}
		gauge(c.worker, float64(g.Worker()), source)
	}
	if l := c.opts.Lease; l != nil {
		st := l.Status()
		for _, state := range leaseStates {
			v := 0.0
			if st.State == state {
				v = 1
			}
			gauge(c.leaseState, v, state.String())
		}
		gauge(c.leaseRenewal, unixSeconds(st.LastRenewal))
		gauge(c.leaseValid, unixSeconds(st.ValidUntil))
		counter(c.leaseRenewals, float64(st.Renewals))
		gauge(c.leaseFailures, float64(st.Failures))
	}
	if m := c.opts.Tokens; m != nil {
		s := m.Stats()
		counter(c.issued, float64(s.Issued))
		counter(c.revocations, float64(s.Revocations))
		counter(c.validations, float64(s.ValidationsOK), "ok")
		counter(c.validations, float64(s.ValidationsInvalid), "invalid")
		counter(c.validations, float64(s.ValidationsUnavailable), "unavailable")
		counter(c.cache, float64(s.CacheHits), "hit")
		counter(c.cache, float64(s.CacheMisses), "miss")
		counter(c.refreshes, float64(s.Refreshes))
		counter(c.refs, float64(s.RefreshFailures))
	}
}

// unixSeconds is t as Unix seconds, or 0 for the zero time.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

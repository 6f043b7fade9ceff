package snowkeyprom_test

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/snowkeyhq/snowkey/extra/snowkeyprom"
	"github.com/snowkeyhq/snowkey/idtype"
)

// A fixed-worker generator's statistics, served at /metrics.
func ExampleNewCollector() {
	gen, err := idtype.NewGenerator(idtype.GeneratorOptions{Worker: 7})
	if err != nil {
		panic(err)
	}
	c, err := snowkeyprom.NewCollector(snowkeyprom.Options{Generator: gen})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	if _, err := gen.Next(); err != nil {
		panic(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range fams {
		fmt.Println(f.GetName(), f.GetMetric()[0].GetCounter().GetValue()+f.GetMetric()[0].GetGauge().GetValue())
	}
	// Output:
	// snowkey_id_clock_backward_steps_total 0
	// snowkey_id_clock_max_backward_seconds 0
	// snowkey_id_clock_waits_total 0
	// snowkey_id_max_drift_seconds 0
	// snowkey_id_worker 7
	// snowkey_ids_issued_total 1
}

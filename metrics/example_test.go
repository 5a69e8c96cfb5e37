package metrics_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/metrics"
)

// A set is registered once; broadcasters made as the program runs are
// added, and removed when they are done.
func ExampleSet() {
	reg := prometheus.NewRegistry()
	set := metrics.NewSet()
	reg.MustRegister(set)

	tenant := fanout.New[string]()
	if err := set.Add(tenant, prometheus.Labels{"tenant": "acme"}); err != nil {
		fmt.Println(err)
		return
	}
	_ = tenant.Action("hello")

	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() == "fanout_values_accepted_total" {
			fmt.Println(f.GetName(), f.GetMetric()[0].GetCounter().GetValue())
		}
	}

	tenant.Shutdown()
	set.Remove(tenant)
	fmt.Println("sources:", set.Len())
	// Output:
	// fanout_values_accepted_total 1
	// sources: 0
}

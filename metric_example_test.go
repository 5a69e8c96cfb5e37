package fanout_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/fanout-go/fanout"
)

// printMetrics prints the samples whose name starts with prefix and whose
// value is not 0, as Prometheus's text format does, without help and type.
func printMetrics(ms []fanout.Metric, prefix string) {
	for _, m := range ms {
		if !strings.HasPrefix(m.Name, prefix) || m.Value == 0 {
			continue
		}
		var ls []string
		for _, l := range m.Labels {
			ls = append(ls, fmt.Sprintf("%s=%q", l.Name, l.Value))
		}
		fmt.Printf("%s{%s} %v\n", m.Name, strings.Join(ls, ","), m.Value)
	}
}

func ExampleBroadcaster_Metrics() {
	b := fanout.New[int](fanout.WithQueueLength(2))
	defer b.Shutdown()
	_, _ = b.Watch(fanout.WithName("audit"), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
	for v := range 5 {
		_ = b.Action(v)
	}
	// A collector would do this at each scrape: see the module
	// github.com/fanout-go/fanout/metrics.
	printMetrics(b.Metrics(), "fanout_")
	// Output:
	// fanout_values_accepted_total{} 5
	// fanout_values_dropped_total{} 3
	// fanout_watchers{} 1
	// fanout_watcher_queued{watcher_id="1",watcher="audit"} 2
	// fanout_watcher_queue_length{watcher_id="1",watcher="audit"} 2
	// fanout_watcher_dropped_total{watcher_id="1",watcher="audit",reason="full"} 3
}

func ExampleRecorder_Metrics() {
	rec, _ := fanout.NewRecorder[string]()
	_, _ = rec.StartHandler(func(string) {})
	_ = rec.Record("started")
	_ = rec.Record("ready")
	_ = rec.Shutdown(context.Background()) // the runner's counts stay in the totals
	printMetrics(rec.Metrics(), "fanout_recorder_")
	// Output:
	// fanout_recorder_values_total{result="recorded"} 2
	// fanout_recorder_runner_values_total{result="received"} 2
	// fanout_recorder_runner_values_total{result="written"} 2
}

package metrics_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/fanout-go/fanout/k8s/eventstats"
	"github.com/fanout-go/fanout/k8s/metrics"
	"github.com/fanout-go/fanout/k8s/record"
)

// fixedSource reports the same counters at every scrape.
type fixedSource eventstats.Stats

func (s fixedSource) Stats() eventstats.Stats { return eventstats.Stats(s) }

// Every counter of [eventstats.Stats] is exported under its documented name
// and reason label, with the constant labels, and the metrics pass
// Prometheus's lint.
func TestCollectorExportsEveryCounter(t *testing.T) {
	src := fixedSource{
		Recorded: 100, Invalid: 1, Refused: 2, Sinks: 3, Queued: 4, Written: 50, Merged: 5, Failures: 6,
		DroppedFull: 7, DroppedSpam: 8, DroppedRejected: 9, DroppedRetries: 10, DroppedShutdown: 11,
	}
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(metrics.NewCollector(src, prometheus.Labels{"component": "test"})))
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP fanout_k8s_event_sinks Sinks and watchers running.
# TYPE fanout_k8s_event_sinks gauge
fanout_k8s_event_sinks{component="test"} 3
# HELP fanout_k8s_event_write_failures_total Failed event write attempts, retried or not.
# TYPE fanout_k8s_event_write_failures_total counter
fanout_k8s_event_write_failures_total{component="test"} 6
# HELP fanout_k8s_events_dropped_total Events lost, by cause.
# TYPE fanout_k8s_events_dropped_total counter
fanout_k8s_events_dropped_total{component="test",reason="invalid"} 1
fanout_k8s_events_dropped_total{component="test",reason="queue_full"} 7
fanout_k8s_events_dropped_total{component="test",reason="rejected"} 9
fanout_k8s_events_dropped_total{component="test",reason="retries_exhausted"} 10
fanout_k8s_events_dropped_total{component="test",reason="shutdown"} 11
fanout_k8s_events_dropped_total{component="test",reason="shutdown_refused"} 2
fanout_k8s_events_dropped_total{component="test",reason="spam_filtered"} 8
# HELP fanout_k8s_events_merged_total Occurrences folded into an earlier event (series counts).
# TYPE fanout_k8s_events_merged_total counter
fanout_k8s_events_merged_total{component="test"} 5
# HELP fanout_k8s_events_queued Events waiting in sink and watcher queues.
# TYPE fanout_k8s_events_queued gauge
fanout_k8s_events_queued{component="test"} 4
# HELP fanout_k8s_events_recorded_total Events accepted by the recorders and queued.
# TYPE fanout_k8s_events_recorded_total counter
fanout_k8s_events_recorded_total{component="test"} 100
# HELP fanout_k8s_events_written_total Events written by a sink, watcher or logger.
# TYPE fanout_k8s_events_written_total counter
fanout_k8s_events_written_total{component="test"} 50
`)))
}

// The collector reads a live record broadcaster at each scrape: an event
// that cannot be built shows up as dropped, reason "invalid".
func TestCollectorReadsRecordBroadcaster(t *testing.T) {
	b := record.New()
	defer b.Shutdown()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(metrics.NewCollector(b, nil)))
	before, err := testutil.GatherAndCount(reg, metrics.NameDropped)
	require.NoError(t, err)
	assert.Equal(t, 7, before, "one series per reason")

	b.NewRecorder(nil, v1.EventSource{Component: "ctl"}).Event(nil, v1.EventTypeNormal, "R", "no object")
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP fanout_k8s_events_dropped_total Events lost, by cause.
# TYPE fanout_k8s_events_dropped_total counter
fanout_k8s_events_dropped_total{reason="invalid"} 1
fanout_k8s_events_dropped_total{reason="queue_full"} 0
fanout_k8s_events_dropped_total{reason="rejected"} 0
fanout_k8s_events_dropped_total{reason="retries_exhausted"} 0
fanout_k8s_events_dropped_total{reason="shutdown"} 0
fanout_k8s_events_dropped_total{reason="shutdown_refused"} 0
fanout_k8s_events_dropped_total{reason="spam_filtered"} 0
`), metrics.NameDropped))
}

func ExampleNewCollector() {
	b := record.New() // or events.New(...): both are an eventstats.Source
	defer b.Shutdown()
	reg := prometheus.NewRegistry() // usually served with promhttp.HandlerFor(reg, ...)
	reg.MustRegister(metrics.NewCollector(b, prometheus.Labels{"controller": "example"}))

	b.NewRecorder(nil, v1.EventSource{Component: "example"}).Event(nil, v1.EventTypeNormal, "Synced", "no object: invalid")
	families, _ := reg.Gather()
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if v := m.GetCounter().GetValue(); v > 0 {
				fmt.Println(f.GetName(), m.GetLabel()[1].GetValue(), v)
			}
		}
	}
	// Output:
	// fanout_k8s_events_dropped_total invalid 1
}

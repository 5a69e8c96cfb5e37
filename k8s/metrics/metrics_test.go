package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/fanout-go/fanout/k8s/events"
	"github.com/fanout-go/fanout/k8s/eventstats"
	"github.com/fanout-go/fanout/k8s/internal/apitest"
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
		Recorded: 100, Invalid: 1, Refused: 2, Sinks: 3, Queued: 4, Written: 50, Merged: 5, MergedLost: 1, Failures: 6,
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
# HELP fanout_k8s_events_merged_total Occurrences folded into an earlier event (series counts), those whose series was lost later (also in dropped) included.
# TYPE fanout_k8s_events_merged_total counter
fanout_k8s_events_merged_total{component="test"} 6
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

// The merged counter never goes down, though Stats.Merged does when a
// series is lost (here evicted from a full series cache, which moves its
// merged occurrence to dropped): Prometheus reads a decrease as a reset.
func TestMergedCounterNeverGoesDown(t *testing.T) {
	b, err := events.New(&apitest.EventsSink{}, events.WithCacheSize(1))
	require.NoError(t, err)
	defer b.Shutdown()
	require.NoError(t, b.StartRecordingToSinkWithContext(context.Background()))
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(metrics.NewCollector(b, nil)))
	rec := b.NewRecorder(scheme.Scheme, "ctl")
	pod := func(name string) *v1.Pod { return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}} }
	merged := func() float64 {
		require.NoError(t, b.Flush(t.Context()))
		return testutil.ToFloat64(prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
			ms := make(chan prometheus.Metric, 16)
			metrics.NewCollector(b, nil).Collect(ms)
			close(ms)
			for m := range ms {
				if strings.Contains(m.Desc().String(), metrics.NameMerged) {
					ch <- m
				}
			}
		}))
	}
	for range 3 { // created, a series of 2, a third occurrence merged
		rec.Eventf(pod("a"), nil, v1.EventTypeNormal, "R", "A", "m")
	}
	require.EqualValues(t, 1, merged())
	rec.Eventf(pod("b"), nil, v1.EventTypeNormal, "R", "A", "m") // evicts a's series
	assert.EqualValues(t, 1, merged(), "%+v", b.Stats())
	st := b.Stats()
	assert.EqualValues(t, 0, st.Merged)
	assert.EqualValues(t, 1, st.MergedLost)
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

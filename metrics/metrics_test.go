package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/metrics"
)

func TestCollectorExportsABroadcastersCounters(t *testing.T) {
	b := fanout.New[int](fanout.WithQueueLength(1))
	defer b.Shutdown()
	slow, err := b.Watch(fanout.WithName("slow"), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
	require.NoError(t, err)
	odd, err := b.Watch(fanout.WithName("odd"), fanout.WithFilter(func(v int) bool { return v%2 == 1 }),
		fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
	require.NoError(t, err)
	for v := range 4 {
		require.NoError(t, b.Action(v))
	}
	_, err = odd.Next(context.Background())
	require.NoError(t, err)
	_ = slow

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(metrics.NewCollector(b, prometheus.Labels{"broadcaster": "test"})))
	want := `
# HELP fanout_values_accepted_total Values accepted for delivery.
# TYPE fanout_values_accepted_total counter
fanout_values_accepted_total{broadcaster="test"} 4
`
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "fanout_values_accepted_total"))
	got, err := testutil.GatherAndCount(reg, "fanout_watcher_dropped_total")
	require.NoError(t, err)
	assert.Equal(t, 10, got, "five reasons for each of two watchers")
	families, err := reg.Gather()
	require.NoError(t, err)
	values := map[string]float64{}
	for _, f := range families {
		for _, m := range f.Metric {
			key := f.GetName()
			for _, l := range m.Label {
				if l.GetName() != "broadcaster" && l.GetName() != "watcher_id" {
					key += "," + l.GetName() + "=" + l.GetValue()
				}
			}
			if m.Counter != nil {
				values[key] = m.Counter.GetValue()
			} else {
				values[key] = m.Gauge.GetValue()
			}
		}
	}
	assert.Equal(t, 3.0, values["fanout_watcher_dropped_total,reason=full,watcher=slow"])
	assert.Equal(t, 1.0, values["fanout_watcher_queued,watcher=slow"])
	assert.Equal(t, 2.0, values["fanout_watcher_values_total,result=filtered,watcher=odd"])
	assert.Equal(t, 1.0, values["fanout_watcher_values_total,result=delivered,watcher=odd"])
	assert.Equal(t, 2.0, values["fanout_watchers"])
}

// A watcher's name may be any string: one that is not valid UTF-8 is
// exported with U+FFFD for each invalid byte. Collect panicked (on the
// registry's goroutine: the process died).
func TestCollectorExportsANameThatIsNotUTF8(t *testing.T) {
	b := fanout.New[int]()
	defer b.Shutdown()
	_, err := b.Watch(fanout.WithName("caf\xe9"))
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(metrics.NewCollector(b, nil)))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var names []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "watcher" {
					names = append(names, l.GetValue())
				}
			}
		}
	}
	require.NotEmpty(t, names)
	assert.Contains(t, names, "caf\uFFFD")
}

// Constant labels that clash with a sample's labels fail the scrape with
// an error, rather than panicking in Collect.
func TestCollectorConstantLabelThatClashesFailsTheScrape(t *testing.T) {
	b := fanout.New[int]()
	defer b.Shutdown()
	_, err := b.Watch()
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(metrics.NewCollector(b, prometheus.Labels{"watcher": "x"})))
	_, err = reg.Gather()
	assert.ErrorContains(t, err, "watcher")
}

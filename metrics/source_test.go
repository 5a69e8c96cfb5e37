package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/metrics"
)

// sourceFunc is a MetricSource of any samples, such as those of a NATS
// bridge, without importing that module here.
type sourceFunc func() []fanout.Metric

func (f sourceFunc) Metrics() []fanout.Metric { return f() }

func TestCollectorExportsAnyMetricSourceReadAtEachScrape(t *testing.T) {
	published := 0.0
	const vHelp = "Values taken from the local watcher, by outcome."
	src := sourceFunc(func() []fanout.Metric {
		return []fanout.Metric{
			{Name: "fanoutnats_forwarder_values_total", Help: vHelp, Type: fanout.Counter,
				Labels: []fanout.Label{{Name: "result", Value: "published"}}, Value: published},
			{Name: "fanoutnats_forwarder_values_total", Help: vHelp, Type: fanout.Counter,
				Labels: []fanout.Label{{Name: "result", Value: "failed"}}, Value: 1},
			{Name: "fanoutnats_forwarder_queued", Help: "Values waiting in the local watcher's queue.", Type: fanout.Gauge, Value: 2},
		}
	})
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(metrics.NewCollector(src, prometheus.Labels{"bridge": "orders"})))
	want := func(n string) string {
		return `
# HELP fanoutnats_forwarder_queued Values waiting in the local watcher's queue.
# TYPE fanoutnats_forwarder_queued gauge
fanoutnats_forwarder_queued{bridge="orders"} 2
# HELP fanoutnats_forwarder_values_total Values taken from the local watcher, by outcome.
# TYPE fanoutnats_forwarder_values_total counter
fanoutnats_forwarder_values_total{bridge="orders",result="failed"} 1
fanoutnats_forwarder_values_total{bridge="orders",result="published"} ` + n + "\n"
	}
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want("0"))))
	published = 5
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want("5"))))
}

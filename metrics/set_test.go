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

// A set registered once reports the sources added to it, and stops
// reporting one once it is removed: unlike a Collector, which a registry
// cannot give back.
func TestSetReportsItsSourcesUntilRemoved(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	set := metrics.NewSet()
	require.NoError(t, reg.Register(set))
	orders, payments := fanout.New[int](), fanout.New[int]()
	defer orders.Shutdown()
	defer payments.Shutdown()
	require.NoError(t, set.Add(orders, prometheus.Labels{"broadcaster": "orders"}))
	require.NoError(t, set.Add(payments, prometheus.Labels{"broadcaster": "payments"}))
	require.NoError(t, orders.Action(1))
	require.NoError(t, payments.Action(1))
	require.NoError(t, payments.Action(2))
	want := `
# HELP fanout_values_accepted_total Values accepted for delivery.
# TYPE fanout_values_accepted_total counter
fanout_values_accepted_total{broadcaster="orders"} 1
fanout_values_accepted_total{broadcaster="payments"} 2
`
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "fanout_values_accepted_total"))

	assert.True(t, set.Remove(orders))
	assert.False(t, set.Remove(orders), "removed already")
	assert.Equal(t, 1, set.Len())
	want = `
# HELP fanout_values_accepted_total Values accepted for delivery.
# TYPE fanout_values_accepted_total counter
fanout_values_accepted_total{broadcaster="payments"} 2
`
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "fanout_values_accepted_total"))
}

// valueSource is a source whose type is not comparable.
type valueSource struct{ samples []fanout.Metric }

func (s valueSource) Metrics() []fanout.Metric { return s.samples }

func TestSetRefusesWhatItCouldNotRemove(t *testing.T) {
	set := metrics.NewSet()
	b := fanout.New[int]()
	defer b.Shutdown()
	assert.Error(t, set.Add(nil, nil), "a nil source")
	assert.Error(t, set.Add(valueSource{}, nil), "a source whose type is not comparable")
	assert.False(t, set.Remove(valueSource{}))
	require.NoError(t, set.Add(b, nil))
	assert.Error(t, set.Add(b, prometheus.Labels{"other": "labels"}), "a source in the set already")
	assert.Equal(t, 1, set.Len())
}

// holder is comparable by type, but not with a slice in its field.
type holder struct{ inner any }

func (holder) Metrics() []fanout.Metric { return nil }

func TestSetRefusesASourceHoldingAValueThatIsNotComparable(t *testing.T) {
	set := metrics.NewSet()
	assert.Error(t, set.Add(holder{inner: []int{1}}, nil), "== would panic on it")
	assert.False(t, set.Remove(holder{inner: []int{1}}))
	assert.Zero(t, set.Len())
}

package fanout_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
)

var (
	_ fanout.MetricSource = (*fanout.Broadcaster[int])(nil)
	_ fanout.MetricSource = (*fanout.Recorder[int])(nil)
)

// sampleValues checks what a Prometheus registry would reject (a name with
// different help, type or label names, a counter not named _total, a
// sample given twice) and returns the values by "name{label=value,...}",
// without the watcher_id label.
func sampleValues(t *testing.T, ms []fanout.Metric) map[string]float64 {
	t.Helper()
	shapes := map[string]string{}
	values := map[string]float64{}
	for _, m := range ms {
		var names, key []string
		for _, l := range m.Labels {
			names = append(names, l.Name)
			if l.Name != "watcher_id" {
				key = append(key, l.Name+"="+l.Value)
			}
		}
		shape := m.Help + "|" + m.Type.String() + "|" + strings.Join(names, ",")
		if prev, ok := shapes[m.Name]; ok && prev != shape {
			t.Errorf("%s: samples disagree on help, type or label names: %q, %q", m.Name, prev, shape)
		}
		shapes[m.Name] = shape
		if (m.Type == fanout.Counter) != strings.HasSuffix(m.Name, "_total") || m.Help == "" {
			t.Errorf("%s is a %v, help %q", m.Name, m.Type, m.Help)
		}
		id := m.Name + "{" + strings.Join(key, ",") + "}"
		if _, dup := values[id]; dup {
			t.Errorf("sample %s given twice", id)
		}
		values[id] = m.Value
	}
	return values
}

// watcherIDs returns the watcher_id labels of the samples named name.
func watcherIDs(ms []fanout.Metric, name string) []string {
	var ids []string
	for _, m := range ms {
		for _, l := range m.Labels {
			if m.Name == name && l.Name == "watcher_id" {
				ids = append(ids, l.Value)
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func TestBroadcasterMetricsCountPerWatcherByName(t *testing.T) {
	b := fanout.New[int](fanout.WithQueueLength(1))
	defer b.Shutdown()
	_, err := b.Watch(fanout.WithName("slow"), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
	require.NoError(t, err)
	for v := range 3 {
		require.NoError(t, b.Action(v))
	}
	v := sampleValues(t, b.Metrics())
	assert.Equal(t, 3.0, v["fanout_values_accepted_total{}"])
	assert.Equal(t, 1.0, v["fanout_watchers{}"])
	assert.Equal(t, 2.0, v["fanout_watcher_dropped_total{watcher=slow,reason=full}"])
	assert.Equal(t, 1.0, v["fanout_watcher_queued{watcher=slow}"])
}

func TestBroadcasterMetricsNameTheWatcherAWaitingPublisherWaitsFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(2))
		defer b.Shutdown()
		slow, err := b.Watch(fanout.WithName("slow"))
		require.NoError(t, err)
		_, err = b.Watch(fanout.WithName("lossy"), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
		require.NoError(t, err)
		v := sampleValues(t, b.Metrics())
		assert.Equal(t, 0.0, v["fanout_publishers_waiting{}"])
		assert.Equal(t, 0.0, v["fanout_watcher_publishers_waiting{watcher=slow}"], "every watcher has the gauge")
		done := stalled(t, slow, b)
		b.Metrics() // the first look at the untimed wait starts its clock
		time.Sleep(4 * time.Second)
		v = sampleValues(t, b.Metrics())
		assert.Equal(t, 1.0, v["fanout_publishers_waiting{}"])
		assert.Equal(t, 4.0, v["fanout_publish_wait_seconds{}"])
		assert.Equal(t, 1.0, v["fanout_watcher_publishers_waiting{watcher=slow}"])
		assert.Equal(t, 0.0, v["fanout_watcher_publishers_waiting{watcher=lossy}"])
		_, err = slow.Next(context.Background())
		require.NoError(t, err)
		require.NoError(t, <-done)
		v = sampleValues(t, b.Metrics())
		assert.Equal(t, 0.0, v["fanout_publishers_waiting{}"])
		assert.Equal(t, 0.0, v["fanout_publish_wait_seconds{}"])
	})
}

func TestRecorderMetricsCountRunnersAndKeepTotalsAfterTheyExit(t *testing.T) {
	rec, err := fanout.NewRecorder[int]()
	require.NoError(t, err)
	_, err = rec.StartHandler(func(v int) {
		if v == 2 {
			panic("handler fails on 2")
		}
	})
	require.NoError(t, err)
	for v := range 4 {
		require.NoError(t, rec.Record(v))
	}
	require.NoError(t, rec.Flush(context.Background()))

	ms := rec.Metrics()
	v := sampleValues(t, ms)
	assert.Equal(t, 4.0, v["fanout_recorder_values_total{result=recorded}"])
	assert.Equal(t, 4.0, v["fanout_values_accepted_total{}"], "the broadcaster's samples come too")
	assert.Equal(t, 3.0, v["fanout_recorder_runner_values_total{result=written}"])
	assert.Equal(t, 1.0, v["fanout_recorder_dropped_total{reason=rejected}"])
	assert.Equal(t, 0.0, v["fanout_recorder_dropped_total{reason=refused}"])
	assert.Equal(t, 1.0, v["fanout_recorder_runners{}"])
	assert.Equal(t, 4.0, v["fanout_runner_values_total{watcher=handler,result=received}"])
	assert.Equal(t, 3.0, v["fanout_runner_values_total{watcher=handler,result=written}"])
	assert.Equal(t, 1.0, v["fanout_runner_dropped_total{watcher=handler,reason=rejected}"])
	assert.Equal(t, 4.0, v["fanout_watcher_values_total{watcher=handler,result=delivered}"])
	ids := watcherIDs(ms, "fanout_runner_values_total")
	assert.Len(t, ids, 1)
	assert.Equal(t, ids, watcherIDs(ms, "fanout_watcher_values_total"), "a runner's watcher_id is its watcher's")

	require.NoError(t, rec.Shutdown(context.Background()))
	v = sampleValues(t, rec.Metrics())
	assert.Equal(t, 3.0, v["fanout_recorder_runner_values_total{result=written}"], "an exited runner's counts stay in the totals")
	assert.Equal(t, 1.0, v["fanout_recorder_dropped_total{reason=rejected}"])
	assert.Equal(t, 0.0, v["fanout_recorder_runners{}"])
	for id := range v {
		assert.False(t, strings.HasPrefix(id, "fanout_runner_"), "an exited runner has no samples of its own: %s", id)
	}
}

func TestRecorderMetricsCountRefusedValuesAsDropped(t *testing.T) {
	rec, err := fanout.NewRecorder[int]()
	require.NoError(t, err)
	defer func() { _ = rec.Shutdown(context.Background()) }()
	_, err = rec.Watch(fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(fanout.WaitIfChannelFull))
	require.NoError(t, err)
	require.NoError(t, rec.Record(1))
	require.ErrorIs(t, rec.Record(2), fanout.ErrRefused)
	v := sampleValues(t, rec.Metrics())
	assert.Equal(t, 1.0, v["fanout_recorder_values_total{result=refused}"])
	assert.Equal(t, 1.0, v["fanout_recorder_dropped_total{reason=refused}"])
	assert.Equal(t, 1.0, v["fanout_recorder_values_total{result=recorded}"])
}

package fanoutnats_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/fanout-go/fanout"
	fanoutnats "github.com/fanout-go/fanout/nats"
	"github.com/fanout-go/fanout/nats/internal/natstest"
)

// checkMetrics checks what a Prometheus registry would reject: a name
// used with different label names, help or type, a counter not named
// _total, a sample given twice. It takes the core's [fanout.Metric], the
// shape the collector of github.com/fanout-go/fanout/metrics reads.
func checkMetrics(t *testing.T, ms []fanout.Metric) map[string]float64 {
	t.Helper()
	type shape struct {
		help   string
		typ    fanout.MetricType
		labels []string
	}
	shapes := map[string]shape{}
	values := map[string]float64{}
	for _, m := range ms {
		var names, key []string
		for _, l := range m.Labels {
			names = append(names, l.Name)
			key = append(key, l.Name+"="+l.Value)
		}
		sh := shape{m.Help, m.Type, names}
		if prev, ok := shapes[m.Name]; ok && (prev.help != sh.help || prev.typ != sh.typ || !slices.Equal(prev.labels, sh.labels)) {
			t.Errorf("%s: samples disagree on help, type or label names", m.Name)
		}
		shapes[m.Name] = sh
		if (m.Type == fanout.Counter) != strings.HasSuffix(m.Name, "_total") {
			t.Errorf("%s is a %v", m.Name, m.Type)
		}
		if !strings.HasPrefix(m.Name, "fanoutnats_") || m.Help == "" {
			t.Errorf("%s: want the fanoutnats_ prefix and a help text", m.Name)
		}
		id := m.Name + "{" + strings.Join(key, ",") + "}"
		if _, dup := values[id]; dup {
			t.Errorf("sample %s given twice", id)
		}
		values[id] = m.Value
	}
	return values
}

func TestMetricsAreValidPrometheusSamplesOfTheStats(t *testing.T) {
	fs := fanoutnats.ForwarderStats{Received: 10, Published: 7, Failed: 2, Abandoned: 1, Retries: 3,
		Watcher: fanout.WatcherStats{Queued: 4, DroppedOldest: 5, DroppedPanic: 6}}
	v := checkMetrics(t, fs.Metrics())
	for id, want := range map[string]float64{
		"fanoutnats_forwarder_values_total{result=published}": 7,
		"fanoutnats_forwarder_values_total{result=abandoned}": 1,
		"fanoutnats_forwarder_dropped_total{reason=oldest}":   5,
		"fanoutnats_forwarder_dropped_total{reason=panic}":    6,
		"fanoutnats_forwarder_retries_total{}":                3,
		"fanoutnats_forwarder_queued{}":                       4,
	} {
		if v[id] != want {
			t.Errorf("%s = %v, want %v", id, v[id], want)
		}
	}
	is := fanoutnats.InboundStats{Received: 9, Delivered: 6, DecodeErrors: 1, Duplicates: 2, SlowConsumerDropped: 8, Pending: 3,
		Acks: 4, AcksUnconfirmed: 1, AckFloor: 7, Frames: 2, Reconnects: 1}
	v = checkMetrics(t, is.Metrics())
	for id, want := range map[string]float64{
		"fanoutnats_inbound_values_total{result=delivered}":    6,
		"fanoutnats_inbound_values_total{result=decode_error}": 1,
		"fanoutnats_inbound_slow_consumer_dropped_total{}":     8,
		"fanoutnats_inbound_acks_total{result=sent}":           4,
		"fanoutnats_inbound_acks_total{result=unconfirmed}":    1,
		"fanoutnats_inbound_ack_floor{}":                       7,
		"fanoutnats_inbound_frames_total{}":                    2,
		"fanoutnats_inbound_reconnects_total{}":                1,
		"fanoutnats_inbound_pending{}":                         3,
	} {
		if v[id] != want {
			t.Errorf("%s = %v, want %v", id, v[id], want)
		}
	}
	v = checkMetrics(t, fanoutnats.SinkStats{Published: 5, Duplicates: 1, Failures: 2}.Metrics())
	if v["fanoutnats_sink_writes_total{result=duplicate}"] != 1 {
		t.Errorf("sink metrics %v", v)
	}
}

func TestBridgeMetricsReadTheCountersAtEachCall(t *testing.T) {
	srv := natstest.New(t)
	b := fanout.New[event](fanout.WithQueueLength(100))
	var src fanout.MetricSource
	f, err := fanoutnats.Forward(b, srv.Connect(t), fanoutnats.ForwardConfig[event]{Subject: "ev"})
	if err != nil {
		t.Fatal(err)
	}
	src = f
	if v := checkMetrics(t, src.Metrics()); v["fanoutnats_forwarder_values_total{result=published}"] != 0 {
		t.Fatalf("a new forwarder reports %v", v)
	}
	for i := range 3 {
		if err := b.Action(event{Seq: i}); err != nil {
			t.Fatal(err)
		}
	}
	closeAndWait(t, f) // publishes what is queued, then stops
	if v := checkMetrics(t, src.Metrics()); v["fanoutnats_forwarder_values_total{result=published}"] != 3 {
		t.Fatalf("after 3 values and Close the forwarder reports %v", v)
	}
}

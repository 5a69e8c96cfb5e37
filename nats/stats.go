package fanoutnats

import "github.com/fanout-go/fanout"

// The bridges report their statistics as [fanout.Metric] samples, the
// shape every component of the repository uses, so that the collector of
// github.com/fanout-go/fanout/metrics serves them as it serves a
// broadcaster: each bridge, and each snapshot of its statistics, is a
// [fanout.MetricSource].
var (
	_ fanout.MetricSource = (*Forwarder[int])(nil)
	_ fanout.MetricSource = (*Subscriber[int])(nil)
	_ fanout.MetricSource = (*Consumer[int])(nil)
	_ fanout.MetricSource = (*Sink[int])(nil)
	_ fanout.MetricSource = ForwarderStats{}
	_ fanout.MetricSource = InboundStats{}
	_ fanout.MetricSource = SinkStats{}
)

func label(name, value string) fanout.Label { return fanout.Label{Name: name, Value: value} }

func counter(name, help string, v uint64, labels ...fanout.Label) fanout.Metric {
	return fanout.Metric{Name: name, Help: help, Type: fanout.Counter, Labels: labels, Value: float64(v)}
}

func gauge(name, help string, v float64, labels ...fanout.Label) fanout.Metric {
	return fanout.Metric{Name: name, Help: help, Type: fanout.Gauge, Labels: labels, Value: v}
}

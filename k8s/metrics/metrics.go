// Package metrics exports the counters of the adapter's event broadcasters
// ([github.com/fanout-go/fanout/k8s/record] and
// [github.com/fanout-go/fanout/k8s/events]), their
// [github.com/fanout-go/fanout/k8s/eventstats.Stats], as Prometheus metrics.
//
// It is a module of its own, github.com/fanout-go/fanout/k8s/metrics, so
// that Prometheus is linked only into the programs that import it: the
// record and events packages do not.
//
// The collector is not registered anywhere: register it yourself, once per
// broadcaster, with constant labels that tell broadcasters apart when you
// have several:
//
//	reg.MustRegister(metrics.NewCollector(b, prometheus.Labels{"component": "my-controller"}))
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanout-go/fanout/k8s/eventstats"
)

// Metric names the collector exports.
const (
	NameRecorded = "fanout_k8s_events_recorded_total"
	NameWritten  = "fanout_k8s_events_written_total"
	NameMerged   = "fanout_k8s_events_merged_total"
	NameFailures = "fanout_k8s_event_write_failures_total"
	NameDropped  = "fanout_k8s_events_dropped_total"
	NameQueued   = "fanout_k8s_events_queued"
	NameSinks    = "fanout_k8s_event_sinks"
)

// Values of the "reason" label of [NameDropped].
const (
	ReasonInvalid  = "invalid"
	ReasonRefused  = "shutdown_refused"
	ReasonFull     = "queue_full"
	ReasonSpam     = "spam_filtered"
	ReasonRejected = "rejected"
	ReasonRetries  = "retries_exhausted"
	ReasonShutdown = "shutdown"
)

type collector struct {
	src                                                 eventstats.Source
	recorded, written, merged, failures, dropped, queue *prometheus.Desc
	sinks                                               *prometheus.Desc
}

// NewCollector returns a Prometheus collector reading src's
// [eventstats.Stats] at each scrape (src is a *record.Broadcaster or an
// *events.Broadcaster). constLabels are added to every metric (nil: none).
func NewCollector(src eventstats.Source, constLabels prometheus.Labels) prometheus.Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, constLabels)
	}
	return &collector{
		src:      src,
		recorded: d(NameRecorded, "Events accepted by the recorders and queued."),
		written:  d(NameWritten, "Events written by a sink, watcher or logger."),
		merged:   d(NameMerged, "Occurrences folded into an earlier event (series counts), those whose series was lost later (also in dropped) included."),
		failures: d(NameFailures, "Failed event write attempts, retried or not."),
		dropped:  d(NameDropped, "Events lost, by cause.", "reason"),
		queue:    d(NameQueued, "Events waiting in sink and watcher queues."),
		sinks:    d(NameSinks, "Sinks and watchers running."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.recorded, c.written, c.merged, c.failures, c.dropped, c.queue, c.sinks} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(c.recorded, s.Recorded)
	counter(c.written, s.Written)
	counter(c.merged, s.Merged+s.MergedLost) // a counter never goes down
	counter(c.failures, s.Failures)
	for _, r := range []struct {
		reason string
		v      uint64
	}{
		{ReasonInvalid, s.Invalid},
		{ReasonRefused, s.Refused},
		{ReasonFull, s.DroppedFull},
		{ReasonSpam, s.DroppedSpam},
		{ReasonRejected, s.DroppedRejected},
		{ReasonRetries, s.DroppedRetries},
		{ReasonShutdown, s.DroppedShutdown},
	} {
		counter(c.dropped, r.v, r.reason)
	}
	ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(s.Queued))
	ch <- prometheus.MustNewConstMetric(c.sinks, prometheus.GaugeValue, float64(s.Sinks))
}

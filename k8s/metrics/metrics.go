// Package metrics holds what the adapter's event broadcasters
// ([github.com/fanout-go/fanout/k8s/record] and
// [github.com/fanout-go/fanout/k8s/events]) count, and a Prometheus
// collector for it.
//
// client-go drops events in several places without a trace: a full queue,
// the spam filter, an exhausted retry budget, an event it cannot build.
// Every one of them is counted here, by cause. The collector is not
// registered anywhere: register it yourself, once per broadcaster, with
// constant labels that tell broadcasters apart when you have several:
//
//	reg.MustRegister(metrics.NewCollector(b, prometheus.Labels{"component": "my-controller"}))
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Stats is a snapshot of an event broadcaster's counters. Counters only
// grow; Queued and Sinks are current values. Every event given to a
// recorder ends up, for each sink, in exactly one of Written, Merged or a
// Dropped* counter once it has left the queue, or in Invalid or Refused
// before it was queued.
type Stats struct {
	// Recorded counts events the recorders accepted and queued.
	Recorded uint64
	// Invalid counts events refused before queueing because they could not
	// be built: no object reference, an unsupported type, a nil object.
	Invalid uint64
	// Refused counts events refused because the broadcaster was shut down.
	Refused uint64
	// Sinks is the number of sinks and watchers still running.
	Sinks int
	// Queued is the number of events waiting in sink and watcher queues.
	Queued int
	// Written counts events a sink stored (or a watcher or logger took).
	Written uint64
	// Merged counts occurrences folded into an earlier event instead of
	// being written on their own (an events.k8s.io series count).
	Merged uint64
	// Failures counts failed write attempts, retried or not.
	Failures uint64
	// DroppedFull counts events a sink or watcher missed because its queue
	// was full.
	DroppedFull uint64
	// DroppedSpam counts events the spam filter skipped.
	DroppedSpam uint64
	// DroppedRejected counts events the API server rejected (not worth
	// retrying) or whose sink or handler panicked.
	DroppedRejected uint64
	// DroppedRetries counts events that failed every try.
	DroppedRetries uint64
	// DroppedShutdown counts events given up because of a shutdown.
	DroppedShutdown uint64
}

// Dropped returns the number of events lost, all causes together,
// including Invalid and Refused.
func (s Stats) Dropped() uint64 {
	return s.Invalid + s.Refused + s.DroppedFull + s.DroppedSpam + s.DroppedRejected +
		s.DroppedRetries + s.DroppedShutdown
}

// Source is anything with [Stats]: the broadcasters of the record and
// events packages.
type Source interface {
	Stats() Stats
}

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
	src                                                 Source
	recorded, written, merged, failures, dropped, queue *prometheus.Desc
	sinks                                               *prometheus.Desc
}

// NewCollector returns a Prometheus collector reading src's [Stats] at
// each scrape. constLabels are added to every metric (nil: none).
func NewCollector(src Source, constLabels prometheus.Labels) prometheus.Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, constLabels)
	}
	return &collector{
		src:      src,
		recorded: d(NameRecorded, "Events accepted by the recorders and queued."),
		written:  d(NameWritten, "Events written by a sink, watcher or logger."),
		merged:   d(NameMerged, "Occurrences folded into an earlier event (series counts)."),
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
	counter(c.merged, s.Merged)
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

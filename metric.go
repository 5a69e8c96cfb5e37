package fanout

import (
	"slices"
	"strconv"
	"time"
)

// MetricType is the Prometheus type of a [Metric].
type MetricType uint8

// The metric types.
const (
	// Counter only grows (a Prometheus counter; its name ends in _total).
	Counter MetricType = iota
	// Gauge goes up and down.
	Gauge
)

// String returns "counter" or "gauge", as in the Prometheus exposition
// format.
func (t MetricType) String() string {
	if t == Gauge {
		return "gauge"
	}
	return "counter"
}

// Label is one label of a [Metric].
type Label struct {
	Name, Value string
}

// Metric is one sample of a component's counters, named and typed for
// Prometheus, so that one collector serves every component of the
// repository without a table of its own: the module
// github.com/fanout-go/fanout/metrics turns any [MetricSource] into a
// Prometheus collector, while this package and the NATS module do not
// depend on the Prometheus client. Metrics of one Name have the same label
// names.
type Metric struct {
	// Name is the metric name, such as "fanout_values_accepted_total".
	Name string
	// Help is the metric's help text.
	Help string
	// Type is [Counter] or [Gauge].
	Type MetricType
	// Labels tell the samples of one Name apart, such as
	// {watcher="audit", reason="newest"}.
	Labels []Label
	// Value is the sample.
	Value float64
}

// MetricSource is anything that reports its counters as [Metric]s: a
// [Broadcaster], a [Recorder], the NATS module's bridges.
type MetricSource interface {
	Metrics() []Metric
}

func counterMetric(name, help string, v uint64, labels ...Label) Metric {
	return Metric{Name: name, Help: help, Type: Counter, Labels: labels, Value: float64(v)}
}

func gaugeMetric(name, help string, v float64, labels ...Label) Metric {
	return Metric{Name: name, Help: help, Type: Gauge, Labels: labels, Value: v}
}

// Metrics returns the broadcaster's counters, and those of each registered
// watcher, as Prometheus samples: fanout_values_accepted_total,
// fanout_publishes_refused_total, fanout_values_dropped_total (every
// watcher, those gone included), fanout_callback_panics_total,
// fanout_wait_reports_total, the gauges fanout_watchers,
// fanout_publishers_waiting (the publish calls waiting now for a full
// watcher) and fanout_publish_wait_seconds (the longest of those waits so
// far, a lower bound unless timed: see [Wait]), and per watcher (labels
// watcher_id, and watcher: its name, see [WithName])
// fanout_watcher_values_total{result=delivered|filtered},
// fanout_watcher_dropped_total{reason}, and the gauges
// fanout_watcher_queued, fanout_watcher_queue_length and
// fanout_watcher_publishers_waiting (the calls waiting for it now: who
// holds the publishers back). It reads a [Broadcaster.Snapshot] and costs
// what that costs.
func (b *Broadcaster[T]) Metrics() []Metric {
	snap := b.Snapshot()
	s := snap.Stats
	var longest time.Duration
	waitingFor := map[uint64]int{}
	for _, w := range snap.Waiting {
		longest = max(longest, w.Waited)
		waitingFor[w.WatcherID]++
	}
	m := []Metric{
		counterMetric("fanout_values_accepted_total", "Values accepted for delivery.", s.Accepted),
		counterMetric("fanout_publishes_refused_total", "ActionOrDrop calls that returned false.", s.Refused),
		counterMetric("fanout_values_dropped_total", "Values missed by watchers, all reasons together.", s.Dropped),
		counterMetric("fanout_callback_panics_total", "Panics recovered in OnFull, filters, drop handlers and wait reports.", s.Panics),
		counterMetric("fanout_wait_reports_total", "Publishes reported waiting for a full watcher (WithWaitReport).", s.WaitReports),
		gaugeMetric("fanout_watchers", "Registered watchers.", float64(s.Watchers)),
		gaugeMetric("fanout_publishers_waiting", "Publish calls waiting now for a full watcher.", float64(snap.Publishers)),
		gaugeMetric("fanout_publish_wait_seconds", "The longest wait so far of the publish calls waiting now (0: none waits).",
			longest.Seconds()),
	}
	for _, ws := range snap.Watchers {
		m = append(m, ws.metrics(waitingFor[ws.ID])...)
	}
	return m
}

// metrics returns a watcher's samples; waiting counts the publish calls
// waiting for it now.
func (s WatcherStats) metrics(waiting int) []Metric {
	id := Label{"watcher_id", strconv.FormatUint(s.ID, 10)}
	name := Label{"watcher", s.Name}
	const values, drops = "fanout_watcher_values_total", "fanout_watcher_dropped_total"
	const vhelp, dhelp = "Values a watcher's consumer took, or its filter rejected.", "Values a watcher missed, by reason."
	m := []Metric{
		counterMetric(values, vhelp, s.Delivered, id, name, Label{"result", "delivered"}),
		counterMetric(values, vhelp, s.Filtered, id, name, Label{"result", "filtered"}),
		gaugeMetric("fanout_watcher_queued", "Values waiting in a watcher's queue.", float64(s.Queued), id, name),
		gaugeMetric("fanout_watcher_queue_length", "A watcher's queue capacity.", float64(s.QueueLength), id, name),
		gaugeMetric("fanout_watcher_publishers_waiting", "Publish calls waiting now for this watcher's room.",
			float64(waiting), id, name),
	}
	for _, d := range []struct {
		r DropReason
		n uint64
	}{{DropFull, s.DroppedFull}, {DropOldest, s.DroppedOldest}, {DropTimeout, s.DroppedTimeout},
		{DropEvicted, s.DroppedEvicted}, {DropPanic, s.DroppedPanic}} {
		m = append(m, counterMetric(drops, dhelp, d.n, id, name, Label{"reason", d.r.String()}))
	}
	return m
}

// Metrics returns the recorder's counters as Prometheus samples, which
// makes a recorder a [MetricSource]:
//
//   - its broadcaster's ([Broadcaster.Metrics]), where each runner is a
//     watcher named "sink <type>" or "handler";
//   - fanout_recorder_values_total{result=recorded|refused} and the gauge
//     fanout_recorder_runners;
//   - totals over every runner started, those exited included:
//     fanout_recorder_runner_values_total{result=received|written|merged},
//     fanout_recorder_write_failures_total, and
//     fanout_recorder_dropped_total{reason} for every [DropReason] a
//     recorder counts (full, spam, rejected, retries, shutdown, refused).
//     A counter never goes down: result="merged" counts every value ever
//     merged (RunnerStats.Merged + MergedLost), so a merged value whose
//     record the correlator loses later is counted in dropped_total too;
//   - per running runner, labelled watcher_id and watcher as its watcher
//     is in the broadcaster's samples: fanout_runner_values_total{result},
//     fanout_runner_write_failures_total and
//     fanout_runner_dropped_total{reason} (all reasons but refused, which
//     no runner sees).
//
// It costs what [Recorder.Stats] and [Broadcaster.Metrics] cost.
func (r *Recorder[T]) Metrics() []Metric {
	var runners []Metric
	s := r.snapshot(func(run *Runner[T], rs RunnerStats) {
		id := Label{"watcher_id", strconv.FormatUint(run.w.ID(), 10)}
		runners = append(runners, rs.metrics(runnerSamples, id, Label{"watcher", run.name})...)
	})
	const values = "fanout_recorder_values_total"
	const help = "Values Record accepted, or refused as a waiting watcher was full."
	m := append(r.b.Metrics(),
		counterMetric(values, help, s.Recorded, Label{"result", "recorded"}),
		counterMetric(values, help, s.Refused, Label{"result", "refused"}),
		gaugeMetric("fanout_recorder_runners", "Runners still running.", float64(s.Runners)))
	m = append(m, s.RunnerStats.metrics(recorderSamples)...)
	m = append(m, counterMetric(recorderSamples.drops, recorderSamples.dhelp, s.Refused, Label{"reason", DropRefused.String()}))
	return append(m, runners...)
}

// runnerNames names the samples of [RunnerStats]: a runner's, or the
// recorder's totals over its runners.
type runnerNames struct {
	values, vhelp, failures, fhelp, drops, dhelp string
}

var (
	runnerSamples = runnerNames{
		"fanout_runner_values_total", "Values a runner took from its queue, wrote, or merged into an earlier record.",
		"fanout_runner_write_failures_total", "A runner's failed write attempts, retried or not.",
		"fanout_runner_dropped_total", "Values a runner did not write, by reason.",
	}
	recorderSamples = runnerNames{
		"fanout_recorder_runner_values_total", "Values runners took from their queues, wrote, or merged into an earlier record.",
		"fanout_recorder_write_failures_total", "Failed write attempts of every runner, retried or not.",
		"fanout_recorder_dropped_total", "Values recorded but not written, by reason.",
	}
)

// metrics returns the samples of s, named n, each with labels.
func (s RunnerStats) metrics(n runnerNames, labels ...Label) []Metric {
	with := func(l Label) []Label { return append(slices.Clone(labels), l) }
	m := []Metric{
		counterMetric(n.values, n.vhelp, s.Received, with(Label{"result", "received"})...),
		counterMetric(n.values, n.vhelp, s.Written, with(Label{"result", "written"})...),
		counterMetric(n.values, n.vhelp, s.Merged+s.MergedLost, with(Label{"result", "merged"})...),
		counterMetric(n.failures, n.fhelp, s.Failures, labels...),
	}
	for _, d := range []struct {
		r DropReason
		n uint64
	}{{DropFull, s.DroppedFull}, {DropSpam, s.DroppedSpam}, {DropRejected, s.DroppedRejected},
		{DropRetries, s.DroppedRetries}, {DropShutdown, s.DroppedShutdown}} {
		m = append(m, counterMetric(n.drops, n.dhelp, d.n, with(Label{"reason", d.r.String()})...))
	}
	return m
}

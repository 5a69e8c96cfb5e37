package exporter

import (
	"runtime"
	"runtime/debug"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics is the exporter's Prometheus collector. It reads the counters of
// the running [Pipeline] and [Source] at each scrape, so it costs nothing
// between scrapes. Register it once; [Run] sets what it reads.
type Metrics struct {
	pipeline atomic.Pointer[Pipeline]
	source   atomic.Pointer[Source]
	lookup   atomic.Pointer[Lookup]
	leader   atomic.Bool
	// kee, if set, are kubernetes-event-exporter's metrics with the
	// configuration's metricsNamePrefix (see [Metrics.keeCompat]).
	kee *keeDescs
	// Lag is the histogram of fanout_eventer_source_lag_seconds.
	Lag prometheus.Histogram
}

var (
	descSent     = desc("sink_sent_total", "Occurrences stored by the sink.", "sink")
	descDropped  = desc("sink_dropped_total", "Occurrences routed to the sink and not stored, by reason.", "sink", "reason")
	descRetries  = desc("sink_retries_total", "Failed writes retried.", "sink")
	descDedup    = desc("sink_deduplicated_total", "Occurrences not written again after a crash: the sink had stored them.", "sink")
	descDepth    = desc("sink_queue_depth", "Occurrences in the sink's queue.", "sink")
	descCapacity = desc("sink_queue_capacity", "Capacity of the sink's queue.", "sink")
	descBlocking = desc("sink_blocking", "1 while the source waits for room in the sink's queue.", "sink")
	descBlocked  = desc("source_blocked_seconds", "How long the source has waited so far for room in a sink's queue (0: it does not wait).")
	descLists    = desc("source_lists_total", "List requests made by the source.")
	descWatches  = desc("source_watches_total", "Watch requests made by the source.")
	descRestarts = desc("source_watch_restarts_total", "Watches started after the first (after a watch ended or failed).")
	descRelists  = desc("source_relists_total", "Lists made where the watch could not resume from the checkpoint's resource version (none, or too old: 410 Gone); count raises made meanwhile may have collapsed.")
	descCollapse = desc("source_collapsed_raises_total", "Count raises those lists showed folded into one occurrence: their intermediate counts were not forwarded.")
	descOccur    = desc("source_occurrences_total", "Occurrences forwarded by the source.")
	descIgnored  = desc("source_updates_ignored_total", "Event modifications that did not raise the count.")
	descDeletes  = desc("source_deletes_total", "Event deletions seen.")
	descTooOld   = desc("source_too_old_total", "Events a first list showed and did not export (without a checkpoint, or with one that did not count them): last seen longer than maxEventAgeSeconds before the start.")
	descSynced   = desc("source_synced", "1 once the initial list has been handled.")
	descRouteDr  = desc("route_dropped_total", "Occurrences removed by a drop rule.")
	descRouteNo  = desc("route_unmatched_total", "Occurrences no match rule sent to any receiver.")
	descCkWrites = desc("checkpoint_writes_total", "Checkpoints written.")
	descCkFails  = desc("checkpoint_failures_total", "Checkpoint writes that failed.")
	descCkLag    = desc("checkpoint_pending", "Changes (occurrences and deletions) no written checkpoint covers yet: what a restart would forward again.")
	descCkLast   = desc("checkpoint_last_write_timestamp_seconds", "When the last checkpoint was written.")
	descAbandon  = desc("sinks_abandoned_total", "Sinks abandoned at shutdown: their write did not return after the deadline.")
	descLeader   = desc("leader", "1 while this replica runs the pipeline (always, without leader election).")
	descLkReqs   = desc("lookup_requests_total", "Involved objects read from the API server (lookup cache misses).")
	descLkHits   = desc("lookup_cache_hits_total", "Involved-object lookups answered by the cache (a remembered failure included).")
	descLkErrors = desc("lookup_errors_total", "Involved-object lookups that failed, by reason (forbidden, unmapped, timeout, error): rules on labels or annotations do not match them.", "reason")
	descLkGone   = desc("lookup_deleted_total", "Involved objects found deleted (or being deleted) when read.")
	descBuild    = desc("build_info", "1, labelled with the exporter's version and the Go version that built it.", "version", "goversion")
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("fanout_eventer_"+name, help, labels, nil)
}

// NewMetrics returns the collector.
func NewMetrics() *Metrics {
	return &Metrics{Lag: prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "fanout_eventer_source_lag_seconds", Help: "Time from an occurrence's last timestamp to its forwarding.",
		Buckets: []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 1800, 3600},
	})}
}

// Describe sends every descriptor.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSent, descDropped, descRetries, descDedup, descDepth, descCapacity,
		descBlocking, descBlocked, descLists, descWatches, descRestarts, descRelists, descCollapse, descOccur, descIgnored, descDeletes, descTooOld, descSynced, descRouteDr,
		descRouteNo, descCkWrites, descCkFails, descCkLag, descCkLast, descAbandon, descLeader, descLkReqs, descLkHits, descLkErrors, descLkGone, descBuild} {
		ch <- d
	}
	m.Lag.Describe(ch)
	m.kee.describe(ch)
}

// Collect sends the current values.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.Lag.Collect(ch)
	ch <- gauge(descLeader, b2f(m.leader.Load()))
	ch <- gauge(descBuild, 1, BuildVersion(), runtime.Version())
	if p := m.pipeline.Load(); p != nil {
		m.collectPipeline(ch, p)
	}
	if l := m.lookup.Load(); l != nil {
		st := l.Stats()
		ch <- counter(descLkReqs, st.Requests)
		ch <- counter(descLkHits, st.CacheHits)
		ch <- counter(descLkGone, st.Deleted)
		for reason, n := range st.Errors {
			ch <- counter(descLkErrors, n, reason)
		}
	}
	m.kee.collect(ch, m)
	if s := m.source.Load(); s != nil {
		st := s.Stats()
		ch <- counter(descLists, st.Lists)
		ch <- counter(descWatches, st.Watches)
		ch <- counter(descRestarts, max(st.Watches, 1)-1)
		ch <- counter(descRelists, st.Relists)
		ch <- counter(descCollapse, st.Collapsed)
		ch <- counter(descOccur, st.Occurrences)
		ch <- counter(descIgnored, st.UpdatesIgnored)
		ch <- counter(descDeletes, st.Deletes)
		ch <- counter(descTooOld, st.TooOld)
		ch <- gauge(descSynced, b2f(st.Synced))
	}
}

func (m *Metrics) collectPipeline(ch chan<- prometheus.Metric, p *Pipeline) {
	for _, s := range p.Stats() {
		ch <- counter(descSent, s.Sent, s.Name)
		ch <- counter(descRetries, s.Retries, s.Name)
		ch <- counter(descDedup, s.Deduplicated, s.Name)
		ch <- gauge(descDepth, float64(s.Queued), s.Name)
		ch <- gauge(descCapacity, float64(s.QueueLength), s.Name)
		for _, r := range sinkDropReasons {
			ch <- counter(descDropped, s.Dropped[r], s.Name, DropLabel(r))
		}
	}
	blocking, waited := p.blocking()
	for _, r := range p.runners {
		ch <- gauge(descBlocking, b2f(blocking[r.name]), r.name)
	}
	ch <- gauge(descBlocked, waited.Seconds())
	ps := p.PipelineStats()
	ch <- counter(descRouteDr, ps.DroppedByRule)
	ch <- counter(descRouteNo, ps.RoutedNowhere)
	ch <- counter(descAbandon, ps.SinksAbandoned)
	if p.store != nil { // without a checkpoint, nothing is written: no series
		collectCheckpoint(ch, ps)
	}
}

// collectCheckpoint sends the checkpoint's samples.
func collectCheckpoint(ch chan<- prometheus.Metric, ps PipelineStats) {
	ch <- counter(descCkWrites, ps.CheckpointWrites)
	ch <- counter(descCkFails, ps.CheckpointFailures)
	ch <- gauge(descCkLag, float64(ps.CheckpointLag))
	if !ps.LastCheckpoint.IsZero() {
		ch <- gauge(descCkLast, float64(ps.LastCheckpoint.UnixNano())/1e9)
	}
}

func counter(d *prometheus.Desc, v uint64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Version is the exporter's version in fanout_eventer_build_info. Set it
// at build time (the Dockerfile does):
//
//	go build -ldflags "-X github.com/fanout-go/fanout/exporter.Version=v0.1.0" ./cmd/fanout-eventer
//
// When empty, [BuildVersion] takes the module's version from the build
// information.
var Version string

// modulePath is this module's path, to find its version in the build
// information.
const modulePath = "github.com/fanout-go/fanout/exporter"

// BuildVersion returns [Version], else this module's version in the
// binary's build information (the main module's, or a dependency's), else
// "(devel)".
func BuildVersion() string {
	if Version != "" {
		return Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if bi.Main.Path == modulePath && bi.Main.Version != "" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == modulePath && d.Version != "" {
			return d.Version
		}
	}
	return "(devel)"
}

// buildRevision returns the VCS revision in the binary's build
// information, or "".
func buildRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return ""
}

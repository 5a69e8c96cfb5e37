package exporter

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// keeDescs are kubernetes-event-exporter's (v1.6.1) metrics, named with a
// metricsNamePrefix, each computed from this exporter's counters:
//
//   - events_sent: occurrences forwarded by the source (theirs counts the
//     events it handles, after the age cut-off);
//   - events_discarded: events not exported for being older than
//     maxEventAgeSeconds (theirs counts those of its watch after the
//     start; here the cut-off applies to the first list only);
//   - watch_errors: failed lists and watches of events;
//   - send_event_errors: failed sink writes (retried or not) and the
//     occurrences a sink rejected, gave up on or panicked on;
//   - kube_api_read_cache_hits, kube_api_read_cache_misses: the
//     involved-object lookups answered by the cache, and read from the
//     API server;
//   - build_info: 1, with version, revision, goversion, goos, goarch.
//
// Their counters are named without _total, as theirs.
type keeDescs struct {
	sent, discarded, watchErrors, sendErrors, cacheHits, cacheMisses, build *prometheus.Desc
}

// keeCompat adds kubernetes-event-exporter's metrics, their names prefixed
// with prefix, to the collector. Call it before registering m.
func (m *Metrics) keeCompat(prefix string) {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prefix+name, help, labels, nil)
	}
	m.kee = &keeDescs{
		sent:        d("events_sent", "Occurrences forwarded by the source (kubernetes-event-exporter's name)."),
		discarded:   d("events_discarded", "Events not exported for being older than maxEventAgeSeconds at start."),
		watchErrors: d("watch_errors", "Failed lists and watches of events."),
		sendErrors:  d("send_event_errors", "Failed sink writes, and occurrences rejected, given up on or panicked on by a sink."),
		cacheHits:   d("kube_api_read_cache_hits", "Involved-object lookups answered by the cache."),
		cacheMisses: d("kube_api_read_cache_misses", "Involved objects read from the API server."),
		build:       d("build_info", "1, labelled with the exporter's version and the Go version, OS and architecture.", "version", "revision", "goversion", "goos", "goarch"),
	}
}

// describe sends the descriptors; nothing if k is nil.
func (k *keeDescs) describe(ch chan<- *prometheus.Desc) {
	if k == nil {
		return
	}
	for _, d := range []*prometheus.Desc{k.sent, k.discarded, k.watchErrors, k.sendErrors, k.cacheHits, k.cacheMisses, k.build} {
		ch <- d
	}
}

// collect sends the values, from m's counters; nothing if k is nil.
func (k *keeDescs) collect(ch chan<- prometheus.Metric, m *Metrics) {
	if k == nil {
		return
	}
	ch <- gauge(k.build, 1, BuildVersion(), buildRevision(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	var src SourceStats
	if s := m.source.Load(); s != nil {
		src = s.Stats()
	}
	ch <- counter(k.sent, src.Occurrences)
	ch <- counter(k.discarded, src.TooOld)
	ch <- counter(k.watchErrors, src.Failures)
	var sendErrors uint64
	if p := m.pipeline.Load(); p != nil {
		for _, s := range p.Stats() {
			sendErrors += s.Retries + s.Dropped[DropRejected] + s.Dropped[DropRetries] + s.Dropped[DropPanic]
		}
	}
	ch <- counter(k.sendErrors, sendErrors)
	var hits, misses uint64
	if l := m.lookup.Load(); l != nil {
		st := l.Stats()
		hits, misses = st.CacheHits, st.Requests
	}
	ch <- counter(k.cacheHits, hits)
	ch <- counter(k.cacheMisses, misses)
}

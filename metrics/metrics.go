// Package metrics exports the counters of fanout's components as
// Prometheus metrics: any [fanout.MetricSource] (a [fanout.Broadcaster], a
// [fanout.Recorder], the NATS module's bridges) becomes a
// prometheus.Collector that reads its [fanout.Metric] samples at each
// scrape.
//
// It is a module of its own, github.com/fanout-go/fanout/metrics, so that
// Prometheus is linked only into the programs that import it: the core and
// the NATS module describe their samples with [fanout.Metric] and do not
// depend on the Prometheus client.
//
// The collector is not registered anywhere: register it yourself, once per
// source, with constant labels that tell sources apart when you have
// several:
//
//	reg.MustRegister(metrics.NewCollector(b, prometheus.Labels{"broadcaster": "orders"}))
//
// A registry cannot give such a collector back (see [Set]): for sources
// that come and go as the program runs, register one [Set] and add and
// remove them.
//
// It is an unchecked collector (its Describe sends nothing): the samples a
// source reports, watchers included, change from scrape to scrape. A label
// value that is not valid UTF-8 (a watcher's name, say) is exported with
// each invalid byte replaced by U+FFFD; a sample Prometheus cannot take
// (constant labels that clash with a sample's labels) fails the scrape
// with an error naming it, rather than panicking.
package metrics

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fanout-go/fanout"
)

// Collector is a prometheus.Collector of one [fanout.MetricSource].
type Collector struct {
	src         fanout.MetricSource
	constLabels prometheus.Labels

	mu    sync.Mutex
	descs map[string]*prometheus.Desc // by name and label names
}

// NewCollector returns a collector reading src at each scrape. constLabels
// are added to every metric (nil: none).
func NewCollector(src fanout.MetricSource, constLabels prometheus.Labels) *Collector {
	return &Collector{src: src, constLabels: constLabels, descs: map[string]*prometheus.Desc{}}
}

// Describe sends nothing: the collector is unchecked, as its samples vary.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect sends the source's samples.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.src.Metrics() {
		names := make([]string, len(m.Labels))
		values := make([]string, len(m.Labels))
		for i, l := range m.Labels {
			names[i], values[i] = l.Name, strings.ToValidUTF8(l.Value, "\uFFFD")
		}
		t := prometheus.CounterValue
		if m.Type == fanout.Gauge {
			t = prometheus.GaugeValue
		}
		d := c.desc(m.Name, m.Help, names)
		pm, err := prometheus.NewConstMetric(d, t, m.Value, values...)
		if err != nil {
			pm = prometheus.NewInvalidMetric(d, err)
		}
		ch <- pm
	}
}

// desc returns the descriptor of a metric name with these label names,
// made once.
func (c *Collector) desc(name, help string, labels []string) *prometheus.Desc {
	key := name + "\x00" + strings.Join(labels, "\x00")
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.descs[key]
	if d == nil {
		d = prometheus.NewDesc(name, help, labels, c.constLabels)
		c.descs[key] = d
	}
	return d
}

package fanoutnats

// MetricType is the Prometheus type of a [Metric].
type MetricType uint8

// The metric types.
const (
	// Counter only grows (Prometheus counter; the name ends in _total).
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

// Metric is one sample of a bridge's statistics, named and typed for
// Prometheus, so that a collector needs no table of its own: for each
// Metric, a prometheus.Collector sends
// prometheus.MustNewConstMetric(desc(m.Name, m.Help, label names), type,
// m.Value, label values). The package does not depend on the Prometheus
// client. Metrics of the same Name have the same label names.
type Metric struct {
	// Name is the metric name, such as "fanoutnats_forwarder_values_total".
	Name string
	// Help is the metric's help text.
	Help string
	// Type is [Counter] or [Gauge].
	Type MetricType
	// Labels tell the samples of one Name apart, for example
	// {result="published"}.
	Labels []Label
	// Value is the sample.
	Value float64
}

func counter(name, help string, v uint64, labels ...Label) Metric {
	return Metric{Name: name, Help: help, Type: Counter, Labels: labels, Value: float64(v)}
}

func gauge(name, help string, v float64, labels ...Label) Metric {
	return Metric{Name: name, Help: help, Type: Gauge, Labels: labels, Value: v}
}

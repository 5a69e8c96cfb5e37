package exporter

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file holds what makes a kubernetes-event-exporter (v1.6.1)
// configuration load unchanged: the keys of its schema that have no
// meaning here are accepted and reported as warnings, each with its line,
// and its receivers without a sink here are skipped with a warning.

// LeaderElectionConfig is kubernetes-event-exporter's leaderElection: with
// Enabled, the exporter leads on a Lease named LeaderElectionID, as with
// --leader-elect --leader-elect-name ID.
type LeaderElectionConfig struct {
	// Enabled turns leader election on.
	Enabled bool `yaml:"enabled"`
	// LeaderElectionID is the Lease's name (default fanout-eventer).
	LeaderElectionID string `yaml:"leaderElectionID"`
}

// foreignSink is the configuration of one of kubernetes-event-exporter's
// sink kinds that this exporter has no sink for: accepted as it is, so
// that the receiver can be skipped with a warning naming its line.
type foreignSink struct{ line int }

// UnmarshalYAML keeps the line and accepts any content.
func (f *foreignSink) UnmarshalYAML(n *yaml.Node) error {
	f.line = n.Line
	return nil
}

// foreignSinks are kubernetes-event-exporter's receiver kinds without a
// sink here, in the order it picks one when a receiver sets several.
type foreignSinks struct {
	InMemory *foreignSink `yaml:"inMemory"`
	Syslog   *foreignSink `yaml:"syslog"`
	Opsgenie *foreignSink `yaml:"opsgenie"`
	Pubsub   *foreignSink `yaml:"pubsub"`
	BigQuery *foreignSink `yaml:"bigquery"`
}

// sinkKind is one sink kind a receiver sets.
type sinkKind struct {
	name    string
	foreign *foreignSink // nil for a kind this exporter has
	cfg     any          // the configuration of a kind this exporter has
	clear   func()
}

// kinds returns the sink kinds set, in kubernetes-event-exporter's order
// of preference (then this exporter's own kinds).
func (r *Receiver) kinds() []sinkKind {
	fs := &r.foreignSinks
	all := []sinkKind{
		foreignKind("inMemory", &fs.InMemory), ownKind("pipe", &r.Pipe), ownKind("webhook", &r.Webhook),
		ownKind("file", &r.File), foreignKind("syslog", &fs.Syslog), ownKind("stdout", &r.Stdout),
		ownKind("elasticsearch", &r.Elasticsearch), ownKind("kinesis", &r.Kinesis),
		ownKind("firehose", &r.Firehose), ownKind("opensearch", &r.OpenSearch),
		foreignKind("opsgenie", &fs.Opsgenie), ownKind("sqs", &r.SQS), ownKind("sns", &r.SNS),
		ownKind("slack", &r.Slack), ownKind("kafka", &r.Kafka), foreignKind("pubsub", &fs.Pubsub),
		ownKind("opscenter", &r.Opscenter), ownKind("teams", &r.Teams),
		foreignKind("bigquery", &fs.BigQuery), ownKind("eventbridge", &r.EventBridge),
		ownKind("loki", &r.Loki), ownKind("nats", &r.NATS), ownKind("log", &r.Log), ownKind("otlp", &r.OTLP),
	}
	return slices.DeleteFunc(all, func(k sinkKind) bool { return k.clear == nil })
}

// ownKind returns the sink kind of this exporter configured at *p; its
// clear is nil when the kind is not set.
func ownKind[T any](name string, p **T) sinkKind {
	if *p == nil {
		return sinkKind{}
	}
	return sinkKind{name: name, cfg: *p, clear: func() { *p = nil }}
}

// foreignKind returns the sink kind of kubernetes-event-exporter without a
// sink here configured at *f; its clear is nil when the kind is not set.
func foreignKind(name string, f **foreignSink) sinkKind {
	if *f == nil {
		return sinkKind{}
	}
	return sinkKind{name: name, foreign: *f, clear: func() { *f = nil }}
}

// chooseKind keeps the first sink kind set, as kubernetes-event-exporter
// does, and clears the others. It returns warnings, and whether the
// receiver is to be skipped (its kind has no sink here).
func (r *Receiver) chooseKind() (warnings []string, skip bool) {
	ks := r.kinds()
	if len(ks) == 0 {
		return nil, false
	}
	if len(ks) > 1 {
		names := make([]string, 0, len(ks)-1)
		for _, k := range ks[1:] {
			names = append(names, k.name)
			k.clear()
		}
		warnings = append(warnings, fmt.Sprintf("line %d: receiver %q sets several sinks: %s is used, as kubernetes-event-exporter does; ignored: %s",
			r.line, r.Name, ks[0].name, strings.Join(names, ", ")))
	}
	if f := ks[0].foreign; f != nil {
		warnings = append(warnings, fmt.Sprintf("line %d: receiver %q: the %s sink (line %d) is not supported yet; "+
			"the receiver is skipped (rules that name it send nothing)", r.line, r.Name, ks[0].name, f.line))
		return warnings, true
	}
	return warnings, false
}

// topLevelWarnings returns a warning for every top-level key of
// kubernetes-event-exporter's schema that is accepted without effect.
func (c *Config) topLevelWarnings(root *yaml.Node) []string {
	var w []string
	for _, p := range mappingPairs(documentMapping(root)) {
		key, msg := p.key, ""
		switch key.Value {
		case "maxEventAgeSeconds", "throttlePeriod":
			msg = "ignored: this exporter has no age cut-off; the checkpoint decides what was missed"
		case "metricsNamePrefix":
			msg = "ignored: the metrics are named fanout_eventer_* (see the README's Operations section)"
		}
		if msg != "" {
			w = append(w, fmt.Sprintf("line %d: %s: %s", key.Line, key.Value, msg))
		}
	}
	return w
}

// documentMapping returns the top-level mapping of a document, or nil.
func documentMapping(root *yaml.Node) *yaml.Node {
	if root == nil || root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	return root.Content[0]
}

// ruleWarnings returns the warnings of the rules of the tree: patterns that
// never match, and label or annotation conditions with omitLookup.
func (rt *Route) ruleWarnings(omitLookup bool) []string {
	var w []string
	for _, r := range slices.Concat(rt.Drop, rt.Match) {
		if r != nil {
			w = append(w, r.warnings(omitLookup)...)
		}
	}
	for _, child := range rt.Routes {
		if child != nil {
			w = append(w, child.ruleWarnings(omitLookup)...)
		}
	}
	return w
}

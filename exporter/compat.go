package exporter

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// This file holds what makes a kubernetes-event-exporter (v1.6.1)
// configuration load unchanged: the keys of its schema that have no
// meaning here are accepted and reported as warnings, each with its line;
// every receiver kind it has is a sink here.

// LeaderElectionConfig is kubernetes-event-exporter's leaderElection: with
// Enabled, the exporter leads on a Lease named LeaderElectionID, as with
// --leader-elect --leader-elect-name ID.
type LeaderElectionConfig struct {
	// Enabled turns leader election on.
	Enabled bool `yaml:"enabled"`
	// LeaderElectionID is the Lease's name (default fanout-eventer).
	LeaderElectionID string `yaml:"leaderElectionID"`
}

// sinkKind is one sink kind a receiver sets.
type sinkKind struct {
	name  string
	cfg   any // the kind's configuration
	clear func()
}

// kinds returns the sink kinds set, in kubernetes-event-exporter's order
// of preference (then this exporter's own kinds).
func (r *Receiver) kinds() []sinkKind {
	all := []sinkKind{
		ownKind("inMemory", &r.InMemory), ownKind("pipe", &r.Pipe), ownKind("webhook", &r.Webhook),
		ownKind("file", &r.File), ownKind("syslog", &r.Syslog), ownKind("stdout", &r.Stdout),
		ownKind("elasticsearch", &r.Elasticsearch), ownKind("kinesis", &r.Kinesis),
		ownKind("firehose", &r.Firehose), ownKind("opensearch", &r.OpenSearch),
		ownKind("opsgenie", &r.Opsgenie), ownKind("sqs", &r.SQS), ownKind("sns", &r.SNS),
		ownKind("slack", &r.Slack), ownKind("kafka", &r.Kafka), ownKind("pubsub", &r.Pubsub),
		ownKind("opscenter", &r.Opscenter), ownKind("teams", &r.Teams),
		ownKind("bigquery", &r.BigQuery), ownKind("eventbridge", &r.EventBridge),
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

// chooseKind keeps the first sink kind set, as kubernetes-event-exporter
// does, and clears the others. It returns warnings.
func (r *Receiver) chooseKind() (warnings []string) {
	ks := r.kinds()
	if len(ks) == 0 {
		return nil
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
	return warnings
}

// topLevelWarnings returns a warning for every top-level key of
// kubernetes-event-exporter's schema that is deprecated there.
func (c *Config) topLevelWarnings(root *yaml.Node) []string {
	var w []string
	for _, p := range mappingPairs(documentMapping(root)) {
		if p.key.Value == "throttlePeriod" && c.MaxEventAgeSeconds == 0 {
			w = append(w, fmt.Sprintf("line %d: throttlePeriod is kubernetes-event-exporter's deprecated name "+
				"of maxEventAgeSeconds: taken as maxEventAgeSeconds: %d", p.key.Line, c.ThrottlePeriod))
		}
	}
	return w
}

// topLevelLines returns the line of each top-level key.
func topLevelLines(root *yaml.Node) map[string]int {
	lines := map[string]int{}
	for _, p := range mappingPairs(documentMapping(root)) {
		lines[p.key.Value] = p.key.Line
	}
	return lines
}

// at returns "line N: " for top-level key, or "" if it is not set.
func (c *Config) at(key string) string {
	if n := c.keyLines[key]; n > 0 {
		return fmt.Sprintf("line %d: ", n)
	}
	return ""
}

// atf returns the problem with top-level key that format and args say,
// after the key's line (at).
func (c *Config) atf(key, format string, args ...any) string {
	return c.at(key) + fmt.Sprintf(format, args...)
}

// KEEDefaultMaxEventAge is kubernetes-event-exporter's maxEventAgeSeconds
// when neither it nor throttlePeriod is set: the cut-off of a
// configuration without a checkpoint.
const KEEDefaultMaxEventAge = 5 * time.Second

// metricsPrefixPattern is what kubernetes-event-exporter requires of a
// metricsNamePrefix that is not empty.
var metricsPrefixPattern = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_:]*_$`)

// validateCompat checks kubernetes-event-exporter's top-level keys that
// take effect here, and sets the age cut-off.
func (c *Config) validateCompat() []string {
	var p []string
	add := func(key, format string, args ...any) { p = append(p, c.atf(key, format, args...)) }
	for key, v := range map[string]int64{"maxEventAgeSeconds": c.MaxEventAgeSeconds, "throttlePeriod": c.ThrottlePeriod} {
		if v < 0 {
			add(key, "%s: %d is negative", key, v)
		}
	}
	if c.MaxEventAgeSeconds != 0 && c.ThrottlePeriod != 0 {
		add("throttlePeriod", "throttlePeriod (deprecated) and maxEventAgeSeconds are both set: set one "+
			"(kubernetes-event-exporter refuses both too)")
	}
	switch {
	case c.MaxEventAgeSeconds > 0:
		c.maxEventAge = time.Duration(c.MaxEventAgeSeconds) * time.Second
	case c.ThrottlePeriod > 0:
		c.maxEventAge = time.Duration(c.ThrottlePeriod) * time.Second
	}
	if c.MetricsNamePrefix != "" && !metricsPrefixPattern.MatchString(c.MetricsNamePrefix) {
		add("metricsNamePrefix", "metricsNamePrefix %q must match %s (as kubernetes-event-exporter requires)",
			c.MetricsNamePrefix, metricsPrefixPattern)
	}
	if c.KubeQPS < 0 {
		add("kubeQPS", "kubeQPS: %g is negative (0 is the default, 20)", c.KubeQPS)
	}
	if c.KubeBurst < 0 {
		add("kubeBurst", "kubeBurst: %d is negative (0 is the default, 40)", c.KubeBurst)
	}
	return p
}

// setKEEAgeDefault sets kubernetes-event-exporter's default age cut-off
// on a configuration file that sets none and has no checkpoint (a
// [Config] made by a program has no default: it sets MaxEventAgeSeconds).
func (c *Config) setKEEAgeDefault() {
	if c.MaxEventAgeSeconds == 0 && c.ThrottlePeriod == 0 && c.Checkpoint.File == "" && c.Checkpoint.ConfigMap == nil {
		c.maxEventAge = KEEDefaultMaxEventAge
	}
}

// MaxEventAge returns the age cut-off at a start without a checkpoint to
// resume from: the events last seen longer than that before the start
// are not exported (0: none, every event the API server holds is). After
// a first start stopped before its sinks were done with its list (a
// checkpoint without a resource version), it applies to the events that
// checkpoint does not count. It is maxEventAgeSeconds (or
// throttlePeriod); unset, it is kubernetes-event-exporter's 5 s for a
// configuration file without a checkpoint ([ParseConfig] sets it), and
// none with one (the first start exports what the API server holds;
// later starts resume from the checkpoint, which decides).
func (c *Config) MaxEventAge() time.Duration { return c.maxEventAge }

// metricsPrefix returns the prefix of kubernetes-event-exporter's metric
// names, and whether they are exported (metricsNamePrefix is set).
func (c *Config) metricsPrefix() (string, bool) {
	_, set := c.keyLines["metricsNamePrefix"]
	return c.MetricsNamePrefix, set
}

// StartNote says what a start exports first: whether it resumes from the
// checkpoint, and the age cut-off that applies without one
// (--check-config prints it).
func (c *Config) StartNote() string {
	var where string
	switch {
	case c.Checkpoint.File != "":
		where = "checkpoint file " + c.Checkpoint.File
	case c.Checkpoint.ConfigMap != nil:
		where = "checkpoint ConfigMap " + c.Checkpoint.ConfigMap.Namespace + "/" + c.Checkpoint.ConfigMap.Name
	}
	cut := "every event the API server still holds is exported"
	if c.maxEventAge > 0 {
		cut = fmt.Sprintf("events last seen more than %s before the start are not exported (%s)", c.maxEventAge, c.ageSource())
	}
	if where == "" {
		return "no checkpoint: at every start, " + cut + "; add checkpoint: to resume where the last run stopped"
	}
	return "a start resumes from the " + where + ", which decides what is exported; the first start (no checkpoint yet; " +
		"after one stopped during its list, for the events it did not count): " + cut
}

// ageSource names the setting the age cut-off comes from.
func (c *Config) ageSource() string {
	switch {
	case c.MaxEventAgeSeconds > 0:
		return "maxEventAgeSeconds"
	case c.ThrottlePeriod > 0:
		return "throttlePeriod"
	}
	return "kubernetes-event-exporter's default maxEventAgeSeconds for a configuration without a checkpoint"
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

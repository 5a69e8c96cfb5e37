package exporter

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/fanout-go/fanout"
	"go.yaml.in/yaml/v3"
)

// Config is the exporter's configuration, read from YAML by [LoadConfig] or
// [ParseConfig]. The route tree and the rule fields are those of
// kubernetes-event-exporter (see the README for the mapping of its keys).
type Config struct {
	// API is the Event API watched: [CoreV1] (the default) or [EventsV1].
	// Both show the same events, so only one is watched.
	API string `yaml:"api"`
	// Namespace restricts the watch to one namespace; empty watches all.
	Namespace string `yaml:"namespace"`
	// Checkpoint says where and how often the checkpoint is written.
	Checkpoint CheckpointConfig `yaml:"checkpoint"`
	// ShutdownTimeout bounds the flush at shutdown (default 20 s).
	ShutdownTimeout Duration `yaml:"shutdownTimeout"`
	// LogLevel is debug, info (the default), warn, error or disabled
	// ([LogDisabled]: no logs). kubernetes-event-exporter's (zerolog's)
	// other levels are mapped with a warning: trace to debug, fatal and
	// panic to error, and its numbers (-128 to 127) to the nearest
	// level: -1 (trace) and below debug, 0 debug, 1 info, 2 warn, 3 to 5
	// error, 6 and above disabled.
	LogLevel string `yaml:"logLevel"`
	// LogFormat is text (the default) or json.
	LogFormat string `yaml:"logFormat"`
	// KubeQPS and KubeBurst set the client's rate limits (defaults 20, 40).
	KubeQPS   float32 `yaml:"kubeQPS"`
	KubeBurst int     `yaml:"kubeBurst"`
	// ClusterName, if set, is written as clusterName in every record (as
	// kubernetes-event-exporter does).
	ClusterName string `yaml:"clusterName"`
	// LeaderElection turns leader election on in the command ([Main]),
	// as --leader-elect does; a program calling [Run] sets
	// [Options].LeaderElection instead.
	LeaderElection LeaderElectionConfig `yaml:"leaderElection"`

	// MaxEventAgeSeconds is kubernetes-event-exporter's age cut-off at
	// start: with no checkpoint to resume from, the events last seen more
	// than this many seconds before the start are not exported (see
	// [Config.MaxEventAge]). ThrottlePeriod is its deprecated name; set
	// one, not both.
	MaxEventAgeSeconds int64 `yaml:"maxEventAgeSeconds"`
	ThrottlePeriod     int64 `yaml:"throttlePeriod"`
	// MetricsNamePrefix, when set (even to ""), adds
	// kubernetes-event-exporter's metrics, their names prefixed with it
	// (events_sent, events_discarded, watch_errors, send_event_errors,
	// kube_api_read_cache_hits, kube_api_read_cache_misses, build_info),
	// to the fanout_eventer_* ones. A prefix that is not empty must match
	// ^[a-zA-Z][a-zA-Z0-9_:]*_$, as there.
	MetricsNamePrefix string `yaml:"metricsNamePrefix"`
	// OmitLookup turns off the lookup of involved objects (see [Lookup]),
	// and CacheSize bounds its cache (0: [DefaultCacheSize]), as in
	// kubernetes-event-exporter.
	OmitLookup bool `yaml:"omitLookup"`
	CacheSize  int  `yaml:"cacheSize"`

	// Compat is the record stream and routing every receiver gets by
	// default: [CompatFanout] (the default: this exporter's) or
	// [CompatKEE] (kubernetes-event-exporter v1.6.1's: its records, one
	// per event at first sighting, and its routing; see the README's
	// migration guide). Routing follows this key only; a receiver's own
	// compat overrides its records and stream. The first sighting is the
	// source's: an occurrence a program hands to [Pipeline.Occurred]
	// counts as one.
	Compat string `yaml:"compat"`

	// Route is the root of the route tree.
	Route Route `yaml:"route"`
	// Receivers are the sinks, at most 64.
	Receivers []*Receiver `yaml:"receivers"`

	// Warnings are "line N: ..." messages about what the configuration
	// sets without effect here (kubernetes-event-exporter's keys, rules
	// that never match), set by [ParseConfig].
	Warnings []string `yaml:"-"`
	// keyLines are the lines of the top-level keys.
	keyLines map[string]int
	// maxEventAge is the age cut-off at a start without a checkpoint, or
	// with one whose first list was not done with (0: none), set by
	// validation.
	maxEventAge time.Duration
}

// CheckpointConfig says where the checkpoint is kept: a file or a
// ConfigMap (one of them, or neither for no checkpoint).
type CheckpointConfig struct {
	// File is the checkpoint file (see [FileStore]).
	File string `yaml:"file"`
	// ConfigMap is the checkpoint ConfigMap (see [ConfigMapStore]).
	ConfigMap *ConfigMapRef `yaml:"configMap"`
	// Interval is the shortest time between two writes (default 2 s).
	Interval Duration `yaml:"interval"`
}

// ConfigMapRef names a ConfigMap.
type ConfigMapRef struct {
	// Namespace and Name locate the ConfigMap.
	Namespace string `yaml:"namespace"`
	Name      string `yaml:"name"`
}

// Receiver is one sink with its queue, batch size, writers and retry
// policy. Exactly one of the sink kinds is set (stdout, file, pipe,
// webhook, elasticsearch, opensearch, kafka, otlp, slack, teams, loki,
// nats, log, syslog, opsgenie, pubsub, bigquery, inMemory, sqs, sns,
// kinesis, firehose, eventbridge, opscenter: every receiver kind of
// kubernetes-event-exporter, and this exporter's nats, otlp and log; of
// several, the first in kubernetes-event-exporter's order is used, with a
// warning), or Sink is set by a program.
type Receiver struct {
	// Name is what rules send occurrences to; it labels the sink's
	// metrics.
	Name string `yaml:"name"`
	// Queue is the sink's queue: its length and full-queue strategy.
	Queue Queue `yaml:"queue"`
	// Batch is the most occurrences per write (default: 1 for a webhook,
	// 256 otherwise).
	Batch int `yaml:"batch"`
	// Writers is the most writes in flight at once, 1 to
	// [fanout.MaxWriters], in order per involved object: the records of
	// one object are written one write at a time, in order, those of
	// other objects in parallel (default [DefaultWriters] for the sinks
	// that make a request per write: webhook, elasticsearch, opensearch,
	// loki, otlp, slack, teams, opsgenie and the AWS ones; 1 for the
	// others, which keep one stream's order or batch and pipeline their
	// writes themselves: file, stdout, pipe, log, inMemory, syslog,
	// kafka, nats, pubsub, bigquery). Every sink is safe with several;
	// the stream sinks (stdout, file, pipe, syslog) write one batch at a
	// time whatever it says. The checkpoint passes an occurrence only
	// once every writer is done with it and with every occurrence before
	// it.
	Writers int `yaml:"writers"`
	// Format is the record payload sinks write: event (the default, the
	// Event as kubernetes-event-exporter writes it, see [EnhancedEvent])
	// or fanout (the [Occurrence]).
	Format string `yaml:"format"`
	// Compat overrides the configuration's Compat for this receiver's
	// records and stream ([CompatFanout] or [CompatKEE]).
	Compat string `yaml:"compat"`
	// RetryConfig is the retry policy; unset fields take [DefaultRetry]'s.
	RetryConfig *RetryConfig `yaml:"retry"`
	// Retry is the policy in effect, set by validation.
	Retry Retry `yaml:"-"`

	// Stdout, File, Webhook, NATS and Log configure the sink kinds.
	Stdout  *StdoutConfig  `yaml:"stdout"`
	File    *FileConfig    `yaml:"file"`
	Webhook *WebhookConfig `yaml:"webhook"`
	NATS    *NATSConfig    `yaml:"nats"`
	Log     *LogConfig     `yaml:"log"`
	// Pipe is kubernetes-event-exporter's pipe sink: JSON Lines written to
	// a path opened for writing (a named pipe, /dev/stdout).
	Pipe *PipeConfig `yaml:"pipe"`
	// Elasticsearch and OpenSearch index occurrences with the bulk API.
	Elasticsearch *ElasticsearchConfig `yaml:"elasticsearch"`
	OpenSearch    *ElasticsearchConfig `yaml:"opensearch"`
	// Kafka produces occurrences to a topic.
	Kafka *KafkaConfig `yaml:"kafka"`
	// OTLP exports occurrences as OpenTelemetry log records.
	OTLP *OTLPConfig `yaml:"otlp"`
	// Slack and Teams post a chat message per occurrence (webhook
	// presets).
	Slack *SlackConfig `yaml:"slack"`
	Teams *TeamsConfig `yaml:"teams"`
	// Loki pushes occurrences to Loki's push API.
	Loki *LokiConfig `yaml:"loki"`
	// Syslog sends occurrences to a syslog daemon.
	Syslog *SyslogConfig `yaml:"syslog"`
	// Opsgenie creates an Opsgenie alert per occurrence.
	Opsgenie *OpsgenieConfig `yaml:"opsgenie"`
	// InMemory keeps the last records in memory, for a program to read.
	InMemory *InMemoryConfig `yaml:"inMemory"`
	// Pubsub publishes occurrences to a Google Cloud Pub/Sub topic.
	Pubsub *PubsubConfig `yaml:"pubsub"`
	// BigQuery writes occurrences as rows of a BigQuery table.
	BigQuery *BigQueryConfig `yaml:"bigquery"`
	// SNS, SQS, Kinesis, Firehose, EventBridge and Opscenter send
	// occurrences to AWS services (kubernetes-event-exporter's keys).
	SNS         *SNSConfig         `yaml:"sns"`
	SQS         *SQSConfig         `yaml:"sqs"`
	Kinesis     *KinesisConfig     `yaml:"kinesis"`
	Firehose    *FirehoseConfig    `yaml:"firehose"`
	EventBridge *EventBridgeConfig `yaml:"eventbridge"`
	Opscenter   *OpsCenterConfig   `yaml:"opscenter"`
	// Sink, set by a program instead of a sink kind, is used as is.
	Sink Sink `yaml:"-"`

	line int
	// kee is set by validation when the receiver's compat (its own, else
	// the configuration's) is [CompatKEE].
	kee bool
}

// RetryConfig is a receiver's retry policy as configured (see [Retry]).
type RetryConfig struct {
	// MaxTries is the number of attempts; 0 retries until shutdown.
	MaxTries *int `yaml:"maxTries"`
	// InitialBackoff and MaxBackoff bound the pauses.
	InitialBackoff Duration `yaml:"initialBackoff"`
	MaxBackoff     Duration `yaml:"maxBackoff"`
}

// Strategy names a full-queue strategy.
type Strategy string

// The full-queue strategies of a receiver's queue.
const (
	// StrategyWait makes the source wait for room (lossless, and every
	// sink waits for the slowest Wait sink).
	StrategyWait Strategy = "Wait"
	// StrategyDropOldest discards the oldest queued occurrence.
	StrategyDropOldest Strategy = "DropOldest"
	// StrategyDropNewest discards the new occurrence.
	StrategyDropNewest Strategy = "DropNewest"
	// StrategyWaitTimeout waits up to Queue.Timeout, then discards the new
	// occurrence.
	StrategyWaitTimeout Strategy = "WaitTimeout"
)

// Queue is a receiver's queue.
type Queue struct {
	// Length is the queue's capacity (default 1000, or 10000 for a
	// webhook).
	Length int `yaml:"length"`
	// Strategy is what a full queue does (default Wait, or DropOldest for
	// a webhook).
	Strategy Strategy `yaml:"strategy"`
	// Timeout is the wait of WaitTimeout.
	Timeout Duration `yaml:"timeout"`
}

func (q Queue) behavior() fanout.FullChannelBehavior {
	switch q.Strategy {
	case StrategyDropOldest:
		return fanout.DropOldestIfChannelFull
	case StrategyDropNewest:
		return fanout.DropIfChannelFull
	case StrategyWaitTimeout:
		return fanout.WaitTimeoutIfChannelFull(time.Duration(q.Timeout))
	}
	return fanout.WaitIfChannelFull
}

// Duration is a time.Duration written as in Go ("500ms", "2m").
type Duration time.Duration

// UnmarshalYAML parses a duration, naming the line on error.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return lineError(n, "invalid duration %q (use Go syntax such as 500ms or 2m, not negative)", n.Value)
	}
	*d = Duration(v)
	return nil
}

func lineError(n *yaml.Node, format string, args ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: ", n.Line) + fmt.Sprintf(format, args...)}}
}

// ConfigError is an invalid configuration: every problem found, each with
// its line, and the warnings, which often say why (a misspelt key, a key
// set twice).
type ConfigError struct {
	// File is the configuration's name.
	File string
	// Problems are "line N: what is wrong" messages.
	Problems []string
	// Warnings are the configuration's warnings (see [Config].Warnings).
	Warnings []string
}

// Error lists the problems, one a line, then the warnings.
func (e *ConfigError) Error() string {
	s := fmt.Sprintf("invalid configuration %s:\n  %s", e.File, strings.Join(e.Problems, "\n  "))
	if len(e.Warnings) > 0 {
		s += "\nwarnings:\n  " + strings.Join(e.Warnings, "\n  ")
	}
	return s
}

// LoadConfig reads and validates the configuration file at path. As
// kubernetes-event-exporter does, ${VAR} and $VAR in the file are replaced
// by the environment's values (empty if unset) before parsing; "$"
// followed by anything else is left as it is.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(path, []byte(os.ExpandEnv(string(b))))
}

// ParseConfig parses and validates a YAML configuration; name is used in
// errors. Unknown fields, wrong types, invalid regular expressions, unknown
// receivers and invalid values are reported together, each with its line,
// as a [*ConfigError], with the warnings. A key set twice in one mapping
// takes its last value, with a warning, as in kubernetes-event-exporter. A
// YAML syntax error names the line and column where the text goes wrong;
// an unquoted template (msg: {{ .Message }}) is refused, and aliases that
// expand to more than 10,000 values are, before anything is decoded;
// every template is executed against a sample event (see the README).
func ParseConfig(name string, data []byte) (*Config, error) {
	var c Config
	root, kept, err := parseYAML(data)
	if err != nil {
		return nil, &ConfigError{File: name, Problems: []string{err.Error()}}
	}
	c.Warnings = append(kept, dedupeKeys(root)...)
	if msg := aliasExpansionProblem(root); msg != "" {
		return nil, &ConfigError{File: name, Problems: []string{msg}, Warnings: sortByLine(c.Warnings)}
	}
	shape := complexKeyProblems(root)
	problems, err := decodeConfig(root, &c)
	if err != nil {
		return nil, &ConfigError{File: name, Problems: append(shape, strings.TrimPrefix(err.Error(), "yaml: ")),
			Warnings: sortByLine(c.Warnings)}
	}
	problems = append(problems, shape...)
	c.setLines(root)
	c.keyLines = topLevelLines(root)
	c.Warnings = append(c.Warnings, c.topLevelWarnings(root)...)
	problems = append(problems, c.validate()...)
	c.setKEEAgeDefault()
	c.Warnings = append(c.Warnings, c.Route.ruleWarnings(c.OmitLookup)...)
	problems = append(problems, c.templateProblems()...)
	c.Warnings = sortByLine(c.Warnings)
	if len(problems) > 0 {
		return nil, &ConfigError{File: name, Problems: sortByLine(problems), Warnings: c.Warnings}
	}
	return &c, nil
}

// sortByLine sorts messages by the line they name (stable: messages
// without a line first, in their order) and returns them.
func sortByLine(msgs []string) []string {
	slices.SortStableFunc(msgs, func(a, b string) int { return cmp.Compare(problemLine(a), problemLine(b)) })
	return msgs
}

// decodeConfig decodes the document root into c, adding a warning for
// each unknown key. It returns the decoding problems (wrong types, each
// with its line: the decoder goes on past them, so that every problem is
// reported at once), or an error that stops it.
func decodeConfig(root *yaml.Node, c *Config) ([]string, error) {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil, nil // an empty document
	}
	c.Warnings = append(c.Warnings, unknownFields(root.Content[0], reflect.TypeFor[Config](), &nodeWalk{})...)
	if err := root.Decode(c); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, err
		}
		return te.Errors, nil
	}
	return nil, nil
}

// problemLine returns the line a problem names, or 0.
func problemLine(p string) int {
	var n int
	if _, err := fmt.Sscanf(p, "line %d:", &n); err != nil {
		return 0
	}
	return n
}

package exporter

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fanout-go/fanout"
)

// maxReceivers is the most receivers a configuration may have: an
// occurrence carries its receivers as the bits of a uint64.
const maxReceivers = 64

// DefaultShutdownTimeout bounds the flush at shutdown when the
// configuration does not say.
const DefaultShutdownTimeout = 20 * time.Second

// setLines records the line of each receiver, from the document's nodes.
func (c *Config) setLines(root *yaml.Node) {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != "receivers" || m.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		for j, item := range m.Content[i+1].Content {
			if j < len(c.Receivers) && c.Receivers[j] != nil {
				c.Receivers[j].line = item.Line
			}
		}
	}
}

// validate sets defaults and returns every problem found.
func (c *Config) validate() []string {
	var p []string
	add := func(line int, format string, args ...any) {
		p = append(p, fmt.Sprintf("line %d: ", line)+fmt.Sprintf(format, args...))
	}
	if c.API == "" {
		c.API = CoreV1
	}
	if c.API != CoreV1 && c.API != EventsV1 {
		p = append(p, c.atf("api", "api: unknown API %q (want %q or %q)", c.API, CoreV1, EventsV1))
	}
	if c.Checkpoint.File != "" && c.Checkpoint.ConfigMap != nil {
		p = append(p, c.at("checkpoint")+"checkpoint: set file or configMap, not both")
	}
	if cm := c.Checkpoint.ConfigMap; cm != nil && (cm.Namespace == "" || cm.Name == "") {
		p = append(p, c.at("checkpoint")+"checkpoint.configMap: namespace and name are required")
	}
	if c.CacheSize < 0 {
		p = append(p, c.atf("cacheSize", "cacheSize: %d is negative (0 is the default, %d)", c.CacheSize, DefaultCacheSize))
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = Duration(DefaultShutdownTimeout)
	}
	p = append(p, c.validateLogging()...)
	p = append(p, c.validateCompat()...)
	if problem := compatProblem("compat", c.Compat); problem != "" {
		p = append(p, c.at("compat")+problem)
	}
	p = append(p, c.validateReceivers(add)...)
	c.Route.resolve(c, add)
	if len(c.Receivers) > 0 && !c.Route.namesReceiver() {
		c.Warnings = append(c.Warnings, c.at("route")+"route: no rule names a receiver: nothing is exported "+
			"(add route: {match: [{receiver: NAME}]})")
	}
	return p
}

// namesReceiver reports whether a match rule of the tree names a
// receiver.
func (rt *Route) namesReceiver() bool {
	for _, m := range rt.Match {
		if m != nil && m.Receiver.Name != "" {
			return true
		}
	}
	for _, child := range rt.Routes {
		if child != nil && child.namesReceiver() {
			return true
		}
	}
	return false
}

// theirLevels maps kubernetes-event-exporter's (zerolog's) log levels
// that slog lacks to the nearest.
var theirLevels = map[string]string{"trace": "debug", "fatal": "error", "panic": "error"}

// LogDisabled is the log level that logs nothing (zerolog's "disabled").
const LogDisabled = "disabled"

// zerologLevel returns the level a number of zerolog's (-128 to 127, as
// its ParseLevel accepts) is logged at: -1 (trace) and below debug, 0
// debug, 1 info, 2 warn, 3 to 5 (error, fatal, panic) error, 6 (no
// level) and above disabled; ok is false for what is not such a number.
func zerologLevel(s string) (level string, ok bool) {
	n, err := strconv.Atoi(s)
	if err != nil || n < -128 || n > 127 {
		return "", false
	}
	switch {
	case n <= 0:
		return "debug", true
	case n == 1:
		return "info", true
	case n == 2:
		return "warn", true
	case n <= 5:
		return "error", true
	}
	return LogDisabled, true
}

// validateLogging checks logLevel and logFormat, mapping
// kubernetes-event-exporter's values.
func (c *Config) validateLogging() []string {
	var p []string
	l, ok := theirLevels[c.LogLevel]
	if !ok {
		l, ok = zerologLevel(c.LogLevel)
	}
	if ok {
		c.Warnings = append(c.Warnings, c.atf("logLevel", "logLevel: %s is logged as %s", c.LogLevel, l))
		c.LogLevel = l
	}
	switch c.LogLevel {
	case "", "debug", "info", "warn", "error", LogDisabled:
	default:
		p = append(p, c.atf("logLevel", "logLevel: unknown level %q (want debug, info, warn, error, disabled, "+
			"or one of zerolog's numbers, -128 to 127)", c.LogLevel))
	}
	if c.LogFormat == "pretty" { // kubernetes-event-exporter's console format
		c.LogFormat = "text"
	}
	if c.LogFormat != "" && c.LogFormat != "text" && c.LogFormat != "json" {
		p = append(p, c.atf("logFormat", "logFormat: unknown format %q (want text, pretty or json)", c.LogFormat))
	}
	return p
}

// validateReceivers validates every receiver.
func (c *Config) validateReceivers(add func(int, string, ...any)) []string {
	var p []string
	if len(c.Receivers) == 0 {
		p = append(p, c.at("receivers")+"receivers: at least one receiver is required")
	}
	names := map[string]int{}
	for i, r := range c.Receivers {
		if r == nil {
			p = append(p, fmt.Sprintf("receivers[%d]: empty receiver", i))
			continue
		}
		if prev, dup := names[r.Name]; dup {
			add(r.line, "receiver %q is already defined at line %d", r.Name, prev)
		}
		names[r.Name] = r.line
		c.validateReceiver(r, add)
	}
	if len(c.Receivers) > maxReceivers {
		p = append(p, fmt.Sprintf("receivers: %d receivers, at most %d are supported", len(c.Receivers), maxReceivers))
	}
	return p
}

// validateReceiver validates r, adding its problems and warnings.
func (c *Config) validateReceiver(r *Receiver, add func(int, string, ...any)) {
	c.Warnings = append(c.Warnings, r.chooseKind()...)
	for _, m := range append(r.applyCompat(c.Compat), r.validate()...) {
		add(r.line, "receiver %q: %s", r.Name, m)
	}
	if pl := r.payload(); pl != nil {
		c.Warnings = append(c.Warnings, pl.warnings(r.kee)...)
	}
	if r.Webhook != nil {
		for _, w := range r.Webhook.warnings() {
			c.Warnings = append(c.Warnings, fmt.Sprintf("line %d: receiver %q: %s", r.line, r.Name, w))
		}
	}
	if es := cmp.Or(r.Elasticsearch, r.OpenSearch); es != nil {
		c.Warnings = append(c.Warnings, es.warnings()...)
	}
	if r.Kafka != nil {
		for _, w := range r.Kafka.warnings() {
			c.Warnings = append(c.Warnings, fmt.Sprintf("line %d: receiver %q: %s", r.line, r.Name, w))
		}
	}
	if r.Slack != nil {
		for _, w := range r.Slack.warnings() {
			c.Warnings = append(c.Warnings, fmt.Sprintf("line %d: receiver %q: %s", r.line, r.Name, w))
		}
	}
	c.Warnings = append(c.Warnings, r.tlsConfig().warnings()...)
	c.Warnings = append(c.Warnings, r.awsWarnings()...)
}

// resolve checks that every rule names a known receiver and sets its bit.
func (rt *Route) resolve(c *Config, add func(int, string, ...any)) {
	theirs := c.Compat == CompatKEE
	for i, d := range rt.Drop {
		if d == nil {
			// An empty entry (- ~, or a - whose fields are all commented
			// out) is a rule that matches every event, as a match rule's:
			// kubernetes-event-exporter drops everything with it.
			d = &Rule{}
			rt.Drop[i] = d
			c.Warnings = append(c.Warnings, "an empty drop rule drops every event of its route "+
				"(as kubernetes-event-exporter does)")
		}
		d.theirs = theirs
		if d.Receiver.Name != "" {
			c.Warnings = append(c.Warnings, fmt.Sprintf("line %d: receiver %q of a drop rule: ignored "+
				"(a drop rule sends nothing; kubernetes-event-exporter ignores it too)", d.Receiver.line, d.Receiver.Name))
			d.Receiver = ReceiverRef{}
		}
	}
	for i, m := range rt.Match {
		if m == nil {
			rt.Match[i] = &Rule{}
			continue
		}
		m.theirs = theirs
		if m.Receiver.Name == "" {
			continue
		}
		for j, r := range c.Receivers {
			if r != nil && r.Name == m.Receiver.Name && j < maxReceivers {
				m.Receiver.bit, m.Receiver.repeat = 1<<j, r.kee
			}
		}
		if m.Receiver.bit == 0 {
			add(m.Receiver.line, "unknown receiver %q", m.Receiver.Name)
		}
	}
	for _, child := range rt.Routes {
		if child != nil {
			child.resolve(c, add)
		}
	}
	rt.Routes = compact(rt.Routes)
}

func compact[T any](s []*T) []*T {
	out := s[:0]
	for _, v := range s {
		if v != nil {
			out = append(out, v)
		}
	}
	return out
}

// sinkKindList names every sink kind a receiver may set, for messages.
const sinkKindList = "stdout, file, pipe, webhook, elasticsearch, opensearch, kafka, otlp, slack, teams, loki, " +
	"nats, log, syslog, opsgenie, pubsub, bigquery, inMemory, sqs, sns, kinesis, firehose, eventbridge or opscenter"

// validate sets the receiver's defaults and returns its problems.
func (r *Receiver) validate() []string {
	var p []string
	if r.Name == "" {
		p = append(p, "name is required")
	}
	switch kinds := len(r.kinds()); {
	case r.Sink != nil && kinds > 0:
		p = append(p, "a receiver with a Sink cannot also configure one")
	case r.Sink == nil && kinds == 0:
		p = append(p, "a sink is required: one of "+sinkKindList)
	}
	p = append(p, r.validateFormat()...)
	if r.BigQuery != nil {
		r.BigQuery.applyTo(r)
	}
	p = append(p, r.setQueueDefaults()...)
	if err := r.setRetry(); err != nil {
		p = append(p, err.Error())
	}
	if r.OpenSearch != nil {
		r.OpenSearch.kind = "opensearch"
	}
	if c, ok := r.kindConfig().(interface{ validate() []string }); ok {
		p = append(p, c.validate()...)
	}
	return p
}

// validateFormat checks the record format and what goes with it.
func (r *Receiver) validateFormat() []string {
	switch pl := r.payload(); {
	case r.Format != "" && r.Format != FormatEvent && r.Format != FormatFanout:
		return []string{fmt.Sprintf("format %q is unknown (want %s or %s)", r.Format, FormatEvent, FormatFanout)}
	case r.Format == FormatFanout && pl != nil && (pl.Layout != nil || pl.DeDot.V):
		return []string{"layout and deDot apply to format event, not fanout"}
	}
	return nil
}

// remote reports whether the receiver's sink is a remote service: its
// queue defaults to 10,000 occurrences and DropOldest, so that an outage
// does not stall the other sinks.
func (r *Receiver) remote() bool {
	return r.Webhook != nil || r.Elasticsearch != nil || r.OpenSearch != nil || r.Kafka != nil || r.OTLP != nil ||
		r.Slack != nil || r.Teams != nil || r.Loki != nil || r.Syslog != nil || r.Opsgenie != nil ||
		r.Pubsub != nil || r.BigQuery != nil || r.awsKind()
}

// DefaultWriters is the writes in flight at once of a receiver whose sink
// makes a request per write ([Receiver].Writers).
const DefaultWriters = 8

// requestEach reports whether the receiver's sink makes a request of its
// own per write, so that several writers make several requests at once:
// its writers default to [DefaultWriters].
func (r *Receiver) requestEach() bool {
	return r.Webhook != nil || r.Elasticsearch != nil || r.OpenSearch != nil || r.Loki != nil || r.OTLP != nil ||
		r.Slack != nil || r.Teams != nil || r.Opsgenie != nil || r.awsKind()
}

// oneMessageEach reports whether the receiver's sink posts one message
// per occurrence: its batch defaults to 1 (and must be 1 for the chat
// presets).
func (r *Receiver) oneMessageEach() bool {
	return r.Webhook != nil || r.Slack != nil || r.Teams != nil
}

func (r *Receiver) setQueueDefaults() []string {
	if r.Queue.Length == 0 {
		r.Queue.Length = 1000
		if r.remote() {
			r.Queue.Length = 10000
		}
	}
	if r.Queue.Strategy == "" {
		r.Queue.Strategy = StrategyWait
		if r.remote() {
			r.Queue.Strategy = StrategyDropOldest
		}
	}
	if r.Batch == 0 {
		r.Batch = 256
		if r.oneMessageEach() {
			r.Batch = 1
		}
	}
	if r.Writers == 0 {
		r.Writers = 1
		if r.requestEach() {
			r.Writers = DefaultWriters
		}
	}
	var p []string
	if (r.Slack != nil || r.Teams != nil) && r.Batch > 1 {
		p = append(p, fmt.Sprintf("batch %d: a chat message is one occurrence: want 1", r.Batch))
	}
	if r.Queue.Length < 1 {
		p = append(p, fmt.Sprintf("queue.length %d must be at least 1", r.Queue.Length))
	}
	if r.Batch < 1 || r.Batch > fanout.MaxQueueLength {
		p = append(p, fmt.Sprintf("batch %d must be 1 to %d", r.Batch, fanout.MaxQueueLength))
	}
	if r.Writers < 1 || r.Writers > fanout.MaxWriters {
		p = append(p, fmt.Sprintf("writers %d must be 1 to %d", r.Writers, fanout.MaxWriters))
	}
	switch r.Queue.Strategy {
	case StrategyWait, StrategyDropOldest, StrategyDropNewest:
	case StrategyWaitTimeout:
		if r.Queue.Timeout <= 0 {
			p = append(p, "queue.timeout is required with strategy WaitTimeout")
		}
	default:
		p = append(p, fmt.Sprintf("queue.strategy %q is unknown (want Wait, DropOldest, DropNewest or WaitTimeout)", r.Queue.Strategy))
	}
	return p
}

func (r *Receiver) setRetry() error {
	r.Retry = DefaultRetry
	if rc := r.RetryConfig; rc != nil {
		if rc.MaxTries != nil {
			r.Retry.MaxTries = *rc.MaxTries
		}
		if rc.InitialBackoff != 0 {
			r.Retry.Initial = time.Duration(rc.InitialBackoff)
		}
		if rc.MaxBackoff != 0 {
			r.Retry.Max = time.Duration(rc.MaxBackoff)
		}
	}
	return r.Retry.validate()
}

// encoder returns the encoder of the receiver's records.
func (r *Receiver) encoder(cluster string) Encoder {
	if r.Format == FormatFanout {
		return FanoutEncoder
	}
	return r.payload().encoder(cluster, r.kee)
}

// payload returns the record options of the receiver's sink, or nil.
func (r *Receiver) payload() *Payload {
	if c, ok := r.kindConfig().(interface{ payload() *Payload }); ok {
		return c.payload()
	}
	return nil
}

// kindConfig returns the configuration of the receiver's sink kind (the
// first set), or nil.
func (r *Receiver) kindConfig() any {
	if ks := r.kinds(); len(ks) > 0 {
		return ks[0].cfg
	}
	return nil
}

// tlsConfig returns the TLS configuration of the receiver's sink, or nil.
func (r *Receiver) tlsConfig() *TLSConfig {
	switch {
	case r.Webhook != nil:
		return r.Webhook.TLS
	case r.Elasticsearch != nil || r.OpenSearch != nil:
		return cmp.Or(r.Elasticsearch, r.OpenSearch).TLS
	case r.Kafka != nil:
		return &r.Kafka.TLS.TLSConfig
	case r.OTLP != nil:
		return r.OTLP.TLS
	case r.Loki != nil:
		return r.Loki.TLS
	}
	return nil
}

// buildSinks returns the sink of every receiver, in order.
func (c *Config) buildSinks() ([]Sink, error) {
	sinks := make([]Sink, 0, len(c.Receivers))
	for _, r := range c.Receivers {
		s, err := r.build(c.ClusterName)
		if err != nil {
			for _, s := range sinks {
				_ = s.Close(context.Background())
			}
			return nil, fmt.Errorf("receiver %q: %w", r.Name, err)
		}
		sinks = append(sinks, s)
	}
	return sinks, nil
}

// build makes the receiver's sink; cluster is the clusterName of its
// records.
func (r *Receiver) build(cluster string) (Sink, error) {
	enc := r.encoder(cluster)
	switch {
	case r.Sink != nil:
		return r.Sink, nil
	case r.Stdout != nil:
		return newStdoutSink(r.Stdout, enc), nil
	case r.File != nil:
		c := *r.File
		c.Encode = enc
		return NewFileSink(c)
	case r.Webhook != nil:
		c := *r.Webhook
		c.array, c.Encode, c.data = r.Batch > 1, enc, recordData{cluster, r.kee}
		return r.messageSink(NewWebhookSink(c))
	case r.NATS != nil:
		c := *r.NATS
		c.Encode = enc
		return NewNATSSink(c)
	case r.Log != nil:
		return newLogSink(r.Log), nil
	case r.Pipe != nil:
		return newPipeSink(r.Pipe, enc)
	case r.Elasticsearch != nil || r.OpenSearch != nil:
		c := *cmp.Or(r.Elasticsearch, r.OpenSearch)
		c.Encode, c.kee = enc, r.kee
		return NewElasticsearchSink(c)
	case r.Kafka != nil:
		c := *r.Kafka
		c.Encode = enc
		return NewKafkaSink(c)
	case r.OTLP != nil:
		c := *r.OTLP
		c.Encode = enc
		return NewOTLPSink(c)
	case r.Slack != nil:
		w := r.Slack.webhook()
		w.Encode, w.data = r.Slack.encoder(cluster, r.kee), recordData{cluster, r.kee}
		return r.messageSink(NewWebhookSink(*w))
	case r.Teams != nil:
		w := r.Teams.webhook()
		w.Encode, w.data = teamsEncoder(enc), recordData{cluster, r.kee}
		return r.messageSink(NewWebhookSink(*w))
	case r.Loki != nil:
		c := *r.Loki
		c.Encode, c.data = enc, recordData{cluster, r.kee}
		return NewLokiSink(c)
	case r.awsKind():
		return r.buildAWS(cluster, enc)
	}
	return r.buildTheirs(enc, cluster)
}

// buildTheirs makes the sink of a receiver of one of the kinds that came
// from kubernetes-event-exporter's receivers last: syslog, opsgenie,
// inMemory, pubsub and bigquery.
func (r *Receiver) buildTheirs(enc Encoder, cluster string) (Sink, error) {
	switch {
	case r.Syslog != nil:
		c := *r.Syslog
		c.Encode = enc
		return NewSyslogSink(c)
	case r.Opsgenie != nil:
		c := *r.Opsgenie
		c.kee = r.kee
		return NewOpsgenieSink(c, cluster)
	case r.InMemory != nil:
		r.InMemory.Ref = NewMemorySink(r.InMemory.Limit, enc)
		return r.InMemory.Ref, nil
	case r.Pubsub != nil:
		c := *r.Pubsub
		c.Encode = enc
		return NewPubsubSink(c)
	case r.BigQuery != nil:
		c := *r.BigQuery
		c.Encode = enc
		return NewBigQuerySink(c)
	}
	return nil, fmt.Errorf("no sink configured")
}

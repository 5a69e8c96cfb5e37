package exporter

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// This file holds what the compat key changes: with compat
// kubernetes-event-exporter a receiver gets kubernetes-event-exporter
// v1.6.1's record stream (its records without the fanout object, one per
// event at first sighting, a receiver named by n matching rules n times,
// its Elasticsearch IDs and index names, its Loki timestamps, its Kafka
// keys), and the routing matches as its routing does.

// The values of the compat key (see [Config].Compat).
const (
	// CompatFanout, the default, is this exporter's record stream and
	// routing: a record per occurrence (every count raise), with the
	// fanout object.
	CompatFanout = "fanout"
	// CompatKEE is kubernetes-event-exporter v1.6.1's: see the README's
	// migration guide.
	CompatKEE = "kubernetes-event-exporter"
)

// compatProblem returns the problem of the compat value v of key, or "".
func compatProblem(key, v string) string {
	switch v {
	case "", CompatFanout, CompatKEE:
		return ""
	}
	return fmt.Sprintf("%s %q is unknown (want %s or %s)", key, v, CompatFanout, CompatKEE)
}

// CompatNote says which record stream applies (--check-config prints it):
// this exporter's or kubernetes-event-exporter's, for the route and every
// receiver, naming the receivers whose own compat differs.
func (c *Config) CompatNote() string {
	theirs := c.Compat == CompatKEE
	note := "fanout-eventer's (compat: " + CompatFanout + ", the default): a record per count raise, with the " +
		"fanout object; a receiver gets an occurrence once however many rules name it (compat: " + CompatKEE +
		" for kubernetes-event-exporter's)"
	other := "kubernetes-event-exporter's"
	if theirs {
		note = "kubernetes-event-exporter's (compat: " + CompatKEE + "): its records, one per event at first " +
			"sighting, once per matching rule naming the receiver; the route matches component, host and minCount as it does"
		other = "fanout-eventer's"
	}
	var others []string
	for _, r := range c.Receivers {
		if r != nil && r.kee != theirs {
			others = append(others, r.Name)
		}
	}
	if len(others) > 0 {
		note += "; " + other + " for receivers " + strings.Join(others, ", ") + " (their own compat)"
	}
	return note
}

// applyCompat sets whether the receiver gets kubernetes-event-exporter's
// stream (its own compat, else global, the configuration's), and the
// defaults that go with it; it returns the problems.
func (r *Receiver) applyCompat(global string) []string {
	if p := compatProblem("compat", r.Compat); p != "" {
		return []string{p}
	}
	if r.Compat != "" {
		global = r.Compat
	}
	r.kee = global == CompatKEE
	if !r.kee {
		return nil
	}
	if r.Format == FormatFanout {
		return []string{"format fanout is not kubernetes-event-exporter's record: with compat " + CompatKEE +
			", remove format (or set compat: " + CompatFanout + " on the receiver)"}
	}
	if r.Loki != nil && r.Loki.Timestamp == "" {
		r.Loki.Timestamp = lokiTimestampNow
	}
	if r.Kafka != nil && r.Kafka.Key == "" {
		r.Kafka.Key = KafkaKeyEvent
	}
	return nil
}

// messageSink returns s, a sink that posts one message per occurrence,
// made to be given one occurrence per write when the receiver gets
// kubernetes-event-exporter's stream: a receiver named by two matching
// rules then gets the occurrence twice in one batch, and posts it twice.
func (r *Receiver) messageSink(s *WebhookSink, err error) (Sink, error) {
	if err != nil {
		return nil, err
	}
	if r.kee && r.Batch == 1 {
		return oneEach{s}, nil
	}
	return s, nil
}

// oneEach writes the first occurrence of each batch it is given: the
// runner writes the rest next, one write each.
type oneEach struct{ Sink }

// Write writes batch[0].
func (s oneEach) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	return s.Sink.Write(ctx, batch[:min(len(batch), 1)])
}

// theirIndexPart is kubernetes-event-exporter's pattern of the part of an
// indexFormat in braces: greedy, so that "a-{2006}.{01}" is one part,
// "2006}.{01", formatted as a whole, as there.
var theirIndexPart = regexp.MustCompile(`(?s){(.*)}`)

// theirIndexName returns the index kubernetes-event-exporter's
// elasticsearch and opensearch sinks write to at now: index, or
// indexFormat formatted with now in the local time zone (a pod's is
// UTC unless TZ says otherwise).
func (c *ElasticsearchConfig) theirIndexName(now time.Time) string {
	if c.IndexFormat == "" {
		return c.Index
	}
	var b strings.Builder
	last := 0
	for _, m := range theirIndexPart.FindAllStringIndex(c.IndexFormat, -1) {
		b.WriteString(c.IndexFormat[last:m[0]])
		b.WriteString(now.Format(c.IndexFormat[m[0]+1 : m[1]-1]))
		last = m[1]
	}
	b.WriteString(c.IndexFormat[last:])
	return b.String()
}

// slackEscape escapes the characters Slack reads as control sequences in
// a message's text (& < >: "<!channel>" would notify the channel), as
// kubernetes-event-exporter's Slack client does.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

package exporter

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
)

// EventBridgeConfig configures an eventbridge receiver
// (kubernetes-event-exporter's keys: detailType, details, source,
// eventBusName, region; and this exporter's endpoint and timeout): each
// occurrence is one event put on the bus, its detail the record.
type EventBridgeConfig struct {
	// DetailType and Source are every event's detail-type and source.
	DetailType string `yaml:"detailType"`
	Source     string `yaml:"source"`
	// Details is the layout of the detail (kubernetes-event-exporter's
	// name for it); without it, the detail is the record.
	Details *Layout `yaml:"details"`
	// EventBusName is the bus's name or ARN; empty is the account's
	// default bus.
	EventBusName string `yaml:"eventBusName"`
	// AWSConfig has the region, endpoint and timeout.
	AWSConfig `yaml:",inline"`
	// Encode makes each detail; nil writes the default record
	// ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`

	pl Payload // the record options: Details as the layout
}

// payload returns the record options: Details is the layout.
func (c *EventBridgeConfig) payload() *Payload {
	c.pl.Layout = c.Details
	return &c.pl
}

func (c *EventBridgeConfig) validate() []string {
	var p []string
	if c.DetailType == "" {
		p = append(p, "eventbridge.detailType is required")
	}
	if c.Source == "" {
		p = append(p, "eventbridge.source is required")
	}
	return append(p, c.AWSConfig.validate("eventbridge")...)
}

// Limits of PutEvents: 10 entries, and 256 KB in all (an entry's size is
// its detail, detail-type and source, and 14 bytes of time).
const (
	eventBridgeBatchCount = 10
	eventBridgeBatchBytes = 256_000
)

// EventBridgeSink puts occurrences on an EventBridge bus with PutEvents,
// each event's detail the record (or the details layout), with the
// configured source and detail-type, and the time of the write, as
// kubernetes-event-exporter's PutEvents does.
//
// An entry the bus refuses for a throttle or an internal failure is
// retried; any other refusal (malformed detail, a source or detail-type
// not allowed) is [Permanent] (see [AWSConfig]).
type EventBridgeSink struct {
	cfg          EventBridgeConfig
	client       *eventbridge.Client
	awsTransport // Close closes its idle connections
	b            awsBatcher
}

// NewEventBridgeSink returns an EventBridge sink; it sends nothing until
// the first write.
func NewEventBridgeSink(cfg EventBridgeConfig) (*EventBridgeSink, error) {
	client, tr, err := awsClient("eventbridge", &cfg.AWSConfig, "", cfg.validate(), eventbridge.NewFromConfig,
		func(o *eventbridge.Options) **string { return &o.BaseEndpoint })
	if err != nil {
		return nil, err
	}
	s := &EventBridgeSink{cfg: cfg, client: client, awsTransport: tr}
	overhead := 14 + len(cfg.Source) + len(cfg.DetailType)
	s.b = awsBatcher{kind: "eventbridge " + cfg.Source, count: eventBridgeBatchCount, bytes: eventBridgeBatchBytes,
		timeout: time.Duration(cfg.Timeout), enc: cfg.Encode, send: s.send,
		size: func(_ *Occurrence, data []byte) int { return overhead + len(data) }}
	return s, nil
}

// with returns c with the encoder enc.
func (c EventBridgeConfig) with(enc Encoder) EventBridgeConfig {
	c.Encode = enc
	return c
}

// Write puts the batch; see [EventBridgeSink].
func (s *EventBridgeSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	return s.b.write(ctx, batch)
}

// send puts recs with one PutEvents.
func (s *EventBridgeSink) send(ctx context.Context, recs []*awsRecord) ([]error, error) {
	now := time.Now()
	var bus *string
	if s.cfg.EventBusName != "" {
		bus = aws.String(s.cfg.EventBusName)
	}
	entries := make([]types.PutEventsRequestEntry, len(recs))
	for i, r := range recs {
		entries[i] = types.PutEventsRequestEntry{Detail: aws.String(string(r.data)), DetailType: aws.String(s.cfg.DetailType),
			Source: aws.String(s.cfg.Source), EventBusName: bus, Time: aws.Time(now)}
	}
	out, err := s.client.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
	if err != nil {
		return nil, err
	}
	return codeErrors(s.b.kind, recs, len(out.Entries), func(i int) (*string, *string) {
		return out.Entries[i].ErrorCode, out.Entries[i].ErrorMessage
	}, func(code string) bool { return !awsCodeRetryable(code) }), nil
}

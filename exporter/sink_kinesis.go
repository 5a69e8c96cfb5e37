package exporter

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// KinesisConfig configures a kinesis receiver (kubernetes-event-exporter's
// keys: streamName, region, layout; and this exporter's deDot, endpoint
// and timeout): each occurrence is one record of the data stream.
type KinesisConfig struct {
	// StreamName is the data stream's name.
	StreamName string `yaml:"streamName"`
	// AWSConfig has the region, endpoint and timeout.
	AWSConfig `yaml:",inline"`
	// Payload is the layout and deDot of the records.
	Payload `yaml:",inline"`
	// Encode makes each record; nil writes the default record
	// ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`
}

func (c *KinesisConfig) validate() []string {
	var p []string
	if c.StreamName == "" {
		p = append(p, "kinesis.streamName is required")
	}
	return append(p, c.AWSConfig.validate("kinesis")...)
}

// Limits of PutRecords: 500 records, and 5 MiB in all (data and partition
// keys).
const (
	kinesisBatchCount = 500
	kinesisBatchBytes = 5 << 20
)

// KinesisSink puts occurrences into a Kinesis data stream with PutRecords,
// each record's data the record and its partition key the event's UID, as
// kubernetes-event-exporter's PutRecord does.
//
// Every record the stream refuses (its throughput exceeded, an internal
// failure) is retried; a request refused as the client's fault is
// [Permanent] for the record at fault (see [AWSConfig] and the README's
// AWS section).
type KinesisSink struct {
	cfg          KinesisConfig
	client       *kinesis.Client
	awsTransport // Close closes its idle connections
	b            awsBatcher
}

// NewKinesisSink returns a Kinesis sink; it sends nothing until the first
// write.
func NewKinesisSink(cfg KinesisConfig) (*KinesisSink, error) {
	client, tr, err := awsClient("kinesis", &cfg.AWSConfig, "", cfg.validate(), kinesis.NewFromConfig,
		func(o *kinesis.Options) **string { return &o.BaseEndpoint })
	if err != nil {
		return nil, err
	}
	s := &KinesisSink{cfg: cfg, client: client, awsTransport: tr}
	s.b = awsBatcher{kind: "kinesis " + cfg.StreamName, count: kinesisBatchCount, bytes: kinesisBatchBytes,
		timeout: time.Duration(cfg.Timeout), enc: cfg.Encode, send: s.send,
		size: func(o *Occurrence, data []byte) int { return len(data) + len(partitionKey(o)) }}
	return s, nil
}

// with returns c with the encoder enc.
func (c KinesisConfig) with(enc Encoder) KinesisConfig {
	c.Encode = enc
	return c
}

// partitionKey returns the partition key of o's record: the event's UID
// (its key if it has none: a partition key is not empty).
func partitionKey(o *Occurrence) string {
	if o.UID == "" {
		return o.Key()
	}
	return o.UID
}

// Write puts the batch; see [KinesisSink].
func (s *KinesisSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	return s.b.write(ctx, batch)
}

// send puts recs with one PutRecords.
func (s *KinesisSink) send(ctx context.Context, recs []*awsRecord) ([]error, error) {
	entries := make([]types.PutRecordsRequestEntry, len(recs))
	for i, r := range recs {
		entries[i] = types.PutRecordsRequestEntry{Data: r.data, PartitionKey: aws.String(partitionKey(r.o))}
	}
	out, err := s.client.PutRecords(ctx, &kinesis.PutRecordsInput{StreamName: aws.String(s.cfg.StreamName), Records: entries})
	if err != nil {
		return nil, err
	}
	return codeErrors(s.b.kind, recs, len(out.Records), func(i int) (*string, *string) {
		return out.Records[i].ErrorCode, out.Records[i].ErrorMessage
	}, never), nil
}

package exporter

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/firehose"
	"github.com/aws/aws-sdk-go-v2/service/firehose/types"
)

// FirehoseConfig configures a firehose receiver (kubernetes-event-exporter's
// keys: deliveryStreamName, region, layout, deDot; and this exporter's
// endpoint and timeout): each occurrence is one record of the Amazon Data
// Firehose stream.
type FirehoseConfig struct {
	// DeliveryStreamName is the Firehose stream's name.
	DeliveryStreamName string `yaml:"deliveryStreamName"`
	// AWSConfig has the region, endpoint and timeout.
	AWSConfig `yaml:",inline"`
	// Payload is the layout and deDot of the records.
	Payload `yaml:",inline"`
	// Encode makes each record; nil writes the default record
	// ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`
}

func (c *FirehoseConfig) validate() []string {
	var p []string
	if c.DeliveryStreamName == "" {
		p = append(p, "firehose.deliveryStreamName is required")
	}
	return append(p, c.AWSConfig.validate("firehose")...)
}

// Limits of PutRecordBatch: 500 records, and 4 MiB in all.
const (
	firehoseBatchCount = 500
	firehoseBatchBytes = 4 << 20
)

// FirehoseSink puts occurrences into an Amazon Data Firehose stream with
// PutRecordBatch, each record's data the record, with no delimiter after
// it, as kubernetes-event-exporter's PutRecord does (a destination that
// needs one, S3 read as JSON Lines, adds it with the stream's processing
// options).
//
// Every record the stream refuses (service unavailable, an internal or KMS
// failure) is retried; a request refused as the client's fault is
// [Permanent] for the record at fault (see [AWSConfig]).
type FirehoseSink struct {
	cfg          FirehoseConfig
	client       *firehose.Client
	awsTransport // Close closes its idle connections
	b            awsBatcher
}

// NewFirehoseSink returns a Firehose sink; it sends nothing until the first
// write.
func NewFirehoseSink(cfg FirehoseConfig) (*FirehoseSink, error) {
	client, tr, err := awsClient("firehose", &cfg.AWSConfig, "", cfg.validate(), firehose.NewFromConfig,
		func(o *firehose.Options) **string { return &o.BaseEndpoint })
	if err != nil {
		return nil, err
	}
	s := &FirehoseSink{cfg: cfg, client: client, awsTransport: tr}
	s.b = awsBatcher{kind: "firehose " + cfg.DeliveryStreamName, count: firehoseBatchCount, bytes: firehoseBatchBytes,
		timeout: time.Duration(cfg.Timeout), enc: cfg.Encode, send: s.send,
		size: func(_ *Occurrence, data []byte) int { return len(data) }}
	return s, nil
}

// with returns c with the encoder enc.
func (c FirehoseConfig) with(enc Encoder) FirehoseConfig {
	c.Encode = enc
	return c
}

// Write puts the batch; see [FirehoseSink].
func (s *FirehoseSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	return s.b.write(ctx, batch)
}

// send puts recs with one PutRecordBatch.
func (s *FirehoseSink) send(ctx context.Context, recs []*awsRecord) ([]error, error) {
	records := make([]types.Record, len(recs))
	for i, r := range recs {
		records[i] = types.Record{Data: r.data}
	}
	out, err := s.client.PutRecordBatch(ctx, &firehose.PutRecordBatchInput{
		DeliveryStreamName: aws.String(s.cfg.DeliveryStreamName), Records: records})
	if err != nil {
		return nil, err
	}
	return codeErrors(s.b.kind, recs, len(out.RequestResponses), func(i int) (*string, *string) {
		return out.RequestResponses[i].ErrorCode, out.RequestResponses[i].ErrorMessage
	}, never), nil
}

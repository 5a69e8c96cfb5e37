package exporter

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"
)

// SNSConfig configures an sns receiver (kubernetes-event-exporter's keys:
// topicARN, region, layout; and this exporter's deDot, endpoint and
// timeout): each occurrence is one message published to the topic, the
// record.
type SNSConfig struct {
	// TopicARN is the topic's ARN (arn:aws:sns:REGION:ACCOUNT:NAME). A
	// name ending in .fifo is a FIFO topic (see [SNSSink]).
	TopicARN string `yaml:"topicARN"`
	// AWSConfig has the endpoint and timeout, and the region, which is
	// the ARN's (a topic is reached in its region; a region that differs
	// is warned about and not used).
	AWSConfig `yaml:",inline"`
	// Payload is the layout and deDot of the records.
	Payload `yaml:",inline"`
	// Encode makes each record; nil writes the default record
	// ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`
}

func (c *SNSConfig) validate() []string {
	var p []string
	switch {
	case c.TopicARN == "":
		p = append(p, "sns.topicARN is required")
	case arnRegion(c.TopicARN, "sns") == "":
		p = append(p, "sns.topicARN "+strconv.Quote(c.TopicARN)+" is not a topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)")
	}
	return append(p, c.AWSConfig.validate("sns")...)
}

// warnings returns a warning when the region is not the topic's.
func (c *SNSConfig) warnings() []string {
	if r := arnRegion(c.TopicARN, "sns"); r != "" && c.Region != "" && c.Region != r {
		return []string{fmt.Sprintf("sns.region %s is not the region of the topic %s: the topic's is used "+
			"(kubernetes-event-exporter sends to %s, where the topic is not found)", c.Region, c.TopicARN, c.Region)}
	}
	return nil
}

// arnRegion returns the region of an ARN of service, or "".
func arnRegion(arn, service string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != service || parts[5] == "" {
		return ""
	}
	return parts[3]
}

// Limits of PublishBatch: 10 messages, and 256 KiB in all.
const (
	snsBatchCount = 10
	snsBatchBytes = 256 << 10
)

// SNSSink publishes occurrences to an SNS topic with PublishBatch, each
// message the record (as kubernetes-event-exporter's Publish does),
// without subject or attributes. A FIFO topic's messages (an ARN ending in
// .fifo, which kubernetes-event-exporter cannot publish to) have the
// involved object as their group and the occurrence's key as their
// deduplication ID, as an [SQSSink]'s.
//
// A message the topic refuses as the sender's fault is [Permanent];
// throttling, server faults, missing credentials or permissions and a
// topic that does not exist (yet) are retried.
type SNSSink struct {
	cfg          SNSConfig
	client       *sns.Client
	awsTransport // Close closes its idle connections
	fifo         bool
	b            awsBatcher
}

// NewSNSSink returns an SNS sink; it sends nothing until the first write.
func NewSNSSink(cfg SNSConfig) (*SNSSink, error) {
	p := cfg.validate()
	cfg.Region = arnRegion(cfg.TopicARN, "sns")
	client, tr, err := awsClient("sns", &cfg.AWSConfig, "", p, sns.NewFromConfig,
		func(o *sns.Options) **string { return &o.BaseEndpoint })
	if err != nil {
		return nil, err
	}
	s := &SNSSink{cfg: cfg, client: client, awsTransport: tr, fifo: strings.HasSuffix(cfg.TopicARN, ".fifo")}
	s.b = awsBatcher{kind: "sns " + cfg.TopicARN, count: snsBatchCount, bytes: snsBatchBytes,
		timeout: time.Duration(cfg.Timeout), enc: cfg.Encode, size: fifoSize(s.fifo), send: s.send}
	return s, nil
}

// with returns c with the encoder enc.
func (c SNSConfig) with(enc Encoder) SNSConfig {
	c.Encode = enc
	return c
}

// Write publishes the batch; see [SNSSink].
func (s *SNSSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	return s.b.write(ctx, batch)
}

// send publishes recs in one PublishBatch.
func (s *SNSSink) send(ctx context.Context, recs []*awsRecord) ([]error, error) {
	entries := make([]types.PublishBatchRequestEntry, len(recs))
	for i, r := range recs {
		group, dedup := fifoIDs(s.fifo, r.o)
		entries[i] = types.PublishBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), Message: aws.String(string(r.data)),
			MessageGroupId: group, MessageDeduplicationId: dedup}
	}
	out, err := s.client.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(s.cfg.TopicARN), PublishBatchRequestEntries: entries})
	if err != nil {
		return nil, err
	}
	return idErrors(s.b.kind, recs, out.Successful, func(e types.PublishBatchResultEntry) *string { return e.Id },
		out.Failed, func(e types.BatchResultErrorEntry) batchFailure {
			return batchFailure{e.Id, e.Code, e.Message, e.SenderFault}
		}), nil
}

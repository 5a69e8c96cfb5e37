package exporter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSConfig configures an sqs receiver (kubernetes-event-exporter's keys:
// queueName, region, layout; and this exporter's deDot, endpoint and
// timeout): each occurrence is one message of the queue, its body the
// record.
type SQSConfig struct {
	// QueueName is the queue's name, whose URL is looked up at the first
	// write, or its URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME).
	// A name ending in .fifo is a FIFO queue (see [SQSSink]).
	QueueName string `yaml:"queueName"`
	// AWSConfig has the region, endpoint and timeout.
	AWSConfig `yaml:",inline"`
	// Payload is the layout and deDot of the records.
	Payload `yaml:",inline"`
	// Encode makes each record; nil writes the default record
	// ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`
}

// sqsQueueName matches the names SQS accepts.
var sqsQueueName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}(\.fifo)?$`)

// queueURL returns the queue's URL when QueueName is one, else "".
func (c *SQSConfig) queueURL() string {
	if strings.HasPrefix(c.QueueName, "https://") || strings.HasPrefix(c.QueueName, "http://") {
		return c.QueueName
	}
	return ""
}

// warnings returns a warning when QueueName is neither a queue's name nor
// a URL: every send fails.
func (c *SQSConfig) warnings() []string {
	if c.QueueName == "" || c.queueURL() != "" || sqsQueueName.MatchString(c.QueueName) {
		return nil
	}
	return []string{fmt.Sprintf("sqs.queueName %q is not a queue name (letters, digits, - and _, at most 80, "+
		"then .fifo for a FIFO queue) nor a queue URL: every send will fail", c.QueueName)}
}

func (c *SQSConfig) validate() []string {
	var p []string
	if c.QueueName == "" {
		p = append(p, "sqs.queueName is required")
	}
	return append(p, c.AWSConfig.validate("sqs")...)
}

// Limits of SendMessageBatch: 10 messages, and 256 KiB in all (the quota
// before 2025; the service now takes 1 MiB, and a message larger than
// 256 KiB is sent alone).
const (
	sqsBatchCount = 10
	sqsBatchBytes = 256 << 10
)

// SQSSink sends occurrences to an SQS queue with SendMessageBatch, each
// message's body the record (as kubernetes-event-exporter's SendMessage
// does), without message attributes. A FIFO queue's messages (a queue
// name ending in .fifo, which kubernetes-event-exporter cannot send to)
// have the involved object as their group (namespace/kind/name: an
// object's occurrences stay in order) and the occurrence's key as their
// deduplication ID, so that the queue discards what a crash made the
// exporter send again within its 5-minute window.
//
// A message the queue refuses as the sender's fault is [Permanent];
// throttling, server faults, missing credentials or permissions and a
// queue that does not exist (yet) are retried (see [AWSConfig] and the
// README's AWS section).
type SQSSink struct {
	cfg          SQSConfig
	client       *sqs.Client
	awsTransport // Close closes its idle connections
	fifo         bool
	b            awsBatcher

	mu  sync.Mutex
	url string // the queue's URL once looked up
}

// NewSQSSink returns an SQS sink; it sends nothing until the first write.
func NewSQSSink(cfg SQSConfig) (*SQSSink, error) {
	client, tr, err := awsClient("sqs", &cfg.AWSConfig, "", cfg.validate(), sqs.NewFromConfig,
		func(o *sqs.Options) **string { return &o.BaseEndpoint })
	if err != nil {
		return nil, err
	}
	s := &SQSSink{cfg: cfg, client: client, awsTransport: tr, fifo: strings.HasSuffix(cfg.QueueName, ".fifo"), url: cfg.queueURL()}
	s.b = awsBatcher{kind: "sqs " + cfg.QueueName, count: sqsBatchCount, bytes: sqsBatchBytes,
		timeout: time.Duration(cfg.Timeout), enc: cfg.Encode, size: fifoSize(s.fifo), send: s.send}
	return s, nil
}

// with returns c with the encoder enc.
func (c SQSConfig) with(enc Encoder) SQSConfig {
	c.Encode = enc
	return c
}

// Write sends the batch; see [SQSSink].
func (s *SQSSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	return s.b.write(ctx, batch)
}

// queueURL returns the queue's URL, looking it up the first time.
func (s *SQSSink) queueURL(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.url != "" {
		return s.url, nil
	}
	out, err := s.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(s.cfg.QueueName)})
	if err != nil {
		return "", err
	}
	s.url = aws.ToString(out.QueueUrl)
	return s.url, nil
}

// send sends recs in one SendMessageBatch.
func (s *SQSSink) send(ctx context.Context, recs []*awsRecord) ([]error, error) {
	url, err := s.queueURL(ctx)
	if err != nil {
		return nil, err
	}
	entries := make([]types.SendMessageBatchRequestEntry, len(recs))
	for i, r := range recs {
		group, dedup := fifoIDs(s.fifo, r.o)
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(string(r.data)),
			MessageGroupId: group, MessageDeduplicationId: dedup}
	}
	out, err := s.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	if err != nil {
		return nil, err
	}
	return idErrors(s.b.kind, recs, out.Successful, func(e types.SendMessageBatchResultEntry) *string { return e.Id },
		out.Failed, func(e types.BatchResultErrorEntry) batchFailure {
			return batchFailure{e.Id, e.Code, e.Message, e.SenderFault}
		}), nil
}

// batchFailure is a failed entry of an SQS or SNS batch answer.
type batchFailure struct {
	id, code, msg *string
	sender        bool // the sender's fault
}

// idErrors returns each entry's error (nil: stored) from an SQS or SNS
// batch answer, whose entries' IDs are their positions: the successful
// entries (whose IDs id returns) and the failed ones (described by fail).
// A failure that is the sender's fault is [Permanent], unless its code is
// one retrying may fix; an entry the answer lacks is retried.
func idErrors[S, F any](kind string, recs []*awsRecord, ok []S, id func(S) *string, failed []F, fail func(F) batchFailure) []error {
	errs := make([]error, len(recs))
	for i, r := range recs {
		errs[i] = fmt.Errorf("%s: occurrence %s: %w", kind, r.o.Key(), errNoResult)
	}
	at := func(id *string) int {
		if i, err := strconv.Atoi(aws.ToString(id)); err == nil && i >= 0 && i < len(recs) {
			return i
		}
		return -1
	}
	for _, e := range ok {
		if i := at(id(e)); i >= 0 {
			errs[i] = nil
		}
	}
	for _, e := range failed {
		if f := fail(e); at(f.id) >= 0 {
			code := aws.ToString(f.code)
			errs[at(f.id)] = entryError(kind, recs[at(f.id)].o, code, aws.ToString(f.msg), f.sender && !awsCodeRetryable(code))
		}
	}
	return errs
}

// fifoSize returns the size function of a queue's or topic's messages:
// the body, and a FIFO message's IDs.
func fifoSize(fifo bool) func(o *Occurrence, data []byte) int {
	return func(o *Occurrence, data []byte) int {
		if !fifo {
			return len(data)
		}
		return len(data) + len(fifoGroup(o)) + len(fifoID(o.Key()))
	}
}

// fifoIDs returns the message group and deduplication IDs of o in a FIFO
// queue or topic, or nils.
func fifoIDs(fifo bool, o *Occurrence) (group, dedup *string) {
	if !fifo {
		return nil, nil
	}
	return aws.String(fifoGroup(o)), aws.String(fifoID(o.Key()))
}

// fifoGroup returns the message group of o in a FIFO queue or topic: its
// involved object.
func fifoGroup(o *Occurrence) string {
	r := o.Regarding
	return fifoID(r.Namespace + "/" + r.Kind + "/" + r.Name)
}

// fifoID returns s as a FIFO group or deduplication ID: s when it has at
// most 128 characters, else its SHA-256 in hex.
func fifoID(s string) string {
	if len(s) <= 128 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

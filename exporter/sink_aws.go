package exporter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go"
)

// This file holds what the AWS receivers (sns, sqs, kinesis, firehose,
// eventbridge, opscenter) share: the client configuration, the
// classification of errors, and the writing of a batch with a service's
// batch API.

// AWSConfig is what every AWS receiver configures besides its service's
// keys: kubernetes-event-exporter's region, and this exporter's endpoint
// and timeout. Credentials come from the AWS SDK's default chain, as in
// kubernetes-event-exporter: the environment (AWS_ACCESS_KEY_ID, ...), the
// shared files and profile (AWS_PROFILE), web identity (EKS IRSA, Pod
// Identity) and the instance's role.
type AWSConfig struct {
	// Region is the service's region; empty takes the SDK's (AWS_REGION,
	// the profile's region), then, for sns, the topic ARN's.
	Region string `yaml:"region"`
	// Endpoint, if set, replaces the service's endpoint URL (a VPC
	// endpoint, an emulator); the SDK's AWS_ENDPOINT_URL and
	// AWS_ENDPOINT_URL_<SERVICE> do the same without a key.
	Endpoint string `yaml:"endpoint"`
	// Timeout bounds each request (default 10 s).
	Timeout Duration `yaml:"timeout"`
}

// validate sets the default timeout and returns the problems, naming the
// keys of sink kind.
func (c *AWSConfig) validate(kind string) []string {
	if c.Timeout == 0 {
		c.Timeout = Duration(defaultSinkTimeout)
	}
	if c.Endpoint != "" {
		return appendProblem(nil, httpURLProblem(kind+".endpoint", c.Endpoint))
	}
	return nil
}

// load returns the SDK configuration of sink kind: the default chain's,
// with c's region (else the chain's, else fallback), and no retries of
// the SDK's own: the receiver's retry policy retries.
func (c *AWSConfig) load(kind, fallback string) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} })}
	if c.Region != "" {
		opts = append(opts, config.WithRegion(c.Region))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("%s: loading the AWS configuration: %w", kind, err)
	}
	if cfg.Region == "" {
		cfg.Region = fallback
	}
	if cfg.Region == "" {
		return aws.Config{}, fmt.Errorf("%s.region is not set, and the AWS configuration has no region (AWS_REGION)", kind)
	}
	return cfg, nil
}

// setEndpoint sets a client's BaseEndpoint to the configured endpoint, if
// any (else it keeps the one the SDK's configuration resolved, from
// AWS_ENDPOINT_URL and the like).
func (c *AWSConfig) setEndpoint(base **string) {
	if c.Endpoint != "" {
		*base = aws.String(c.Endpoint)
	}
}

// awsClient checks a sink's configuration (its problems), loads the SDK
// configuration of sink kind (see [AWSConfig.load]) and returns the
// service's client made by newClient, with the configured endpoint
// (base returns the options' BaseEndpoint field), and its transport.
func awsClient[C, O any](kind string, c *AWSConfig, fallback string, problems []string,
	newClient func(aws.Config, ...func(*O)) C, base func(*O) **string) (C, awsTransport, error) {
	var client C
	if len(problems) > 0 {
		return client, awsTransport{}, errors.New(problems[0])
	}
	ac, err := c.load(kind, fallback)
	if err != nil {
		return client, awsTransport{}, err
	}
	// The SDK's HTTP client, built now (with AWS_CA_BUNDLE's authorities,
	// if set) so that Close can close its idle connections.
	if b, ok := ac.HTTPClient.(*awshttp.BuildableClient); ok {
		ac.HTTPClient = b.Freeze()
	}
	idle, _ := ac.HTTPClient.(interface{ CloseIdleConnections() })
	return newClient(ac, func(o *O) { c.setEndpoint(base(o)) }), awsTransport{idle}, nil
}

// awsTransport is an AWS sink's HTTP client, of its own.
type awsTransport struct {
	idle interface{ CloseIdleConnections() }
}

// Close closes the idle connections of the sink's HTTP client.
func (t awsTransport) Close(context.Context) error {
	if t.idle != nil {
		t.idle.CloseIdleConnections()
	}
	return nil
}

// awsRetryableCodes are the error codes that a client fault may carry and
// that retrying can fix, besides the SDK's throttling codes: missing or
// refused credentials and permissions, and a resource that does not exist
// (yet), which an operator fixes without a restart; the occurrences wait
// for it, as the retry policy allows. Codes starting with KMS (the key of
// an encrypted queue, topic or stream) are such too.
var awsRetryableCodes = map[string]bool{
	"AccessDenied": true, "AccessDeniedException": true, "AuthorizationError": true,
	"UnrecognizedClientException": true, "InvalidClientTokenId": true, "SignatureDoesNotMatch": true,
	"InvalidSignatureException": true, "IncompleteSignature": true, "MissingAuthenticationToken": true,
	"MissingAuthenticationTokenException": true, "ExpiredToken": true, "ExpiredTokenException": true,
	"RequestExpired": true, "InvalidSecurity": true, "OptInRequired": true,
	"NotFound": true, "NotFoundException": true, "ResourceNotFoundException": true, "ResourceInUseException": true,
	"QueueDoesNotExist": true, "AWS.SimpleQueueService.NonExistentQueue": true,
	"ServiceUnavailable": true, "ServiceUnavailableException": true, "InternalFailure": true,
	"InternalError": true, "InternalServerError": true,
}

// awsCodeRetryable reports whether an error code (a request's, or one
// entry's) is one retrying may fix.
func awsCodeRetryable(code string) bool {
	_, throttle := retry.DefaultThrottleErrorCodes[code]
	_, transient := retry.DefaultRetryableErrorCodes[code]
	return throttle || transient || awsRetryableCodes[code] || strings.HasPrefix(code, "KMS")
}

// awsPermanent reports whether retrying a request that failed with err
// cannot help: the SDK refused its parameters, or the service answered
// with a client fault (4xx) whose code is not one that retrying may fix
// ([awsCodeRetryable]). A failure to connect or to get credentials, a
// server fault, a throttle and the end of ctx are retried.
func awsPermanent(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var params smithy.InvalidParamsError
	if errors.As(err, &params) {
		return true
	}
	var api smithy.APIError
	if !errors.As(err, &api) || awsCodeRetryable(api.ErrorCode()) ||
		retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary {
		return false
	}
	var resp *awshttp.ResponseError
	if errors.As(err, &resp) {
		code := resp.HTTPStatusCode()
		return code >= 400 && code < 500 && code != 429
	}
	return api.ErrorFault() == smithy.FaultClient
}

// awsError returns the error of a request of sink kind, [Permanent] when
// retrying cannot help (see [awsPermanent]).
func awsError(kind string, err error) error {
	err = fmt.Errorf("%s: %w", kind, err)
	if awsPermanent(err) {
		return Permanent(err)
	}
	return err
}

// entryError returns the error of one entry of a batch request that the
// service did not store: [Permanent] when permanent.
func entryError(kind string, o *Occurrence, code, msg string, permanent bool) error {
	err := fmt.Errorf("%s: occurrence %s: %s: %s", kind, o.Key(), code, msg)
	if permanent {
		return Permanent(err)
	}
	return err
}

// errNoResult is the error of an entry that a batch answer does not
// mention (not expected of the services): retried.
var errNoResult = errors.New("the answer has no result for this entry")

// codeErrors returns each entry's error from a batch answer whose n
// results follow the entries' order: result(i) is the i-th result's error
// code (nil once stored) and message, [Permanent] when permanent(code).
// An entry without a result is retried ([errNoResult]).
func codeErrors(kind string, recs []*awsRecord, n int, result func(i int) (code, msg *string), permanent func(string) bool) []error {
	errs := make([]error, len(recs))
	for i, r := range recs {
		if i >= n {
			errs[i] = fmt.Errorf("%s: occurrence %s: %w", kind, r.o.Key(), errNoResult)
			continue
		}
		if code, msg := result(i); code != nil {
			errs[i] = entryError(kind, r.o, *code, aws.ToString(msg), permanent(*code))
		}
	}
	return errs
}

// never is the permanence of the entry errors of services whose entries
// fail only for reasons that pass (Kinesis, Firehose).
func never(string) bool { return false }

// awsRecord is one occurrence's entry in a batch request.
type awsRecord struct {
	o     *Occurrence
	data  []byte // the record
	size  int    // what it counts toward the request's size limit
	index int    // its index in the write's batch
	// stored is set once the service has the record: before the write
	// (ahead), or by it.
	stored, ahead bool
}

// awsBatcher writes batches with a service's batch API: it encodes the
// occurrences, sends them in requests of at most limit entries and bytes,
// and reports the stored prefix. An entry the service refuses ends the
// prefix there; the entries after it that the service stored are
// remembered (ahead), so that the retry of the rest does not send them
// again. A request the service refuses with a client fault is split in
// halves until the entry at fault is alone (and dropped as [Permanent]):
// the others are stored.
type awsBatcher struct {
	kind    string
	count   int // the most entries of a request
	bytes   int // the most bytes of a request (one larger entry is sent alone)
	timeout time.Duration
	enc     Encoder
	// size returns what an occurrence's entry counts toward bytes.
	size func(o *Occurrence, data []byte) int
	// send sends recs in one request and returns each entry's error, one
	// per entry (nil once stored; [Permanent] when permanent), or the
	// request's error.
	send  func(ctx context.Context, recs []*awsRecord) ([]error, error)
	ahead aheadSet
}

// write writes batch; see [awsBatcher].
func (b *awsBatcher) write(ctx context.Context, batch []*Occurrence) (int, error) {
	recs, encErr := b.records(batch)
	n, err := b.sendAll(ctx, recs)
	b.ahead.settle(recs, n)
	if err != nil {
		return n, err
	}
	return n, encErr
}

// records encodes the longest prefix of batch that encodes.
func (b *awsBatcher) records(batch []*Occurrence) ([]*awsRecord, error) {
	recs := make([]*awsRecord, 0, len(batch))
	_, err := encodeEach(batch, b.enc, func(i int, o *Occurrence, data []byte) {
		ahead := b.ahead.has(o.Key())
		recs = append(recs, &awsRecord{o: o, data: data, size: b.size(o, data), index: i, stored: ahead, ahead: ahead})
	})
	return recs, err
}

// sendAll sends the records not stored yet, in requests within the
// limits, and returns the index in the batch of the first record not
// stored, with its error, or len(recs).
func (b *awsBatcher) sendAll(ctx context.Context, recs []*awsRecord) (int, error) {
	pending := make([]*awsRecord, 0, len(recs))
	for _, r := range recs {
		if !r.stored {
			pending = append(pending, r)
		}
	}
	for len(pending) > 0 {
		k, size := 1, pending[0].size
		for k < len(pending) && k < b.count && size+pending[k].size <= b.bytes {
			size += pending[k].size
			k++
		}
		if i, err := b.sendChunk(ctx, pending[:k]); err != nil {
			return pending[i].index, err
		}
		pending = pending[k:]
	}
	return len(recs), nil
}

// sendChunk sends chunk in one request, or in halves when the service
// refuses the request with a client fault, and returns the position in
// chunk of the first record not stored, with its error (nil: all stored).
func (b *awsBatcher) sendChunk(ctx context.Context, chunk []*awsRecord) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, b.timeout)
	errs, err := b.send(rctx, chunk)
	cancel()
	if err != nil {
		err = awsError(b.kind, err)
		if !IsPermanent(err) || len(chunk) == 1 {
			return 0, err
		}
		h := len(chunk) / 2
		if i, err := b.sendChunk(ctx, chunk[:h]); err != nil {
			return i, err
		}
		i, err := b.sendChunk(ctx, chunk[h:])
		return h + i, err
	}
	first := -1
	for i, r := range chunk {
		if errs[i] == nil {
			r.stored = true
		} else if first < 0 {
			first = i
		}
	}
	if first < 0 {
		return 0, nil
	}
	return first, errs[first]
}

// maxAhead bounds an [aheadSet]: its keys stay until the retry of their
// batch, which may never come (the policy gave up); past the bound, the
// set is emptied (a later retry then sends those again).
const maxAhead = 8192

// aheadSet holds the keys of the occurrences that a write stored after
// the first it could not store: the retry of the rest skips them. Safe
// for concurrent use.
type aheadSet struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

// has reports whether the occurrence with key is stored already.
func (s *aheadSet) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.keys[key]
	return ok
}

// settle updates the set after a write of recs stored the first n: the
// keys of the records before n leave it, and those stored after n join.
func (s *aheadSet) settle(recs []*awsRecord, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		switch {
		case r.index < n && r.ahead:
			delete(s.keys, r.o.Key())
		case r.index > n && r.stored && !r.ahead:
			if s.keys == nil || len(s.keys) >= maxAhead {
				s.keys = map[string]struct{}{}
			}
			s.keys[r.o.Key()] = struct{}{}
		}
	}
}

// awsKind reports whether the receiver's sink is one of the AWS
// receivers.
func (r *Receiver) awsKind() bool {
	return r.SNS != nil || r.SQS != nil || r.Kinesis != nil || r.Firehose != nil || r.EventBridge != nil ||
		r.Opscenter != nil
}

// awsWarnings returns the warnings of the receiver's AWS sink, if any,
// each with the receiver's line.
func (r *Receiver) awsWarnings() []string {
	var w []string
	switch {
	case r.SNS != nil:
		w = r.SNS.warnings()
	case r.SQS != nil:
		w = r.SQS.warnings()
	}
	for i, m := range w {
		w[i] = fmt.Sprintf("line %d: receiver %q: %s", r.line, r.Name, m)
	}
	return w
}

// buildAWS makes the receiver's AWS sink, writing the records enc makes;
// cluster is the clusterName of OpsCenter's templates.
func (r *Receiver) buildAWS(cluster string, enc Encoder) (Sink, error) {
	switch {
	case r.SNS != nil:
		return NewSNSSink(r.SNS.with(enc))
	case r.SQS != nil:
		return NewSQSSink(r.SQS.with(enc))
	case r.Kinesis != nil:
		return NewKinesisSink(r.Kinesis.with(enc))
	case r.Firehose != nil:
		return NewFirehoseSink(r.Firehose.with(enc))
	case r.EventBridge != nil:
		return NewEventBridgeSink(r.EventBridge.with(enc))
	}
	c := *r.Opscenter
	c.data = recordData{cluster, r.kee}
	return NewOpsCenterSink(c)
}

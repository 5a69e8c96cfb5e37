package exporter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	"github.com/fanout-go/fanout/exporter/internal/awstest"
)

// scriptedService is the send function of an awsBatcher under test: it
// records each request's keys and answers as its fields say.
type scriptedService struct {
	mu       sync.Mutex
	requests [][]string       // the keys of each request
	stored   map[string]int   // how often each key was stored
	refuse   map[string]error // an entry's error, by key (once)
	faulty   map[string]bool  // a key whose presence fails the whole request as the client's fault
	down     error            // the error of every request, if set
}

func (s *scriptedService) send(_ context.Context, recs []*awsRecord) ([]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.o.Key()
	}
	s.requests = append(s.requests, keys)
	if s.down != nil {
		return nil, s.down
	}
	for _, k := range keys {
		if s.faulty[k] {
			return nil, &smithy.GenericAPIError{Code: "ValidationException", Message: k + " is invalid", Fault: smithy.FaultClient}
		}
	}
	errs := make([]error, len(recs))
	for i, k := range keys {
		if err, ok := s.refuse[k]; ok {
			errs[i] = err
			delete(s.refuse, k)
			continue
		}
		if s.stored == nil {
			s.stored = map[string]int{}
		}
		s.stored[k]++
	}
	return errs, nil
}

// batcher returns an awsBatcher over svc of at most count entries and
// bytes per request, each entry counting its record's length.
func (svc *scriptedService) batcher(count, bytes int) *awsBatcher {
	return &awsBatcher{kind: "test", count: count, bytes: bytes, timeout: time.Second, send: svc.send,
		enc:  func(o *Occurrence) ([]byte, error) { return []byte(o.Message), nil },
		size: func(_ *Occurrence, data []byte) int { return len(data) }}
}

// sized returns occurrences u0/1, u1/1, ... whose records are as long as
// sizes say.
func sized(sizes ...int) []*Occurrence {
	out := make([]*Occurrence, len(sizes))
	for i, n := range sizes {
		out[i] = occ(fmt.Sprintf("u%d", i), 1, "ns")
		out[i].Message = strings.Repeat("x", n)
	}
	return out
}

// fakeReceiver returns the sink of the first receiver of the configuration
// yaml, with the test's credentials, its region (found by cfg) set to the
// test's and its endpoint to url.
func fakeReceiver(t *testing.T, yaml, url string, cfg func(r *Receiver) *AWSConfig) Sink {
	t.Helper()
	awstest.SetEnv(t)
	c := parseOK(t, yaml)
	r := c.Receivers[0]
	cfg(r).Region, cfg(r).Endpoint = awstest.Region, url
	s, err := r.build(c.ClusterName)
	return built(s, err)(t)
}

func TestAWSRequestsHoldAtMostTheServicesCountAndBytes(t *testing.T) {
	svc := &scriptedService{}
	b := svc.batcher(3, 100)
	batch := sized(10, 10, 10, 10, 60, 50, 120, 1, 1)
	if n, err := b.write(t.Context(), batch); n != len(batch) || err != nil {
		t.Fatal(n, err)
	}
	want := [][]string{{"u0/1", "u1/1", "u2/1"}, {"u3/1", "u4/1"}, {"u5/1"}, {"u6/1"}, {"u7/1", "u8/1"}}
	if !slices.EqualFunc(svc.requests, want, slices.Equal) {
		t.Errorf("requests %v, want %v (3 entries at most, 100 bytes at most, a larger entry alone)", svc.requests, want)
	}
}

func TestAWSRefusedEntryEndsThePrefixAndTheRetrySendsNothingStoredTwice(t *testing.T) {
	throttled := errors.New("throttled")
	svc := &scriptedService{refuse: map[string]error{"u2/1": throttled}}
	b := svc.batcher(10, 1<<20)
	batch := sized(1, 1, 1, 1, 1)
	n, err := b.write(t.Context(), batch)
	if n != 2 || !errors.Is(err, throttled) {
		t.Fatalf("n %d, err %v; want 2 stored, then u2's error", n, err)
	}
	// The runner retries the rest: u3 and u4, stored by the first write,
	// are not sent again.
	if n, err := b.write(t.Context(), batch[n:]); n != 3 || err != nil {
		t.Fatalf("retry: n %d, err %v; want all 3 stored", n, err)
	}
	for _, o := range batch {
		if got := svc.stored[o.Key()]; got != 1 {
			t.Errorf("%s stored %d times, want once", o.Key(), got)
		}
	}
	if got := svc.requests[1]; !slices.Equal(got, []string{"u2/1"}) {
		t.Errorf("the retry sent %v, want only u2/1", got)
	}
	if len(b.ahead.keys) != 0 {
		t.Errorf("ahead set %v after the retry, want empty", b.ahead.keys)
	}
}

func TestAWSRequestRefusedAsTheClientsFaultIsSplitUntilTheEntryAtFaultIsAlone(t *testing.T) {
	svc := &scriptedService{faulty: map[string]bool{"u5/1": true}}
	b := svc.batcher(10, 1<<20)
	batch := sized(1, 1, 1, 1, 1, 1, 1, 1)
	n, err := b.write(t.Context(), batch)
	if n != 5 || !IsPermanent(err) || !strings.Contains(err.Error(), "u5/1 is invalid") {
		t.Fatalf("n %d, err %v; want 5 stored, then u5's permanent error", n, err)
	}
	// The halves were 0-3 (stored), then 4-7, 4-5, 4 (stored) and 5.
	wantRequests := [][]string{{"u0/1", "u1/1", "u2/1", "u3/1", "u4/1", "u5/1", "u6/1", "u7/1"},
		{"u0/1", "u1/1", "u2/1", "u3/1"}, {"u4/1", "u5/1", "u6/1", "u7/1"}, {"u4/1", "u5/1"}, {"u4/1"}, {"u5/1"}}
	if !slices.EqualFunc(svc.requests, wantRequests, slices.Equal) {
		t.Errorf("requests %v, want %v", svc.requests, wantRequests)
	}
	// The runner drops u5 and writes the rest.
	if n, err := b.write(t.Context(), batch[6:]); n != 2 || err != nil {
		t.Fatalf("rest: n %d, err %v", n, err)
	}
	for i, o := range batch {
		if want := min(1, abs(i-5)); svc.stored[o.Key()] != want {
			t.Errorf("%s stored %d times, want %d", o.Key(), svc.stored[o.Key()], want)
		}
	}
}

func abs(n int) int { return max(n, -n) }

func TestAWSRequestFailureThatMayPassLaterIsRetriedWhole(t *testing.T) {
	for _, down := range []error{
		&smithy.GenericAPIError{Code: "ThrottlingException", Fault: smithy.FaultClient},
		&smithy.GenericAPIError{Code: "AccessDeniedException", Fault: smithy.FaultClient},
		&smithy.GenericAPIError{Code: "KMSDisabledException", Fault: smithy.FaultClient},
		&smithy.GenericAPIError{Code: "InternalFailure", Fault: smithy.FaultServer},
		errors.New("dial tcp: connection refused"),
		context.DeadlineExceeded,
	} {
		svc := &scriptedService{down: down}
		n, err := svc.batcher(10, 1<<20).write(t.Context(), sized(1, 1, 1))
		wantFailure(t, down.Error(), n, err, false)
		if len(svc.requests) != 1 {
			t.Errorf("%v: %d requests, want 1 (no split)", down, len(svc.requests))
		}
	}
}

func TestAWSOccurrenceThatCannotBeEncodedIsPermanentAfterThePrefix(t *testing.T) {
	svc := &scriptedService{}
	b := svc.batcher(10, 1<<20)
	b.enc = func(o *Occurrence) ([]byte, error) {
		if o.UID == "u1" {
			return nil, errors.New("layout failed")
		}
		return []byte(o.Message), nil
	}
	n, err := b.write(t.Context(), sized(1, 1, 1))
	if n != 1 || !IsPermanent(err) || svc.stored["u0/1"] != 1 || svc.stored["u2/1"] != 0 {
		t.Errorf("n %d, err %v, stored %v; want u0 stored, then u1's permanent error", n, err, svc.stored)
	}
}

// Writers on several goroutines (the runner's concurrent writers) share
// one sink: each stores its own batch, once.
func TestAWSWritesFromSeveralGoroutinesStoreEachOccurrenceOnce(t *testing.T) {
	svc := &scriptedService{refuse: map[string]error{}}
	b := svc.batcher(10, 1<<20)
	var batches [][]*Occurrence
	for g := range 8 {
		var batch []*Occurrence
		for i := range 25 {
			o := occ(fmt.Sprintf("g%d-%d", g, i), 1, "ns")
			batch = append(batch, o)
			if i%7 == 3 {
				svc.refuse[o.Key()] = errors.New("throttled")
			}
		}
		batches = append(batches, batch)
	}
	var wg sync.WaitGroup
	for _, batch := range batches {
		wg.Go(func() {
			for len(batch) > 0 {
				n, _ := b.write(context.Background(), batch)
				batch = batch[n:]
			}
		})
	}
	wg.Wait()
	for _, batch := range batches {
		for _, o := range batch {
			if svc.stored[o.Key()] != 1 {
				t.Errorf("%s stored %d times, want once", o.Key(), svc.stored[o.Key()])
			}
		}
	}
}

// Every example of theirs with an AWS receiver loads into a real sink, with
// no "not supported" warning, and the sink builds from the AWS SDK's
// default configuration (here, credentials in the environment).
func TestTheirAWSExamplesLoadAsSinksWithoutWarningsOfSupport(t *testing.T) {
	awstest.SetEnv(t)
	t.Setenv("ELASTIC_API_KEY", "key")
	built := 0
	for _, f := range []string{"02-route.yaml", "08-kinesis.yaml", "09-firehose.yaml", "10-sns.yaml", "11-sqs.yaml",
		"16-kinesis-layout.yaml", "22-eventbridge.yaml", "config.example.yaml"} {
		b, err := os.ReadFile(theirs + f)
		if err != nil {
			t.Fatal(err)
		}
		// Their config.example.yaml's opsgenie receiver has no API key,
		// with which they do not start: given one, it loads.
		c, err := ParseConfig(f, []byte(os.ExpandEnv(strings.Replace(string(b), `apiKey: ""`, `apiKey: "k"`, 1))))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.Warnings {
			for _, kind := range []string{"sns", "sqs", "kinesis", "firehose", "eventbridge", "opscenter"} {
				if strings.Contains(w, "the "+kind+" sink") {
					t.Errorf("%s: %s", f, w)
				}
			}
		}
		for _, r := range c.Receivers {
			if !r.awsKind() {
				continue
			}
			s, err := r.build(c.ClusterName)
			if err != nil {
				t.Fatalf("%s: receiver %s: %v", f, r.Name, err)
			}
			_ = s.Close(t.Context())
			built++
		}
	}
	if built != 9 {
		t.Errorf("%d AWS sinks built, want 9", built)
	}
}

func TestTheirSNSRegionOtherThanTheTopicsIsWarnedAndTheTopicsIsUsed(t *testing.T) {
	awstest.SetEnv(t)
	c, err := LoadConfig(theirs + "10-sns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wantWarnings(t, c, `line 4: receiver "sns": sns.region us-west-2 is not the region of the topic `+
		`arn:aws:sns:us-east-1:1234567890123456:mytopic: the topic's is used`)
	s, err := c.Receivers[0].build("")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.(*SNSSink).client.Options().Region; got != "us-east-1" {
		t.Errorf("region %s, want the topic's, us-east-1", got)
	}
}

func TestSQSQueueNameThatIsNoQueueNameIsWarned(t *testing.T) {
	c, err := LoadConfig(theirs + "11-sqs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wantWarnings(t, c, `line 4: receiver "sqs": sqs.queueName "/tmp/dump" is not a queue name`)
	for _, ok := range []string{"events", "kube_events-1.fifo", "https://sqs.eu-west-3.amazonaws.com/123456789012/events"} {
		c := parseOK(t, "receivers:\n  - name: q\n    sqs: {queueName: \""+ok+"\", region: eu-west-3}\n")
		if slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.Contains(w, "queueName") }) {
			t.Errorf("%s: warnings %v", ok, c.Warnings)
		}
	}
}

func TestAWSReceiverWithoutARegionAnywhereIsRefusedAtStart(t *testing.T) {
	awstest.SetEnv(t)
	c := parseOK(t, "receivers:\n  - name: k\n    kinesis: {streamName: s}\n")
	if _, err := c.buildSinks(); err == nil || !strings.Contains(err.Error(), "kinesis.region is not set, and the AWS configuration has no region") {
		t.Errorf("err %v, want the missing region named", err)
	}
	t.Setenv("AWS_REGION", "eu-central-1")
	s, err := c.Receivers[0].build("")
	if err != nil || s.(*KinesisSink).client.Options().Region != "eu-central-1" {
		t.Errorf("err %v; want the environment's region", err)
	}
}

func TestAWSReceiversRequireTheirKeys(t *testing.T) {
	wantConfigErrors(t, map[string]string{
		"sqs: {region: r}":                          "sqs.queueName is required",
		"sns: {region: r}":                          "sns.topicARN is required",
		"sns: {topicARN: mytopic}":                  `sns.topicARN "mytopic" is not a topic ARN`,
		"kinesis: {region: r}":                      "kinesis.streamName is required",
		"firehose: {region: r}":                     "firehose.deliveryStreamName is required",
		"kinesis: {streamName: s, timeout: banana}": `invalid duration "banana"`,
	})
}

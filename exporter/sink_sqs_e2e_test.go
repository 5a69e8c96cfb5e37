//go:build e2e

package exporter

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/fanout-go/fanout/exporter/internal/awstest"
)

// These tests send to fauxqs, an SQS and SNS emulator speaking the
// services' protocols (run by internal/awstest), and read back what it
// stored with the SDK.

// sqsClient returns an SDK client of the emulator at url, to set up
// queues and read them.
func sqsClient(url string) *sqs.Client {
	return sqs.New(sqs.Options{Region: awstest.Region, BaseEndpoint: aws.String(url),
		Credentials: credentials.NewStaticCredentialsProvider(awstest.AccessKeyID, awstest.SecretAccessKey, "")})
}

// createQueue creates the queue name (FIFO when it ends in .fifo) and
// returns its URL.
func createQueue(t *testing.T, c *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	out, err := c.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

// receiveAll receives (and deletes) messages from the queue until it has
// want of them, or a few seconds (10 for want > 1, else 2) have passed,
// and returns them in the order first received. Its receives hide what
// they return for 2 s only, and a message received again is counted once:
// a receive whose response was lost (and which the SDK retried) must not
// hide its messages for the queue's default 30 s, longer than the test
// waits.
func receiveAll(t *testing.T, c *sqs.Client, url string, want int) []sqstypes.Message {
	t.Helper()
	var got []sqstypes.Message
	seen := map[string]bool{}
	deadline := time.Now().Add(2 * time.Second)
	if want > 1 {
		deadline = deadline.Add(8 * time.Second)
	}
	for len(got) < want && time.Now().Before(deadline) {
		out, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url),
			MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			if id := aws.ToString(m.MessageId); !seen[id] {
				seen[id] = true
				got = append(got, m)
			}
			if _, err := c.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return got
}

// bodies returns the messages' bodies.
func bodies(ms []sqstypes.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = aws.ToString(m.Body)
	}
	return out
}

// records returns the default records of batch.
func records(batch []*Occurrence) []string {
	out := make([]string, len(batch))
	for i, o := range batch {
		out[i] = string(o.EventJSON(""))
	}
	return out
}

// wantDelivered writes batch with s and checks that the queue at url
// receives each record once, in any order.
func wantDelivered(t *testing.T, s Sink, c *sqs.Client, url string, batch []*Occurrence) {
	t.Helper()
	if n, err := s.Write(t.Context(), batch); n != len(batch) || err != nil {
		t.Fatal(n, err)
	}
	got, want := bodies(receiveAll(t, c, url, len(batch))), records(batch)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("received %d messages:\n%v\nwant the %d records:\n%v", len(got), got, len(want), want)
	}
}

func newSQSSink(t *testing.T, url, queue string) *SQSSink {
	awstest.SetEnv(t)
	return built(NewSQSSink(SQSConfig{QueueName: queue, AWSConfig: AWSConfig{Region: awstest.Region, Endpoint: url}}))(t)
}

func TestSQSQueueReceivesEachRecordAsAMessageBody(t *testing.T) {
	emu := awstest.StartFauxqs(t)
	c := sqsClient(emu.URL)
	url := createQueue(t, c, "kube-events", nil)
	s := newSQSSink(t, emu.URL, "kube-events")
	var batch []*Occurrence
	for i := range 23 {
		batch = append(batch, occ(fmt.Sprintf("e%d", i), 1, "ns"))
	}
	wantDelivered(t, s, c, url, batch)
}

// A FIFO queue keeps an object's occurrences in order, and discards what
// is sent twice (a restart that sends again what it sent before its
// checkpoint).
func TestSQSFIFOQueueKeepsAnObjectsOrderAndDiscardsWhatIsSentAgain(t *testing.T) {
	emu := awstest.StartFauxqs(t)
	c := sqsClient(emu.URL)
	url := createQueue(t, c, "kube-events.fifo", map[string]string{"FifoQueue": "true"})
	s := newSQSSink(t, emu.URL, "kube-events.fifo")
	var batch []*Occurrence
	for i := range 12 {
		o := occ(fmt.Sprintf("e%d", i), 1, "ns")
		o.Regarding.Name = fmt.Sprintf("pod-%d", i%2)
		batch = append(batch, o)
	}
	for range 2 {
		if n, err := s.Write(t.Context(), batch); n != len(batch) || err != nil {
			t.Fatal(n, err)
		}
	}
	got := receiveAll(t, c, url, len(batch))
	if more := receiveAll(t, c, url, 1); len(got) != len(batch) || len(more) != 0 {
		t.Fatalf("received %d messages, then %d, want %d (the second sending discarded)", len(got), len(more), len(batch))
	}
	byObject := map[string][]string{}
	for _, m := range got {
		var rec EnhancedEvent
		if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &rec); err != nil {
			t.Fatal(err)
		}
		byObject[rec.InvolvedObject.Name] = append(byObject[rec.InvolvedObject.Name], rec.Fanout.Key)
	}
	for _, name := range []string{"pod-0", "pod-1"} {
		var want []string
		for _, o := range batch {
			if o.Regarding.Name == name {
				want = append(want, o.Key())
			}
		}
		if !slices.Equal(byObject[name], want) {
			t.Errorf("%s's occurrences received %v, want in order %v", name, byObject[name], want)
		}
	}
}

// A queue that does not exist (yet) is retried: once it is created, the
// retry stores the occurrences.
func TestSQSQueueThatDoesNotExistYetIsRetried(t *testing.T) {
	emu := awstest.StartFauxqs(t)
	c := sqsClient(emu.URL)
	s := newSQSSink(t, emu.URL, "later")
	batch := []*Occurrence{occ("a", 1, "ns")}
	n, err := s.Write(t.Context(), batch)
	wantFailure(t, "missing queue", n, err, false)
	url := createQueue(t, c, "later", nil)
	if n, err := s.Write(t.Context(), batch); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if got := bodies(receiveAll(t, c, url, 1)); !slices.Equal(got, records(batch)) {
		t.Errorf("received %v", got)
	}
}

// A message larger than the queue takes is refused as the sender's fault:
// permanent, after the messages before it.
func TestSQSMessageTooLargeIsPermanentAfterThePrefix(t *testing.T) {
	emu := awstest.StartFauxqs(t)
	c := sqsClient(emu.URL)
	url := createQueue(t, c, "small", map[string]string{"MaximumMessageSize": "1024"})
	s := newSQSSink(t, emu.URL, "small")
	big := occ("big", 1, "ns")
	big.Message = string(make([]byte, 2048))
	batch := []*Occurrence{occ("a", 1, "ns"), big, occ("c", 1, "ns")}
	n, err := s.Write(t.Context(), batch)
	if n != 1 || !IsPermanent(err) {
		t.Fatalf("n %d, err %v; want a stored, then big's permanent error", n, err)
	}
	if n, err := s.Write(t.Context(), batch[2:]); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	got := bodies(receiveAll(t, c, url, 2))
	slices.Sort(got)
	if want := records([]*Occurrence{batch[0], batch[2]}); !slices.Equal(got, want) {
		t.Errorf("received %v, want a and c", got)
	}
}

package awstest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/firehose"
	"github.com/aws/aws-sdk-go-v2/service/firehose/types"
)

// recorder is a testing.TB that keeps the errors a Fake reports instead
// of failing the test.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) reported(want string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.errs, func(e string) bool { return strings.Contains(e, want) })
}

// putRecordBatch is the input of Firehose's PutRecordBatch, as the API
// reference defines it.
type putRecordBatch struct {
	DeliveryStreamName string
	Records            []struct{ Data []byte }
}

// fakeFirehose returns a Fake of Firehose reporting to r, answering
// PutRecordBatch with one record ID per record, and a client of it signing
// with secret in region.
func fakeFirehose(t *testing.T, r *recorder, secret, region string) (*Fake, *firehose.Client) {
	f := NewFake(r, "firehose", "Firehose_20150804")
	Handle(f, "PutRecordBatch", func(in putRecordBatch) (any, error) {
		out := make([]map[string]string, len(in.Records))
		for i := range out {
			out[i] = map[string]string{"RecordId": f.NextID()}
		}
		return map[string]any{"FailedPutCount": 0, "RequestResponses": out}, nil
	})
	c := firehose.New(firehose.Options{Region: region, BaseEndpoint: aws.String(f.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKeyID, secret, "")})
	return f, c
}

func put(c *firehose.Client, t *testing.T) error {
	_, err := c.PutRecordBatch(t.Context(), &firehose.PutRecordBatchInput{DeliveryStreamName: aws.String("s"),
		Records: []types.Record{{Data: []byte("one")}, {Data: []byte("two")}}})
	return err
}

func TestFakeServesARequestTheSDKSigned(t *testing.T) {
	r := &recorder{TB: t}
	f, c := fakeFirehose(t, r, SecretAccessKey, Region)
	if err := put(c, t); err != nil || len(r.errs) > 0 {
		t.Fatalf("err %v, reported %v", err, r.errs)
	}
	reqs := f.Requests()
	if len(reqs) != 1 || reqs[0].Operation != "PutRecordBatch" || !strings.Contains(string(reqs[0].Body), `"Data":"b25l"`) {
		t.Errorf("requests %+v", reqs)
	}
}

func TestFakeRefusesASignatureMadeWithAnotherSecret(t *testing.T) {
	r := &recorder{TB: t}
	_, c := fakeFirehose(t, r, "another-secret", Region)
	if err := put(c, t); err == nil || !r.reported("the signature does not match") {
		t.Errorf("err %v, reported %v; want the signature refused", err, r.errs)
	}
}

func TestFakeRefusesASignatureForAnotherRegion(t *testing.T) {
	r := &recorder{TB: t}
	_, c := fakeFirehose(t, r, SecretAccessKey, "us-east-1")
	if err := put(c, t); err == nil || !r.reported("credential scope") {
		t.Errorf("err %v, reported %v; want the region refused", err, r.errs)
	}
}

func TestFakeRefusesABodyWithAFieldTheShapeLacks(t *testing.T) {
	r := &recorder{TB: t}
	f := NewFake(r, "firehose", "Firehose_20150804")
	Handle(f, "PutRecordBatch", func(in struct{ DeliveryStreamName string }) (any, error) { return struct{}{}, nil })
	c := firehose.New(firehose.Options{Region: Region, BaseEndpoint: aws.String(f.URL), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, "")})
	if err := put(c, t); err == nil || !r.reported(`unknown field "Records"`) {
		t.Errorf("err %v, reported %v; want the body refused", err, r.errs)
	}
}

package exporter

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/fanout-go/fanout/exporter/internal/awstest"
)

// No Firehose emulator installs here: these tests run against
// awstest.Fake, which checks each request as the service would (the AWS
// JSON 1.1 protocol, the SigV4 signature, the body against the shapes
// below, from the Firehose API reference) and answers as the reference
// says.

// firehosePutRecordBatch is PutRecordBatch's input.
type firehosePutRecordBatch struct {
	DeliveryStreamName string
	Records            []struct{ Data []byte }
}

// firehoseResult is one entry of PutRecordBatch's RequestResponses.
type firehoseResult struct {
	RecordId     string `json:",omitempty"`
	ErrorCode    string `json:",omitempty"`
	ErrorMessage string `json:",omitempty"`
}

// fakeFirehose is a Firehose stream behind an awstest.Fake: it keeps the
// records it stores, and refuses those its refuse says.
type fakeFirehose struct {
	*awstest.Fake
	mu      sync.Mutex
	streams []string // the stream of each request
	records [][]byte
	sizes   []int           // each request's count
	refuse  map[string]bool // records refused once, by their data
	fail    *awstest.APIError
}

func newFakeFirehose(t *testing.T) *fakeFirehose {
	f := &fakeFirehose{Fake: awstest.NewFake(t, "firehose", "Firehose_20150804"), refuse: map[string]bool{}}
	awstest.Handle(f.Fake, "PutRecordBatch", f.putRecordBatch)
	return f
}

func (f *fakeFirehose) putRecordBatch(in firehosePutRecordBatch) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	f.streams = append(f.streams, in.DeliveryStreamName)
	f.sizes = append(f.sizes, len(in.Records))
	out := make([]firehoseResult, len(in.Records))
	failed := 0
	for i, r := range in.Records {
		if f.refuse[string(r.Data)] {
			delete(f.refuse, string(r.Data))
			out[i] = firehoseResult{ErrorCode: "ServiceUnavailableException", ErrorMessage: "Slow down."}
			failed++
			continue
		}
		f.records = append(f.records, r.Data)
		out[i] = firehoseResult{RecordId: f.NextID()}
	}
	return map[string]any{"FailedPutCount": failed, "Encrypted": false, "RequestResponses": out}, nil
}

// newFirehoseSink returns a sink of stream events on f, with the test
// credentials.
func newFirehoseSink(t *testing.T, f *fakeFirehose, cfg FirehoseConfig) *FirehoseSink {
	awstest.SetEnv(t)
	cfg.DeliveryStreamName, cfg.Region, cfg.Endpoint = "events", awstest.Region, f.URL
	return built(NewFirehoseSink(cfg))(t)
}

func TestFirehosePutsEachRecordAsTheirsDoesInRequestsOfAtMost500(t *testing.T) {
	f := newFakeFirehose(t)
	s := newFirehoseSink(t, f, FirehoseConfig{})
	var batch []*Occurrence
	for i := range 1200 {
		batch = append(batch, occ(fmt.Sprintf("e%d", i), 1, "ns"))
	}
	if n, err := s.Write(t.Context(), batch); n != len(batch) || err != nil {
		t.Fatal(n, err)
	}
	if fmt.Sprint(f.sizes) != "[500 500 200]" || f.streams[0] != "events" {
		t.Errorf("requests of %v records to %v, want 500, 500 and 200 to events", f.sizes, f.streams)
	}
	for i, o := range batch {
		if want := o.EventJSON(""); !bytes.Equal(f.records[i], want) {
			t.Fatalf("record %d is %s, want the record without a delimiter: %s", i, f.records[i], want)
		}
	}
}

func TestFirehoseRefusedRecordIsRetriedAndTheOnesStoredAfterItAreNotSentAgain(t *testing.T) {
	f := newFakeFirehose(t)
	s := newFirehoseSink(t, f, FirehoseConfig{})
	batch := []*Occurrence{occ("a", 1, "ns"), occ("b", 1, "ns"), occ("c", 1, "ns")}
	f.refuse[string(batch[1].EventJSON(""))] = true
	n, err := s.Write(t.Context(), batch)
	if n != 1 || err == nil || IsPermanent(err) {
		t.Fatalf("n %d, err %v; want a stored, then b's retryable error", n, err)
	}
	if n, err := s.Write(t.Context(), batch[1:]); n != 2 || err != nil {
		t.Fatalf("retry: n %d, err %v", n, err)
	}
	if fmt.Sprint(f.sizes) != "[3 1]" || len(f.records) != 3 {
		t.Errorf("requests of %v records storing %d, want 3 then b alone, each stored once", f.sizes, len(f.records))
	}
}

// The errors of a request are retried or permanent as the README says,
// through the SDK's own decoding of the service's answer.
func TestAWSErrorAnswersAreRetriedOrPermanentByTheirCode(t *testing.T) {
	f := newFakeFirehose(t)
	s := newFirehoseSink(t, f, FirehoseConfig{})
	for _, c := range []struct {
		fail      awstest.APIError
		permanent bool
	}{
		{awstest.APIError{Status: http.StatusBadRequest, Type: "ThrottlingException"}, false},
		{awstest.APIError{Status: http.StatusBadRequest, Type: "LimitExceededException"}, false},
		{awstest.APIError{Status: http.StatusBadRequest, Type: "ResourceNotFoundException"}, false},
		{awstest.APIError{Status: http.StatusBadRequest, Type: "ResourceInUseException"}, false},
		{awstest.APIError{Status: http.StatusBadRequest, Type: "UnrecognizedClientException"}, false},
		{awstest.APIError{Status: http.StatusBadRequest, Type: "InvalidKMSResourceException"}, true},
		{awstest.APIError{Status: http.StatusForbidden, Type: "AccessDeniedException"}, false},
		{awstest.APIError{Status: http.StatusBadRequest, Type: "KMSAccessDeniedException"}, false},
		{awstest.APIError{Status: http.StatusInternalServerError, Type: "InternalFailure"}, false},
		{awstest.APIError{Status: http.StatusServiceUnavailable, Type: "ServiceUnavailableException"}, false},
		{awstest.APIError{Status: http.StatusBadRequest, Type: "InvalidArgumentException"}, true},
		{awstest.APIError{Status: http.StatusBadRequest, Type: "ValidationException"}, true},
		{awstest.APIError{Status: http.StatusRequestEntityTooLarge, Type: "RequestEntityTooLarge"}, true},
	} {
		f.mu.Lock()
		f.fail = &c.fail
		f.mu.Unlock()
		n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
		wantFailure(t, c.fail.Type, n, err, c.permanent)
	}
}

func TestAWSUnreachableEndpointIsRetryable(t *testing.T) {
	awstest.SetEnv(t)
	s := built(NewFirehoseSink(FirehoseConfig{DeliveryStreamName: "events",
		AWSConfig: AWSConfig{Region: awstest.Region, Endpoint: "http://" + deadAddr()}}))(t)
	n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
	wantFailure(t, "unreachable", n, err, false)
}

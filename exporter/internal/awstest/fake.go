package awstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The static credentials a [Fake] checks signatures with; [SetEnv] sets
// them in the environment, where the SDK's default chain finds them.
const (
	AccessKeyID     = "AKIDFANOUTTEST"
	SecretAccessKey = "fanout-test-secret"
	// Region is the region of the tests.
	Region = "eu-west-3"
)

// SetEnv makes the AWS SDK's default configuration, in t, use the static
// credentials [AccessKeyID] and [SecretAccessKey] and no shared
// configuration file (so that the developer's ~/.aws plays no part), with
// no region set.
func SetEnv(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_ENDPOINT_URL", "")
}

// APIError is an error answer of a [Fake]: the HTTP status, and the
// error's type (its code, such as ThrottlingException) and message.
type APIError struct {
	Status  int
	Type    string
	Message string
}

// Error returns the type and the message.
func (e *APIError) Error() string { return e.Type + ": " + e.Message }

// Request is a request a [Fake] received and checked.
type Request struct {
	// Operation is the operation's name (X-Amz-Target without its
	// prefix), Body the request's JSON.
	Operation string
	Body      []byte
}

// Fake is a server of one AWS service's JSON 1.1 protocol (see the package
// documentation). Its methods are safe for concurrent use.
type Fake struct {
	// URL is the endpoint, http://127.0.0.1:PORT.
	URL string

	t       testing.TB
	service string // the signing name, e.g. firehose
	prefix  string // the X-Amz-Target prefix, e.g. Firehose_20150804
	srv     *httptest.Server
	ids     atomic.Int64

	mu       sync.Mutex
	handlers map[string]func(body []byte) (any, error)
	requests []Request
}

// NewFake starts a fake of the service whose signing name is service (as
// in the credential scope: firehose, events, ssm) and whose operations are
// targeted as prefix.Operation (Firehose_20150804, AWSEvents, AmazonSSM);
// t's cleanup stops it. A request that breaks the protocol fails t and is
// answered 400.
func NewFake(t testing.TB, service, prefix string) *Fake {
	f := &Fake{t: t, service: service, prefix: prefix, handlers: map[string]func([]byte) (any, error){}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = f.srv.URL
	t.Cleanup(f.srv.Close)
	return f
}

// Handle makes f answer the operation op with h: the request's body is
// decoded into an In, refusing unknown fields (a request that does not
// decode fails the test), and h returns the output (encoded as JSON) or
// an error (an [*APIError] is answered as such; any other, as a 500
// InternalFailure).
func Handle[In any](f *Fake, op string, h func(in In) (any, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers[op] = func(body []byte) (any, error) {
		var in In
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			f.t.Errorf("awstest: %s.%s: the body does not decode into %T: %v\n%s", f.prefix, op, in, err, body)
			return nil, &APIError{Status: http.StatusBadRequest, Type: "SerializationException", Message: err.Error()}
		}
		return h(in)
	}
}

// Requests returns the requests received and checked so far, in order.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// NextID returns a new identifier for an answer (a record's, an event's).
func (f *Fake) NextID() string { return strconv.FormatInt(f.ids.Add(1), 10) }

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		f.fail(w, "reading the body: %v", err)
		return
	}
	op, problem := f.check(r, body)
	if problem != "" {
		f.fail(w, "%s", problem)
		return
	}
	f.mu.Lock()
	h := f.handlers[op]
	f.requests = append(f.requests, Request{Operation: op, Body: body})
	f.mu.Unlock()
	if h == nil {
		f.t.Errorf("awstest: unexpected operation %s.%s", f.prefix, op)
		writeError(w, &APIError{Status: http.StatusBadRequest, Type: "UnknownOperationException", Message: op})
		return
	}
	out, err := h(body)
	if err != nil {
		writeError(w, err)
		return
	}
	b, err := json.Marshal(out)
	if err != nil {
		f.fail(w, "encoding the answer: %v", err)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Requestid", f.NextID())
	_, _ = w.Write(b)
}

// check checks the request against the protocol and returns the
// operation, or a problem.
func (f *Fake) check(r *http.Request, body []byte) (op, problem string) {
	if r.Method != http.MethodPost || r.URL.Path != "/" {
		return "", fmt.Sprintf("%s %s, want POST /", r.Method, r.URL.Path)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
		return "", fmt.Sprintf("Content-Type %q, want application/x-amz-json-1.1", ct)
	}
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), f.prefix+".")
	if !ok || op == "" {
		return "", fmt.Sprintf("X-Amz-Target %q, want %s.<Operation>", r.Header.Get("X-Amz-Target"), f.prefix)
	}
	if !json.Valid(body) {
		return "", fmt.Sprintf("%s: the body is not JSON: %q", op, body)
	}
	if p := f.checkSignature(r, body); p != "" {
		return "", op + ": " + p
	}
	return op, ""
}

// checkSignature recomputes the request's SigV4 signature, over the
// headers it says it signed, with the test credentials, the service's
// signing name and [Region], and compares it.
func (f *Fake) checkSignature(r *http.Request, body []byte) string {
	auth := r.Header.Get("Authorization")
	fields, ok := parseAuthorization(auth)
	if !ok {
		return fmt.Sprintf("Authorization %q is not AWS4-HMAC-SHA256", auth)
	}
	date := r.Header.Get("X-Amz-Date")
	when, err := time.Parse("20060102T150405Z", date)
	if err != nil {
		return fmt.Sprintf("X-Amz-Date %q: %v", date, err)
	}
	if want := AccessKeyID + "/" + date[:8] + "/" + Region + "/" + f.service + "/aws4_request"; fields["Credential"] != want {
		return fmt.Sprintf("credential scope %q, want %q", fields["Credential"], want)
	}
	re, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	re.ContentLength = -1
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		switch h {
		case "host":
		case "content-length":
			re.ContentLength = int64(len(body))
		default:
			re.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: AccessKeyID, SecretAccessKey: SecretAccessKey}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, re, hex.EncodeToString(sum[:]), f.service, Region, when); err != nil {
		return err.Error()
	}
	if want, _ := parseAuthorization(re.Header.Get("Authorization")); want["Signature"] != fields["Signature"] {
		return fmt.Sprintf("the signature does not match (signed headers %s)", fields["SignedHeaders"])
	}
	return ""
}

// parseAuthorization splits an AWS4-HMAC-SHA256 Authorization header into
// its Credential, SignedHeaders and Signature.
func parseAuthorization(h string) (map[string]string, bool) {
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return nil, false
	}
	fields := map[string]string{}
	for _, kv := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		fields[k] = v
	}
	return fields, fields["Credential"] != "" && fields["SignedHeaders"] != "" && fields["Signature"] != ""
}

// fail fails the test with a protocol problem and answers 400.
func (f *Fake) fail(w http.ResponseWriter, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	f.t.Errorf("awstest: %s: %s", f.prefix, msg)
	writeError(w, &APIError{Status: http.StatusBadRequest, Type: "ValidationException", Message: msg})
}

// writeError answers err as the JSON 1.1 protocol does.
func writeError(w http.ResponseWriter, err error) {
	ae, ok := err.(*APIError)
	if !ok {
		ae = &APIError{Status: http.StatusInternalServerError, Type: "InternalFailure", Message: err.Error()}
	}
	b, _ := json.Marshal(map[string]string{"__type": ae.Type, "message": ae.Message})
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Errortype", ae.Type)
	w.WriteHeader(ae.Status)
	_, _ = w.Write(b)
}

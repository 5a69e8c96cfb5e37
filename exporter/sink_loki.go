package exporter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// LokiConfig configures a loki receiver (kubernetes-event-exporter's keys,
// and timestamp and timeout): each write is one request to Loki's push API
// (/loki/api/v1/push, JSON), one entry per occurrence in one stream.
type LokiConfig struct {
	// URL is the push API's URL ("http://loki:3100/loki/api/v1/push").
	URL string `yaml:"url"`
	// StreamLabels are the labels of the stream (default
	// {job: fanout-eventer}: Loki requires one).
	StreamLabels map[string]string `yaml:"streamLabels"`
	// Headers are added to the requests ("X-Scope-OrgID" for a tenant);
	// values are templates, as a webhook's, executed against each
	// occurrence: a batch is pushed in one request per run of
	// consecutive occurrences with the same headers, so that
	// X-Scope-OrgID: "{{ .Namespace }}" sends each entry to its
	// namespace's tenant.
	Headers map[string]string `yaml:"headers"`
	// TLS configures the connection to an https URL.
	TLS *TLSConfig `yaml:"tls"`
	// Timestamp is the entries' time: event (the default: the
	// occurrence's LastTime, so that what a retry or a restart pushes
	// again is the same entry, which Loki stores once) or now (the push's
	// time in whole seconds, as kubernetes-event-exporter; the default
	// with compat kubernetes-event-exporter).
	Timestamp string `yaml:"timestamp"`
	// Timeout bounds each request (default 10 s).
	Timeout Duration `yaml:"timeout"`
	// Payload is the layout and deDot of the log lines.
	Payload `yaml:",inline"`
	// Encode makes each log line; nil writes the default record
	// ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`

	data recordData // the data of header templates
}

// The values of a loki receiver's timestamp.
const (
	lokiTimestampEvent = "event"
	lokiTimestampNow   = "now"
)

// lokiLabelName is what Loki accepts as a label name (Prometheus's).
var lokiLabelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

func (c *LokiConfig) validate() []string {
	var p []string
	p = appendProblem(p, httpURLProblem("loki.url", c.URL))
	for _, k := range slices.Sorted(maps.Keys(c.StreamLabels)) {
		if !lokiLabelName.MatchString(k) {
			p = append(p, fmt.Sprintf("loki.streamLabels: %q is not a label name Loki accepts ([a-zA-Z_][a-zA-Z0-9_]*)", k))
		}
	}
	if len(c.StreamLabels) == 0 {
		c.StreamLabels = map[string]string{"job": "fanout-eventer"}
	}
	if c.Timestamp == "" {
		c.Timestamp = lokiTimestampEvent
	}
	p = append(p, headerProblems("loki", c.Headers)...)
	if c.Timestamp != lokiTimestampEvent && c.Timestamp != lokiTimestampNow {
		p = append(p, fmt.Sprintf("loki.timestamp %q is unknown (want event or now)", c.Timestamp))
	}
	return append(p, connectionProblems("loki", &c.Timeout, c.TLS)...)
}

// LokiSink pushes occurrences to Loki. 2xx is success; 429, 5xx and
// transport errors are retried. Loki refuses a push with 400 (an entry
// too old, a line too long) after storing the entries it accepted, so a
// push of several entries refused that way is made again entry by entry
// (the stored ones are stored once): the entry refused is [Permanent],
// dropped and counted, and the others are written. An occurrence whose
// headers cannot be sent (a template's value with a newline) is
// [Permanent] too.
type LokiSink struct {
	cfg     LokiConfig
	client  *http.Client
	headers headerSet
	bufs    scratchPool
}

// NewLokiSink returns a Loki sink; it sends nothing until the first write.
func NewLokiSink(cfg LokiConfig) (*LokiSink, error) {
	if p := cfg.validate(); len(p) > 0 {
		return nil, errors.New(p[0])
	}
	tr, err := httpTransport("loki", cfg.TLS)
	if err != nil {
		return nil, err
	}
	return &LokiSink{cfg: cfg, client: &http.Client{Transport: tr, Timeout: time.Duration(cfg.Timeout)},
		headers: newHeaderSet(cfg.Headers)}, nil
}

// lokiPush is the body of a push request.
type lokiPush struct {
	Streams []lokiStream `json:"streams"`
}

// lokiStream is one stream of a push: its labels and its entries, each
// [timestamp in nanoseconds, line].
type lokiStream struct {
	Stream map[string]string `json:"stream"`
	Values [][2]string       `json:"values"`
}

// Write pushes the batch: one request per run of consecutive occurrences
// whose headers (templates executed against each occurrence) are the
// same, in order, so that each entry goes with its own headers (a tenant
// per namespace, say). An occurrence that cannot be encoded ends the
// batch there. It returns how many occurrences, from the start, were
// pushed: a request that fails ends the batch there.
func (s *LokiSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	sc := s.bufs.get() // several writers may push at once
	defer s.bufs.put(sc)
	values, headers, stopErr := s.entries(batch, &sc.head)
	written := 0
	for written < len(values) {
		end := written + 1
		for end < len(values) && slices.Equal(headers[end], headers[written]) {
			end++
		}
		n, err := s.pushRun(ctx, headers[written], values[written:end], &sc.body)
		written += n
		if err != nil {
			return written, err
		}
	}
	return written, stopErr
}

// pushRun pushes values, entries with the same headers, in one request;
// when Loki refuses it for good (400: an entry too old or too long,
// after storing the others), entry by entry. It returns how many, from
// the start, were pushed.
func (s *LokiSink) pushRun(ctx context.Context, headers []header, values [][2]string, buf *bytes.Buffer) (int, error) {
	err := s.push(ctx, headers, values, buf)
	if err == nil {
		return len(values), nil
	}
	if !IsPermanent(err) || len(values) == 1 {
		return 0, err
	}
	for i := range values {
		if err := s.push(ctx, headers, values[i:i+1], buf); err != nil {
			return i, err
		}
	}
	return len(values), nil
}

// entries returns the entries of the longest prefix of batch that encodes
// and whose headers can be sent, and each one's headers; then the
// [Permanent] error of the occurrence that ends the prefix.
func (s *LokiSink) entries(batch []*Occurrence, hbuf *bytes.Buffer) ([][2]string, [][]header, error) {
	headers := make([][]header, 0, len(batch))
	var hdrErr error
	for _, o := range batch {
		h, err := s.headers.render(o, s.cfg.data, hbuf)
		if err != nil {
			hdrErr = fmt.Errorf("loki: %w", err)
			break
		}
		headers = append(headers, h)
	}
	values := make([][2]string, 0, len(headers))
	now := time.Now().Truncate(time.Second) // kubernetes-event-exporter's precision
	_, encErr := encodeEach(batch[:len(headers)], s.cfg.Encode, func(_ int, o *Occurrence, line []byte) {
		t := now
		if s.cfg.Timestamp == lokiTimestampEvent {
			t = occurrenceTime(o)
		}
		values = append(values, [2]string{strconv.FormatInt(t.UnixNano(), 10), string(line)})
	})
	if encErr != nil {
		return values, headers[:len(values)], encErr
	}
	return values, headers, hdrErr
}

// push sends values in one request with headers.
func (s *LokiSink) push(ctx context.Context, headers []header, values [][2]string, buf *bytes.Buffer) error {
	buf.Reset()
	if err := json.NewEncoder(buf).Encode(lokiPush{Streams: []lokiStream{{Stream: s.cfg.StreamLabels, Values: values}}}); err != nil {
		return Permanent(fmt.Errorf("loki: %w", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.URL, bytes.NewReader(buf.Bytes()))
	if err != nil {
		return Permanent(fmt.Errorf("loki: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	setHeaders(req, headers)
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("loki %s: %w", s.cfg.URL, err)
	}
	return statusError("loki "+s.cfg.URL, resp, readAnswer(resp, 512), retryableStatus)
}

// Close closes idle connections.
func (s *LokiSink) Close(context.Context) error {
	s.client.CloseIdleConnections()
	return nil
}

package exporter

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	grpcgzip "google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// OTLPConfig configures an otlp receiver: each write is one OTLP logs
// export request (gRPC, or HTTP with protobuf), one log record per
// occurrence. kubernetes-event-exporter has no such sink.
type OTLPConfig struct {
	// Endpoint is host:port for gRPC (default port 4317), or the URL of
	// the logs path for HTTP ("http://collector:4318/v1/logs"; a URL
	// without a path gets /v1/logs).
	Endpoint string `yaml:"endpoint"`
	// Protocol is grpc (the default) or http/protobuf.
	Protocol string `yaml:"protocol"`
	// Insecure makes a gRPC connection without TLS (an http:// URL is
	// without TLS anyway).
	Insecure bool `yaml:"insecure"`
	// TLS configures the TLS connection.
	TLS *TLSConfig `yaml:"tls"`
	// Headers are added to every request (gRPC metadata or HTTP headers).
	Headers map[string]string `yaml:"headers"`
	// Compression is gzip or none (the default).
	Compression string `yaml:"compression"`
	// Timeout bounds each export (default 10 s).
	Timeout Duration `yaml:"timeout"`
	// Resource are the resource attributes of every record
	// (service.name defaults to fanout-eventer).
	Resource map[string]string `yaml:"resource"`
	// Payload is the layout and deDot of the records' bodies.
	Payload `yaml:",inline"`
	// Encode makes each record's body (a string); nil writes the default
	// record ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`
}

// The protocols of an otlp receiver.
const (
	// OTLPGRPC is OTLP over gRPC.
	OTLPGRPC = "grpc"
	// OTLPHTTP is OTLP over HTTP with protobuf bodies.
	OTLPHTTP = "http/protobuf"
)

func (c *OTLPConfig) validate() []string {
	var p []string
	if c.Protocol == "" {
		c.Protocol = OTLPGRPC
	}
	switch c.Protocol {
	case OTLPGRPC:
		if c.Endpoint == "" || strings.Contains(c.Endpoint, "://") {
			p = append(p, fmt.Sprintf("otlp.endpoint %q: want host:port for grpc", c.Endpoint))
		} else if _, _, err := net.SplitHostPort(c.Endpoint); err != nil {
			// No port: gRPC's resolver would dial 443.
			c.Endpoint = net.JoinHostPort(strings.Trim(c.Endpoint, "[]"), "4317")
		}
	case OTLPHTTP:
		if problem := httpURLProblem("otlp.endpoint", c.Endpoint); problem != "" {
			p = append(p, problem)
		} else if u, _ := url.Parse(c.Endpoint); u.Path == "" || u.Path == "/" {
			c.Endpoint = strings.TrimSuffix(c.Endpoint, "/") + "/v1/logs"
		}
	default:
		p = append(p, fmt.Sprintf("otlp.protocol %q is unknown (want grpc or http/protobuf)", c.Protocol))
	}
	if c.Compression != "" && c.Compression != "gzip" && c.Compression != "none" {
		p = append(p, fmt.Sprintf("otlp.compression %q is unknown (want gzip or none)", c.Compression))
	}
	if c.Insecure && c.TLS != nil {
		p = append(p, "otlp: insecure and tls exclude each other")
	}
	p = append(p, staticHeaderProblems("otlp", c.Headers)...)
	return append(p, connectionProblems("otlp", &c.Timeout, c.TLS)...)
}

// OTLPSink exports occurrences as OTLP log records: the body is the
// record (the Event JSON, or the layout) as a string, the time the
// occurrence's LastTime, the severity WARN for Warning events and INFO
// otherwise, and the attributes those of the OpenTelemetry Collector's
// k8sevents receiver (k8s.event.reason, k8s.object.kind, ...) plus
// fanout.occurrence.key, the occurrence's key, by which a backend can
// discard what a retry or a restart exported twice.
//
// It speaks the protocol itself (the OTLP protobuf messages over gRPC or
// HTTP) rather than through the OpenTelemetry log SDK, whose batching
// processor hides each export's outcome: the receiver needs it to retry,
// drop and count. As the OTLP specification says, gRPC codes
// UNAVAILABLE, RESOURCE_EXHAUSTED, ABORTED, DEADLINE_EXCEEDED, CANCELLED,
// OUT_OF_RANGE and DATA_LOSS, HTTP statuses 429, 502, 503 and 504, and
// transport errors are retried; other failures are [Permanent]. A partial
// success (records the server rejected and says not to retry) counts as
// stored.
type OTLPSink struct {
	cfg      OTLPConfig
	resource *resourcepb.Resource
	conn     *grpc.ClientConn
	grpc     collogspb.LogsServiceClient
	http     *http.Client
	bufs     scratchPool
}

// NewOTLPSink returns an OTLP sink; it connects at the first write.
func NewOTLPSink(cfg OTLPConfig) (*OTLPSink, error) {
	if p := cfg.validate(); len(p) > 0 {
		return nil, errors.New(p[0])
	}
	s := &OTLPSink{cfg: cfg, resource: otlpResource(cfg.Resource)}
	if cfg.Protocol == OTLPHTTP {
		tr, err := httpTransport("otlp", cfg.TLS)
		if err != nil {
			return nil, err
		}
		s.http = &http.Client{Transport: tr}
		return s, nil
	}
	creds := insecure.NewCredentials()
	if !cfg.Insecure {
		tc, err := cfg.TLS.orEmpty().clientTLS("otlp")
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(tc)
	}
	conn, err := grpc.NewClient(cfg.Endpoint, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("otlp: %w", err)
	}
	s.conn, s.grpc = conn, collogspb.NewLogsServiceClient(conn)
	return s, nil
}

// orEmpty returns t, or an empty configuration (the system's roots).
func (t *TLSConfig) orEmpty() *TLSConfig {
	if t == nil {
		return &TLSConfig{}
	}
	return t
}

// otlpResource returns the resource of every record.
func otlpResource(attrs map[string]string) *resourcepb.Resource {
	all := map[string]string{"service.name": "fanout-eventer"}
	maps.Copy(all, attrs)
	r := &resourcepb.Resource{}
	for _, k := range slices.Sorted(maps.Keys(all)) {
		r.Attributes = append(r.Attributes, strAttr(k, all[k]))
	}
	return r
}

func strAttr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: validUTF8(k), Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: validUTF8(v)}}}
}

// validUTF8 returns s with each byte that is not UTF-8 replaced by U+FFFD:
// protobuf strings must be UTF-8, and one that is not fails the marshalling
// of the whole request, every occurrence of the batch with it. An Event
// read as protobuf is not checked for UTF-8 by the API machinery.
func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// Write exports the batch in one request: all of it is stored, or none.
// An occurrence that cannot be encoded ends the batch there.
func (s *OTLPSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	req, batch, encErr := s.request(batch)
	if len(batch) == 0 {
		return 0, encErr
	}
	actx, cancel := context.WithTimeout(ctx, time.Duration(s.cfg.Timeout))
	defer cancel()
	var err error
	if s.grpc != nil {
		err = s.exportGRPC(actx, req)
	} else {
		err = s.exportHTTP(actx, req)
	}
	if halvable(err, batch) {
		return s.Write(ctx, batch[:len(batch)/2])
	}
	if err != nil {
		return 0, err
	}
	return len(batch), encErr
}

// request returns the export request of the longest prefix of batch that
// encodes, and that prefix.
func (s *OTLPSink) request(batch []*Occurrence) (*collogspb.ExportLogsServiceRequest, []*Occurrence, error) {
	scope := &logspb.ScopeLogs{Scope: &commonpb.InstrumentationScope{Name: "github.com/fanout-go/fanout/exporter"}}
	now := uint64(time.Now().UnixNano())
	n, encErr := encodeEach(batch, s.cfg.Encode, func(_ int, o *Occurrence, body []byte) {
		scope.LogRecords = append(scope.LogRecords, logRecord(o, string(body), now))
	})
	req := &collogspb.ExportLogsServiceRequest{ResourceLogs: []*logspb.ResourceLogs{{Resource: s.resource,
		ScopeLogs: []*logspb.ScopeLogs{scope}}}}
	return req, batch[:n], encErr
}

// logRecord returns the log record of o with body, observed at now.
func logRecord(o *Occurrence, body string, now uint64) *logspb.LogRecord {
	sev, sevText := logspb.SeverityNumber_SEVERITY_NUMBER_INFO, cmp.Or(o.Type, "Normal")
	if o.Type == "Warning" {
		sev = logspb.SeverityNumber_SEVERITY_NUMBER_WARN
	}
	r := &logspb.LogRecord{ObservedTimeUnixNano: now, SeverityNumber: sev, SeverityText: sevText,
		Body: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: validUTF8(body)}}}
	if !o.LastTime.IsZero() {
		r.TimeUnixNano = uint64(o.LastTime.UnixNano())
	}
	attrs := [][2]string{{"fanout.occurrence.key", o.Key()}, {"k8s.event.uid", o.UID}, {"k8s.event.name", o.Name},
		{"k8s.namespace.name", o.Namespace}, {"k8s.event.reason", o.Reason}, {"k8s.event.action", o.Action},
		{"k8s.event.count", fmt.Sprint(o.Count)}, {"k8s.object.kind", o.Regarding.Kind},
		{"k8s.object.name", o.Regarding.Name}, {"k8s.object.uid", o.Regarding.UID},
		{"k8s.object.fieldpath", o.Regarding.FieldPath}, {"k8s.object.api_version", o.Regarding.APIVersion}}
	for _, a := range attrs {
		if a[1] != "" {
			r.Attributes = append(r.Attributes, strAttr(a[0], a[1]))
		}
	}
	return r
}

// exportGRPC sends req over gRPC.
func (s *OTLPSink) exportGRPC(ctx context.Context, req *collogspb.ExportLogsServiceRequest) error {
	if len(s.cfg.Headers) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, metadata.New(s.cfg.Headers))
	}
	var opts []grpc.CallOption
	if s.cfg.Compression == "gzip" {
		opts = append(opts, grpc.UseCompressor(grpcgzip.Name))
	}
	_, err := s.grpc.Export(ctx, req, opts...)
	if err == nil {
		return nil
	}
	err = fmt.Errorf("otlp %s: %w", s.cfg.Endpoint, err)
	if status.Code(err) == codes.ResourceExhausted && strings.Contains(err.Error(), "larger than max") {
		return Permanent(fmt.Errorf("%w: %w", err, errTooLarge)) // the server's message size limit
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.DeadlineExceeded, codes.Canceled,
		codes.OutOfRange, codes.DataLoss:
		return err
	}
	return Permanent(err)
}

// exportHTTP posts req as protobuf.
func (s *OTLPSink) exportHTTP(ctx context.Context, req *collogspb.ExportLogsServiceRequest) error {
	body, err := proto.Marshal(req)
	if err != nil {
		return Permanent(fmt.Errorf("otlp: %w", err))
	}
	sc := s.bufs.get() // several writers may export at once
	defer s.bufs.put(sc)
	if s.cfg.Compression == "gzip" {
		zw := gzip.NewWriter(&sc.body)
		_, _ = zw.Write(body) // a bytes.Buffer does not fail
		_ = zw.Close()
	} else {
		sc.body.Write(body)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.Endpoint, bytes.NewReader(sc.body.Bytes()))
	if err != nil {
		return Permanent(fmt.Errorf("otlp: %w", err))
	}
	hreq.Header.Set("Content-Type", "application/x-protobuf")
	if s.cfg.Compression == "gzip" {
		hreq.Header.Set("Content-Encoding", "gzip")
	}
	for k, v := range s.cfg.Headers {
		hreq.Header.Set(k, v)
	}
	resp, err := s.http.Do(hreq)
	if err != nil {
		return fmt.Errorf("otlp %s: %w", s.cfg.Endpoint, err)
	}
	return statusError("otlp "+s.cfg.Endpoint, resp, readAnswer(resp, 512), otlpRetryableStatus)
}

// otlpRetryableStatus reports whether OTLP/HTTP says to retry an export
// answered with code: 429, 502, 503 and 504.
func otlpRetryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusBadGateway ||
		code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// Close closes the connection.
func (s *OTLPSink) Close(context.Context) error {
	if s.conn != nil {
		return s.conn.Close()
	}
	s.http.CloseIdleConnections()
	return nil
}

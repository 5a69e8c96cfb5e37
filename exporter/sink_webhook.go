package exporter

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/template"
	"time"

	"golang.org/x/net/http/httpguts"
)

// WebhookConfig configures a webhook receiver: each write is one HTTP POST
// of JSON, an object for a receiver with batch 1 (as in
// kubernetes-event-exporter) and an array of objects otherwise.
type WebhookConfig struct {
	// Endpoint is the URL posted to.
	Endpoint string `yaml:"endpoint"`
	// Headers are added to every request. A value is a template, as in
	// kubernetes-event-exporter, executed against the [EnhancedEvent] of
	// the request's first occurrence; a value that is not a valid
	// template, or fails, is sent as it is. A header that can never be
	// sent is a configuration error (a name that is not a token, a value
	// that is not a template with CR, LF or NUL); a template whose value
	// for an occurrence has such a character rejects that occurrence
	// ([Permanent]: not retried).
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds each request (default 10 s).
	Timeout Duration `yaml:"timeout"`
	// TLS configures the connection to an https endpoint.
	TLS *TLSConfig `yaml:"tls"`
	// Payload is the layout and deDot of the bodies.
	Payload `yaml:",inline"`
	// Encode makes the JSON of each occurrence; nil writes the default
	// record ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`

	array bool
	data  recordData // the data of header templates
	// check, if set, checks the body of a 2xx response (a preset's
	// service answers some failures with 200).
	check func(body []byte) error
}

// TLSConfig is a webhook's TLS configuration, kubernetes-event-exporter's.
type TLSConfig struct {
	// InsecureSkipVerify accepts any server certificate.
	InsecureSkipVerify Bool `yaml:"insecureSkipVerify"`
	// ServerName is the name the server certificate is checked against,
	// when it is not the endpoint's host.
	ServerName string `yaml:"serverName"`
	// CaFile is a PEM file of the authorities trusted instead of the
	// system's.
	CaFile string `yaml:"caFile"`
	// CertFile and KeyFile are the client certificate and its key (PEM),
	// both or neither.
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
}

func (c *WebhookConfig) validate() []string {
	p := appendProblem(nil, httpURLProblem("webhook.endpoint", c.Endpoint))
	p = append(p, headerProblems("webhook", c.Headers)...)
	return append(p, connectionProblems("webhook", &c.Timeout, c.TLS)...)
}

// headerProblems returns the problems of the headers of sink kind that
// can never be sent: a name that is not an HTTP token, or a value that is
// not a template (or does not parse, so it is sent as it is) with a
// character a header value cannot hold (CR, LF, NUL).
func headerProblems(kind string, h map[string]string) []string {
	return checkHeaders(kind, h, headerTemplates(h))
}

// staticHeaderProblems is headerProblems for the sinks whose headers are
// sent as written, not templates (elasticsearch, opensearch, otlp): a
// request with such a header would fail before it is sent, and be retried
// as if the server were down.
func staticHeaderProblems(kind string, h map[string]string) []string {
	return checkHeaders(kind, h, nil)
}

// checkHeaders checks the names of h, and its values but those tmpls
// holds a template for.
func checkHeaders(kind string, h map[string]string, tmpls map[string]*template.Template) []string {
	var p []string
	for _, k := range slices.Sorted(maps.Keys(h)) {
		if !httpguts.ValidHeaderFieldName(k) {
			p = append(p, fmt.Sprintf("%s.headers: %q is not a valid header name", kind, k))
		}
		if tmpls[k] == nil && !httpguts.ValidHeaderFieldValue(h[k]) {
			p = append(p, fmt.Sprintf("%s.headers: the value of %s, %q, is not a valid header value (no CR, LF or NUL)", kind, k, h[k]))
		}
	}
	return p
}

// warnings returns the TLS configuration's warnings (nil is no TLS
// configuration).
func (t *TLSConfig) warnings() []string {
	if t == nil {
		return nil
	}
	if w := t.InsecureSkipVerify.warning("tls.insecureSkipVerify"); w != "" {
		return []string{w}
	}
	return nil
}

// validate returns the problem of a TLS configuration, naming the key of
// sink kind (nil is no TLS configuration).
func (t *TLSConfig) validate(kind string) []string {
	if t != nil && (t.CertFile == "") != (t.KeyFile == "") {
		return []string{kind + ".tls: certFile and keyFile go together"}
	}
	return nil
}

// clientTLS returns the transport's TLS configuration, reading the files;
// errors name the key of sink kind.
func (t *TLSConfig) clientTLS(kind string) (*tls.Config, error) {
	c := &tls.Config{InsecureSkipVerify: t.InsecureSkipVerify.V, ServerName: t.ServerName} //nolint:gosec // the user's choice
	if t.CaFile != "" {
		pem, err := os.ReadFile(t.CaFile)
		if err != nil {
			return nil, fmt.Errorf("%s.tls.caFile: %w", kind, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.tls.caFile %s: no PEM certificate", kind, t.CaFile)
		}
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s.tls: client certificate: %w", kind, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// headerTemplates parses the header values that are templates; the others
// are sent as they are.
func headerTemplates(h map[string]string) map[string]*template.Template {
	out := map[string]*template.Template{}
	for k, v := range h {
		if !strings.Contains(v, "{{") {
			continue
		}
		if t, err := parseTemplate(v); err == nil {
			out[k] = t
		}
	}
	return out
}

// warnings returns a warning per header value that looks like a template
// and does not parse.
func (c *WebhookConfig) warnings() []string {
	var w []string
	for k, v := range c.Headers {
		if _, ok := headerTemplates(map[string]string{k: v})[k]; !ok && strings.Contains(v, "{{") {
			w = append(w, fmt.Sprintf("webhook header %s: %q is not a valid template; it is sent as it is", k, v))
		}
	}
	slices.Sort(w)
	return w
}

// WebhookSink posts occurrences as JSON. A response 2xx is success; 408,
// 429 and 5xx and transport errors are retried; any other status is
// [Permanent] (the first occurrence of the request is dropped, counted as
// rejected). A single-occurrence request carries the occurrence's key in
// an Idempotency-Key header, so that a receiver can discard what a crash
// made the exporter send twice.
type WebhookSink struct {
	cfg     WebhookConfig
	client  *http.Client
	headers headerSet
	bufs    scratchPool
}

// NewWebhookSink returns a webhook sink; it sends nothing until the first
// write.
func NewWebhookSink(cfg WebhookConfig) (*WebhookSink, error) {
	if p := cfg.validate(); len(p) > 0 {
		return nil, fmt.Errorf("%s", p[0])
	}
	tr, err := httpTransport("webhook", cfg.TLS)
	if err != nil {
		return nil, err
	}
	tr.MaxIdleConnsPerHost = 4
	return &WebhookSink{cfg: cfg, client: &http.Client{Transport: tr, Timeout: time.Duration(cfg.Timeout)},
		headers: newHeaderSet(cfg.Headers)}, nil
}

// Write posts the batch in one request; an occurrence that cannot be
// encoded ends the batch there (the ones before are posted).
// Several writers may call it at once.
func (s *WebhookSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	sc := s.bufs.get()
	defer s.bufs.put(sc)
	return s.write(ctx, batch, sc)
}

func (s *WebhookSink) write(ctx context.Context, batch []*Occurrence, sc *scratch) (int, error) {
	batch, encErr := s.encode(batch, &sc.body)
	if len(batch) == 0 {
		return 0, encErr
	}
	if n, err := s.post(ctx, batch, sc); err != nil {
		if halvable(err, batch) {
			return s.write(ctx, batch[:len(batch)/2], sc)
		}
		return n, err
	}
	return len(batch), encErr
}

// encode writes the body of the longest prefix of batch that encodes, and
// returns that prefix.
func (s *WebhookSink) encode(batch []*Occurrence, buf *bytes.Buffer) ([]*Occurrence, error) {
	buf.Reset()
	array := s.cfg.array || len(batch) > 1
	if array {
		buf.WriteByte('[')
	}
	n, encErr := encodeEach(batch, s.cfg.Encode, func(i int, _ *Occurrence, rec []byte) {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(rec)
	})
	if array {
		buf.WriteByte(']')
	}
	return batch[:n], encErr
}

// post sends the body made by encode for batch.
func (s *WebhookSink) post(ctx context.Context, batch []*Occurrence, sc *scratch) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.Endpoint, bytes.NewReader(sc.body.Bytes()))
	if err != nil {
		return 0, Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if len(batch) == 1 {
		req.Header.Set("Idempotency-Key", batch[0].Key())
	}
	if err := s.setHeaders(req, batch[0], &sc.head); err != nil {
		return 0, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	body := readAnswer(resp, 64<<10)
	if err := statusError("webhook "+s.cfg.Endpoint, resp, body, retryableStatus); err != nil {
		return 0, err
	}
	if s.cfg.check != nil {
		if err := s.cfg.check(body); err != nil {
			return 0, fmt.Errorf("webhook %s: %w", s.cfg.Endpoint, err)
		}
	}
	return len(batch), nil
}

// setHeaders sets the configured headers, templates executed against o;
// the error of a value that cannot be sent is [Permanent].
func (s *WebhookSink) setHeaders(req *http.Request, o *Occurrence, hbuf *bytes.Buffer) error {
	hs, err := s.headers.render(o, s.cfg.data, hbuf)
	if err != nil {
		return fmt.Errorf("webhook %s: %w", s.cfg.Endpoint, err)
	}
	setHeaders(req, hs)
	return nil
}

// header is one header of a request: its name and value.
type header struct{ name, value string }

// headerSet is a sink's configured headers, with the values that are
// templates parsed.
type headerSet struct {
	// static are the headers when no value is a template, sorted by
	// name; names are the names, sorted.
	static []header
	names  []string
	values map[string]string
	tmpls  map[string]*template.Template
}

// newHeaderSet parses the header values that are templates.
func newHeaderSet(h map[string]string) headerSet {
	hs := headerSet{names: slices.Sorted(maps.Keys(h)), values: h, tmpls: headerTemplates(h)}
	if len(hs.tmpls) == 0 {
		for _, k := range hs.names {
			hs.static = append(hs.static, header{k, h[k]})
		}
	}
	return hs
}

// render returns the headers of o's request, sorted by name: templates
// executed against o's record as data makes it (a template that
// fails is sent as it is). Without templates, it returns the same slice
// for every occurrence. A value that is not a valid header value (a
// newline in the event's message, say) can never be sent: the error is
// [Permanent].
func (h headerSet) render(o *Occurrence, d recordData, buf *bytes.Buffer) ([]header, error) {
	if len(h.tmpls) == 0 {
		return h.static, nil
	}
	data := d.of(o)
	out := make([]header, 0, len(h.names))
	for _, k := range h.names {
		v := h.values[k]
		if t := h.tmpls[k]; t != nil {
			buf.Reset()
			if t.Execute(buf, data) == nil {
				v = buf.String()
			}
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return nil, Permanent(fmt.Errorf("occurrence %s: header %s: %q is not a valid header value (CR, LF or NUL)",
				o.Key(), k, v))
		}
		out = append(out, header{k, v})
	}
	return out, nil
}

// setHeaders sets hs on req.
func setHeaders(req *http.Request, hs []header) {
	for _, h := range hs {
		req.Header.Set(h.name, h.value)
	}
}

// Close closes idle connections.
func (s *WebhookSink) Close(context.Context) error {
	s.client.CloseIdleConnections()
	return nil
}

package exporter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// WebhookConfig configures a webhook receiver: each write is one HTTP POST
// of JSON, an object for a receiver with batch 1 (as in
// kubernetes-event-exporter) and an array of objects otherwise.
type WebhookConfig struct {
	// Endpoint is the URL posted to.
	Endpoint string `yaml:"endpoint"`
	// Headers are added to every request.
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds each request (default 10 s).
	Timeout Duration `yaml:"timeout"`
	// Encode makes the JSON of each occurrence; nil writes the default
	// record ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`

	array bool
}

func (c *WebhookConfig) validate() []string {
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return []string{fmt.Sprintf("webhook.endpoint %q is not an http or https URL", c.Endpoint)}
	}
	if c.Timeout == 0 {
		c.Timeout = Duration(10 * time.Second)
	}
	return nil
}

// WebhookSink posts occurrences as JSON. A response 2xx is success; 408,
// 429 and 5xx and transport errors are retried; any other status is
// [Permanent] (the first occurrence of the request is dropped, counted as
// rejected). A single-occurrence request carries the occurrence's key in
// an Idempotency-Key header, so that a receiver can discard what a crash
// made the exporter send twice.
type WebhookSink struct {
	cfg    WebhookConfig
	client *http.Client
	buf    bytes.Buffer
}

// NewWebhookSink returns a webhook sink; it sends nothing until the first
// write.
func NewWebhookSink(cfg WebhookConfig) (*WebhookSink, error) {
	if p := cfg.validate(); len(p) > 0 {
		return nil, fmt.Errorf("%s", p[0])
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	return &WebhookSink{cfg: cfg, client: &http.Client{Transport: tr, Timeout: time.Duration(cfg.Timeout)}}, nil
}

// Write posts the batch in one request; an occurrence that cannot be
// encoded ends the batch there (the ones before are posted).
func (s *WebhookSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	batch, encErr := s.encode(batch)
	if len(batch) == 0 {
		return 0, encErr
	}
	if n, err := s.post(ctx, batch); err != nil {
		return n, err
	}
	return len(batch), encErr
}

// encode writes the body of the longest prefix of batch that encodes, and
// returns that prefix.
func (s *WebhookSink) encode(batch []*Occurrence) ([]*Occurrence, error) {
	s.buf.Reset()
	array := s.cfg.array || len(batch) > 1
	if array {
		s.buf.WriteByte('[')
	}
	enc := s.cfg.Encode.orDefault()
	var encErr error
	for i, o := range batch {
		b, err := enc(o)
		if err != nil {
			batch, encErr = batch[:i], Permanent(fmt.Errorf("occurrence %s: %w", o.Key(), err))
			break
		}
		if i > 0 {
			s.buf.WriteByte(',')
		}
		s.buf.Write(b)
	}
	if array {
		s.buf.WriteByte(']')
	}
	return batch, encErr
}

// post sends the body made by encode for batch.
func (s *WebhookSink) post(ctx context.Context, batch []*Occurrence) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.Endpoint, bytes.NewReader(s.buf.Bytes()))
	if err != nil {
		return 0, Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if len(batch) == 1 {
		req.Header.Set("Idempotency-Key", batch[0].Key())
	}
	for k, v := range s.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return len(batch), nil
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return 0, fmt.Errorf("webhook %s: %s: %s", s.cfg.Endpoint, resp.Status, bytes.TrimSpace(body))
	default:
		return 0, Permanent(fmt.Errorf("webhook %s: %s: %s", s.cfg.Endpoint, resp.Status, bytes.TrimSpace(body)))
	}
}

// Close closes idle connections.
func (s *WebhookSink) Close(context.Context) error {
	s.client.CloseIdleConnections()
	return nil
}

package exporter

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
)

// ElasticsearchConfig configures an elasticsearch or opensearch receiver
// (kubernetes-event-exporter's keys): each write is one request to the
// bulk API (_bulk), one index action per occurrence.
type ElasticsearchConfig struct {
	// Hosts are the nodes' URLs (http or https).
	Hosts []string `yaml:"hosts"`
	// Index is the index written to, unless IndexFormat is set.
	Index string `yaml:"index"`
	// IndexFormat is an index name whose parts in braces are Go time
	// layouts ("kube-events-{2006-01-02}"), formatted with the
	// occurrence's time (LastTime, in UTC), so that a retry writes to the
	// index of the first try.
	IndexFormat string `yaml:"indexFormat"`
	// Username and Password are for HTTP basic authentication.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// CloudID is an Elastic Cloud deployment's ID, instead of Hosts.
	CloudID string `yaml:"cloudID"`
	// APIKey is sent as "Authorization: ApiKey <key>".
	APIKey string `yaml:"apiKey"`
	// Headers are added to every request.
	Headers map[string]string `yaml:"headers"`
	// UseEventID makes the document ID the event's UID, so that the
	// event's document is replaced by each count raise, as in
	// kubernetes-event-exporter. Without it the ID is the occurrence's
	// key, one document per occurrence.
	UseEventID Bool `yaml:"useEventID"`
	// Type is the document type of clusters before Elasticsearch 7.
	Type string `yaml:"type"`
	// TLS configures the connection to https hosts.
	TLS *TLSConfig `yaml:"tls"`
	// Timeout bounds each request (default 10 s).
	Timeout Duration `yaml:"timeout"`
	// Payload is the layout and deDot of the documents.
	Payload `yaml:",inline"`
	// Encode makes each document; nil writes the default record
	// ([EventEncoder] without a cluster name).
	Encode Encoder `yaml:"-"`

	kind string // elasticsearch or opensearch, for messages
	// kee writes as kubernetes-event-exporter does (compat): the index
	// from the write's time (see theirIndexName), and no document ID
	// (the server makes one) unless UseEventID.
	kee bool
}

// indexTimeLayout matches a part in braces of IndexFormat.
var indexTimeLayout = regexp.MustCompile(`\{[^{}]*\}`)

func (c *ElasticsearchConfig) validate() []string {
	if c.kind == "" {
		c.kind = "elasticsearch"
	}
	var p []string
	if len(c.Hosts) == 0 && c.CloudID == "" {
		p = append(p, c.kind+".hosts is required (or cloudID)")
	}
	for _, h := range c.Hosts {
		p = appendProblem(p, httpURLProblem(c.kind+".hosts", h))
	}
	if c.CloudID != "" {
		if _, err := cloudURL(c.CloudID); err != nil {
			p = append(p, fmt.Sprintf("%s.cloudID: %v", c.kind, err))
		}
	}
	if c.Index == "" && c.IndexFormat == "" {
		p = append(p, c.kind+".index or indexFormat is required")
	}
	if c.Index != strings.ToLower(c.Index) {
		p = append(p, fmt.Sprintf("%s.index %q: index names are lowercase (the server refuses others)", c.kind, c.Index))
	}
	if c.IndexFormat != "" && strings.ContainsAny(indexTimeLayout.ReplaceAllString(c.IndexFormat, ""), "{}") {
		p = append(p, fmt.Sprintf("%s.indexFormat %q: unbalanced braces", c.kind, c.IndexFormat))
	}
	p = append(p, staticHeaderProblems(c.kind, c.Headers)...)
	return append(p, connectionProblems(c.kind, &c.Timeout, c.TLS)...)
}

// warnings returns the configuration's warnings.
func (c *ElasticsearchConfig) warnings() []string {
	if w := c.UseEventID.warning("useEventID"); w != "" {
		return []string{w}
	}
	return nil
}

// cloudURL returns the Elasticsearch URL of an Elastic Cloud ID
// ("name:base64(host$es-id$kibana-id)").
func cloudURL(id string) (string, error) {
	_, enc, ok := strings.Cut(id, ":")
	if !ok {
		enc = id
	}
	dec, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("not a cloud ID: %v", err)
	}
	parts := strings.Split(string(dec), "$")
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return "", errors.New("not a cloud ID: want host$id after the name")
	}
	return "https://" + parts[1] + "." + parts[0], nil
}

// indexName returns the index of an occurrence at t.
func (c *ElasticsearchConfig) indexName(t time.Time) string {
	if c.IndexFormat == "" {
		return c.Index
	}
	t = t.UTC()
	return indexTimeLayout.ReplaceAllStringFunc(c.IndexFormat, func(part string) string {
		return t.Format(part[1 : len(part)-1])
	})
}

// ElasticsearchSink indexes occurrences with the bulk API of Elasticsearch
// or OpenSearch, through the OpenSearch client (the bulk protocol is the
// same). Each document's ID is the occurrence's key (or the event's UID
// with useEventID), and the action is index, so that what a retry or a
// restart sends again replaces the document instead of adding one.
//
// A document the server refuses with 429 or 5xx, a request refused with
// 408, 429 or 5xx, and transport errors are retried; any other refusal of
// a document (a mapping error, 400) or of the request is [Permanent]: the
// document is dropped, counted as rejected.
type ElasticsearchSink struct {
	cfg    ElasticsearchConfig
	client *opensearchapi.Client
	bufs   scratchPool
}

// NewElasticsearchSink returns an Elasticsearch or OpenSearch sink; it
// sends nothing until the first write.
func NewElasticsearchSink(cfg ElasticsearchConfig) (*ElasticsearchSink, error) {
	if p := cfg.validate(); len(p) > 0 {
		return nil, errors.New(p[0])
	}
	tr, err := httpTransport(cfg.kind, cfg.TLS)
	if err != nil {
		return nil, err
	}
	hosts := cfg.Hosts
	if cfg.CloudID != "" {
		u, _ := cloudURL(cfg.CloudID) // checked by validate
		hosts = []string{u}
	}
	header := http.Header{}
	for k, v := range cfg.Headers {
		header.Set(k, v)
	}
	if cfg.APIKey != "" {
		header.Set("Authorization", "ApiKey "+cfg.APIKey)
	}
	client, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{
		Addresses: hosts, Username: cfg.Username, Password: cfg.Password, Header: header, Transport: tr,
		// The receiver's retry policy retries, and counts; the client
		// neither retries nor checks the nodes' health in the background.
		DisableRetry: true, HealthCheckMaxRetries: -1, RequestTimeout: time.Duration(cfg.Timeout),
	}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.kind, err)
	}
	return &ElasticsearchSink{cfg: cfg, client: client}, nil
}

// Write indexes the batch in one bulk request and returns how many
// documents, from the start, the server stored before the first it
// refused. An occurrence that cannot be encoded ends the batch there.
// Several writers may call it at once.
func (s *ElasticsearchSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	sc := s.bufs.get()
	defer s.bufs.put(sc)
	return s.write(ctx, batch, &sc.body)
}

func (s *ElasticsearchSink) write(ctx context.Context, batch []*Occurrence, buf *bytes.Buffer) (int, error) {
	batch, encErr := s.encode(batch, buf)
	if len(batch) == 0 {
		return 0, encErr
	}
	resp, err := s.client.Bulk(ctx, opensearchapi.BulkReq{Body: bytes.NewReader(buf.Bytes())})
	switch {
	case err != nil && (resp == nil || len(resp.Items) == 0):
		if err = s.requestError(resp, err); halvable(err, batch) {
			return s.write(ctx, batch[:len(batch)/2], buf)
		}
		return 0, err
	case resp == nil || len(resp.Items) == 0:
		return 0, fmt.Errorf("%s: bulk response without items", s.cfg.kind)
	}
	if len(resp.Items) != len(batch) {
		return 0, fmt.Errorf("%s: bulk response has %d items for %d documents", s.cfg.kind, len(resp.Items), len(batch))
	}
	for i, item := range resp.Items {
		if err := s.itemError(batch[i], item); err != nil {
			return i, err
		}
	}
	return len(batch), encErr
}

// encode writes the bulk body of the longest prefix of batch that encodes,
// and returns that prefix.
func (s *ElasticsearchSink) encode(batch []*Occurrence, buf *bytes.Buffer) ([]*Occurrence, error) {
	buf.Reset()
	type meta struct {
		Index string `json:"_index"`
		ID    string `json:"_id,omitempty"`
		Type  string `json:"_type,omitempty"`
	}
	now := time.Now()
	n, err := encodeEach(batch, s.cfg.Encode, func(_ int, o *Occurrence, doc []byte) {
		m := meta{Index: s.cfg.indexName(occurrenceTime(o)), ID: o.Key(), Type: s.cfg.Type}
		if s.cfg.kee {
			m.Index, m.ID = s.cfg.theirIndexName(now), ""
		}
		if s.cfg.UseEventID.V {
			m.ID = o.UID
		}
		action, _ := json.Marshal(map[string]meta{"index": m}) // strings only: cannot fail
		buf.Write(action)
		buf.WriteByte('\n')
		buf.Write(doc)
		buf.WriteByte('\n')
	})
	return batch[:n], err
}

// occurrenceTime is the time an occurrence is filed under: its LastTime,
// or now for an occurrence without one.
func occurrenceTime(o *Occurrence) time.Time {
	if o.LastTime.IsZero() {
		return time.Now()
	}
	return o.LastTime
}

// itemError returns the error of one bulk item, nil when it is stored.
func (s *ElasticsearchSink) itemError(o *Occurrence, item map[string]opensearchapi.BulkRespItem) error {
	for _, r := range item { // one action per item
		switch {
		case r.Status >= 200 && r.Status < 300:
			return nil
		case r.Error == nil && r.Status == 0:
			return fmt.Errorf("%s: occurrence %s: bulk item without status", s.cfg.kind, o.Key())
		}
		reason := fmt.Sprintf("status %d", r.Status)
		if r.Error != nil {
			reason += ": " + r.Error.Type + ": " + r.Error.Reason
		}
		err := fmt.Errorf("%s: occurrence %s: %s", s.cfg.kind, o.Key(), reason)
		if retryableStatus(r.Status) {
			return err
		}
		return Permanent(err)
	}
	return fmt.Errorf("%s: occurrence %s: empty bulk item", s.cfg.kind, o.Key())
}

// requestError classifies the error of a bulk request as a whole.
func (s *ElasticsearchSink) requestError(resp *opensearchapi.BulkResp, err error) error {
	err = fmt.Errorf("%s: %w", s.cfg.kind, err)
	if resp == nil || resp.Inspect().Response == nil {
		return err // no response: a transport error
	}
	switch code := resp.Inspect().Response.StatusCode; {
	case code == http.StatusRequestEntityTooLarge:
		return Permanent(fmt.Errorf("%w: %w", err, errTooLarge))
	case retryableStatus(code):
		return err
	}
	return Permanent(err)
}

// Close releases the client's connections.
func (s *ElasticsearchSink) Close(context.Context) error {
	return s.client.Close()
}

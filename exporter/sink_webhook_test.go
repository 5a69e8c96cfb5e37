package exporter

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// hook is an httptest webhook that records the keys it accepted and
// answers with status (200 when zero).
type hook struct {
	mu     sync.Mutex
	status int
	keys   []string
	idem   []string
	bodies []string
	srv    *httptest.Server
}

func newHook(t *testing.T) *hook {
	h := &hook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.status != 0 {
			w.WriteHeader(h.status)
			return
		}
		var many []json.RawMessage
		if err := json.Unmarshal(body, &many); err != nil {
			if !json.Valid(body) {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			many = append(many, body)
		}
		for _, b := range many {
			h.keys = append(h.keys, lineKey(b))
		}
		h.bodies = append(h.bodies, string(body))
		h.idem = append(h.idem, r.Header.Get("Idempotency-Key")+"|"+r.Header.Get("X-Team"))
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func TestWebhookPostsObjectsOrArraysWithHeaders(t *testing.T) {
	h := newHook(t)
	single, err := NewWebhookSink(WebhookConfig{Endpoint: h.srv.URL, Headers: map[string]string{"X-Team": "sre"}})
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close(context.Background())
	if n, err := single.Write(context.Background(), []*Occurrence{occ("a", 2, "ns")}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	batched, _ := NewWebhookSink(WebhookConfig{Endpoint: h.srv.URL, array: true})
	defer batched.Close(context.Background())
	if n, err := batched.Write(context.Background(), []*Occurrence{occ("b", 1, "ns"), occ("c", 1, "ns")}); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	if got := h.keys; !sameSet(got, []string{"a/2", "b/1", "c/1"}) {
		t.Errorf("webhook received %v", got)
	}
	if h.idem[0] != "a/2|sre" || h.idem[1] != "|" {
		t.Errorf("headers %v: want the key as Idempotency-Key of a single occurrence, and the configured header", h.idem)
	}
}

// Header templates see the receiver's record: with compat
// kubernetes-event-exporter theirs, which has no fanout object.
func TestWebhookHeaderTemplatesSeeTheirRecordWithTheirStream(t *testing.T) {
	for compat, want := range map[string]string{CompatKEE: "a/1|theirs", CompatFanout: "a/1|ours"} {
		h := newHook(t)
		c := parseOK(t, "compat: "+compat+"\nreceivers:\n  - name: w\n    webhook:\n      endpoint: "+h.srv.URL+
			"\n      headers: {X-Team: \"{{ if .Fanout }}ours{{ else }}theirs{{ end }}\"}\n")
		s := built(c.Receivers[0].build(c.ClusterName))(t)
		if n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")}); n != 1 || err != nil {
			t.Fatal(n, err)
		}
		if !slices.Equal(h.idem, []string{want}) {
			t.Errorf("compat %s: Idempotency-Key|X-Team %q, want %q", compat, h.idem, want)
		}
	}
}

func TestWebhookClassifiesStatusesAsRetryableOrPermanent(t *testing.T) {
	h := newHook(t)
	s, _ := NewWebhookSink(WebhookConfig{Endpoint: h.srv.URL})
	defer s.Close(context.Background())
	for status, permanent := range map[int]bool{500: false, 503: false, 429: false, 408: false, 400: true, 404: true, 413: true} {
		h.mu.Lock()
		h.status = status
		h.mu.Unlock()
		n, err := s.Write(context.Background(), []*Occurrence{occ("a", 1, "ns")})
		if n != 0 || err == nil || IsPermanent(err) != permanent {
			t.Errorf("status %d: n %d, err %v; want permanent=%v", status, n, err, permanent)
		}
	}
}

func TestWebhookTimeoutIsARetryableError(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	s, _ := NewWebhookSink(WebhookConfig{Endpoint: srv.URL, Timeout: Duration(50 * time.Millisecond)})
	defer s.Close(context.Background())
	n, err := s.Write(context.Background(), []*Occurrence{occ("a", 1, "ns")})
	if n != 0 || err == nil || IsPermanent(err) {
		t.Errorf("n %d, err %v; want a retryable time-out", n, err)
	}
}

func TestWebhookUnreachableIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	s, _ := NewWebhookSink(WebhookConfig{Endpoint: url})
	n, err := s.Write(context.Background(), []*Occurrence{occ("a", 1, "ns")})
	if n != 0 || err == nil || IsPermanent(err) {
		t.Errorf("n %d, err %v; want a retryable connection error", n, err)
	}
}

// A header template whose value for an occurrence cannot be sent (a
// message with a newline, common in probe failures) rejects that
// occurrence: retrying would stall the sink on a request that can never
// be sent.
func TestWebhookHeaderTemplateWithNewlineRejectsTheOccurrence(t *testing.T) {
	h := newHook(t)
	s := built(NewWebhookSink(WebhookConfig{Endpoint: h.srv.URL,
		Headers: map[string]string{"X-Message": "{{ .Message }}"}}))(t)
	o := occ("a", 1, "ns")
	o.Message = "Readiness probe failed: line one\nline two"
	n, err := s.Write(t.Context(), []*Occurrence{o})
	wantFailure(t, "newline in a header", n, err, true)
	if n, err := s.Write(t.Context(), []*Occurrence{occ("b", 1, "ns")}); n != 1 || err != nil {
		t.Errorf("next occurrence: %d, %v", n, err)
	}
}

// A header that can never be sent, whatever the occurrence, is a
// configuration error with the receiver's line.
func TestWebhookHeaderThatCannotBeSentIsAConfigError(t *testing.T) {
	wantConfigErrors(t, map[string]string{
		"webhook: {endpoint: 'http://h', headers: {'X Team': sre}}":       `line 2: receiver "r": webhook.headers: "X Team" is not a valid header name`,
		"webhook: {endpoint: 'http://h', headers: {X-Team: \"a\\nb\"}}":   `webhook.headers: the value of X-Team, "a\nb", is not a valid header value`,
		"teams: {endpoint: 'http://h', headers: {'X:Team': sre}}":         `"X:Team" is not a valid header name`,
		"loki: {url: 'http://l', headers: {X-Scope-OrgID: \"a\\u0000\"}}": `loki.headers: the value of X-Scope-OrgID`,
	})
}

// The headers of the sinks that send them as written (Elasticsearch,
// OpenSearch, OTLP) are checked too: such a request failed before it was
// sent, and was retried as if the server were down.
func TestStaticHeaderThatCannotBeSentIsAConfigError(t *testing.T) {
	wantConfigErrors(t, map[string]string{
		"elasticsearch: {hosts: ['http://e'], index: ev, headers: {'X Team': sre}}": `elasticsearch.headers: "X Team" is not a valid header name`,
		"opensearch: {hosts: ['http://e'], index: ev, headers: {A: \"a\\nb\"}}":     `opensearch.headers: the value of A, "a\nb", is not a valid header value`,
		"otlp: {endpoint: 'otel:4317', headers: {authorization: \"x\\ry\"}}":        `otlp.headers: the value of authorization`,
		"otlp: {endpoint: 'otel:4317', headers: {'{{bad}}': x}}":                    `otlp.headers: "{{bad}}" is not a valid header name`,
	})
}

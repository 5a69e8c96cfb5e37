package exporter

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// The OTLP sink's tests against the OpenTelemetry Collector's receiver are
// in the module internal/otlptest; these need no collector.

func TestOTLPConfigErrorsNameTheKey(t *testing.T) {
	for cfg, want := range map[string]string{
		"otlp: {endpoint: 'http://c:4317'}": `otlp.endpoint "http://c:4317": want host:port for grpc`,
		"otlp: {}":                          `otlp.endpoint "": want host:port`,
		"otlp: {endpoint: 'c:4318', protocol: http/protobuf}": `otlp.endpoint "c:4318" is not an http or https URL`,
		"otlp: {endpoint: 'c:4317', protocol: http/json}":     `otlp.protocol "http/json" is unknown`,
		"otlp: {endpoint: 'c:4317', compression: zstd}":       `otlp.compression "zstd" is unknown`,
		"otlp: {endpoint: 'c:4317', insecure: true, tls: {}}": "otlp: insecure and tls exclude each other",
		"otlp: {endpoint: 'c:4317', tls: {keyFile: k}}":       "otlp.tls: certFile and keyFile go together",
	} {
		_, err := ParseConfig("c.yaml", []byte("receivers:\n  - name: o\n    "+cfg+"\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", cfg, err, want)
		}
	}
}

func TestOTLPHTTPEndpointWithoutAPathGetsTheLogsPath(t *testing.T) {
	c := parseOK(t, "receivers:\n  - name: o\n    otlp: {endpoint: 'http://c:4318', protocol: http/protobuf}\n")
	if got := c.Receivers[0].OTLP.Endpoint; got != "http://c:4318/v1/logs" {
		t.Errorf("endpoint %s", got)
	}
}

func TestOTLPUnreachableIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close()
	for _, cfg := range []OTLPConfig{{Endpoint: addr, Insecure: true}, {Endpoint: "http://" + addr, Protocol: OTLPHTTP}} {
		s, err := NewOTLPSink(cfg)
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
		if n != 0 || err == nil || IsPermanent(err) {
			t.Errorf("%s: n %d, err %v; want a retryable error", cfg.Protocol, n, err)
		}
		_ = s.Close(t.Context())
	}
}

func TestOTLPHTTPStatusesAreRetryableOrPermanentAsTheSpecificationSays(t *testing.T) {
	var status atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	s, err := NewOTLPSink(OTLPConfig{Endpoint: srv.URL, Protocol: OTLPHTTP})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	for code, permanent := range map[int]bool{429: false, 502: false, 503: false, 504: false, 400: true, 401: true, 500: true} {
		status.Store(int64(code))
		n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
		if n != 0 || err == nil || IsPermanent(err) != permanent {
			t.Errorf("status %d: n %d, err %v; want permanent=%v", code, n, err, permanent)
		}
	}
}

package exporter

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"
)

// The OTLP sink's tests against the OpenTelemetry Collector's receiver are
// in the module internal/otlptest; these need no collector.

func TestOTLPConfigErrorsNameTheKey(t *testing.T) {
	wantConfigErrors(t, map[string]string{
		"otlp: {endpoint: 'http://c:4317'}": `otlp.endpoint "http://c:4317": want host:port for grpc`,
		"otlp: {}":                          `otlp.endpoint "": want host:port`,
		"otlp: {endpoint: 'c:4318', protocol: http/protobuf}": `otlp.endpoint "c:4318" is not an http or https URL`,
		"otlp: {endpoint: 'c:4317', protocol: http/json}":     `otlp.protocol "http/json" is unknown`,
		"otlp: {endpoint: 'c:4317', compression: zstd}":       `otlp.compression "zstd" is unknown`,
		"otlp: {endpoint: 'c:4317', insecure: true, tls: {}}": "otlp: insecure and tls exclude each other",
		"otlp: {endpoint: 'c:4317', tls: {keyFile: k}}":       "otlp.tls: certFile and keyFile go together",
	})
}

func TestOTLPHTTPEndpointWithoutAPathGetsTheLogsPath(t *testing.T) {
	c := parseOK(t, "receivers:\n  - name: o\n    otlp: {endpoint: 'http://c:4318', protocol: http/protobuf}\n")
	if got := c.Receivers[0].OTLP.Endpoint; got != "http://c:4318/v1/logs" {
		t.Errorf("endpoint %s", got)
	}
}

func TestOTLPUnreachableIsRetryable(t *testing.T) {
	addr := deadAddr()
	for _, cfg := range []OTLPConfig{{Endpoint: addr, Insecure: true}, {Endpoint: "http://" + addr, Protocol: OTLPHTTP}} {
		n, err := built(NewOTLPSink(cfg))(t).Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
		wantFailure(t, cfg.Protocol, n, err, false)
	}
}

func TestOTLPHTTPBatchTooLargeForTheServerIsWrittenInHalves(t *testing.T) {
	var largest atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if len(body) > 3000 {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		largest.Store(max(largest.Load(), int64(len(body))))
	}))
	defer srv.Close()
	s := built(NewOTLPSink(OTLPConfig{Endpoint: srv.URL, Protocol: OTLPHTTP}))(t)
	var batch []*Occurrence
	for i := range 8 {
		batch = append(batch, occ(fmt.Sprint("u", i), 1, "ns")) // about 700 bytes each
	}
	if n, err := s.Write(t.Context(), batch); n == 0 || n == len(batch) || err != nil {
		t.Errorf("n %d, err %v; want a part of the batch stored", n, err)
	}
	if largest.Load() == 0 {
		t.Error("nothing accepted")
	}
}

func TestOTLPHTTPStatusesAreRetryableOrPermanentAsTheSpecificationSays(t *testing.T) {
	var status atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	s := built(NewOTLPSink(OTLPConfig{Endpoint: srv.URL, Protocol: OTLPHTTP}))(t)
	wantStatusClasses(t, s, func(code int) { status.Store(int64(code)) },
		map[int]bool{429: false, 502: false, 503: false, 504: false, 400: true, 401: true, 500: true})
}

// A gRPC endpoint without a port gets the documented 4317; gRPC's resolver
// dialled 443, and the writes failed, retryable, for ever.
func TestOTLPGRPCEndpointWithoutAPortGetsPort4317(t *testing.T) {
	for endpoint, want := range map[string]string{"collector": "collector:4317", "collector:4319": "collector:4319",
		"10.0.0.1": "10.0.0.1:4317", "[::1]": "[::1]:4317", "[::1]:99": "[::1]:99"} {
		c := parseOK(t, fmt.Sprintf("receivers:\n  - name: o\n    otlp: {endpoint: '%s'}\n", endpoint))
		if got := c.Receivers[0].OTLP.Endpoint; got != want {
			t.Errorf("endpoint %s: %s, want %s", endpoint, got, want)
		}
	}
}

// A string of an occurrence that is not UTF-8 (an Event read as protobuf
// is not checked) is exported with U+FFFD for each invalid byte. It made
// the marshalling of the whole request fail, a permanent error with none
// stored: the runner then dropped the valid occurrences before it, one
// by one.
func TestOTLPStringsThatAreNotUTF8AreExportedValid(t *testing.T) {
	var got atomic.Pointer[collogspb.ExportLogsServiceRequest]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collogspb.ExportLogsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		got.Store(&req)
	}))
	defer srv.Close()
	bad := occ("bad", 1, "ns")
	bad.Reason = "Back\xffOff"
	s := built(NewOTLPSink(OTLPConfig{Endpoint: srv.URL, Protocol: OTLPHTTP}))(t)
	if n, err := s.Write(t.Context(), []*Occurrence{occ("good", 1, "ns"), bad}); n != 2 || err != nil {
		t.Fatalf("n %d, err %v; want both stored", n, err)
	}
	var reasons []string
	for _, r := range got.Load().ResourceLogs[0].ScopeLogs[0].LogRecords {
		for _, a := range r.Attributes {
			if a.Key == "k8s.event.reason" {
				reasons = append(reasons, a.Value.GetStringValue())
			}
		}
	}
	if want := []string{"Test", "Back\uFFFDOff"}; !slices.Equal(reasons, want) {
		t.Errorf("reasons %q, want %q", reasons, want)
	}
}

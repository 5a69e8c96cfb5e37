package otlptest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// collector is the OpenTelemetry Collector's OTLP receiver, listening on
// gRPC and HTTP, handing the logs to a consumer that records them, or
// fails with fail's error while fail is set.
type collector struct {
	grpcAddr, httpURL string

	mu      sync.Mutex
	logs    []plog.LogRecord
	res     []map[string]any
	fail    error
	failFor int // when > 0, how many more requests fail
}

// freeAddr returns a local address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startCollector starts the receiver, its configuration changed by
// configure.
func startCollector(t *testing.T, configure ...func(*otlpreceiver.Config)) *collector {
	t.Helper()
	c := &collector{grpcAddr: freeAddr(t)}
	httpAddr := freeAddr(t)
	c.httpURL = "http://" + httpAddr
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = c.grpcAddr
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = httpAddr
	for _, f := range configure {
		f(cfg)
	}
	next, err := consumer.NewLogs(c.consume)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.CreateLogs(t.Context(), receivertest.NewNopSettings(f.Type()), cfg, next)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return c
}

func (c *collector) consume(_ context.Context, ld plog.Logs) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail != nil {
		if c.failFor == 0 {
			return c.fail
		}
		c.failFor--
		if c.failFor == 0 {
			defer func() { c.fail = nil }()
		}
		return c.fail
	}
	for _, rl := range ld.ResourceLogs().All() {
		for _, sl := range rl.ScopeLogs().All() {
			for _, lr := range sl.LogRecords().All() {
				c.logs = append(c.logs, lr)
				c.res = append(c.res, rl.Resource().Attributes().AsRaw())
			}
		}
	}
	return nil
}

func (c *collector) failWith(err error, times int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail, c.failFor = err, times
}

func (c *collector) records() ([]plog.LogRecord, []map[string]any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]plog.LogRecord(nil), c.logs...), append([]map[string]any(nil), c.res...)
}

// occ returns occurrence uid/count of type typ about pod web.
func occ(uid string, count int32, typ string) *exporter.Occurrence {
	return &exporter.Occurrence{UID: uid, Count: count, APIVersion: exporter.CoreV1, Namespace: "prod", Name: uid,
		Type: typ, Reason: "BackOff", Message: "restarting", ReportingController: "kubelet",
		Regarding: exporter.ObjectRef{Kind: "Pod", Namespace: "prod", Name: "web", UID: "pod-uid"},
		FirstTime: time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC), LastTime: time.Date(2026, 11, 27, 6, 0, int(count), 0, time.UTC)}
}

func newSink(t *testing.T, cfg exporter.OTLPConfig) *exporter.OTLPSink {
	t.Helper()
	s, err := exporter.NewOTLPSink(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// protocols are the sink configurations of both protocols for c.
func protocols(c *collector) map[string]exporter.OTLPConfig {
	return map[string]exporter.OTLPConfig{
		"grpc":      {Endpoint: c.grpcAddr, Insecure: true, Compression: "gzip"},
		"http":      {Endpoint: c.httpURL, Protocol: exporter.OTLPHTTP},
		"http+gzip": {Endpoint: c.httpURL + "/v1/logs", Protocol: exporter.OTLPHTTP, Compression: "gzip"},
	}
}

func TestOTLPExportsEachOccurrenceAsALogRecordOverGRPCAndHTTP(t *testing.T) {
	for _, name := range []string{"grpc", "http", "http+gzip"} {
		t.Run(name, func(t *testing.T) {
			c := startCollector(t)
			cfg := protocols(c)[name]
			cfg.Resource = map[string]string{"k8s.cluster.name": "prod-eu"}
			s := newSink(t, cfg)
			batch := []*exporter.Occurrence{occ("e1", 1, "Normal"), occ("e1", 2, "Warning")}
			if n, err := s.Write(t.Context(), batch); n != 2 || err != nil {
				t.Fatal(n, err)
			}
			logs, res := c.records()
			if len(logs) != 2 {
				t.Fatalf("%d records, want 2", len(logs))
			}
			checkRecord(t, logs[1], res[1], batch[1])
			if logs[0].SeverityNumber() != plog.SeverityNumberInfo {
				t.Errorf("Normal event severity %v, want INFO", logs[0].SeverityNumber())
			}
		})
	}
}

// checkRecord checks the log record of o.
func checkRecord(t *testing.T, lr plog.LogRecord, res map[string]any, o *exporter.Occurrence) {
	t.Helper()
	var body struct {
		Reason         string
		Count          int32
		InvolvedObject struct{ Name string }
	}
	if err := json.Unmarshal([]byte(lr.Body().Str()), &body); err != nil || body.Reason != "BackOff" ||
		body.Count != o.Count || body.InvolvedObject.Name != "web" {
		t.Errorf("body %q: %v", lr.Body().Str(), err)
	}
	attrs := lr.Attributes().AsRaw()
	for k, want := range map[string]any{"fanout.occurrence.key": o.Key(), "k8s.event.reason": "BackOff",
		"k8s.object.kind": "Pod", "k8s.object.name": "web", "k8s.namespace.name": "prod", "k8s.event.count": fmt.Sprint(o.Count)} {
		if attrs[k] != want {
			t.Errorf("attribute %s = %v, want %v", k, attrs[k], want)
		}
	}
	if lr.SeverityNumber() != plog.SeverityNumberWarn || lr.SeverityText() != "Warning" ||
		!lr.Timestamp().AsTime().Equal(o.LastTime) {
		t.Errorf("severity %v %q, time %v", lr.SeverityNumber(), lr.SeverityText(), lr.Timestamp())
	}
	if res["service.name"] != "fanout-eventer" || res["k8s.cluster.name"] != "prod-eu" {
		t.Errorf("resource %v", res)
	}
}

func TestOTLPCollectorRefusalsAreRetryableOrPermanentAsItSays(t *testing.T) {
	c := startCollector(t)
	for name, cfg := range protocols(c) {
		s := newSink(t, cfg)
		for _, tc := range []struct {
			err       error
			permanent bool
		}{{errors.New("pipeline full"), false}, {consumererror.NewPermanent(errors.New("bad data")), true}} {
			c.failWith(tc.err, 0)
			n, err := s.Write(t.Context(), []*exporter.Occurrence{occ("e1", 1, "Normal")})
			if n != 0 || err == nil || exporter.IsPermanent(err) != tc.permanent {
				t.Errorf("%s, consumer error %v: n %d, err %v; want permanent=%v", name, tc.err, n, err, tc.permanent)
			}
		}
		c.failWith(nil, 0)
	}
}

func TestOTLPReceiverRetriesUntilTheCollectorAcceptsAndDropsNothing(t *testing.T) {
	c := startCollector(t)
	c.failWith(errors.New("pipeline full"), 3)
	var batch []*exporter.Occurrence
	for i := range 10 {
		batch = append(batch, occ(fmt.Sprint("e", i), 1, "Warning"))
	}
	st := runPipeline(t, `
    queue: {strategy: Wait}
    retry: {initialBackoff: 1ms, maxBackoff: 1ms}
    otlp:
      endpoint: `+c.grpcAddr+`
      insecure: true
      layout: {reason: "{{ .Reason }}", object: "{{ .InvolvedObject.Name }}"}
`, batch)
	logs, _ := c.records()
	if len(logs) != 10 || st.Sent != 10 || st.Retries == 0 {
		t.Errorf("%d records, stats %+v; want 10 records sent after retries", len(logs), st)
	}
	if len(logs) > 0 && logs[0].Body().Str() != `{"object":"web","reason":"BackOff"}` {
		t.Errorf("layout body %q", logs[0].Body().Str())
	}
}

func TestOTLPBatchOverTheCollectorsMessageLimitIsWrittenInHalves(t *testing.T) {
	c := startCollector(t, func(cfg *otlpreceiver.Config) { cfg.Protocols.GRPC.Get().MaxRecvMsgSizeMiB = 1 })
	var batch []*exporter.Occurrence
	for i := range 8 {
		o := occ(fmt.Sprint("e", i), 1, "Normal")
		o.Message = strings.Repeat("x", 300<<10) // 8 records: 2.4 MiB, over the receiver's 1 MiB
		batch = append(batch, o)
	}
	s := newSink(t, exporter.OTLPConfig{Endpoint: c.grpcAddr, Insecure: true})
	if n, err := s.Write(t.Context(), batch); n == 0 || n > 3 || err != nil {
		t.Errorf("one write: n %d, err %v; want the 1 to 3 records that fit in 1 MiB", n, err)
	}
	st := runPipeline(t, `
    batch: 8
    queue: {strategy: Wait}
    otlp: {endpoint: "`+c.grpcAddr+`", insecure: true}
`, batch)
	if logs, _ := c.records(); len(logs) < 8 || st.Sent != 8 {
		t.Errorf("%d records, stats %+v; want all 8 sent by the receiver, in smaller exports", len(logs), st)
	}
}

// runPipeline runs the occurrences through a pipeline whose one receiver,
// otel, is configured by receiver (YAML lines after its name), and
// returns the receiver's counters after the shutdown.
func runPipeline(t *testing.T, receiver string, occs []*exporter.Occurrence) exporter.SinkStats {
	t.Helper()
	cfg, err := exporter.ParseConfig("c.yaml", []byte("route: {match: [{receiver: otel}]}\nreceivers:\n  - name: otel"+receiver))
	if err != nil {
		t.Fatal(err)
	}
	p, err := exporter.NewPipeline(cfg, exporter.PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range occs {
		if err := p.Occurred(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	return p.Stats()[0]
}

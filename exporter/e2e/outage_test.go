//go:build e2e

package e2e

import (
	"github.com/fanout-go/fanout/k8s/apiservertest"

	"context"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter"
)

const (
	outage       = 30 * time.Second
	outageEvents = 1000
)

// countingSink signals once it has stored target occurrences
// (outageEvents if target is 0).
type countingSink struct {
	exporter.Sink
	target int
	mu     sync.Mutex
	n      int
	done   chan struct{}
}

func (s *countingSink) Write(ctx context.Context, batch []*exporter.Occurrence) (int, error) {
	n, err := s.Sink.Write(ctx, batch)
	s.mu.Lock()
	defer s.mu.Unlock()
	target := s.target
	if target == 0 {
		target = outageEvents
	}
	if s.n < target && s.n+n >= target {
		close(s.done)
	}
	s.n += n
	return n, err
}

func outageConfig(t *testing.T, ns, dir, hookURL, strategy string, queue int) (*exporter.Config, *countingSink) {
	t.Helper()
	cfg := parse(t, fmt.Sprintf(`
namespace: %s
shutdownTimeout: 2s
maxEventAgeSeconds: 3600 # no checkpoint: keep what a slow start lists
route:
  match: [{receiver: file}, {receiver: hook}]
receivers:
  - name: file
    stdout: {}
    queue: {length: 100, strategy: Wait}
  - name: hook
    webhook: {endpoint: %s, timeout: 2s}
    batch: 10
    queue: {length: %d, strategy: %s}
    retry: {maxTries: 0, initialBackoff: 100ms, maxBackoff: 1s}
`, ns, hookURL, queue, strategy))
	fs, err := exporter.NewFileSink(exporter.FileConfig{Path: filepath.Join(dir, "events.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	file := &countingSink{Sink: fs, done: make(chan struct{})}
	cfg.Receivers[0].Stdout, cfg.Receivers[0].Sink = nil, file
	return cfg, file
}

func TestWebhookDownFor30Seconds(t *testing.T) {
	_, client := cluster(t)
	t.Run("Wait delivers everything after it recovers", func(t *testing.T) {
		t.Parallel()
		ns := apiservertest.Namespace(t, client, "outage-wait")
		hook := newWebhook(t, nil)
		hook.setDown(true)
		cfg, file := outageConfig(t, ns, t.TempDir(), hook.URL, "Wait", 100)
		l := listen(t)
		stop := runExporter(t, exporter.Options{Config: cfg, Client: client, Listener: l})
		up := time.AfterFunc(outage, func() { hook.setDown(false) })
		defer up.Stop()
		want, err := createEvents(t.Context(), client, ns, 0, outageEvents, 4, 0)
		if err != nil {
			t.Fatal(err)
		}
		hook.set.setWant(want)
		hook.set.wait(t, "webhook", outage+2*time.Minute)
		<-file.done
		if retries := metric(t, l, `fanout_eventer_sink_retries_total{sink="hook"}`); retries == 0 {
			t.Error("no retries counted during the outage")
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		hook.set.check(t, "webhook", false)
	})
	t.Run("DropOldest does not slow the file sink and counts its drops", func(t *testing.T) {
		t.Parallel()
		ns := apiservertest.Namespace(t, client, "outage-drop")
		hook := newWebhook(t, nil)
		hook.setDown(true)
		downSince := time.Now()
		cfg, file := outageConfig(t, ns, t.TempDir(), hook.URL, "DropOldest", 50)
		l := listen(t)
		stop := runExporter(t, exporter.Options{Config: cfg, Client: client, Listener: l})
		want, err := createEvents(t.Context(), client, ns, 0, outageEvents, 4, 0)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-file.done:
			t.Logf("the file sink stored all %d occurrences %v into the webhook's outage", outageEvents, time.Since(downSince).Round(time.Millisecond))
		case <-time.After(outage - time.Since(downSince)):
			t.Fatalf("the file sink did not get all %d occurrences while the webhook was down", outageEvents)
		}
		// The webhook keeps its queue (50) and what its writers hold
		// (DefaultWriters batches of 10, at least a queue's worth),
		// give or take a batch; the rest is dropped oldest first.
		kept := 50 + max(50, exporter.DefaultWriters*10) + 10
		drops := metric(t, l, `fanout_eventer_sink_dropped_total{reason="queue_oldest",sink="hook"}`)
		if drops < float64(outageEvents-kept) {
			t.Errorf("webhook queue_oldest drops = %v, want at least %d", drops, outageEvents-kept)
		}
		hook.setDown(false)
		last := hook.set.reach(1)
		<-last // the newest occurrences are never the ones dropped
		if err := stop(); err != nil {
			t.Logf("stop: %v", err)
		}
		if sent := metricsOf(t, hook, want); sent == 0 {
			t.Error("nothing reached the webhook after it recovered")
		}
	})
}

// metricsOf returns how many wanted occurrences the webhook received.
func metricsOf(t *testing.T, hook *webhook, want map[string]bool) int {
	t.Helper()
	hook.set.mu.Lock()
	defer hook.set.mu.Unlock()
	n := 0
	for k := range hook.set.keys {
		if want[k] {
			n++
		}
	}
	return n
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// metric returns the value of one sample of /metrics.
func metric(t *testing.T, l net.Listener, sample string) float64 {
	t.Helper()
	body := httpGet(t, "http://"+l.Addr().String()+"/metrics")
	m := regexp.MustCompile(regexp.QuoteMeta(sample) + ` (\S+)`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no %s", sample)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

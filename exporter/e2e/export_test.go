//go:build e2e

package e2e

import (
	"github.com/fanout-go/fanout/k8s/apiservertest"

	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter"
)

// 6,000 events, every third raised twice (one update each): 10,000
// occurrences.
const (
	burstEvents  = 6000
	repeatEvery  = 3
	burstWorkers = 8
)

func TestTenThousandOccurrencesReachFileWebhookAndNATSExactlyOnce(t *testing.T) {
	_, client := cluster(t)
	ns := apiservertest.Namespace(t, client, "burst")
	dir := t.TempDir()
	natsURL := natsServer(t)
	hook := newWebhook(t, nil) // the wanted set is known once the events exist
	cfg := parse(t, fmt.Sprintf(`
namespace: %s
checkpoint: {file: %s, interval: 500ms}
route:
  match:
    - receiver: file
    - receiver: hook
    - receiver: nats
receivers:
  - name: file
    file: {path: %s, maxsize: 1, maxbackups: 1000}
    queue: {length: 1000, strategy: Wait}
  - name: hook
    webhook: {endpoint: %s}
    batch: 100
    queue: {length: 1000, strategy: Wait}
  - name: nats
    nats: {url: %q, subject: events.k8s}
    queue: {length: 1000, strategy: Wait}
`, ns, filepath.Join(dir, "ck.json"), filepath.Join(dir, "events.jsonl"), hook.URL, natsURL))
	l := listen(t)
	stop := runExporter(t, exporter.Options{Config: cfg, Client: client, Listener: l})
	// The first list forwards each event's count at the time: an event
	// created and raised before it would be forwarded at its last count
	// only. Occurrences are made once the exporter is ready.
	waitReady(t, l.Addr().String())

	start := time.Now()
	want, err := createEvents(t.Context(), client, ns, 0, burstEvents, burstWorkers, repeatEvery)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 10_000 {
		t.Fatalf("made %d occurrences, want 10,000", len(want))
	}
	t.Logf("10,000 occurrences made through the API in %v", time.Since(start).Round(time.Millisecond))
	hook.set.setWant(want)
	hook.set.wait(t, "webhook", 3*time.Minute)
	if err := stop(); err != nil { // flushes the file and NATS sinks
		t.Fatal(err)
	}
	t.Logf("all delivered %v after the first event was created", time.Since(start).Round(time.Millisecond))
	hook.set.check(t, "webhook", false)
	fileKeys(t, filepath.Join(dir, "events.jsonl"), want).check(t, "file", false)
	streamKeys(t, natsURL, want).check(t, "nats", false)
}

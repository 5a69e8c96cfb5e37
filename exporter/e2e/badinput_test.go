//go:build e2e

package e2e

import (
	"github.com/fanout-go/fanout/k8s/apiservertest"

	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// oddMessages are event messages an exporter must carry without failing.
var oddMessages = []string{
	strings.Repeat("huge message ", 700<<10/13), // ~700 KB: over NATS's 256 KiB here
	"invalid UTF-8: \xff\xfe\xc3\x28 end",
	"emoji 🚀, RTL \u202eevil\u202c, NUL \x00, controls \x01\x1b[31m",
	"",
	`{"looks":"like json","uid":"forged","count":99}`,
	"line one\nline two\r\nline three",
}

func TestOddEventsAndUnreachableSinksAreCountedNeverFatal(t *testing.T) {
	cfg, _ := cluster(t)
	cfg.ContentType = runtime.ContentTypeProtobuf // raw bytes, not JSON-escaped, reach the server
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := apiservertest.Namespace(t, client, "odd")
	natsURL := natsServer(t)
	hook := newWebhook(t, nil)
	config := parse(t, fmt.Sprintf(`
namespace: %s
shutdownTimeout: 1s
maxEventAgeSeconds: 3600 # no checkpoint: keep what a slow start lists
route:
  match: [{receiver: file}, {receiver: hook}, {receiver: nats}, {receiver: deadhook}, {receiver: deadnats}]
receivers:
  - name: file
    stdout: {}
  - name: hook
    webhook: {endpoint: %s}
    queue: {strategy: Wait}
  - name: nats
    nats: {url: %q, subject: events.k8s}
  - name: deadhook
    webhook: {endpoint: "http://127.0.0.1:1/nothing-listens", timeout: 1s}
    queue: {length: 2, strategy: DropOldest}
    retry: {maxTries: 0, initialBackoff: 10ms, maxBackoff: 50ms}
  - name: deadnats
    nats: {url: "nats://127.0.0.1:1", subject: events.k8s, timeout: 200ms}
    queue: {length: 2, strategy: DropOldest}
    retry: {maxTries: 2, initialBackoff: 10ms, maxBackoff: 50ms}
`, ns, hook.URL, natsURL))
	dir := t.TempDir()
	fs, err := exporter.NewFileSink(exporter.FileConfig{Path: filepath.Join(dir, "events.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	file := &countingSink{Sink: fs, target: len(oddMessages), done: make(chan struct{})}
	config.Receivers[0].Stdout, config.Receivers[0].Sink = nil, file
	l := listen(t)
	stop := runExporter(t, exporter.Options{Config: config, Client: client, Listener: l})

	want := map[string]bool{}
	for i, msg := range oddMessages {
		e := event(ns, i, msg)
		e.Reason = "Odd\xffReason"
		e.InvolvedObject.Name = "pod-\u00e9"
		created, err := client.CoreV1().Events(ns).Create(t.Context(), e, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating event %d: %v", i, err)
		}
		want[exporter.Key(string(created.UID), 1)] = true
	}
	select {
	case <-file.done:
	case <-time.After(time.Minute):
		t.Fatal("the file sink did not store every odd event")
	}
	hook.set.setWant(want)
	hook.set.wait(t, "webhook", time.Minute)
	if n := metric(t, l, `fanout_eventer_sink_dropped_total{reason="rejected",sink="nats"}`); n != 1 {
		t.Errorf("nats rejected %v occurrences, want 1: the one over its maximum payload", n)
	}
	if n := metric(t, l, `fanout_eventer_sink_retries_total{sink="deadhook"}`); n == 0 {
		t.Error("no retries counted for the unreachable webhook")
	}
	if n := metric(t, l, `fanout_eventer_sink_dropped_total{reason="retries_exhausted",sink="deadnats"}`); n == 0 {
		t.Error("no retries_exhausted counted for the unreachable NATS server")
	}
	_ = stop() // the dead sinks make the flush miss its deadline; it must return
	keys := fileKeys(t, filepath.Join(dir, "events.jsonl"), want)
	keys.check(t, "file", false)
	got := streamKeys(t, natsURL, nil)
	if len(got.keys) != len(want)-1 {
		t.Errorf("the stream holds %d occurrences, want all but the oversized one (%d)", len(got.keys), len(want)-1)
	}
}

//go:build e2e

package exporter

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter/internal/vlogstest"
	corev1 "k8s.io/api/core/v1"
)

// These tests push to a real server of Loki's push API: VictoriaLogs,
// built and run by internal/vlogstest (Grafana Loki is AGPL and cannot be
// used here), and read back what it stored with LogsQL. What VictoriaLogs
// does not share with Loki (an identical entry stored once, a push refused
// with 400 after the other entries were stored) is tested against fakeLoki
// in sink_loki_test.go.

func TestLokiServerStoresEachRecordInTheStreamAtTheOccurrencesLastTime(t *testing.T) {
	srv := vlogstest.Start(t)
	s := newLokiSink(t, LokiConfig{URL: srv.PushURL(), StreamLabels: map[string]string{"app": "kube-events", "env": "prod"}})
	batch := []*Occurrence{dated("a", 1, 26), dated("b", 1, 27), dated("a", 2, 27)}
	batch[1].LastTime = batch[1].LastTime.Add(123456789) // nanoseconds are kept
	batch[2].LastTime = batch[2].LastTime.Add(time.Second)
	if n, err := s.Write(t.Context(), batch); n != 3 || err != nil {
		t.Fatal(n, err)
	}
	got := queryLoki(t, srv, "")
	if len(got) != len(batch) {
		t.Fatalf("found %d entries, want %d: %v", len(got), len(batch), got)
	}
	for i, o := range batch {
		line, _ := EventEncoder("")(o)
		want := vlogstest.Entry{"_msg": string(line), "_stream": `{app="kube-events",env="prod"}`, "app": "kube-events", "env": "prod"}
		wantEntry(t, got[i], want, o.LastTime)
	}
}

// The server is killed with SIGKILL while the receiver runs, connected to
// it, and occurrences keep coming while it is down; it comes back on the
// same port with the same data. What it acknowledged before the kill is
// made durable first (Persist): VictoriaLogs writes acknowledged entries
// to disk only every 5 s, so a kill with acknowledged entries in memory
// loses them, which is not the sink's doing and would make the count
// below fail at random. Hence the kill comes when the first 20 are
// acknowledged and persisted, and nothing is in flight.
//
// The check is that each of the 40 occurrences is found exactly once and
// that nothing else is found: with nothing in flight at the kill, no push
// can have its answer cut off, so a second copy (VictoriaLogs, unlike
// Loki, stores an identical entry again) would be the sink pushing again
// what was acknowledged.
func TestLokiWaitReceiverLosesNothingWhenTheServerIsKilledMidStream(t *testing.T) {
	srv := vlogstest.Start(t)
	p, err := NewPipeline(parseOK(t, `route: {match: [{receiver: loki}]}
receivers:
  - name: loki
    queue: {length: 64, strategy: Wait}
    batch: 4
    retry: {maxTries: 0, initialBackoff: 5ms, maxBackoff: 50ms}
    loki: {url: `+srv.PushURL()+`}
`), PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdownWithin(p, 5*time.Second) })
	want := map[string]bool{}
	feed := func(prefix string) {
		for i := range 20 {
			o := dated(fmt.Sprint(prefix, i), 1, 27)
			o.LastTime = o.LastTime.Add(time.Duration(len(want)) * time.Millisecond)
			line, _ := EventEncoder("")(o)
			want[string(line)] = true
			if err := p.Occurred(t.Context(), o); err != nil {
				t.Fatal(err)
			}
		}
	}
	feed("before-")
	eventually(t, "the first 20 to be sent", func() bool { return p.Stats()[0].Sent == 20 })
	if err := srv.Persist(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	feed("during-")
	eventually(t, "a write to the killed server to fail", func() bool {
		st := p.Stats()[0]
		return st.Retries > 0 || dropped(st) > 0
	})
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats()[0]; st.Sent != 40 || dropped(st) != 0 {
		t.Errorf("sent %d, dropped %v; want 40 sent, none dropped", st.Sent, st.Dropped)
	}
	wantEachLineOnce(t, queryLoki(t, srv, ""), want)
}

// wantEachLineOnce checks that every line of want is among the entries
// once, and that every entry is a line of want.
func wantEachLineOnce(t *testing.T, entries []vlogstest.Entry, want map[string]bool) {
	t.Helper()
	found := map[string]int{}
	for _, e := range entries {
		if !want[e["_msg"]] {
			t.Errorf("found a line never written: %q", e["_msg"])
		}
		found[e["_msg"]]++
	}
	for line := range want {
		switch found[line] {
		case 0:
			t.Errorf("lost: %s", line)
		case 1:
		default:
			t.Errorf("stored %d times: %s", found[line], line)
		}
	}
}

// A configuration written for kubernetes-event-exporter (its route and its
// loki receiver's keys, as in testdata/kubernetes-event-exporter/
// 23-loki.yaml, with a layout and ${VAR} expanded) runs through the
// pipeline into the server. The tenant is "12:34" rather than 23-loki's
// "tennantID": VictoriaLogs's tenants are AccountID:ProjectID, and it
// refuses the push of any other X-Scope-OrgID with 400.
func TestLokiReceiverConfiguredAsTheirsExportsItsLayoutToTheTenant(t *testing.T) {
	srv := vlogstest.Start(t)
	t.Setenv("LOKI_URL", srv.PushURL())
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(`route:
  routes:
    - drop:
        - type: "Normal"
      match:
        - receiver: "loki"
receivers:
  - name: "loki"
    loki:
      headers:
        X-Scope-OrgID: "12:34"
      streamLabels:
        foo: bar
      url: ${LOKI_URL}
      layout:
        reason: "{{ .Reason }}"
        object: "{{ .InvolvedObject.Kind }}/{{ .InvolvedObject.Namespace }}/{{ .InvolvedObject.Name }}"
        message: "{{ .Message }}"
        firstSeen: "{{ .GetTimestampISO8601 }}"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPipeline(c, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdownWithin(p, 5*time.Second) })
	for _, e := range theirLokiEvents() {
		if err := p.Occurred(t.Context(), FromCore(e)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantTheirLokiEntries(t, srv)
}

// theirLokiEvents are two Warning events, the second last seen a minute
// after it was first seen, and between them a Normal one that the route
// drops.
func theirLokiEvents() []*corev1.Event {
	normal, second := backOffEvent(), backOffEvent()
	normal.UID, normal.Type, normal.Reason, normal.Message = "e-2", "Normal", "Pulled", "Container image pulled"
	second.UID, second.InvolvedObject.Name = "e-3", "web-2"
	second.LastTimestamp.Time = second.LastTimestamp.Add(time.Minute)
	return []*corev1.Event{backOffEvent(), normal, second}
}

func wantTheirLokiEntries(t *testing.T, srv *vlogstest.Server) {
	t.Helper()
	got := queryLoki(t, srv, "12:34")
	want := []string{
		`{"firstSeen":"2026-11-27T06:00:00.000Z","message":"Back-off restarting failed container","object":"Pod/shop/web-1","reason":"BackOff"}`,
		`{"firstSeen":"2026-11-27T06:00:00.000Z","message":"Back-off restarting failed container","object":"Pod/shop/web-2","reason":"BackOff"}`,
	}
	if len(got) != len(want) {
		t.Fatalf("found %v in tenant 12:34, want the two Warning events", got)
	}
	for i, line := range want { // at the last timestamp: 06:00, then 06:01
		wantEntry(t, got[i], vlogstest.Entry{"_msg": line, "_stream": `{foo="bar"}`, "foo": "bar"},
			recordTime.Add(time.Duration(i)*time.Minute))
	}
	if other := queryLoki(t, srv, ""); len(other) != 0 {
		t.Errorf("found %v in the default tenant, want nothing", other)
	}
}

// queryLoki returns every entry of the tenant, sorted by time.
func queryLoki(t *testing.T, srv *vlogstest.Server, tenant string) []vlogstest.Entry {
	t.Helper()
	entries, err := srv.Query(t.Context(), tenant, "* | sort by (_time)")
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// wantEntry checks the fields of want in got, and that got's time is at.
func wantEntry(t *testing.T, got, want vlogstest.Entry, at time.Time) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s:\n got %s\nwant %s", k, got[k], v)
		}
	}
	if ts, err := time.Parse(time.RFC3339Nano, got["_time"]); err != nil || !ts.Equal(at) {
		t.Errorf("_time %s (%v), want %s", got["_time"], err, at.Format(time.RFC3339Nano))
	}
	if !json.Valid([]byte(got["_msg"])) {
		t.Errorf("line %q is not JSON", got["_msg"])
	}
}

// shutdownWithin shuts p down (if a test has not) without waiting longer
// than d for a sink that cannot write.
func shutdownWithin(p *Pipeline, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = p.Shutdown(ctx)
}

// eventually polls cond until it holds, failing t after a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

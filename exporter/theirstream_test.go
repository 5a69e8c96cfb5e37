package exporter

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fanout-go/fanout/exporter/internal/kee"
)

const keeCompat = "compat: " + CompatKEE + "\n"

func TestCompatValuesAreCheckedAndFormatFanoutIsRefusedWithTheirs(t *testing.T) {
	for yaml, want := range map[string]string{
		"compat: kee\nreceivers: [{name: a, stdout: {}}]\n":                         `compat "kee" is unknown (want fanout or kubernetes-event-exporter)`,
		"receivers:\n  - name: a\n    compat: x\n    stdout: {}\n":                  `line 2: receiver "a": compat "x" is unknown`,
		keeCompat + "receivers:\n  - name: a\n    format: fanout\n    stdout: {}\n": `line 3: receiver "a": format fanout is not kubernetes-event-exporter's record`,
	} {
		_, err := ParseConfig("c.yaml", []byte(yaml))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", yaml, err, want)
		}
	}
	c := parseOK(t, keeCompat+"receivers:\n  - name: a\n    compat: fanout\n    format: fanout\n    stdout: {}\n  - name: b\n    stdout: {}\n")
	if c.Receivers[0].kee || !c.Receivers[1].kee {
		t.Errorf("kee: a %v (its own compat: fanout), b %v (the global)", c.Receivers[0].kee, c.Receivers[1].kee)
	}
}

func TestTheirRecordIsTheEventWithoutTheFanoutObject(t *testing.T) {
	c := parseOK(t, "clusterName: prod\nreceivers:\n  - name: a\n    compat: "+CompatKEE+"\n    stdout: {}\n")
	rec, err := c.Receivers[0].encoder(c.ClusterName)(FromCore(backOffEvent()))
	if err != nil || string(rec) != theirRecord {
		t.Errorf("record %s (%v)\nwant %s", rec, err, theirRecord)
	}
}

func TestTheirLayoutWritesNullForAValueThatIsNotAStringWithAWarning(t *testing.T) {
	const yaml = keeCompat + "receivers:\n  - name: a\n    stdout:\n      layout: {n: 3, ok: true, m: \"{{ .Message }}\"}\n"
	out, _, err := writeWith(t, yaml, occ("a", 1, "ns"))
	if want := `{"m":"message of a","n":null,"ok":null}`; err != nil || strings.TrimSpace(out) != want {
		t.Errorf("rendered %s (%v), want %s", out, err, want)
	}
	wantWarnings(t, parseOK(t, yaml), "line 5: layout value 3 is written as null", "line 5: layout value true is written as null")
}

// theirPipeline returns a pipeline of the configuration with memSinks
// named as its receivers, and the sinks.
func theirPipeline(t *testing.T, yaml string) (*Pipeline, map[string]*memSink) {
	t.Helper()
	c := parseOK(t, yaml)
	sinks := map[string]*memSink{}
	for _, r := range c.Receivers {
		sinks[r.Name] = &memSink{}
		r.Stdout, r.Sink = nil, sinks[r.Name]
	}
	p, err := NewPipeline(c, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p, sinks
}

func TestTheirStreamTakesAnEventsFirstOccurrenceOnly(t *testing.T) {
	p, sinks := theirPipeline(t, `route: {match: [{receiver: theirs}, {receiver: ours}]}
receivers:
  - {name: theirs, compat: kubernetes-event-exporter, stdout: {}}
  - {name: ours, stdout: {}}
`)
	raise := occ("a", 2, "ns")
	raise.raise = true
	publish(t, p, occ("a", 1, "ns"), raise, occ("b", 4, "ns"))
	if got := sinks["theirs"].stored(); !slices.Equal(got, []string{"a/1", "b/4"}) {
		t.Errorf("their stream got %v, want the first occurrences a/1 and b/4", got)
	}
	if got := sinks["ours"].stored(); !slices.Equal(got, []string{"a/1", "a/2", "b/4"}) {
		t.Errorf("our stream got %v, want every occurrence", got)
	}
	if st := p.PipelineStats(); st.RoutedNowhere != 0 || st.DroppedByRule != 0 {
		t.Errorf("stats %+v: a raise is neither unmatched nor dropped", st)
	}
}

func TestReceiverNamedByTwoMatchingRulesGetsItTwiceWithTheirStream(t *testing.T) {
	p, sinks := theirPipeline(t, `route:
  match: [{receiver: theirs}, {receiver: ours}, {type: Normal, receiver: theirs}, {receiver: ours}]
  routes:
    - match: [{receiver: theirs}]
receivers:
  - {name: theirs, compat: kubernetes-event-exporter, stdout: {}}
  - {name: ours, stdout: {}}
`)
	publish(t, p, occ("a", 1, "ns"))
	if got := sinks["theirs"].stored(); !slices.Equal(got, []string{"a/1", "a/1", "a/1"}) {
		t.Errorf("their stream got %v, want a/1 once per matching rule: 3 times", got)
	}
	if got := sinks["ours"].stored(); !slices.Equal(got, []string{"a/1"}) {
		t.Errorf("our stream got %v, want a/1 once", got)
	}
}

// sourcedEvent returns an Event reported by component on host, with
// reportingComponent and count as given.
func sourcedEvent(uid, component, host, reporting string, count int32) *Occurrence {
	return FromCore(&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: uid, UID: types.UID(uid)},
		Source: corev1.EventSource{Component: component, Host: host}, ReportingController: reporting, Count: count,
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p"}, Type: "Normal", Reason: "Test"})
}

func TestTheirRoutingMatchesTheSourceComponentAndHostAndTheCountAsItIs(t *testing.T) {
	const route = `route:
  match:
    - {component: "^kubelet$", receiver: component}
    - {host: "^node-1$", receiver: host}
    - {minCount: 1, receiver: count}
receivers: [{name: component, stdout: {}}, {name: host, stdout: {}}, {name: count, stdout: {}}]
`
	events := []*Occurrence{
		sourcedEvent("source", "kubelet", "node-1", "", 1),
		sourcedEvent("reporting", "", "", "kubelet", 0), // written through events.k8s.io
		sourcedEvent("both", "kubelet", "", "other", 2),
	}
	events[1].ReportingInstance = "node-1"
	for compat, want := range map[string]map[string][]string{
		"": {"component": {"source/1", "reporting/1"}, "host": {"source/1", "reporting/1"},
			"count": {"source/1", "reporting/1", "both/2"}},
		keeCompat: {"component": {"source/1", "both/2"}, "host": {"source/1"}, "count": {"source/1", "both/2"}},
	} {
		c := parseOK(t, compat+route)
		got := map[string][]string{}
		for _, o := range events {
			set, _ := c.Route.receivers(o)
			for i, r := range c.Receivers {
				if set&(1<<i) != 0 {
					got[r.Name] = append(got[r.Name], o.Key())
				}
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("compat %q: routed %v, want %v", compat, got, want)
		}
	}
}

func TestTheirWebhookPostsAnEventNamedTwiceInTwoRequests(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	c := parseOK(t, keeCompat+"route: {match: [{receiver: hook}, {receiver: hook}]}\n"+
		"receivers: [{name: hook, webhook: {endpoint: \""+srv.URL+"\"}}]\n")
	p, err := NewPipeline(c, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, p, FromCore(backOffEvent()))
	mu.Lock()
	defer mu.Unlock()
	want := strings.Replace(theirRecord, `"clusterName":"prod"`, `"clusterName":""`, 1)
	if len(bodies) != 2 || bodies[0] != want || bodies[1] != want {
		t.Errorf("posted %q\nwant the record twice, one request each: %s", bodies, want)
	}
}

func TestTheirElasticsearchIndexIsFromTheWriteTimeAndTheServerMakesTheID(t *testing.T) {
	b := newBulkServer(t)
	cfg := ElasticsearchConfig{Hosts: []string{b.srv.URL}, IndexFormat: "ev-{2006}.{01}", kee: true}
	s := newESSink(t, cfg)
	before := time.Now()
	if n, err := s.Write(t.Context(), []*Occurrence{dated("a", 1, 3), dated("a", 1, 3)}); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	// Their pattern part is greedy: "2006}.{01" is formatted as one.
	want := []string{"ev-" + before.Format("2006}.{01") + "/auto-1", "ev-" + before.Format("2006}.{01") + "/auto-2"}
	if got := b.stored(); !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v: two documents, IDs the server's, in the index of the write's time", got, want)
	}
	cfg.UseEventID.V = true
	s = newESSink(t, cfg)
	if n, err := s.Write(t.Context(), []*Occurrence{dated("b", 2, 3)}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if got := b.stored(); !slices.Contains(got, "ev-"+before.Format("2006}.{01")+"/b") {
		t.Errorf("stored %v, want b under the event's UID", got)
	}
}

func TestTheirLokiTimestampIsThePushTimeAndTheirKafkaKeyTheEventUID(t *testing.T) {
	c := parseOK(t, keeCompat+`receivers:
  - {name: l, loki: {url: "http://loki/loki/api/v1/push"}}
  - {name: k, kafka: {brokers: ["localhost:9092"], topic: t}}
  - {name: mine, loki: {url: "http://loki/loki/api/v1/push", timestamp: event}}
`)
	if got := c.Receivers[0].Loki.Timestamp; got != lokiTimestampNow {
		t.Errorf("their loki timestamp %q, want now", got)
	}
	if got := c.Receivers[1].Kafka.Key; got != KafkaKeyEvent {
		t.Errorf("their kafka key %q, want event", got)
	}
	if got := c.Receivers[2].Loki.Timestamp; got != lokiTimestampEvent {
		t.Errorf("a loki timestamp set alongside compat became %q, want event", got)
	}
}

func TestSlackTextIsEscapedAndTheAttachmentIsNot(t *testing.T) {
	for _, compat := range []string{"", keeCompat} {
		c := parseOK(t, compat+"receivers: [{name: s, slack: {token: x, channel: c, fields: {m: \"{{ .Message }}\"}}}]\n")
		o := occ("a", 1, "ns")
		o.Message = "<!channel> a & b <https://x|y>"
		rec, err := c.Receivers[0].Slack.encoder("", c.Receivers[0].kee)(o)
		if err != nil {
			t.Fatal(err)
		}
		var msg struct {
			Text        string
			Attachments []struct{ Fields []struct{ Value string } }
		}
		if err := json.Unmarshal(rec, &msg); err != nil {
			t.Fatal(err)
		}
		if msg.Text != "&lt;!channel&gt; a &amp; b &lt;https://x|y&gt;" || msg.Attachments[0].Fields[0].Value != o.Message {
			t.Errorf("compat %q: text %q, field %q", compat, msg.Text, msg.Attachments[0].Fields[0].Value)
		}
	}
}

// The replay below hands the same events, on one (fake) API server, to
// kubernetes-event-exporter v1.6.1's own code (its watcher, route engine,
// records, templates and the Send of its stdout, webhook, loki,
// elasticsearch and slack sinks, copied in internal/kee) and to this
// exporter with compat: kubernetes-event-exporter, each writing to
// servers of its own, and compares what the servers received.

// replayRoute is the route of both exporters: a drop rule, receivers
// named twice (hook, by the component and the host rules) and minCount.
const replayRoute = `route:
  drop:
    - namespace: "^kube-system$"
  match:
    - receiver: dump
    - receiver: layout
    - receiver: es
    - receiver: loki
  routes:
    - match:
        - component: "^kubelet$"
          receiver: hook
        - host: "^node-1$"
          receiver: hook
    - match:
        - minCount: 1
          receiver: slack
`

const replayLayout = `{msg: "{{ .Message }}", obj: {kind: "{{ .InvolvedObject.Kind }}", name: "{{ .InvolvedObject.Name }}"}, ` +
	`n: 3, at: "{{ .GetTimestampISO8601 }}", labels: "{{ toJson .InvolvedObject.Labels }}"}`

// replayed is what one exporter wrote, by receiver, in order.
type replayed map[string][]string

// capture is a server that keeps what each request posted, as add makes
// it a string.
type capture struct {
	mu  sync.Mutex
	got []string
	srv *httptest.Server
}

func newCapture(t *testing.T, add func(r *http.Request, body []byte) string, answer string) *capture {
	c := &capture{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.got = append(c.got, add(r, body))
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *capture) posted() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// slackMessage returns a chat.postMessage request's channel, text and
// attachments as one JSON object, whether it was posted as a form (their
// Slack client) or as JSON (ours); attachment keys with empty values are
// left out, as Slack reads them.
func slackMessage(r *http.Request, body []byte) string {
	msg := map[string]any{}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		form, _ := url.ParseQuery(string(body))
		var att any
		_ = json.Unmarshal([]byte(form.Get("attachments")), &att)
		msg = map[string]any{"channel": form.Get("channel"), "text": form.Get("text"), "attachments": att}
	} else {
		_ = json.Unmarshal(body, &msg)
	}
	atts, _ := msg["attachments"].([]any)
	for _, a := range atts {
		if m, ok := a.(map[string]any); ok {
			maps.DeleteFunc(m, func(_ string, v any) bool { return v == nil || reflect.ValueOf(v).IsZero() || v == "" })
		}
	}
	out, _ := json.Marshal(map[string]any{"channel": msg["channel"], "text": msg["text"], "attachments": msg["attachments"]})
	return string(out)
}

// lokiLines returns the lines of a push, each checked to carry a time in
// whole seconds between from and now.
func lokiLines(t *testing.T, from time.Time) func(*http.Request, []byte) string {
	return func(_ *http.Request, body []byte) string {
		streams, err := parsePush(body)
		if err != nil || len(streams) != 1 {
			return "bad push: " + string(body)
		}
		var lines []string
		for _, v := range streams[0].values {
			if v.ts.Nanosecond() != 0 || v.ts.Before(from.Truncate(time.Second)) || v.ts.After(time.Now()) {
				t.Errorf("loki entry at %v: not the push time in whole seconds", v.ts)
			}
			lines = append(lines, streams[0].labels+" "+v.line)
		}
		return strings.Join(lines, "\n")
	}
}

// replayServers are the servers one exporter writes to.
type replayServers struct {
	hook, loki, slack *capture
}

func newReplayServers(t *testing.T, from time.Time) replayServers {
	return replayServers{
		hook:  newCapture(t, func(_ *http.Request, b []byte) string { return string(b) }, `{}`),
		loki:  newCapture(t, lokiLines(t, from), ``),
		slack: newCapture(t, slackMessage, `{"ok":true,"channel":"C1","ts":"1.2"}`),
	}
}

// theirReplay runs kubernetes-event-exporter's code on cs until stop is
// closed; the returned function waits for it and returns what it wrote.
func theirReplay(t *testing.T, cs kubernetes.Interface, srv replayServers, stop chan struct{}) (
	dump *syncBuffer, done func() replayed) {
	var route struct{ Route kee.Route }
	var layout map[string]any
	if yaml.Unmarshal([]byte(replayRoute), &route) != nil || yaml.Unmarshal([]byte(replayLayout), &layout) != nil {
		t.Fatal("replay route or layout")
	}
	dump, laid := &syncBuffer{}, &syncBuffer{}
	var es []string
	reg := theirSinks(t, srv, layout, dump, laid, &es)
	engine := &kee.Engine{Route: route.Route, Registry: reg}
	w := kee.NewEventWatcher(cs, "", 3600, kee.WithClusterName("prod", engine.OnEvent))
	ran := make(chan struct{})
	go func() { w.Run(stop); close(ran) }()
	return dump, func() replayed {
		<-ran
		reg.Close()
		if len(reg.Errors) > 0 {
			t.Errorf("their sinks failed: %v", reg.Errors)
		}
		return replayed{"dump": lines(dump.String()), "layout": lines(laid.String()), "es": es,
			"hook": srv.hook.posted(), "loki": entries(srv.loki.posted()), "slack": srv.slack.posted()}
	}
}

// theirSinks returns their registry of the replay's receivers: stdout
// sinks writing to dump and laid (with layout), their Elasticsearch
// sink's requests kept in es, and the others writing to srv.
func theirSinks(t *testing.T, srv replayServers, layout map[string]any, dump, laid *syncBuffer, es *[]string) *kee.SyncRegistry {
	reg := &kee.SyncRegistry{}
	sinks := map[string]func() (kee.Sink, error){
		"dump":   func() (kee.Sink, error) { return kee.NewStdoutSink(&kee.StdoutConfig{}, dump) },
		"layout": func() (kee.Sink, error) { return kee.NewStdoutSink(&kee.StdoutConfig{Layout: layout}, laid) },
		"hook":   func() (kee.Sink, error) { return kee.NewWebhook(&kee.WebhookConfig{Endpoint: srv.hook.srv.URL}) },
		"loki": func() (kee.Sink, error) {
			return kee.NewLoki(&kee.LokiConfig{URL: srv.loki.srv.URL + "/loki/api/v1/push", StreamLabels: map[string]string{"app": "events"}})
		},
		"es": func() (kee.Sink, error) {
			return kee.NewElasticsearch(&kee.ElasticsearchConfig{IndexFormat: "kube-events-{2006-01-02}"},
				func(_ context.Context, r kee.IndexRequest) error {
					body, _ := io.ReadAll(r.Body)
					*es = append(*es, r.Index+" id="+r.DocumentID+" "+string(body))
					return nil
				})
		},
		"slack": func() (kee.Sink, error) {
			return kee.NewSlackSink(&kee.SlackConfig{Token: "x", Channel: "#{{ .Namespace }}", Message: "{{ .Message }}",
				Title: "{{ .Reason }}", Fields: map[string]string{"reason": "{{ .Reason }}", "count": "{{ .Count }}"}},
				slack.OptionAPIURL(srv.slack.srv.URL+"/api/"))
		},
	}
	for name, newSink := range sinks {
		s, err := newSink()
		if err != nil {
			t.Fatal(err)
		}
		reg.Register(name, s)
	}
	return reg
}

func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

// entries returns the Loki entries of pushes of one or more entries each
// (theirs pushes one per event, ours a batch).
func entries(pushes []string) []string { return lines(strings.Join(pushes, "\n")) }

// ourReplay runs this exporter with compat on cs until ctx ends; the
// returned function waits for it, shuts the pipeline down and returns what
// it wrote.
func ourReplay(t *testing.T, ctx context.Context, cs kubernetes.Interface, srv replayServers) (dumpFile string, src *Source, done func() replayed) {
	dir := t.TempDir()
	es := newBulkServer(t)
	c := parseOK(t, keeCompat+"omitLookup: true\nmaxEventAgeSeconds: 3600\nclusterName: prod\n"+replayRoute+`receivers:
  - {name: dump, file: {path: `+filepath.Join(dir, "dump")+`}}
  - {name: layout, file: {path: `+filepath.Join(dir, "layout")+`, layout: `+replayLayout+`}}
  - {name: es, elasticsearch: {hosts: [`+es.srv.URL+`], indexFormat: "kube-events-{2006-01-02}"}}
  - {name: loki, loki: {url: `+srv.loki.srv.URL+`/loki/api/v1/push, streamLabels: {app: events}}}
  - {name: hook, webhook: {endpoint: `+srv.hook.srv.URL+`}}
  - name: slack
    slack: {endpoint: `+srv.slack.srv.URL+`/api/chat.postMessage, token: x, channel: "#{{ .Namespace }}",
      message: "{{ .Message }}", title: "{{ .Reason }}", fields: {reason: "{{ .Reason }}", count: "{{ .Count }}"}}
`)
	p, err := NewPipeline(c, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src, err = NewSource(cs, CoreV1, "", p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan struct{})
	go func() { src.Run(ctx); close(ran) }()
	return filepath.Join(dir, "dump"), src, func() replayed {
		<-ran
		if err := p.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
		read := func(name string) []string {
			b, _ := os.ReadFile(filepath.Join(dir, name))
			return lines(string(b))
		}
		es.mu.Lock()
		defer es.mu.Unlock()
		var docs []string
		for _, key := range es.actions {
			index, id, _ := strings.Cut(key, "/")
			if strings.HasPrefix(id, "auto-") {
				id = "" // made by the server: none sent
			}
			docs = append(docs, index+" id="+id+" "+string(es.docs[key]))
		}
		return replayed{"dump": read("dump"), "layout": read("layout"), "es": docs,
			"hook": srv.hook.posted(), "loki": entries(srv.loki.posted()), "slack": srv.slack.posted()}
	}
}

// replayEvent returns an event of the replay, last seen now.
func replayEvent(uid, ns string, count int32, source corev1.EventSource, reporting string) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: uid + ".18a", UID: types.UID(uid),
		CreationTimestamp: metav1.Now()},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-" + uid, UID: "p-" + types.UID(uid), APIVersion: "v1"},
		Reason:         "BackOff", Message: "Back-off of " + uid, Type: corev1.EventTypeWarning, Count: count, Source: source,
		ReportingController: reporting, FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now()}
}

// waitFor polls cond until it holds, failing t after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); waitABit() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// replayChanges makes, on cs, the changes of the replay after the first
// list: count raises of the listed event, new events (one written
// through events.k8s.io: no count and no source; one dropped; one whose
// reportingComponent is not its source's), and the sentinel, last.
func replayChanges(t *testing.T, cs kubernetes.Interface) {
	ctx, events := t.Context(), cs.CoreV1().Events("shop")
	for _, n := range []int32{2, 3} {
		e, err := events.Get(ctx, "backoff.18a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e.Count, e.LastTimestamp = n, metav1.Now()
		if _, err := events.Update(ctx, e, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scheduled := replayEvent("scheduled", "shop", 0, corev1.EventSource{}, "default-scheduler")
	scheduled.ReportingInstance, scheduled.Type, scheduled.Reason = "scheduler-1", corev1.EventTypeNormal, "Scheduled"
	scheduled.FirstTimestamp, scheduled.LastTimestamp, scheduled.EventTime = metav1.Time{}, metav1.Time{}, metav1.NowMicro()
	for _, e := range []*corev1.Event{
		scheduled,
		replayEvent("system", "kube-system", 1, corev1.EventSource{Component: "kubelet", Host: "node-1"}, ""),
		replayEvent("pulled", "shop", 5, corev1.EventSource{Component: "kubelet", Host: "node-1"}, "kubelet-x"),
		replayEvent("sentinel", "zz", 1, corev1.EventSource{}, ""),
	} {
		if _, err := cs.CoreV1().Events(e.Namespace).Create(ctx, e, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// sameDay checks that every document of the replays went to the index of
// the day of the write (the replay ran from start to now), and replaces
// the index by "kube-events-(day)" for the comparison.
func sameDay(t *testing.T, start time.Time, rs ...replayed) {
	t.Helper()
	days := []string{"kube-events-" + start.Format("2006-01-02"), "kube-events-" + time.Now().Format("2006-01-02")}
	for _, r := range rs {
		for i, doc := range r["es"] {
			index, rest, _ := strings.Cut(doc, " ")
			if !slices.Contains(days, index) {
				t.Errorf("document in index %s, want one of %v (the write's day)", index, days)
			}
			r["es"][i] = "kube-events-(day) " + rest
		}
	}
}

func TestTheirStreamIsWhatKubernetesEventExporterWritesForTheSameEvents(t *testing.T) {
	start := time.Now()
	listed := replayEvent("backoff", "shop", 1, corev1.EventSource{Component: "kubelet", Host: "node-1"}, "kubelet")
	listed.Message = "Back-off <!channel> & <b>x</b>" // Slack must not notify the channel
	cs := fake.NewClientset(listed)
	watching := make(chan struct{}, 16)
	cs.PrependWatchReactor("events", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := cs.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err == nil {
			watching <- struct{}{}
		}
		return true, w, err
	})
	stop := make(chan struct{})
	theirDump, theirs := theirReplay(t, cs, newReplayServers(t, start), stop)
	ctx, cancel := context.WithCancel(context.Background())
	ourDump, src, ours := ourReplay(t, ctx, cs, newReplayServers(t, start))
	waitFor(t, "both exporters watching", func() bool { return len(watching) >= 2 && src.Stats().Watches >= 1 })
	replayChanges(t, cs)
	waitFor(t, "the sentinel in both dumps", func() bool {
		b, _ := os.ReadFile(ourDump)
		return strings.Contains(theirDump.String(), `"uid":"sentinel"`) && strings.Contains(string(b), `"uid":"sentinel"`)
	})
	close(stop)
	cancel()
	want, got := theirs(), ours()
	sameDay(t, start, want, got)
	counts := map[string]int{"dump": 4, "layout": 4, "es": 4, "loki": 4, "hook": 4, "slack": 3}
	// The network sinks write with several writers (issue 36): records
	// about different objects may arrive in either order, each object's
	// in its order (TestWebhookPostsSeveralObjectsAtOnceAndEachObjectInOrder
	// holds that). The files have one writer: in order.
	inAnyOrder := map[string]bool{"es": true, "loki": true, "hook": true, "slack": true}
	for name, n := range counts {
		if len(want[name]) != n {
			t.Errorf("theirs wrote %d records to %s, want %d: %q", len(want[name]), name, n, want[name])
		}
		if inAnyOrder[name] {
			got[name], want[name] = slices.Sorted(slices.Values(got[name])), slices.Sorted(slices.Values(want[name]))
		}
		if !slices.Equal(got[name], want[name]) {
			t.Errorf("%s: ours wrote\n%s\ntheirs\n%s", name, strings.Join(got[name], "\n"), strings.Join(want[name], "\n"))
		}
	}
}

package exporter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests push to fakeLoki, which checks the push API's JSON as Loki's
// documentation gives it (docs/sources/reference/loki-http-api.md, "Ingest
// logs") and stores entries as Loki does: an entry identical to a stored
// one (same stream, timestamp and line) is stored once, and a push with
// entries it refuses stores the others and answers 400. They test what
// depends on that, and on answers a real server gives only on its own
// terms: storing each entry once when pushed again, the entry-by-entry
// push after a 400, the class of each status (429, 5xx, 4xx), the tenant
// header's template, timestamp: now, and the configuration.
//
// Grafana Loki itself is not run: it is AGPL, which this project may not
// use (Debian's loki package is an unrelated program). The real server of
// the push API is VictoriaLogs (Apache-2.0, internal/vlogstest), in
// sink_loki_e2e_test.go (build tag e2e, which make test sets): the lines,
// stream labels and timestamps it stores, nothing lost by a Wait receiver
// across a SIGKILL and restart of the server, and a kubernetes-event-
// exporter configuration with a layout and a tenant through the pipeline.
// VictoriaLogs shares neither Loki behaviour above: it stores an identical
// entry again, and answers 204 to a push after dropping the entries it
// refuses.

// fakeLoki is the push API of a Loki server.
type fakeLoki struct {
	mu sync.Mutex
	// entries are the stored entries: labels, timestamp and line.
	entries []string
	seen    map[string]bool
	// oldest is the oldest timestamp accepted (Loki's
	// reject_old_samples_max_age); zero accepts any.
	oldest time.Time
	// status, if set, answers every push with it.
	status  int
	tenants []string
	pushes  int
	srv     *httptest.Server
}

func newFakeLoki(t *testing.T) *fakeLoki {
	l := &fakeLoki{seen: map[string]bool{}}
	l.srv = httptest.NewServer(http.HandlerFunc(l.serve))
	t.Cleanup(l.srv.Close)
	return l
}

// labelName is Loki's (Prometheus's) label name syntax.
var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

func (l *fakeLoki) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pushes++
	l.tenants = append(l.tenants, r.Header.Get("X-Scope-OrgID"))
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/loki/api/v1/push":
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	case r.Header.Get("Content-Type") != "application/json":
		http.Error(w, "unsupported Content-Type", http.StatusUnsupportedMediaType)
		return
	case l.status != 0:
		http.Error(w, "answered "+strconv.Itoa(l.status), l.status)
		return
	}
	streams, err := parsePush(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var refused []string
	for _, st := range streams {
		for _, v := range st.values {
			if !l.oldest.IsZero() && v.ts.Before(l.oldest) {
				refused = append(refused, fmt.Sprintf("entry for stream '%s' has timestamp too old: %s", st.labels, v.ts))
				continue
			}
			if k := st.labels + " " + strconv.FormatInt(v.ts.UnixNano(), 10) + " " + v.line; !l.seen[k] {
				l.seen[k] = true
				l.entries = append(l.entries, k)
			}
		}
	}
	if len(refused) > 0 {
		http.Error(w, strings.Join(refused, "\n"), http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// pushedStream is a stream of a push, checked.
type pushedStream struct {
	labels string // {a="b", c="d"}, sorted
	values []pushedEntry
}

type pushedEntry struct {
	ts   time.Time
	line string
}

// parsePush checks and decodes a JSON push body: {"streams": [{"stream":
// {label: value}, "values": [["<ns>", "<line>"(, {metadata})]]}]}.
func parsePush(body []byte) ([]pushedStream, error) {
	var push struct {
		Streams []struct {
			Stream map[string]string `json:"stream"`
			Values [][]json.RawMessage
		} `json:"streams"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&push); err != nil {
		return nil, fmt.Errorf("loghttp: %v", err)
	}
	var out []pushedStream
	for _, st := range push.Streams {
		if len(st.Stream) == 0 {
			return nil, fmt.Errorf("error at least one label pair is required per stream")
		}
		var pairs []string
		for _, k := range slices.Sorted(maps.Keys(st.Stream)) {
			if !labelName.MatchString(k) {
				return nil, fmt.Errorf("error parsing labels: invalid label name %q", k)
			}
			pairs = append(pairs, fmt.Sprintf("%s=%q", k, st.Stream[k]))
		}
		ps := pushedStream{labels: "{" + strings.Join(pairs, ", ") + "}"}
		for _, v := range st.Values {
			e, err := parseEntry(v)
			if err != nil {
				return nil, err
			}
			ps.values = append(ps.values, e)
		}
		out = append(out, ps)
	}
	return out, nil
}

// parseEntry checks one value: a nanosecond timestamp as a string, the
// line, and optionally structured metadata.
func parseEntry(v []json.RawMessage) (pushedEntry, error) {
	if len(v) != 2 && len(v) != 3 {
		return pushedEntry{}, fmt.Errorf("loghttp: an entry has %d elements, want 2 or 3", len(v))
	}
	var ts, line string
	if err := json.Unmarshal(v[0], &ts); err != nil {
		return pushedEntry{}, fmt.Errorf("loghttp: timestamp %s is not a string", v[0])
	}
	ns, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return pushedEntry{}, fmt.Errorf("loghttp: timestamp %q is not nanoseconds", ts)
	}
	if err := json.Unmarshal(v[1], &line); err != nil {
		return pushedEntry{}, fmt.Errorf("loghttp: line %s is not a string", v[1])
	}
	if len(v) == 3 {
		var meta map[string]string
		if err := json.Unmarshal(v[2], &meta); err != nil {
			return pushedEntry{}, fmt.Errorf("loghttp: structured metadata %s: %v", v[2], err)
		}
	}
	return pushedEntry{ts: time.Unix(0, ns).UTC(), line: line}, nil
}

func (l *fakeLoki) stored() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}

func newLokiSink(t *testing.T, cfg LokiConfig) *LokiSink {
	t.Helper()
	return built(NewLokiSink(cfg))(t)
}

func TestLokiPushesOneStreamWithEachOccurrenceAtItsTime(t *testing.T) {
	l := newFakeLoki(t)
	s := newLokiSink(t, LokiConfig{URL: l.srv.URL + "/loki/api/v1/push", StreamLabels: map[string]string{"app": "kube-events", "env": "prod"},
		Headers: map[string]string{"X-Scope-OrgID": "team-{{ .Namespace }}"}})
	batch := []*Occurrence{dated("a", 1, 26), dated("b", 1, 27)}
	if n, err := s.Write(t.Context(), batch); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	got := l.stored()
	if len(got) != 2 {
		t.Fatalf("stored %q", got)
	}
	for i, o := range batch {
		line, _ := EventEncoder("")(o)
		want := fmt.Sprintf(`{app="kube-events", env="prod"} %d %s`, o.LastTime.UnixNano(), line)
		if got[i] != want {
			t.Errorf("entry %d:\n got %s\nwant %s", i, got[i], want)
		}
	}
	if l.tenants[0] != "team-ns" {
		t.Errorf("tenant %q", l.tenants[0])
	}
}

func TestLokiPushingAgainAfterACrashStoresEachEntryOnce(t *testing.T) {
	l := newFakeLoki(t)
	s := newLokiSink(t, LokiConfig{URL: l.srv.URL + "/loki/api/v1/push"})
	for range 2 {
		if n, err := s.Write(t.Context(), []*Occurrence{dated("a", 1, 26), dated("a", 2, 26)}); n != 2 || err != nil {
			t.Fatal(n, err)
		}
	}
	if got := l.stored(); len(got) != 2 || !strings.HasPrefix(got[0], `{job="fanout-eventer"} `) {
		t.Errorf("stored %q, want two entries in the default stream", got)
	}
}

func TestLokiRefusedEntryIsDroppedAloneAndTheOthersStoredOnce(t *testing.T) {
	l := newFakeLoki(t)
	l.oldest = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	c := parseOK(t, `route: {match: [{receiver: loki}]}
receivers:
  - name: loki
    batch: 8
    retry: {initialBackoff: 1ms, maxBackoff: 1ms}
    loki:
      url: `+l.srv.URL+`/loki/api/v1/push
      streamLabels: {source: kubernetes}
      layout: {reason: "{{ .Reason }}", name: "{{ .InvolvedObject.Name }}"}
`)
	p, err := NewPipeline(c, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, day := range []int{26, 26, 10, 27} { // the third is older than Loki accepts
		if err := p.Occurred(t.Context(), dated(fmt.Sprint("u", i), 1, day)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The receiver's writers push other objects' occurrences in any
	// order: what is stored is compared as a set.
	got := l.stored()
	slices.Sort(got)
	want := []string{`{source="kubernetes"} 1795694400000000000 {"name":"p-u0","reason":"Test"}`,
		`{source="kubernetes"} 1795694400000000000 {"name":"p-u1","reason":"Test"}`,
		`{source="kubernetes"} 1795780800000000000 {"name":"p-u3","reason":"Test"}`}
	if !slices.Equal(got, want) {
		t.Errorf("stored %q, want u0, u1 and u3, once each", got)
	}
	if st := p.Stats()[0]; st.Dropped[DropRejected] != 1 || st.Sent != 3 {
		t.Errorf("stats %+v, want 3 sent and the old one rejected", st)
	}
}

func TestLokiStatusesAreRetryableOrPermanent(t *testing.T) {
	l := newFakeLoki(t)
	s := newLokiSink(t, LokiConfig{URL: l.srv.URL + "/loki/api/v1/push"})
	wantStatusClasses(t, s, func(status int) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.status = status
	}, map[int]bool{429: false, 500: false, 503: false, 400: true, 401: true, 413: true})
	down := newLokiSink(t, LokiConfig{URL: "http://" + deadAddr() + "/loki/api/v1/push"})
	n, err := down.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
	wantFailure(t, "unreachable", n, err, false)
}

func TestLokiTimestampNowIsThePushTimeInWholeSeconds(t *testing.T) {
	l := newFakeLoki(t)
	s := newLokiSink(t, LokiConfig{URL: l.srv.URL + "/loki/api/v1/push", Timestamp: "now"})
	before := time.Now().Truncate(time.Second)
	if _, err := s.Write(t.Context(), []*Occurrence{dated("a", 1, 1)}); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	ns, _ := strconv.ParseInt(strings.Fields(l.stored()[0])[1], 10, 64)
	if ts := time.Unix(0, ns); ts.Before(before) || ts.After(after) || ns%int64(time.Second) != 0 {
		t.Errorf("timestamp %v, want the push's (%v to %v) in whole seconds, as kubernetes-event-exporter", ts, before, after)
	}
}

func TestLokiTheirExampleLoadsAndBadKeysAreNamed(t *testing.T) {
	c, err := LoadConfig(theirs + "23-loki.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if lk := c.Receivers[0].Loki; lk == nil || lk.StreamLabels["foo"] != "bar" || lk.Headers["X-Scope-OrgID"] != "tennantID" ||
		lk.URL != "http://127.0.0.1:3100/loki/api/v1/push" {
		t.Errorf("loki %+v", c.Receivers[0])
	}
	wantConfigErrors(t, map[string]string{
		"loki: {url: '127.0.0.1:3100'}":                        `loki.url "127.0.0.1:3100" is not an http or https URL`,
		"loki: {url: 'http://l', streamLabels: {app-name: x}}": `loki.streamLabels: "app-name" is not a label name`,
		"loki: {url: 'http://l', timestamp: later}":            `loki.timestamp "later" is unknown`,
		"loki: {url: 'http://l', tls: {certFile: c}}":          "loki.tls: certFile and keyFile go together",
	})
}

// tenantLoki is a push API that records the namespaces of the entries
// each tenant (X-Scope-OrgID) received, and answers 503 to the tenants of
// down.
type tenantLoki struct {
	mu       sync.Mutex
	byTenant map[string][]string
	down     map[string]bool
	srv      *httptest.Server
}

func newTenantLoki(t *testing.T, down ...string) *tenantLoki {
	l := &tenantLoki{byTenant: map[string][]string{}, down: map[string]bool{}}
	for _, d := range down {
		l.down[d] = true
	}
	l.srv = httptest.NewServer(http.HandlerFunc(l.serve))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *tenantLoki) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var push struct {
		Streams []struct {
			Values [][2]string `json:"values"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(body, &push); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	tenant := r.Header.Get("X-Scope-OrgID")
	if l.down[tenant] {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	for _, s := range push.Streams {
		for _, v := range s.Values {
			var rec struct {
				Metadata struct{ Namespace string } `json:"metadata"`
			}
			_ = json.Unmarshal([]byte(v[1]), &rec)
			l.byTenant[tenant] = append(l.byTenant[tenant], rec.Metadata.Namespace)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (l *tenantLoki) received() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.byTenant)
}

// kubernetes-event-exporter pushes each event with the headers' templates
// executed against it, so X-Scope-OrgID: "{{ .Namespace }}" sends each
// event to its namespace's tenant: a batch is pushed in runs of the same
// headers.
func TestLokiTenantHeaderTemplateIsExecutedPerOccurrence(t *testing.T) {
	l := newTenantLoki(t)
	s := newLokiSink(t, LokiConfig{URL: l.srv.URL + "/loki/api/v1/push",
		Headers: map[string]string{"X-Scope-OrgID": "{{ .Namespace }}"}})
	batch := []*Occurrence{occ("a", 1, "team-a"), occ("b", 1, "team-b"), occ("c", 1, "team-b"), occ("d", 1, "team-a")}
	if n, err := s.Write(t.Context(), batch); n != 4 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	want := map[string][]string{"team-a": {"team-a", "team-a"}, "team-b": {"team-b", "team-b"}}
	if got := l.received(); !reflect.DeepEqual(got, want) {
		t.Errorf("entries by tenant %v, want %v", got, want)
	}
}

// Header templates see the receiver's record: with compat
// kubernetes-event-exporter theirs, which has no fanout object.
func TestLokiHeaderTemplatesSeeTheirRecordWithTheirStream(t *testing.T) {
	l := newTenantLoki(t)
	for _, compat := range []string{CompatKEE, CompatFanout} {
		c := parseOK(t, "compat: "+compat+"\nreceivers:\n  - name: l\n    loki:\n      url: "+l.srv.URL+"/loki/api/v1/push"+
			"\n      headers: {X-Scope-OrgID: \"{{ if .Fanout }}ours{{ else }}theirs{{ end }}\"}\n")
		s := built(c.Receivers[0].build(c.ClusterName))(t)
		if n, err := s.Write(t.Context(), []*Occurrence{occ(compat, 1, "ns")}); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	}
	got := l.received()
	if len(got["theirs"]) != 1 || len(got["ours"]) != 1 {
		t.Errorf("entries by tenant %v, want one theirs and one ours", got)
	}
}

// A run of the batch that fails after the runs before it were pushed
// reports those as written, so that only the rest is retried.
func TestLokiFailedTenantRunReportsTheRunsBeforeItAsWritten(t *testing.T) {
	l := newTenantLoki(t, "team-b")
	s := newLokiSink(t, LokiConfig{URL: l.srv.URL + "/loki/api/v1/push",
		Headers: map[string]string{"X-Scope-OrgID": "{{ .Namespace }}"}})
	batch := []*Occurrence{occ("a", 1, "team-a"), occ("b", 1, "team-a"), occ("c", 1, "team-b"), occ("d", 1, "team-a")}
	n, err := s.Write(t.Context(), batch)
	if n != 2 || err == nil || IsPermanent(err) {
		t.Fatalf("write: %d, %v; want 2 written and a retryable error", n, err)
	}
	if got := l.received(); !reflect.DeepEqual(got, map[string][]string{"team-a": {"team-a", "team-a"}}) {
		t.Errorf("entries by tenant %v, want the first two only", got)
	}
}

// An occurrence whose header template's value cannot be sent is rejected
// alone: the occurrences before it are pushed, and it is not retried.
func TestLokiHeaderTemplateWithNewlineRejectsTheOccurrence(t *testing.T) {
	l := newFakeLoki(t)
	s := newLokiSink(t, LokiConfig{URL: l.srv.URL + "/loki/api/v1/push",
		Headers: map[string]string{"X-Reason": "{{ .Message }}"}})
	bad := occ("b", 1, "ns")
	bad.Message = "line one\nline two"
	n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns"), bad, occ("c", 1, "ns")})
	if n != 1 || !IsPermanent(err) {
		t.Fatalf("write: n %d, err %v; want 1 and a permanent error", n, err)
	}
	if got := l.stored(); len(got) != 1 {
		t.Errorf("stored %q, want the first occurrence", got)
	}
}

package exporter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/fanout-go/fanout/exporter/internal/kee"
)

// fakeOpsgenie is a recorded-API fake of Opsgenie's Alert API: it checks
// what the documentation (and Opsgenie's Go SDK, which
// kubernetes-event-exporter uses) says a create-alert request is — POST
// /v2/alerts, "Authorization: GenieKey <key>", a JSON body — keeps the
// bodies, and answers 202 as Opsgenie does, or status when set.
type fakeOpsgenie struct {
	*httptest.Server
	key string

	mu     sync.Mutex
	alerts []map[string]any
	status int
}

func newFakeOpsgenie(t *testing.T, key string) *fakeOpsgenie {
	f := &fakeOpsgenie{key: key}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeOpsgenie) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	var alert map[string]any
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/v2/alerts":
		http.Error(w, `{"message":"not found"}`, http.StatusNotFound)
		return
	case r.Header.Get("Authorization") != "GenieKey "+f.key:
		http.Error(w, `{"message":"Could not authenticate"}`, http.StatusUnauthorized)
		return
	case r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &alert) != nil:
		http.Error(w, `{"message":"Invalid JSON"}`, http.StatusBadRequest)
		return
	case f.status != 0:
		http.Error(w, `{"message":"failing on purpose"}`, f.status)
		return
	}
	f.alerts = append(f.alerts, alert)
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, `{"result":"Request will be processed","took":0.107,"requestId":"43a29c5c-3dbf-4fa4-9c26-f4f71023e120"}`)
}

func (f *fakeOpsgenie) received() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.alerts
}

// theirOpsgenie returns their example configuration (03-opsgenie.yaml)
// pointed at the fake, by the host name the SDK reaches over http, after
// the top-level keys top.
func theirOpsgenie(t *testing.T, f *fakeOpsgenie, top string) *Config {
	t.Helper()
	b, err := os.ReadFile(theirs + "03-opsgenie.yaml")
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.Replace(string(b), "apiKey: xxx", "apiKey: xxx\n      URL: "+f.Listener.Addr().String(), 1)
	return parseOK(t, top+yaml)
}

// Their example's alert is posted with their templates rendered, their
// priority, the key in a GenieKey header: the request their SDK makes.
func TestOpsgenieCreatesTheAlertOfTheirExample(t *testing.T) {
	f := newFakeOpsgenie(t, "xxx")
	c := theirOpsgenie(t, f, "")
	s, err := c.Receivers[0].build("prod")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	o := onObject("e1", 1, "web")
	if n, err := s.Write(t.Context(), []*Occurrence{o, onObject("e2", 1, "db")}); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	pretty, _ := json.MarshalIndent(o.Enhanced("prod"), "", "  ")
	want := map[string]any{"message": "Event Test for ns/web on K8s cluster", "alias": "e1",
		"description": "<pre>" + string(pretty) + "</pre>", "tags": []any{"event", "Test", "Pod", "web"}, "priority": "P3"}
	got := f.received()
	if len(got) != 2 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("alerts %d, first:\n%v\nwant\n%v", len(got), got[0], want)
	}
}

// With compat kubernetes-event-exporter the alert is theirs: the
// templates of their example give what their code gives for the same
// event (their record has no fanout object: toPrettyJson . shows none).
func TestOpsgenieWithTheirStreamRendersTheirRecordWithoutTheFanoutObject(t *testing.T) {
	f := newFakeOpsgenie(t, "xxx")
	c := theirOpsgenie(t, f, "compat: kubernetes-event-exporter\nclusterName: prod\n")
	s, err := c.Receivers[0].build(c.ClusterName)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	o := onObject("e1", 1, "web")
	if n, err := s.Write(t.Context(), []*Occurrence{o}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	e := o.coreEvent()
	ev := &kee.EnhancedEvent{Event: *e, ClusterName: "prod", InvolvedObject: kee.EnhancedObjectReference{ObjectReference: e.InvolvedObject}}
	render := func(text string) string {
		s, err := kee.GetString(ev, text)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	cfg := c.Receivers[0].Opsgenie
	want := map[string]any{"message": render(cfg.Message), "alias": render(cfg.Alias),
		"description": render(cfg.Description), "priority": "P3"}
	var tags []any
	for _, tag := range cfg.Tags {
		tags = append(tags, render(tag))
	}
	want["tags"] = tags
	got := f.received()
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) || strings.Contains(want["description"].(string), "fanout") {
		t.Errorf("alert:\n%v\nwant theirs:\n%v", got, want)
	}
}

func TestOpsgenieDetailsAndPriorityAreSent(t *testing.T) {
	f := newFakeOpsgenie(t, "k")
	s := built(NewOpsgenieSink(OpsgenieConfig{APIKey: "k", URL: f.URL, Priority: "P1", Message: "{{ .Reason }}",
		Details: map[string]string{"kind": "{{ .InvolvedObject.Kind }}", "cluster": "{{ .ClusterName }}"}}, "c1"))(t)
	if n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	want := map[string]any{"message": "Test", "priority": "P1", "details": map[string]any{"kind": "Pod", "cluster": "c1"}}
	if got := f.received(); len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("alerts %v, want %v", got, want)
	}
}

func TestOpsgenieRetriesRateLimitsAndServerErrorsAndDropsTheRest(t *testing.T) {
	f := newFakeOpsgenie(t, "k")
	s := built(NewOpsgenieSink(OpsgenieConfig{APIKey: "k", URL: f.URL, Message: "m"}, ""))(t)
	wantStatusClasses(t, s, func(status int) { f.mu.Lock(); f.status = status; f.mu.Unlock() },
		map[int]bool{400: true, 401: true, 403: true, 404: true, 422: true, 501: true, 429: false, 500: false, 503: false})
}

func TestOpsgenieWrongKeyIsPermanent(t *testing.T) {
	f := newFakeOpsgenie(t, "right")
	s := built(NewOpsgenieSink(OpsgenieConfig{APIKey: "wrong", URL: f.URL, Message: "m"}, ""))(t)
	n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
	wantFailure(t, "wrong key", n, err, true)
}

// An alert whose message renders empty, or whose template fails, is
// dropped after the ones before it are created.
func TestOpsgenieAlertThatCannotBeRenderedIsPermanentAfterThePrefix(t *testing.T) {
	f := newFakeOpsgenie(t, "k")
	s := built(NewOpsgenieSink(OpsgenieConfig{APIKey: "k", URL: f.URL, Message: "{{ .Action }}"}, ""))(t)
	first, empty := occ("a", 1, "ns"), occ("b", 1, "ns")
	first.Action = "Pull"
	n, err := s.Write(t.Context(), []*Occurrence{first, empty})
	if n != 1 || !IsPermanent(err) || !strings.Contains(err.Error(), "b/1") || len(f.received()) != 1 {
		t.Errorf("n %d, err %v, %d alerts; want 1 created and a permanent error about b/1", n, err, len(f.received()))
	}
	s = built(NewOpsgenieSink(OpsgenieConfig{APIKey: "k", URL: f.URL, Message: "{{ .Nope }}"}, ""))(t)
	n, err = s.Write(t.Context(), []*Occurrence{first})
	wantFailure(t, "failing template", n, err, true)
}

func TestOpsgenieUnreachableIsRetryable(t *testing.T) {
	s := built(NewOpsgenieSink(OpsgenieConfig{APIKey: "k", URL: "http://" + deadAddr(), Message: "m"}, ""))(t)
	n, err := s.Write(context.Background(), []*Occurrence{occ("a", 1, "ns")})
	wantFailure(t, "unreachable", n, err, false)
}

// URL is a host, as in their SDK: https, or http for a host without
// "api" in its name; or a URL.
func TestOpsgenieURLIsTheirHostOrAURL(t *testing.T) {
	for url, want := range map[string]string{"": "https://api.opsgenie.com/v2/alerts",
		"api.eu.opsgenie.com": "https://api.eu.opsgenie.com/v2/alerts", "127.0.0.1:8080": "http://127.0.0.1:8080/v2/alerts",
		"https://proxy.internal/og/": "https://proxy.internal/og/v2/alerts"} {
		if got, err := (&OpsgenieConfig{URL: url}).endpoint(); got != want || err != nil {
			t.Errorf("URL %q: %s, %v; want %s", url, got, err, want)
		}
	}
}

func TestOpsgenieBadKeysAreNamed(t *testing.T) {
	wantConfigErrors(t, map[string]string{
		"opsgenie: {message: m}":                                "opsgenie.apiKey is required",
		"opsgenie: {apiKey: k}":                                 "opsgenie.message is required",
		"opsgenie: {apiKey: k, message: m, priority: P9}":       `opsgenie.priority "P9" is unknown`,
		`opsgenie: {apiKey: k, message: "{{ .Reason "}`:         "opsgenie.message: template",
		`opsgenie: {apiKey: k, message: m, tags: ["{{ x"]}`:     "opsgenie.tags[0]: template",
		`opsgenie: {apiKey: k, message: m, URL: "ftp://x"}`:     `opsgenie.URL "ftp://x" is not an http or https URL`,
		`opsgenie: {apiKey: k, message: m, details: {a: "{{"}}`: "opsgenie.details.a: template",
	})
}

func TestOpsgenieConcurrentWritesEachCreateTheirAlerts(t *testing.T) {
	f := newFakeOpsgenie(t, "k")
	s := built(NewOpsgenieSink(OpsgenieConfig{APIKey: "k", URL: f.URL, Message: "{{ .Name }}"}, ""))(t)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 10 {
				if n, err := s.Write(context.Background(), []*Occurrence{occ(fmt.Sprint(w, "-", i), 1, "ns")}); n != 1 || err != nil {
					t.Error(n, err)
				}
			}
		})
	}
	wg.Wait()
	seen := map[any]bool{}
	for _, a := range f.received() {
		seen[a["message"]] = true
	}
	if len(seen) != 40 {
		t.Errorf("%d distinct alerts, want 40", len(seen))
	}
}

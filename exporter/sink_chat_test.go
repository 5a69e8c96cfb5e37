package exporter

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// chatServer records the requests it gets and answers each with the next
// of answers (status and body), then 200 and ok.
type chatServer struct {
	mu      sync.Mutex
	bodies  []string
	auth    []string
	answers []chatAnswer
	srv     *httptest.Server
}

type chatAnswer struct {
	status int
	body   string
}

func newChatServer(t *testing.T, answers ...chatAnswer) *chatServer {
	c := &chatServer{answers: answers}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.bodies = append(c.bodies, string(body))
		c.auth = append(c.auth, r.Header.Get("Authorization"))
		a := chatAnswer{200, `{"ok":true}`}
		if len(c.answers) > 0 {
			a, c.answers = c.answers[0], c.answers[1:]
		}
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// chatSink builds the first receiver of a configuration.
func chatSink(t *testing.T, yaml string) Sink {
	t.Helper()
	c := parseOK(t, yaml)
	return built(c.Receivers[0].build(c.ClusterName))(t)
}

func TestSlackPostsTheirMessageWithSortedFieldsAndTheToken(t *testing.T) {
	srv := newChatServer(t)
	s := chatSink(t, `clusterName: prod
receivers:
  - name: slack
    slack:
      endpoint: `+srv.srv.URL+`/api/chat.postMessage
      token: xoxb-1
      channel: "#{{ .Namespace }}"
      message: "{{ .Reason }} on {{ .InvolvedObject.Name }} in {{ .ClusterName }}"
      color: danger
      title: "{{ .Type }}"
      fields:
        reason: "{{ .Reason }}"
        namespace: "{{ .Namespace }}"
`)
	o := FromCore(backOffEvent())
	if n, err := s.Write(t.Context(), []*Occurrence{o}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	var msg struct {
		Channel, Text string
		Attachments   []struct {
			Color, Title string
			Fields       []struct {
				Title, Value string
				Short        bool
			}
		}
	}
	if err := json.Unmarshal([]byte(srv.bodies[0]), &msg); err != nil {
		t.Fatal(err)
	}
	e := o.Enhanced("prod")
	if msg.Channel != "#"+e.Namespace || msg.Text != e.Reason+" on "+e.InvolvedObject.Name+" in prod" ||
		len(msg.Attachments) != 1 || msg.Attachments[0].Color != "danger" || msg.Attachments[0].Title != e.Type {
		t.Errorf("message %s", srv.bodies[0])
	}
	if f := msg.Attachments[0].Fields; len(f) != 2 || f[0].Title != "namespace" || f[1].Title != "reason" || f[1].Value != e.Reason {
		t.Errorf("fields %+v, want namespace then reason", f)
	}
	if srv.auth[0] != "Bearer xoxb-1" {
		t.Errorf("authorization %q", srv.auth[0])
	}
}

func TestSlackWithoutFieldsSendsNoAttachmentAndDefaultsToTheEventMessage(t *testing.T) {
	srv := newChatServer(t)
	s := chatSink(t, "receivers:\n  - name: s\n    slack: {endpoint: "+srv.srv.URL+", channel: ops}\n")
	if _, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")}); err != nil {
		t.Fatal(err)
	}
	if got := srv.bodies[0]; got != `{"channel":"ops","text":"message of a"}` {
		t.Errorf("message %s", got)
	}
}

func TestSlackErrorsInA200AreRetryableOnlyWhenRateLimited(t *testing.T) {
	srv := newChatServer(t, chatAnswer{200, `{"ok":false,"error":"ratelimited"}`},
		chatAnswer{200, `{"ok":false,"error":"channel_not_found"}`}, chatAnswer{429, `{"ok":false,"error":"ratelimited"}`})
	s := chatSink(t, "receivers:\n  - name: s\n    slack: {endpoint: "+srv.srv.URL+", token: t, channel: ops}\n")
	for i, permanent := range []bool{false, true, false} {
		n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
		wantFailure(t, fmt.Sprint("answer ", i), n, err, permanent)
	}
	if n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")}); n != 1 || err != nil {
		t.Errorf("ok answer: n %d, err %v", n, err)
	}
}

func TestSlackLayoutReplacesTheMessage(t *testing.T) {
	srv := newChatServer(t)
	s := chatSink(t, "receivers:\n  - name: s\n    slack:\n      endpoint: "+srv.srv.URL+"\n      layout: {text: \"{{ .Reason }}!\", blocks: []}\n")
	if _, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")}); err != nil {
		t.Fatal(err)
	}
	if got := srv.bodies[0]; got != `{"blocks":[],"text":"Test!"}` {
		t.Errorf("message %s", got)
	}
}

func TestSlackTheirExamplesLoadAndBadTemplatesAreNamed(t *testing.T) {
	c, err := LoadConfig(theirs + "07-slack.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if sl := c.Receivers[0].Slack; sl == nil || sl.Token != "YOUR-API-TOKEN-HERE" || len(sl.Fields) != 3 || c.Receivers[0].Batch != 1 {
		t.Errorf("slack %+v", c.Receivers[0])
	}
	c = parseOK(t, "receivers:\n  - name: s\n    slack: {token: '', channel: ops}\n")
	wantWarnings(t, c, `receiver "s": slack.token is empty`)
	wantConfigErrors(t, map[string]string{
		"slack: {channel: ops, message: '{{ .Reason '}":   `slack.message: invalid template "{{ .Reason "`,
		"slack: {channel: ops, fields: {a: '{{ end }}'}}": "slack.fields.a: invalid template",
		"slack: {token: t}":                          "slack.channel is required",
		"slack: {channel: ops, endpoint: 'ftp://x'}": `slack.endpoint "ftp://x" is not an http or https URL`,
		"batch: 5\n    slack: {channel: ops}":        "batch 5: a chat message is one occurrence",
		"teams: {endpoint: ''}":                      `teams.endpoint "" is not an http or https URL`,
	})
}

func TestTeamsPostsTheirTextFromTheRecordOrTheLayout(t *testing.T) {
	srv := newChatServer(t)
	plain := chatSink(t, "receivers:\n  - name: t\n    teams: {endpoint: "+srv.srv.URL+"}\n")
	laid := chatSink(t, "receivers:\n  - name: t\n    teams:\n      endpoint: "+srv.srv.URL+"\n      headers: {X-Reason: \"{{ .Reason }}\"}\n"+
		"      layout:\n        message: \"{{ .Message }}!\"\n        reason: \"{{ .Reason }}\"\n        metadata: {kind: \"{{ .InvolvedObject.Kind }}\"}\n")
	for _, s := range []Sink{plain, laid} {
		if n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")}); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	}
	var msgs [2]map[string]string
	for i := range msgs {
		if err := json.Unmarshal([]byte(srv.bodies[i]), &msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if m := msgs[0]; m["summary"] != "event" || !strings.HasPrefix(m["text"], "Event: message of a \nStatus: Test \nMetadata: {") {
		t.Errorf("record message %q", m)
	}
	if m := msgs[1]; m["text"] != "Event: message of a! \nStatus: Test \nMetadata: {\"kind\":\"Pod\"}" {
		t.Errorf("layout message %q", m["text"])
	}
}

func TestTeamsThrottlingInA200IsRetryable(t *testing.T) {
	srv := newChatServer(t, chatAnswer{200, "Microsoft Teams endpoint returned HTTP error 429 with ContextId x"},
		chatAnswer{400, "Bad payload"})
	s := chatSink(t, "receivers:\n  - name: t\n    teams: {endpoint: "+srv.srv.URL+"}\n")
	for i, permanent := range []bool{false, true} {
		n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
		wantFailure(t, fmt.Sprint("answer ", i), n, err, permanent)
	}
}

func TestTeamsTheirExampleLoads(t *testing.T) {
	c, err := LoadConfig(theirs + "18-teams.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if tm := c.Receivers[0].Teams; tm == nil || tm.Endpoint != "https://outlook.office.com/webhook/..." || tm.Layout != nil {
		t.Errorf("teams %+v", c.Receivers[0])
	}
}

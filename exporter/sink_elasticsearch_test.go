package exporter

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// bulkServer speaks the bulk API as Elasticsearch and OpenSearch do: an
// NDJSON body of action and document lines, ended by a newline, answered
// with one item per action, each with its own status and error. Documents
// are kept by index and ID, so an index action with an ID already stored
// replaces the document (status 200, "updated").
type bulkServer struct {
	mu sync.Mutex
	// docs are the documents stored, by "index/id".
	docs map[string]json.RawMessage
	// answer, if set, gives the status of an action on document id (0:
	// stored); it is called once per action received.
	answer func(id string) int
	// status, if set, answers every request with it, as a whole.
	status int
	// maxBody, if set, is the largest body accepted; a larger one is
	// answered 413 (http.max_content_length).
	maxBody int
	// auth are the Authorization headers received.
	auth []string
	// autoIDs counts the IDs made for documents sent without one
	// (auto-1, auto-2, ...), as the server makes one.
	autoIDs int
	// actions are the "index/id" of the documents stored, in order.
	actions []string
	srv     *httptest.Server
}

func newBulkServer(t *testing.T) *bulkServer {
	b := &bulkServer{docs: map[string]json.RawMessage{}}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *bulkServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.auth = append(b.auth, r.Header.Get("Authorization"))
	w.Header().Set("Content-Type", "application/json")
	switch {
	case b.status != 0:
		w.WriteHeader(b.status)
		fmt.Fprintf(w, `{"error":{"type":"test_exception","reason":"answered %d"},"status":%d}`, b.status, b.status)
		return
	case r.Method != http.MethodPost || r.URL.Path != "/_bulk":
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":{"type":"no_handler","reason":"%s %s"},"status":404}`, r.Method, r.URL.Path)
		return
	case b.maxBody > 0 && len(body) > b.maxBody:
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		return
	case len(body) == 0 || body[len(body)-1] != '\n':
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"type":"illegal_argument_exception","reason":"The bulk request must be terminated by a newline [\n]"},"status":400}`)
		return
	}
	items, errs, err := b.apply(body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"type":"parse_exception","reason":%q},"status":400}`, err)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"took": 1, "errors": errs, "items": items})
}

// apply executes the actions of a bulk body and returns the items.
func (b *bulkServer) apply(body []byte) (items []map[string]any, errs bool, err error) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var action map[string]struct {
			Index string `json:"_index"`
			ID    string `json:"_id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &action); err != nil || len(action) != 1 || action["index"].Index == "" {
			return nil, false, fmt.Errorf("bad action line %q", sc.Text())
		}
		a := action["index"]
		if a.ID == "" {
			b.autoIDs++
			a.ID = fmt.Sprintf("auto-%d", b.autoIDs)
		}
		if !sc.Scan() || !json.Valid(sc.Bytes()) {
			return nil, false, fmt.Errorf("action %s without a JSON document", a.ID)
		}
		item := map[string]any{"_index": a.Index, "_id": a.ID}
		status := 0
		if b.answer != nil {
			status = b.answer(a.ID)
		}
		switch {
		case status == 0:
			item["status"], item["result"] = 201, "created"
			if _, ok := b.docs[a.Index+"/"+a.ID]; ok {
				item["status"], item["result"] = 200, "updated"
			}
			b.docs[a.Index+"/"+a.ID] = slices.Clone(sc.Bytes())
			b.actions = append(b.actions, a.Index+"/"+a.ID)
		case status == http.StatusTooManyRequests:
			errs, item["status"] = true, status
			item["error"] = map[string]any{"type": "es_rejected_execution_exception", "reason": "rejected execution: queue capacity 200"}
		default:
			errs, item["status"] = true, status
			item["error"] = map[string]any{"type": "mapper_parsing_exception", "reason": "failed to parse field [count] of type [long]"}
		}
		items = append(items, map[string]any{"index": item})
	}
	return items, errs, nil
}

// stored returns the keys of the documents stored.
func (b *bulkServer) stored() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Sorted(maps.Keys(b.docs))
}

func newESSink(t *testing.T, cfg ElasticsearchConfig) *ElasticsearchSink {
	t.Helper()
	return built(NewElasticsearchSink(cfg))(t)
}

// dated returns occurrence uid/count at the given day of November 2026.
func dated(uid string, count int32, day int) *Occurrence {
	o := occ(uid, count, "ns")
	o.LastTime = time.Date(2026, 11, day, 12, 0, 0, 0, time.UTC)
	return o
}

func TestElasticsearchIndexesEachOccurrenceUnderItsKeyInItsDatedIndex(t *testing.T) {
	b := newBulkServer(t)
	s := newESSink(t, ElasticsearchConfig{Hosts: []string{b.srv.URL}, IndexFormat: "kube-events-{2006-01-02}"})
	batch := []*Occurrence{dated("a", 1, 26), dated("a", 2, 27), dated("b", 1, 27)}
	if n, err := s.Write(t.Context(), batch); n != 3 || err != nil {
		t.Fatal(n, err)
	}
	want := []string{"kube-events-2026-11-26/a/1", "kube-events-2026-11-27/a/2", "kube-events-2026-11-27/b/1"}
	if got := b.stored(); !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
	var doc struct {
		Metadata struct{ UID string }
		Reason   string
	}
	if err := json.Unmarshal(b.docs["kube-events-2026-11-27/b/1"], &doc); err != nil || doc.Reason != "Test" {
		t.Errorf("document %s: %v", b.docs["kube-events-2026-11-27/b/1"], err)
	}
}

func TestElasticsearchWritingAgainAfterACrashReplacesTheDocuments(t *testing.T) {
	b := newBulkServer(t)
	s := newESSink(t, ElasticsearchConfig{Hosts: []string{b.srv.URL}, Index: "events"})
	batch := []*Occurrence{occ("a", 1, "ns"), occ("b", 1, "ns")}
	for range 2 {
		if n, err := s.Write(t.Context(), batch); n != 2 || err != nil {
			t.Fatal(n, err)
		}
	}
	if got := b.stored(); !slices.Equal(got, []string{"events/a/1", "events/b/1"}) {
		t.Errorf("stored %v, want each occurrence once", got)
	}
}

func TestElasticsearchUseEventIDKeepsOneDocumentPerEvent(t *testing.T) {
	b := newBulkServer(t)
	s := newESSink(t, ElasticsearchConfig{Hosts: []string{b.srv.URL}, Index: "events", UseEventID: Bool{V: true}})
	if n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns"), occ("a", 2, "ns")}); n != 2 || err != nil {
		t.Fatal(n, err)
	}
	if got := b.stored(); !slices.Equal(got, []string{"events/a"}) {
		t.Errorf("stored %v, want one document under the event's UID", got)
	}
}

func TestElasticsearchRefusedItemEndsTheStoredPrefix429RetryableMapperErrorPermanent(t *testing.T) {
	for status, want := range map[int]struct {
		permanent bool
		reason    string
	}{429: {false, "es_rejected_execution_exception"}, 400: {true, "mapper_parsing_exception"}} {
		b := newBulkServer(t)
		b.answer = func(id string) int {
			if id == "b/1" {
				return status
			}
			return 0
		}
		s := newESSink(t, ElasticsearchConfig{Hosts: []string{b.srv.URL}, Index: "events"})
		n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns"), occ("b", 1, "ns"), occ("c", 1, "ns")})
		if n != 1 || err == nil || IsPermanent(err) != want.permanent || !strings.Contains(err.Error(), want.reason) {
			t.Errorf("item status %d: n %d, err %v; want 1 stored and permanent=%v", status, n, err, want.permanent)
		}
	}
}

func TestElasticsearchBatchTooLargeForTheServerIsWrittenInHalves(t *testing.T) {
	b := newBulkServer(t)
	s := newESSink(t, ElasticsearchConfig{Hosts: []string{b.srv.URL}, Index: "events"})
	batch := []*Occurrence{occ("a", 1, "ns"), occ("b", 1, "ns"), occ("c", 1, "ns"), occ("d", 1, "ns"), occ("e", 1, "ns")}
	one, _ := EventEncoder("")(batch[0])
	b.maxBody = 2*len(one) + 200 // two documents and their actions
	for len(batch) > 0 {
		n, err := s.Write(t.Context(), batch)
		if n == 0 || err != nil {
			t.Fatalf("%d left: n %d, err %v; want a prefix stored", len(batch), n, err)
		}
		batch = batch[n:]
	}
	if got := b.stored(); len(got) != 5 {
		t.Errorf("stored %v, want all five", got)
	}
	b.maxBody = 10
	n, err := s.Write(t.Context(), []*Occurrence{occ("f", 1, "ns")})
	wantFailure(t, "one document too large", n, err, true)
}

func TestElasticsearchRequestErrorsAreRetryableOrPermanentByStatus(t *testing.T) {
	b := newBulkServer(t)
	s := newESSink(t, ElasticsearchConfig{Hosts: []string{b.srv.URL}, Index: "events"})
	wantStatusClasses(t, s, func(status int) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.status = status
	}, map[int]bool{503: false, 429: false, 500: false, 401: true, 403: true, 413: true})
}

func TestElasticsearchUnreachableIsRetryable(t *testing.T) {
	s := newESSink(t, ElasticsearchConfig{Hosts: []string{"http://" + deadAddr()}, Index: "events"})
	n, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")})
	wantFailure(t, "unreachable", n, err, false)
}

func TestElasticsearchSendsBasicAuthOrAPIKey(t *testing.T) {
	b := newBulkServer(t)
	basic := newESSink(t, ElasticsearchConfig{Hosts: []string{b.srv.URL}, Index: "e", Username: "u", Password: "p"})
	key := newESSink(t, ElasticsearchConfig{Hosts: []string{b.srv.URL}, Index: "e", APIKey: "k"})
	for _, s := range []*ElasticsearchSink{basic, key} {
		if _, err := s.Write(t.Context(), []*Occurrence{occ("a", 1, "ns")}); err != nil {
			t.Fatal(err)
		}
	}
	if len(b.auth) != 2 || b.auth[0] != "Basic dTpw" || b.auth[1] != "ApiKey k" {
		t.Errorf("authorization %q", b.auth)
	}
}

func TestElasticsearchReceiverRetriesA429AndCountsAMapperRejection(t *testing.T) {
	b := newBulkServer(t)
	tries := map[string]int{}
	b.answer = func(id string) int {
		tries[id]++
		switch {
		case id == "u2/1" && tries[id] == 1:
			return http.StatusTooManyRequests
		case id == "u5/1":
			return http.StatusBadRequest
		}
		return 0
	}
	c := parseOK(t, `route: {match: [{receiver: es}]}
receivers:
  - name: es
    batch: 4
    retry: {initialBackoff: 1ms, maxBackoff: 1ms}
    opensearch:
      hosts: [`+b.srv.URL+`]
      index: kube-events
      layout: {reason: "{{ .Reason }}", object: "{{ .InvolvedObject.Name }}"}
`)
	p, err := NewPipeline(c, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keys := publishN(t, p, 8)
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, k := range keys {
		if k != "u5/1" {
			want = append(want, "kube-events/"+k)
		}
	}
	slices.Sort(want)
	if got := b.stored(); !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
	if st := p.Stats()[0]; st.Dropped[DropRejected] != 1 || st.Retries == 0 || st.Sent != 7 {
		t.Errorf("stats %+v, want 7 sent, one rejected, retries", st)
	}
	if doc := string(b.docs["kube-events/u1/1"]); doc != `{"object":"p-u1","reason":"Test"}` {
		t.Errorf("layout document %s", doc)
	}
}

func TestElasticsearchConfigErrorsNameTheKey(t *testing.T) {
	wantConfigErrors(t, map[string]string{
		"elasticsearch: {index: x}":                                     "elasticsearch.hosts is required",
		"opensearch: {hosts: [http://h:9200]}":                          "opensearch.index or indexFormat is required",
		"elasticsearch: {hosts: [h:9200], index: x}":                    `elasticsearch.hosts "h:9200" is not an http or https URL`,
		"elasticsearch: {cloudID: 'x:!!', index: x}":                    "elasticsearch.cloudID: not a cloud ID",
		"opensearch: {hosts: [http://h], indexFormat: 'a-{'}":           "opensearch.indexFormat",
		"opensearch: {hosts: [http://h], index: Events}":                `opensearch.index "Events": index names are lowercase`,
		"opensearch: {hosts: [http://h], index: x, tls: {certFile: c}}": "opensearch.tls: certFile and keyFile go together",
	})
}

func TestElasticsearchTheirPlaceholdersLoadWithWarnings(t *testing.T) {
	c, err := LoadConfig(theirs + "05-elasticsearch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	es := c.Receivers[0].Elasticsearch
	if es == nil || es.IndexFormat != "kube-events-{2006-01-02}" || es.UseEventID.V {
		t.Fatalf("receiver %+v", c.Receivers[0])
	}
	wantWarnings(t, c, `useEventID: "true|false" is not a boolean`)
}

func TestCloudIDIsTheDeploymentsElasticsearchURL(t *testing.T) {
	// "name:" + base64("eu-west-1.aws.found.io$abc123$kib456")
	u, err := cloudURL("name:ZXUtd2VzdC0xLmF3cy5mb3VuZC5pbyRhYmMxMjMka2liNDU2")
	if err != nil || u != "https://abc123.eu-west-1.aws.found.io" {
		t.Errorf("url %q, %v", u, err)
	}
}

package exporter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// objectGateSink holds the writes of the objects whose gate is closed and
// records, per object, the UIDs it stored.
type objectGateSink struct {
	mu     sync.Mutex
	gates  map[string]chan struct{} // by Regarding.Name
	stored map[string][]string
	all    int
}

func (s *objectGateSink) Write(ctx context.Context, batch []*Occurrence) (int, error) {
	for _, o := range batch {
		if g := s.gates[o.Regarding.Name]; g != nil {
			select {
			case <-g:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range batch {
		s.stored[o.Regarding.Name] = append(s.stored[o.Regarding.Name], o.UID)
		s.all++
	}
	return len(batch), nil
}

func (s *objectGateSink) Close(context.Context) error { return nil }

func (s *objectGateSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all
}

// With several writers, the records of other objects are written while one
// object's write is stuck, each object's in order, and the checkpoint does
// not pass the stuck record: it covers only what precedes it, then
// everything once it is written.
func TestWritersWriteOtherObjectsPastAStuckOneAndTheCheckpointWaitsForIt(t *testing.T) {
	stuck := make(chan struct{})
	s := &objectGateSink{gates: map[string]chan struct{}{"a": stuck}, stored: map[string][]string{}}
	c := testConfig(t, s)
	c.Receivers[0].Writers, c.Receivers[0].Batch = 4, 1
	c.Checkpoint.Interval = Duration(time.Hour)
	store := FileStore{Path: filepath.Join(t.TempDir(), "ck.json")}
	p, err := NewPipeline(c, PipelineOptions{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	seq := []*Occurrence{onObject("b1", 1, "b"), onObject("a1", 1, "a"), onObject("c1", 1, "c"),
		onObject("a2", 1, "a"), onObject("b2", 1, "b"), onObject("c2", 1, "c")}
	for _, o := range seq {
		if err := p.Occurred(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); s.count() < 5 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // b1, c1, b2, c2 written; a1 stuck; a2 waits for it
	}
	s.mu.Lock()
	got := map[string][]string{"b": slices.Clone(s.stored["b"]), "c": slices.Clone(s.stored["c"]), "a": s.stored["a"]}
	s.mu.Unlock()
	if !slices.Equal(got["b"], []string{"b1", "b2"}) || !slices.Equal(got["c"], []string{"c1", "c2"}) || len(got["a"]) != 0 {
		t.Fatalf("stored %v while a1 is stuck, want b1 b2 and c1 c2 only", got)
	}
	p.saveCheckpoint(t.Context())
	ck, err := store.Load(t.Context())
	if err != nil || ck == nil {
		t.Fatalf("checkpoint %v, %v", ck, err)
	}
	if ck.Counts["b1"] != 1 || ck.Counts["a1"] != 0 || ck.Counts["c1"] != 0 || ck.Counts["b2"] != 0 {
		t.Errorf("checkpoint counts %v: want b1 only, which precedes the stuck a1", ck.Counts)
	}
	close(stuck)
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.stored["a"], []string{"a1", "a2"}) {
		t.Errorf("a stored %v, want a1 then a2", s.stored["a"])
	}
	ck, err = store.Load(t.Context())
	if err != nil || ck == nil || ck.Counts["c2"] != 1 || ck.Counts["a2"] != 1 {
		t.Errorf("checkpoint after the shutdown %v, %v: want every occurrence", ck, err)
	}
}

// A webhook receiver writes with DefaultWriters writers: requests about
// different objects are in flight at once, never two about one object,
// and each object's records arrive in order.
func TestWebhookPostsSeveralObjectsAtOnceAndEachObjectInOrder(t *testing.T) {
	var mu sync.Mutex
	inFlight, most := map[string]int{}, 0
	arrived := map[string][]string{}
	total := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rec struct {
			Metadata       struct{ UID string }  `json:"metadata"`
			InvolvedObject struct{ Name string } `json:"involvedObject"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &rec); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		obj := rec.InvolvedObject.Name
		mu.Lock()
		inFlight[obj]++
		n := 0
		for _, v := range inFlight {
			n += v
		}
		most = max(most, n)
		if inFlight[obj] > 1 {
			t.Errorf("two requests about %s at once", obj)
		}
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // a server's round trip, so that writes overlap
		mu.Lock()
		inFlight[obj]--
		arrived[obj] = append(arrived[obj], rec.Metadata.UID)
		total++
		mu.Unlock()
	}))
	defer srv.Close()
	c := parseOK(t, "route: {match: [{receiver: hook}]}\nreceivers:\n  - name: hook\n    webhook: {endpoint: \""+srv.URL+"\"}\n")
	if w := c.Receivers[0].Writers; w != DefaultWriters {
		t.Fatalf("webhook writers %d, want %d", w, DefaultWriters)
	}
	p, err := NewPipeline(c, PipelineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if err := p.Occurred(t.Context(), onObject(fmt.Sprintf("e%02d", i), 1, fmt.Sprint("o", i%10))); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if total != 60 || most < 2 {
		t.Errorf("%d records arrived, at most %d requests at once: want 60, several at once", total, most)
	}
	for obj, uids := range arrived {
		if !slices.IsSorted(uids) {
			t.Errorf("%s's records arrived out of order: %v", obj, uids)
		}
	}
}

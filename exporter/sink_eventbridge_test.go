package exporter

import (
	"encoding/json"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter/internal/awstest"
)

// No EventBridge emulator installs here: these tests run against
// awstest.Fake, with PutEvents' shapes from the EventBridge API reference.

// eventBridgeEntry is one entry of PutEvents' input.
type eventBridgeEntry struct {
	Source, DetailType, Detail, EventBusName, TraceHeader string
	Resources                                             []string
	Time                                                  float64 // a timestamp: epoch seconds
}

// fakeEventBridge is an EventBridge bus behind an awstest.Fake; refuse
// gives the error code of entries by their detail (once).
type fakeEventBridge struct {
	*awstest.Fake
	mu      sync.Mutex
	entries []eventBridgeEntry
	refuse  map[string]string
}

func newFakeEventBridge(t *testing.T) *fakeEventBridge {
	f := &fakeEventBridge{Fake: awstest.NewFake(t, "events", "AWSEvents"), refuse: map[string]string{}}
	awstest.Handle(f.Fake, "PutEvents", func(in struct {
		Entries    []eventBridgeEntry
		EndpointId string
	}) (any, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		out, failed := make([]map[string]string, len(in.Entries)), 0
		for i, e := range in.Entries {
			if code, ok := f.refuse[e.Detail]; ok {
				delete(f.refuse, e.Detail)
				out[i], failed = map[string]string{"ErrorCode": code, "ErrorMessage": "refused"}, failed+1
				continue
			}
			f.entries = append(f.entries, e)
			out[i] = map[string]string{"EventId": f.NextID()}
		}
		return map[string]any{"FailedEntryCount": failed, "Entries": out}, nil
	})
	return f
}

// eventBridgeReceiver returns the sink of an eventbridge receiver with
// the keys of body, its region and endpoint set to the test's and f.
func eventBridgeReceiver(t *testing.T, f *fakeEventBridge, body string) Sink {
	t.Helper()
	return fakeReceiver(t, "receivers:\n  - name: eb\n    eventbridge:\n"+body, f.URL,
		func(r *Receiver) *AWSConfig { return &r.EventBridge.AWSConfig })
}

func TestEventBridgePutsTheirDetailTypeSourceBusAndDetailsLayout(t *testing.T) {
	f := newFakeEventBridge(t)
	// kubernetes-event-exporter's README example, unchanged.
	s := eventBridgeReceiver(t, f, `      detailType: "deployment"
      source: "cd"
      eventBusName: "default"
      region: "ap-southeast-1"
      details:
        message: "{{ .Message }}"
        namespace: "{{ .Namespace }}"
        reason: "{{ .Reason }}"
        object: "{{ .Namespace }}"
`)
	before := time.Now()
	var batch []*Occurrence
	for _, uid := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		batch = append(batch, occ(uid, 1, "prod"))
	}
	if n, err := s.Write(t.Context(), batch); n != len(batch) || err != nil {
		t.Fatal(n, err)
	}
	if reqs := f.Requests(); len(reqs) != 2 {
		t.Errorf("%d requests, want 2 (PutEvents takes 10 entries)", len(reqs))
	}
	for i, e := range f.entries {
		var detail map[string]string
		if err := json.Unmarshal([]byte(e.Detail), &detail); err != nil {
			t.Fatal(err)
		}
		o := batch[i]
		want := map[string]string{"message": o.Message, "namespace": "prod", "reason": o.Reason, "object": "prod"}
		sent := time.Unix(0, int64(e.Time*1e9))
		if e.Source != "cd" || e.DetailType != "deployment" || e.EventBusName != "default" || !maps.Equal(detail, want) ||
			sent.Before(before.Truncate(time.Second)) || sent.After(time.Now()) {
			t.Errorf("entry %d: %+v, detail %v; want source cd, deployment, bus default, %v, the time of the write", i, e, detail, want)
		}
	}
}

func TestEventBridgeWithoutABusNamePutsOnTheDefaultBusTheRecordAsDetail(t *testing.T) {
	f := newFakeEventBridge(t)
	s := eventBridgeReceiver(t, f, "      detailType: kube\n      source: k8s\n")
	o := occ("a", 1, "ns")
	if n, err := s.Write(t.Context(), []*Occurrence{o}); n != 1 || err != nil {
		t.Fatal(n, err)
	}
	if e := f.entries[0]; e.EventBusName != "" || e.Detail != string(o.EventJSON("")) {
		t.Errorf("entry %+v, want no bus name and the record as detail", e)
	}
}

func TestEventBridgeRefusedEntriesAreRetriedOrPermanentByTheirCode(t *testing.T) {
	f := newFakeEventBridge(t)
	s := eventBridgeReceiver(t, f, "      detailType: kube\n      source: k8s\n")
	for code, permanent := range map[string]bool{"ThrottlingException": false, "InternalFailure": false,
		"MalformedDetail": true, "NotAuthorizedForSourceException": true, "InvalidArgument": true} {
		o := occ(code, 1, "ns")
		f.mu.Lock()
		f.refuse[string(o.EventJSON(""))] = code
		f.mu.Unlock()
		n, err := s.Write(t.Context(), []*Occurrence{o})
		wantFailure(t, code, n, err, permanent)
	}
}

func TestEventBridgeRequiresTheirDetailTypeAndSource(t *testing.T) {
	wantConfigErrors(t, map[string]string{
		"eventbridge: {source: cd}":                                  "eventbridge.detailType is required",
		"eventbridge: {detailType: d}":                               "eventbridge.source is required",
		"eventbridge: {detailType: d, source: s, endpoint: ftp://x}": `eventbridge.endpoint "ftp://x" is not an http or https URL`,
	})
}

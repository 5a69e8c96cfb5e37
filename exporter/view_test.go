package exporter

import (
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/fanout-go/fanout/debug"
)

// viewPage returns the live view's JSON.
func viewPage(t *testing.T, base string) debug.Page {
	t.Helper()
	code, body := get(t, base+DebugViewPath+"?format=json")
	if code != 200 {
		t.Fatalf("%s: %d %s", DebugViewPath, code, body)
	}
	var p debug.Page
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// field returns the value of the field named name, or nil.
func field(sec debug.SectionView, name string) any {
	for _, f := range sec.Fields {
		if f.Name == name {
			return f.Value
		}
	}
	return nil
}

// holdingBack reports whether p shows the state a hung sink settles in: the
// source waiting for a full queue whose runner holds a batch. On the way the
// view can show the source waiting before the runner took its batch, or
// after it did and before the source refilled the queue.
func holdingBack(p debug.Page) bool {
	if len(p.Sections) != 2 || len(p.Sections[1].Broadcasters) == 0 {
		return false
	}
	b := p.Sections[1].Broadcasters[0]
	return len(b.Waiting) > 0 && b.Waiting[0].Queued == b.Waiting[0].QueueLength &&
		len(b.WatcherList) > 0 && b.WatcherList[0].Runner != nil && b.WatcherList[0].Runner.InFlight > 0
}

// A sink whose writes hang fills its queue (Wait, 16) and holds the source
// back: the live view, served beside /metrics, names it as what the source
// waits for, with the batch its write holds, and shows the checkpoint's pending
// changes and the leader state; /metrics says the same.
func TestRunServesTheLiveViewOfASinkHoldingTheSourceBack(t *testing.T) {
	var objs []runtime.Object
	for i := range 40 {
		objs = append(objs, coreEvent(fmt.Sprintf("e%02d", i), 1))
	}
	cs := fake.NewClientset(objs...)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &memSink{gate: make(chan struct{})}
	ck := filepath.Join(t.TempDir(), "ck.json")
	stop := runExporter(t, Options{Config: sinkConfig(t, s, ck), Client: cs, Listener: l})
	base := "http://" + l.Addr().String()
	var p debug.Page
	for p = viewPage(t, base); !holdingBack(p); p = viewPage(t, base) {
		waitABit()
	}
	// A page renders its sections one after the other: the first one seen
	// settled may have its state section from before. Nothing moves once
	// settled, so the next page shows it whole.
	p = viewPage(t, base)
	state, sinks := p.Sections[0], p.Sections[1]
	if state.Name != "fanout-eventer" || field(state, "leader") != true {
		t.Errorf("state section %+v: want fanout-eventer, leading", state)
	}
	if n, _ := field(state, "checkpoint pending").(float64); n <= 0 {
		t.Errorf("checkpoint pending %v: the sink holds every change back", field(state, "checkpoint pending"))
	}
	b := sinks.Broadcasters[0]
	if w := b.Waiting[0]; w.WatcherName != "s0" || w.Queued != 16 || w.QueueLength != 16 {
		t.Errorf("the source waits for %+v, want s0 with its queue of 16 full", w)
	}
	first := b.WatcherList[0]
	// The hung write holds the batch the runner took: what was queued when it
	// looked, up to the receiver's Batch of 4, and nothing else has been read.
	if r := first.Runner; first.Name != "s0" || first.BlockingSecs == nil || r == nil ||
		r.InFlight < 1 || r.InFlight > 4 || r.Received != uint64(r.InFlight) || r.Written != 0 {
		t.Errorf("first watcher %+v (runner %+v): want s0, blocking, one batch of 1 to 4 in flight", first, r)
	}
	_, metrics := get(t, base+"/metrics")
	if !strings.Contains(metrics, `fanout_eventer_sink_blocking{sink="s0"} 1`) {
		t.Errorf("/metrics does not say s0 holds the source back")
	}
	close(s.gate)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// Without a checkpoint nothing is ever written, and the view, as /metrics,
// shows no checkpoint state: a pending count that only grows would read as
// a stuck sink.
func TestLiveViewShowsNoCheckpointStateWithoutACheckpoint(t *testing.T) {
	cs := fake.NewClientset(coreEvent("a", 1))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &memSink{target: 1, reached: make(chan struct{})}
	stop := runExporter(t, Options{Config: testConfig(t, s), Client: cs, Listener: l})
	<-s.reached
	state := viewPage(t, "http://"+l.Addr().String()).Sections[0]
	for _, f := range state.Fields {
		if strings.HasPrefix(f.Name, "checkpoint") {
			t.Errorf("field %q = %v without a checkpoint", f.Name, f.Value)
		}
	}
	if field(state, "routed nowhere") == nil {
		t.Error("the pipeline's fields are missing")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

package harness

import (
	"strings"
	"testing"
	"time"
)

// Both recorders, fed the same events, make the same sink calls: a Create
// for the first event about each pod, a Patch for every repeat, one call
// per event.
func TestMeasureRecord(t *testing.T) {
	pods := recordPods()
	const events = RecordBatch + 200 // one full batch and a partial one
	for _, s := range RecordSystems() {
		smp, err := measureRecord(s, pods, events)
		if err != nil {
			t.Fatalf("%s: %v", s.Label(), err)
		}
		want := sinkCalls{creates: RecordPods, patches: events - RecordPods}
		if smp.calls != want || smp.events != events || smp.counted != events/2 {
			t.Errorf("%s: %s for %d events, %d counted for allocations; want %s, %d", s.Label(), smp.calls, smp.events,
				smp.counted, want, events/2)
		}
		if !smp.settled || smp.elapsed <= 0 || smp.eventsPerSec() <= 0 || smp.mallocs == 0 {
			t.Errorf("%s: settled %v, elapsed %v, %v events/s, %d mallocs", s.Label(), smp.settled, smp.elapsed,
				smp.eventsPerSec(), smp.mallocs)
		}
	}
	if _, err := measureRecord(Fanout(StrategyWait, APIPull), pods, 10); err == nil {
		t.Error("measureRecord of a system that is no recorder: no error")
	}
}

func TestCheckSameSinkCalls(t *testing.T) {
	smp := func(creates, patches, updates int64) recordSample {
		return recordSample{events: creates + patches + updates, calls: sinkCalls{creates, updates, patches}}
	}
	systems := RecordSystems()
	same := [][]recordSample{{smp(200, 800, 0), smp(200, 800, 0)}, {smp(200, 800, 0), smp(200, 800, 0)}}
	if err := checkSameSinkCalls(systems, same); err != nil {
		t.Errorf("same calls: %v", err)
	}
	for name, tt := range map[string]struct {
		samples [][]recordSample
		want    []string
	}{
		"a Create instead of a Patch": {
			[][]recordSample{{smp(200, 800, 0)}, {smp(201, 799, 0)}},
			[]string{"different sink calls", "201 Create, 799 Patch", "client-go tools/record", "200 Create, 800 Patch", "fanout k8s/record"},
		},
		"an Update instead of a Patch": {
			[][]recordSample{{smp(200, 800, 0), smp(200, 799, 1)}, {smp(200, 800, 0)}},
			[]string{"different sink calls", "1 Update", "repetition 2"},
		},
		"a lost event": {
			[][]recordSample{{smp(200, 800, 0)}, {{events: 1000, calls: sinkCalls{creates: 200, patches: 799}}}},
			[]string{"client-go tools/record", "999 sink calls", "for 1000 events"},
		},
	} {
		err := checkSameSinkCalls(systems, tt.samples)
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v; want an error with %q", name, err, w)
			}
		}
	}
}

// A sink that stops receiving calls ends the wait with an error instead of
// hanging.
func TestSinkWaitForGivesUp(t *testing.T) {
	defer func(d time.Duration) { recordStallTimeout = d }(recordStallTimeout)
	recordStallTimeout = 20 * time.Millisecond
	s := &countingSink{}
	s.creates.Add(3)
	if err := s.waitFor(3); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := s.waitFor(4)
	if err == nil || !strings.Contains(err.Error(), "3 of 4 events reached the sink") || time.Since(start) < recordStallTimeout {
		t.Errorf("waitFor(4) with 3 calls: %v after %v", err, time.Since(start))
	}
}

func TestConfigsRunRecord(t *testing.T) {
	for name, cfg := range map[string]Config{"default": DefaultConfig(), "quick": QuickConfig()} {
		if err := cfg.Validate(); err != nil || !cfg.runs(KindRecord) || cfg.RecordEvents < 2*RecordBatch {
			t.Errorf("%s config: %v, runs record %v, %d events", name, err, cfg.runs(KindRecord), cfg.RecordEvents)
		}
	}
}

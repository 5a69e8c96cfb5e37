package harness

import (
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// Both recorders, fed the same events, make the same sink calls: a Create
// for the first event about each pod, a Patch for every repeat, one call
// per event, and the same about each pod, from one goroutine or several.
func TestMeasureRecord(t *testing.T) {
	pods := recordPods()
	const events = RecordBatch + 200 // two rounds
	for _, producers := range []int{1, 8} {
		var first []sinkCalls
		for _, s := range RecordSystems() {
			name := fmt.Sprintf("%s P=%d", s.Label(), producers)
			smp, err := measureRecord(s, pods, events, producers)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			n := int64(recordEvents(events, producers))
			want := sinkCalls{creates: RecordPods, patches: n - RecordPods}
			// Allocations are counted from the first round boundary at or
			// past half the events: two rounds, of 350 events, or of 44
			// then 43 per producer.
			counted := map[int]int64{1: 350, 8: 696 - 8*44}[producers]
			if smp.calls != want || smp.events != n || smp.counted != counted {
				t.Errorf("%s: %s for %d events, %d counted for allocations; want %s, %d, %d", name, smp.calls, smp.events,
					smp.counted, want, n, counted)
			}
			if len(smp.byPod) != RecordPods+1 || smp.byPod[RecordPods] != (sinkCalls{}) || smp.byPod[0].creates != 1 {
				t.Errorf("%s: calls per pod %v", name, smp.byPod)
			}
			if first == nil {
				first = smp.byPod
			} else if p := firstDiff(first, smp.byPod); p >= 0 {
				t.Errorf("%s: calls about pod %d: %s, the other recorder %s", name, p, smp.byPod[p], first[p])
			}
			if !smp.settled || smp.elapsed <= 0 || smp.eventsPerSec() <= 0 || smp.mallocs == 0 || smp.heap == 0 {
				t.Errorf("%s: settled %v, elapsed %v, %v events/s, %d mallocs, heap %d", name, smp.settled, smp.elapsed,
					smp.eventsPerSec(), smp.mallocs, smp.heap)
			}
		}
	}
	if _, err := measureRecord(Fanout(StrategyWait, APIPull), pods, 10, 1); err == nil {
		t.Error("measureRecord of a system that is no recorder: no error")
	}
}

// The counted half's heap statistics give the allocations, the GC cycles
// per 10,000 events and the heap it began with.
func TestRecordSampleCountedHalf(t *testing.T) {
	m0 := runtime.MemStats{Mallocs: 100, NumGC: 3, HeapAlloc: 8 << 20}
	m1 := runtime.MemStats{Mallocs: 600, NumGC: 7, HeapAlloc: 9 << 20}
	var s recordSample
	s.countedHalf(&m0, &m1, 20000)
	if s.mallocs != 500 || s.counted != 20000 || s.gcs != 4 || s.heap != 8<<20 || s.gcsPer10k() != 2 {
		t.Errorf("%d mallocs, %d counted, %d GCs (%v per 10k), heap %d; want 500, 20000, 4 (2), %d",
			s.mallocs, s.counted, s.gcs, s.gcsPer10k(), s.heap, 8<<20)
	}
}

// Producer j of P records about the pods i with i mod P = j, in turn, its
// share of each round: every pod gets events, and no pod two producers.
func TestRecordRoundsSplitPods(t *testing.T) {
	pods := recordPods()
	rr := newRecordRounds(nil, nil, pods, 2000, 8)
	// 250 events each, at most 62 per round: 5 rounds of 50.
	if rr.per != 250 || rr.share != 50 || len(rr.start) != 5 || rr.total != 2000 {
		t.Errorf("per %d, share %d, rounds %d, total %d", rr.per, rr.share, len(rr.start), rr.total)
	}
	seen := map[string]int{}
	for j, own := range rr.own {
		if len(own) != RecordPods/8 {
			t.Errorf("producer %d owns %d pods", j, len(own))
		}
		for _, p := range own {
			seen[p.Name]++
		}
	}
	if len(seen) != RecordPods {
		t.Errorf("%d pods owned", len(seen))
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("%s owned by %d producers", name, n)
		}
	}
}

func TestCheckSameSinkCalls(t *testing.T) {
	smp := func(creates, patches, updates int64) recordSample {
		return recordSample{events: creates + patches + updates, calls: sinkCalls{creates, updates, patches},
			byPod: []sinkCalls{{creates, updates, patches}}}
	}
	// The same calls in all, but not about the same pods.
	swapped := func() recordSample {
		s := smp(200, 800, 0)
		s.byPod = []sinkCalls{{100, 0, 400}, {100, 0, 400}}
		return s
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
		"calls about other pods": {
			[][]recordSample{{smp(200, 800, 0)}, {smp(200, 800, 0), swapped()}},
			[]string{"different sink calls about pod 0", "100 Create, 400 Patch", "client-go tools/record, repetition 2"},
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

// Each measured repetition runs under the profiler label of its system, so
// that a CPU profile of the record and events groups tells the systems
// apart (-cpuprofile, -tagfocus); the goroutine profile shows the label of
// the goroutine measuring.
func TestRecordRepsLabelEachMeasurement(t *testing.T) {
	systems := []System{RecordFanout, RecordClientGo}
	var seen []string
	_, err := recordReps(Config{Reps: 2, RecordEvents: 4 * RecordBatch}, &Results{}, systems, KindRecord, 1,
		func(s System, events int) (recordSample, error) {
			if events != 4*RecordBatch { // the warm-up (2 batches) is not labelled
				return recordSample{settled: true}, nil
			}
			var b strings.Builder
			if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
				return recordSample{}, err
			}
			if !strings.Contains(b.String(), fmt.Sprintf("%q:%q", "system", s.Label())) {
				t.Errorf("measuring %s: no goroutine labelled system=%s", s.Label(), s.Label())
			}
			seen = append(seen, s.Label())
			return recordSample{settled: true}, nil
		})
	if err != nil || len(seen) != 4 {
		t.Fatalf("measured %v, %v; want 4 labelled measurements", seen, err)
	}
}

package harness

import (
	"fmt"
	"strings"
	"testing"

	k8sevents "github.com/fanout-go/fanout/k8s/events"
)

// Both events recorders, fed the same events, make the same sink calls: a
// Create for the first event about each pod and a Patch for its second
// (the series), none for the merged rest, and the same about each pod,
// from one goroutine or several; fanout's goroutines do not grow with the
// events.
func TestMeasureEvents(t *testing.T) {
	pods := recordPods()
	const events = RecordBatch + 200 // two rounds
	for _, producers := range []int{1, 8} {
		var first []sinkCalls
		for _, s := range EventsSystems() {
			name := fmt.Sprintf("%s P=%d", s.Label(), producers)
			smp, err := measureEvents(s, pods, events, producers)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			want := sinkCalls{creates: RecordPods, patches: RecordPods}
			if smp.calls != want || smp.events != int64(recordEvents(events, producers)) {
				t.Errorf("%s: %s for %d events; want %s", name, smp.calls, smp.events, want)
			}
			if first == nil {
				first = smp.byPod
			} else if p := firstDiff(first, smp.byPod); p >= 0 {
				t.Errorf("%s: calls about pod %d: %s, the other recorder %s", name, p, smp.byPod[p], first[p])
			}
			if !smp.settled || smp.elapsed <= 0 || smp.mallocs == 0 || smp.peakGoroutines < producers {
				t.Errorf("%s: settled %v, elapsed %v, %d mallocs, %d goroutines", name, smp.settled, smp.elapsed, smp.mallocs,
					smp.peakGoroutines)
			}
			if s == EventsFanout && smp.peakGoroutines > producers+k8sevents.DefaultWriters+3 {
				t.Errorf("%s: %d goroutines: the producers, the sink and its writers, its maintenance and the probe", name,
					smp.peakGoroutines)
			}
		}
	}
	if _, err := measureEvents(RecordFanout, pods, 10, 1); err == nil {
		t.Error("measureEvents of a system that is no events recorder: no error")
	}
}

func TestCheckSameSeriesCalls(t *testing.T) {
	smp := func(byPod ...sinkCalls) eventsSample {
		var s eventsSample
		for _, c := range byPod {
			s.calls.creates += c.creates
			s.calls.patches += c.patches
			s.calls.updates += c.updates
		}
		s.byPod = append(byPod, sinkCalls{})
		return s
	}
	series, single := sinkCalls{creates: 1, patches: 1}, sinkCalls{creates: 1}
	systems := EventsSystems()
	same := [][]eventsSample{{smp(series, single)}, {smp(series, single), smp(series, single)}}
	if err := checkSameSeriesCalls(systems, same); err != nil {
		t.Errorf("same calls: %v", err)
	}
	for name, tt := range map[string]struct {
		samples [][]eventsSample
		want    string
	}{
		"another pod's series":  {[][]eventsSample{{smp(series, single)}, {smp(single, series)}}, "different sink calls about pod 0"},
		"a second create":       {[][]eventsSample{{smp(sinkCalls{creates: 2, patches: 1})}, {}}, "about pod 0"},
		"an update":             {[][]eventsSample{{smp(sinkCalls{creates: 1, updates: 1})}, {}}, "1 Update"},
		"a patch without event": {[][]eventsSample{{smp(sinkCalls{patches: 1})}, {}}, "fanout k8s/events, repetition 1"},
		"fewer series":          {[][]eventsSample{{smp(series, series)}, {smp(series, single)}}, "different sink calls: 2 Create, 1 Patch"},
	} {
		if err := checkSameSeriesCalls(systems, tt.samples); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want an error with %q", name, err, tt.want)
		}
	}
}

// The events target compares fanout's k8s/events with client-go's
// tools/events recorded from 8 goroutines, and is N/A without them.
func TestEventsTargetNeedsEightProducers(t *testing.T) {
	c := func(s System, producers int, ratio float64) Case {
		c := newCase(KindEvents, s)
		c.Producers, c.RatioVsClientGo = producers, ptr(ratio)
		return c
	}
	for _, tt := range []struct {
		cases []Case
		want  string
	}{
		{[]Case{c(EventsFanout, 8, 6), c(EventsClientGo, 8, 1)}, Pass + " 6.00×"},
		{[]Case{c(EventsFanout, 8, 4), c(EventsClientGo, 8, 1)}, Fail + " 4.00×"},
		{[]Case{c(EventsFanout, 1, 9), c(EventsClientGo, 1, 1)}, NA + " -"},
	} {
		tg := targetNamed(t, EvaluateTargets(tt.cases), "k8s events, 8 producers: fanout k8s/events / client-go tools/events (same sink calls)")
		if tg.Status+" "+tg.Measured != tt.want {
			t.Errorf("fanout %d producers, ratio %v: %+v, want %s", tt.cases[0].Producers, *tt.cases[0].RatioVsClientGo, tg, tt.want)
		}
	}
}

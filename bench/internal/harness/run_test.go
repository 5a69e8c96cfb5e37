package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// tinyConfig runs every kind of measurement in well under a second.
func tinyConfig() Config {
	return Config{
		Watchers: []int{1, 3}, Producers: []int{1, 2}, Reps: 2, Events: 500,
		StallWatchers:   3,
		LatencyWatchers: 2, LatencyRate: 2000, LatencyDuration: 20 * time.Millisecond, LatencyReps: 2,
		LatencyProducers: []int{1, 2}, LatencyHighRate: 4000,
		IdleWatchers: 50, IdlePullWatchers: 80, IdleMemReps: 1,
		IdleCPUWatchers: 2, IdleCPUDuration: 5 * time.Millisecond,
		RecordEvents: 600, RecordProducers: []int{1, 2},
		ReplayHistory: 50,
		TopicCounts:   []int{1, 2}, FilterWatchers: 10,
		WorkingWatchers: []int{1},
		SchedulerRuns:   2,
	}
}

// tinyRun is shared by the tests that only read the results.
var tinyRun = struct {
	res *Results
	err error
}{}

func runTiny(t *testing.T) *Results {
	t.Helper()
	if tinyRun.res == nil && tinyRun.err == nil {
		var progress bytes.Buffer
		tinyRun.res, tinyRun.err = Run(tinyConfig(), &progress)
		if tinyRun.err == nil && !strings.Contains(progress.String(), "done") {
			tinyRun.err = errors.New("no progress lines: " + progress.String())
		}
	}
	if tinyRun.err != nil {
		t.Fatal(tinyRun.err)
	}
	return tinyRun.res
}

func TestRunTiny(t *testing.T) {
	res := runTiny(t)
	// A pair of the tiny run lasts microseconds: its short run may take as
	// long as its long one, and the long one's figure is used.
	if w := slices.DeleteFunc(slices.Clone(res.Warnings), func(w string) bool { return strings.Contains(w, shortAsLong) }); len(w) > 0 {
		t.Errorf("warnings: %q", w)
	}
	count := map[string]int{}
	for _, c := range res.Cases {
		count[c.Kind]++
	}
	want := map[string]int{
		KindThroughput: 2 * (len(ThroughputSystemsFor(1, 1)) + len(ThroughputSystemsFor(1, 2))),
		KindStall:      2 * len(StallSystems()),
		KindLatency:    2*len(LatencySystems(1)) + len(LatencySystems(2)), // light with 1 and 2 producers, high with 1
		KindIdleMemory: len(IdleMemorySystems()),
		KindIdleCPU:    len(IdleCPUSystems()) + 1,
		KindReplay:     len(ReplaySystems()),
		KindRecord:     2 * len(RecordSystems()),
		KindEvents:     2 * len(EventsSystems()),
		KindTopics:     2 * (len(TopicSystems(1)) + len(TopicSystems(2))),
		KindFilter:     len(FilterSystems()),
		KindWorking:    len(WorkingSystems()),
	}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%d %s cases, want %d", count[k], k, n)
		}
	}
	for _, c := range res.Cases {
		checkTinyCase(t, c)
		if c.Run != 1 {
			t.Errorf("%s %s: run %d", c.Kind, c.Label, c.Run)
		}
	}
	// The second run of the scheduler-bound cases the tiny run measures:
	// the light latency of fanout wait pull and chan and k8s wait q100,
	// with 1 and 2 producers (no N=100, no 4 or 8 producers).
	if len(res.Reruns) != 2*3 {
		t.Errorf("%d reruns, want 6", len(res.Reruns))
	}
	for _, c := range res.Reruns {
		checkTinyCase(t, c)
		if c.Run != 2 || c.Kind != KindLatency || c.LatencyRate != 2000 {
			t.Errorf("rerun %s %s: run %d at %d/s", c.Kind, c.Label, c.Run, c.LatencyRate)
		}
	}
	if len(res.Targets) != len(EvaluateTargets(res.Cases)) || len(res.Targets) == 0 {
		t.Fatalf("%d targets", len(res.Targets))
	}
	for _, tg := range res.Targets {
		// Not measured: N is 1 and 3, producers 1 and 2, 80 idle pull
		// watchers, record producers 1 and 2, topics 1 and 2.
		na := strings.Contains(tg.Name, "N=10:") || strings.Contains(tg.Name, "N=10 ") || strings.Contains(tg.Name, "N=100") ||
			strings.Contains(tg.Name, "4 producers") || strings.Contains(tg.Name, "8 producers") ||
			strings.Contains(tg.Name, "N=1000") || strings.Contains(tg.Name, "100000 watchers") ||
			strings.Contains(tg.Name, "10 topics") || strings.Contains(tg.Name, "100 topics") || strings.Contains(tg.Name, "1000 topics")
		if na != (tg.Status == NA) {
			t.Errorf("target %q: status %s", tg.Name, tg.Status)
		}
	}
}

// checkTinyCase checks the figures of one case of the tiny run.
func checkTinyCase(t *testing.T, c Case) {
	t.Helper()
	switch c.Kind {
	case KindThroughput:
		if c.Reps != 2 || c.Published != 500 || c.RatioVsK8s == nil || *c.DeliveredPerSec < 0 || *c.NsPerPublish <= 0 ||
			c.Batch != max(1, strings.Count(c.Label, " b16")*16) {
			t.Errorf("%s N=%d P=%d: %+v", c.Label, c.Watchers, c.Producers, c)
		}
		if c.Label == Reference.Label() && *c.RatioVsK8s != 1 {
			t.Errorf("reference ratio %v, want 1", *c.RatioVsK8s)
		}
		if c.Strategy == StrategyWait && (*c.DropPct != 0 || *c.DeliveredPerSec <= 0) {
			t.Errorf("%s N=%d P=%d: lossless with drop %v%%, %v/s", c.Label, c.Watchers, c.Producers, *c.DropPct, *c.DeliveredPerSec)
		}
	case KindStall:
		if (c.StalledWatchers == 1) != (c.StallRatio != nil) {
			t.Errorf("%s stalled=%d: stall ratio %v", c.Label, c.StalledWatchers, c.StallRatio)
		}
	case KindLatency:
		if *c.P50LatencyNs > *c.P99LatencyNs || *c.P99LatencyNs > *c.P999LatencyNs || *c.LatencySamples == 0 {
			t.Errorf("%s: latency %d/%d/%d over %d samples", c.Label, *c.P50LatencyNs, *c.P99LatencyNs, *c.P999LatencyNs, *c.LatencySamples)
		}
		if (c.LatencyRate != 2000 && c.LatencyRate != 4000) || (c.LatencyRate == 4000 && c.Producers != 1) ||
			*c.PublishedPerSec <= 0 || *c.PublishedPerSec > 1.2*float64(c.LatencyRate) {
			t.Errorf("%s P=%d: rate %d, published %v/s", c.Label, c.Producers, c.LatencyRate, *c.PublishedPerSec)
		}
	case KindIdleMemory:
		want := 50
		if c.Label == "fanout wait pull" {
			want = 80
		}
		if *c.IdleBytesPerWatcher <= 0 || c.Watchers != want {
			t.Errorf("%s: %v bytes per idle watcher, %d watchers (want %d)", c.Label, *c.IdleBytesPerWatcher, c.Watchers, want)
		}
	case KindReplay:
		if c.History != 50 || c.Replay != 50 || c.Published < 50 || *c.DeliveredPerSec <= 0 || *c.NsPerReplayedValue <= 0 ||
			c.RatioVsK8s == nil || (c.System == SystemK8s) != (*c.RatioVsK8s == 1) {
			t.Errorf("%s: %+v", c.Label, c)
		}
	case KindIdleCPU:
		if v := *c.IdleCPUMsPerSec; v < 0 || math.IsNaN(v) {
			t.Errorf("%s: idle CPU %v", c.Label, v)
		}
	case KindRecord:
		// 600 events about 200 pods, from 1 or 2 goroutines: a Create
		// for the first event of each pod, a Patch for every repeat.
		if c.Reps != 2 || c.Published != 600 || c.SinkCreates != RecordPods || c.SinkPatches != 600-RecordPods ||
			c.RatioVsClientGo == nil || c.RatioVsK8s == nil || *c.RatioVsK8s != *c.RatioVsClientGo ||
			*c.DeliveredPerSec <= 0 || *c.NsPerPublish <= 0 || *c.AllocsPerEvent <= 0 || (c.Producers != 1 && c.Producers != 2) ||
			c.GCsPer10kEvents == nil || *c.GCsPer10kEvents < 0 || c.HeapMB == nil || *c.HeapMB <= 0 {
			t.Errorf("%s: %+v", c.Label, c)
		}
		if c.Label == RecordClientGo.Label() && *c.RatioVsClientGo != 1 {
			t.Errorf("client-go record ratio %v, want 1", *c.RatioVsClientGo)
		}
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	cfg := tinyConfig()
	cfg.Watchers = []int{0}
	cfg.Reps = 0
	cfg.RecordEvents = 0
	cfg.RecordProducers = []int{8, 0}
	cfg.LatencyProducers = nil
	cfg.ReplayHistory = 0
	cfg.Only = []string{KindRecord, "bogus"}
	_, err := Run(cfg, nil)
	for _, want := range []string{"watcher count 0", "reps 0", "record events 0", `unknown kind "bogus"`, "record producer count 0",
		"no latency producer counts", "replay history 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run with N=0, no reps, no record events and kind bogus: %v; want %q", err, want)
		}
	}
}

// A negative Events is an error, not a silent fallback to the calibrated
// counts: `-events -5` asks for something that cannot be done.
func TestValidateRejectsNegativeEvents(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Events = -5
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "events -5") {
		t.Errorf("Validate with Events -5: %v, want an error naming events -5", err)
	}
	cfg.Events = 0
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate with Events 0 (calibrate): %v", err)
	}
}

// The JSON Lines output has one object per case with every required field,
// numbers where the kind measures them.
func TestWriteJSON(t *testing.T) {
	res := runTiny(t)
	var buf bytes.Buffer
	if err := WriteJSON(&buf, res); err != nil {
		t.Fatal(err)
	}
	required := []string{"kind", "system", "strategy", "api", "watchers", "queue", "producers", "batch", "delivered_per_sec",
		"ratio_vs_client_go", "ns_per_replayed_value", "history", "replay", "run",
		"ns_per_publish", "allocs_per_event", "drop_pct", "idle_bytes_per_watcher", "p50_latency_ns", "p99_latency_ns", "p999_latency_ns"}
	measures := map[string][]string{
		KindThroughput: {"delivered_per_sec", "ns_per_publish", "allocs_per_event", "drop_pct", "ratio_vs_k8s_wait_q100"},
		KindStall:      {"ns_per_publish", "producer_ns_per_publish", "drop_pct"},
		KindLatency:    {"p50_latency_ns", "p99_latency_ns", "p999_latency_ns", "latency_rate", "published_per_sec"},
		KindIdleMemory: {"idle_bytes_per_watcher"},
		KindIdleCPU:    {"idle_cpu_ms_per_sec"},
		KindRecord:     {"delivered_per_sec", "ns_per_publish", "allocs_per_event", "ratio_vs_k8s_wait_q100", "ratio_vs_client_go", "spread_pct"},
		KindReplay:     {"delivered_per_sec", "ns_per_replayed_value", "allocs_per_event", "ratio_vs_k8s_wait_q100", "history", "replay"},
		KindTopics:     {"delivered_per_sec", "ns_per_publish", "ratio_vs_fanout", "ratio_vs_by_hand", "out_of_order", "topics", "short_published"},
		KindFilter:     {"delivered_per_sec", "ns_per_publish", "ratio_vs_by_hand", "short_published"},
		KindWorking:    {"delivered_per_sec", "ns_per_publish", "ratio_vs_fanout", "ratio_vs_limit", "out_of_order", "short_published"},
	}
	sc := bufio.NewScanner(&buf)
	lines := 0
	for sc.Scan() {
		lines++
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d: %v", lines, err)
		}
		for _, f := range required {
			if _, ok := m[f]; !ok {
				t.Errorf("line %d: no field %q", lines, f)
			}
		}
		kind, _ := m["kind"].(string)
		for _, f := range measures[kind] {
			if v, ok := m[f].(float64); !ok || v < 0 {
				t.Errorf("line %d (%s): %s = %v", lines, kind, f, m[f])
			}
		}
		// Null where the tiny run's pairs were too short for the CPU clock.
		if v, ok := m["cpu_ns_per_delivered"].(float64); ok && v < 0 {
			t.Errorf("line %d (%s): cpu_ns_per_delivered = %v", lines, kind, v)
		}
		if sys := m["system"]; sys != "fanout" && sys != "k8s" && sys != "chan" && sys != "teivah" && sys != "kelindar" && sys != SystemDisruptor && sys != SystemLimit && sys != SystemCskr && sys != SystemWatermill &&
			!(kind == KindIdleCPU && sys == "none") && !((kind == KindRecord || kind == KindEvents) && sys == SystemClientGo) {
			t.Errorf("line %d: system %v", lines, sys)
		}
		if b, _ := m["batch"].(float64); kind != KindIdleCPU && b != 1 && !(kind == KindThroughput && b == DefaultBatch) {
			t.Errorf("line %d: batch %v", lines, m["batch"])
		}
		if n, _ := m["watchers"].(float64); kind != KindIdleCPU && n < 1 {
			t.Errorf("line %d: watchers %v", lines, m["watchers"])
		}
	}
	if lines != len(res.Cases)+len(res.Reruns) {
		t.Errorf("%d lines for %d cases and %d reruns", lines, len(res.Cases), len(res.Reruns))
	}
}

func TestWriteReport(t *testing.T) {
	res := runTiny(t)
	var buf bytes.Buffer
	if err := WriteReport(&buf, res); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"== throughput: 1 watcher, 1 producer ==", "== throughput: 3 watchers, 2 producers ==",
		"vs k8s wait q100", "1.00×", "== stalled watcher", "== publish→receive latency", "== idle memory",
		"== idle CPU", FloorLabel, "== targets ==", res.Machine.String(), "fanout wait-timeout chan",
		"== k8s record: 600 events about 200 pods", "200 Create + 400 Patch", "fanout k8s/record", "client-go tools/record",
		"k8s record vs client-go record", "fanout wait pull b16", "teivah q100", "kelindar q50000",
		"== publish→receive latency: 2 watchers, 2 producers", "== publish→receive latency: 2 watchers, 1 producer, 4000 events/s",
		"== scheduler-bound ratios: each run", "run 2",
		"published/s", "disruptor q128", "cskr q100", "== replay: a late joiner starts with the last 50 values",
		"fanout WithReplay", "k8s WatchWithPrefix + app history", "== k8s record: 600 events about 200 pods into a no-op sink, 2 producers",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if n := strings.Count(out, "k8s wait q100 "); n < 4 {
		t.Errorf("k8s wait q100 appears in %d rows", n)
	}
}

func TestWriteChart(t *testing.T) {
	res := runTiny(t)
	var buf bytes.Buffer
	if err := WriteChart(&buf, res); err != nil {
		t.Fatal(err)
	}
	svg := buf.String()
	if !strings.HasPrefix(svg, "<?xml") || !strings.Contains(svg, "<svg") {
		t.Fatalf("not an SVG document: %.100q", svg)
	}
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("invalid XML: %v", err)
		}
	}
	for _, s := range ChartSystems() {
		if !strings.Contains(svg, s.Label()) {
			t.Errorf("chart has no line for %s", s.Label())
		}
	}
	if err := WriteChart(io.Discard, &Results{}); err == nil {
		t.Error("WriteChart with no case: no error")
	}
}

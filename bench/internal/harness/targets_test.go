package harness

import (
	"bytes"
	"strings"
	"testing"
)

func thr(s System, n int, perSec float64) Case { return thrP(s, n, 1, perSec) }

func thrP(s System, n, producers int, perSec float64) Case {
	c := newCase(KindThroughput, s)
	c.Watchers, c.Producers, c.Published = n, producers, 10_000
	c.DeliveredPerSec, c.AllocsPerEvent = ptr(perSec), ptr(0.0)
	return c
}

func latP(s System, producers int, p99 int64) Case {
	c := newCase(KindLatency, s)
	c.Producers, c.P99LatencyNs = producers, ptr(p99)
	return c
}

// targetNamed returns the target of targets with the given name.
func targetNamed(t *testing.T, targets []Target, name string) Target {
	t.Helper()
	for _, tg := range targets {
		if tg.Name == name {
			return tg
		}
	}
	t.Fatalf("no target %q", name)
	return Target{}
}

func TestEvaluateTargets(t *testing.T) {
	pull, ch := Fanout(StrategyWait, APIPull), Fanout(StrategyWait, APIChan)
	cases := []Case{
		thr(pull, 100, 200e6), thr(Reference, 100, 10e6), thr(Baseline, 100, 40e6), thr(ch, 100, 25e6),
		thr(pull, 10, 90e6), thr(Reference, 10, 10e6),
	}
	timeout := thr(Fanout(StrategyWaitTimeout, APIChan), 10, 1e6)
	timeout.AllocsPerEvent = ptr(0.2)
	// 200 values published, 100 counted: too few to resolve 0.01.
	few := thr(pull, 10_000, 1e6)
	few.Published, few.AllocsPerEvent = 200, ptr(0.15)
	cases = append(cases, timeout, few)
	cases = append(cases, latP(pull, 1, 30e3), latP(ch, 1, 90e3), latP(Reference, 1, 80e3))
	mem := newCase(KindIdleMemory, pull)
	mem.IdleBytesPerWatcher = ptr(250.0)
	cases = append(cases, mem)
	cpu := func(label string, s System, v float64) Case {
		c := newCase(KindIdleCPU, s)
		c.Label, c.IdleCPUMsPerSec = label, ptr(v)
		return c
	}
	cases = append(cases, cpu(FloorLabel, System{Name: "none"}, 1.5), cpu(pull.Label(), pull, 2.2), cpu(ch.Label(), ch, 2.7))
	stall := newCase(KindStall, Fanout(StrategyDrop, APIPull))
	stall.StalledWatchers, stall.StallRatio = 1, ptr(2.5)
	cases = append(cases, stall)
	rec := func(s System, perSec, ratio float64) Case {
		c := newCase(KindRecord, s)
		c.Watchers, c.Producers, c.DeliveredPerSec, c.RatioVsK8s, c.AllocsPerEvent = 1, 1, ptr(perSec), ptr(ratio), ptr(17.0)
		return c
	}
	cases = append(cases, rec(RecordFanout, 200e3, 6.44), rec(RecordClientGo, 35e3, 1))

	want := map[string]string{
		"lossless N=100: fanout wait pull / k8s wait q100":                                Pass + " 20.0×",
		"lossless N=100: fanout wait pull / raw chan":                                     Pass + " 5.0×",
		"lossless N=10: fanout wait pull / k8s wait q100":                                 Fail + " 9.0×",
		"lossless N=1000: fanout wait pull / k8s wait q100":                               NA + " -",
		"ResultChan N=100: fanout wait chan / k8s wait q100":                              Fail + " 2.5×",
		"idle memory per watcher: fanout wait pull":                                       Pass + " 250 B",
		"p99 latency at light load: fanout wait pull / k8s wait q100":                     Pass + " 0.38×",
		"p99 latency at light load: fanout wait chan / k8s wait q100":                     Fail + " 1.12×",
		"idle CPU: fanout wait pull":                                                      Pass + " 2.200 ms/s (floor 1.500)",
		"idle CPU: fanout wait chan":                                                      Fail + " 2.700 ms/s (floor 1.500)",
		"stalled watcher: fanout drop pull ns/publish stalled / not":                      Fail + " 2.50×",
		"stalled watcher: fanout evict chan among wait ns/publish stalled / not":          NA + " -",
		"allocations per published event, worst fanout case, wait-timeout":                Fail + " 0.2000 (fanout wait-timeout chan, N=10, P=1)",
		"allocations per published event, worst fanout case, wait/drop/drop-oldest/evict": Pass + " 0.0000 (fanout wait pull, N=100, P=1)",
		"k8s record vs client-go record":                                                  Pass + " 6.4×",
	}
	got := map[string]string{}
	for _, tg := range EvaluateTargets(cases) {
		got[tg.Name] = tg.Status + " " + tg.Measured
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: got %q, want %q", name, got[name], w)
		}
	}

	var buf bytes.Buffer
	res := &Results{Cases: cases, Targets: EvaluateTargets(cases)}
	if err := WriteReport(&buf, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "FAIL  lossless N=10: fanout wait pull / k8s wait q100") ||
		!strings.Contains(buf.String(), "of 66 targets met") {
		t.Errorf("report targets:\n%s", buf.String())
	}
}

// Issue 10's targets: each compares figures of the same run, with the
// producers, batch and N it names; the peer target names the fastest peer.
func TestEvaluateTargetsPeersProducersBatchesAndScale(t *testing.T) {
	pull := Fanout(StrategyWait, APIPull)
	cases := []Case{
		thr(pull, 1, 60e6), thr(Limit, 1, 90e6), thr(Baseline, 1, 15e6), thr(Teivah, 1, 20e6), thr(Kelindar, 1, 70e6), thr(Reference, 1, 5e6),
		thr(pull, 10, 100e6), thr(FanoutBatch(16), 10, 320e6), thr(Teivah, 10, 30e6),
		// At N=100 kelindar/event is ahead of fanout at queue 100, and compared
		// with fanout at its own queue length.
		thr(pull, 100, 200e6), thr(Kelindar, 100, 300e6), thr(FanoutAtKelindarQueue, 100, 900e6),
		thr(Fanout(StrategyDrop, APIPull), 100, 120e6), thr(Fanout(StrategyDropOldest, APIPull), 100, 90e6),
		thr(K8s(StrategyDrop, 100), 100, 10e6), thr(K8s(StrategyDrop, 100), 100, 10e6),
		// At N=1000 go-disruptor is ahead of fanout at queue 100, and compared
		// with fanout at its own ring length.
		thr(pull, 1000, 80e6), thr(Disruptor, 1000, 90e6), thr(FanoutAtDisruptorRing, 1000, 117e6),
		thr(pull, 10_000, 310e6), thr(Reference, 10_000, 10e6),
		thrP(pull, 10, 4, 60e6), thrP(Reference, 10, 4, 10e6), thrP(Baseline, 10, 4, 50e6),
		thrP(pull, 100, 4, 150e6), thrP(Reference, 100, 4, 10e6),
		latP(pull, 4, 50e3), latP(Fanout(StrategyWait, APIChan), 4, 200e3), latP(Reference, 4, 100e3),
	}
	mem := newCase(KindIdleMemory, pull)
	mem.Watchers, mem.IdleBytesPerWatcher = 100_000, ptr(280.0)
	rec8 := newCase(KindRecord, RecordFanout)
	rec8.Producers, rec8.RatioVsClientGo = 8, ptr(4.5)
	cases = append(cases, mem, rec8)
	want := map[string]string{
		"1 producer, lossless N=1: fanout wait pull / fastest lossless peer, at its queue length":     Fail + " 0.86× (kelindar q50000)",
		"1 producer, lossless N=10: fanout wait pull / fastest lossless peer, at its queue length":    Pass + " 3.33× (teivah q100)",
		"1 producer, lossless N=100: fanout wait pull / fastest lossless peer, at its queue length":   Pass + " 3.00× (kelindar q50000)",
		"4 producers, lossless N=10: fanout wait pull / k8s wait q100":                                Pass + " 6.00×",
		"4 producers, lossless N=10: fanout wait pull / raw chan":                                     Fail + " 1.20×",
		"4 producers, lossless N=100: fanout wait pull / k8s wait q100":                               Pass + " 15.00×",
		"4 producers, lossless N=1000: fanout wait pull / k8s wait q100":                              NA + " -",
		"lossless N=100: fanout wait pull, 4 producers / 1 producer":                                  Pass + " 0.75×",
		"1 producer, N=100: fanout drop pull / fanout wait pull":                                      Pass + " 0.60×",
		"1 producer, N=100: fanout drop-oldest pull / fanout wait pull":                               Fail + " 0.45×",
		"1 producer, N=100: fanout drop pull / k8s drop q100":                                         Pass + " 12.00×",
		"1 producer, N=100: fanout drop-oldest pull / k8s drop q100":                                  Fail + " 9.00×",
		"1 producer, lossless N=10000: fanout wait pull / k8s wait q100":                              Pass + " 31.00×",
		"idle memory per watcher, 100000 watchers: fanout wait pull (heap + stacks)":                  Pass + " 280 B",
		"k8s record, 8 producers: fanout k8s/record / client-go tools/record (same sink calls)":       Fail + " 4.50×",
		"p99 latency, 4 producers: fanout wait pull / k8s wait q100 (4 producers)":                    Pass + " 0.50×",
		"p99 latency, 4 producers: fanout wait chan / k8s wait q100 (4 producers)":                    Fail + " 2.00×",
		"p99 latency at light load: fanout wait pull / k8s wait q100":                                 NA + " -",
		"k8s record vs client-go record":                                                              NA + " -",
		"1 producer, lossless N=10000: fanout wait pull / fastest lossless peer, at its queue length": Pass + " 31.00× (k8s wait q100)",
		"1 producer, lossless N=1000: fanout wait pull / fastest lossless peer, at its queue length":  Pass + " 1.30× (disruptor q128)",
		"allocations per published event, worst fanout case, wait/drop/drop-oldest/evict":             Pass + " 0.0000 (fanout wait pull, N=1, P=1)",
		"lossless N=10: fanout wait pull / k8s wait q100":                                             NA + " -",
		"idle memory per watcher: fanout wait pull":                                                   Pass + " 280 B",
		"allocations per published event, worst fanout case, wait-timeout":                            NA + " -",
		"stalled watcher: fanout drop pull ns/publish stalled / not":                                  NA + " -",
		"idle CPU: fanout wait pull":                                                                  NA + " -",
	}
	got := map[string]string{}
	for _, tg := range EvaluateTargets(cases) {
		got[tg.Name] = tg.Status + " " + tg.Measured
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: got %q, want %q", name, got[name], w)
		}
	}

	// Fewer than 100,000 idle watchers: the 300-byte target is not measured.
	cases[len(cases)-2].Watchers = 10_000
	for _, tg := range EvaluateTargets(cases) {
		if strings.HasPrefix(tg.Name, "idle memory per watcher, 100000") && tg.Status != NA {
			t.Errorf("%s with 10,000 watchers: %s", tg.Name, tg.Status)
		}
	}
}

// The record target takes the median of per-repetition ratios, else the
// ratio of the medians, and is N/A without both recorders.
func TestRecordTarget(t *testing.T) {
	rec := func(s System, perSec float64, ratio *float64) Case {
		c := newCase(KindRecord, s)
		c.Producers, c.DeliveredPerSec, c.RatioVsK8s = 1, ptr(perSec), ratio
		return c
	}
	for _, tt := range []struct {
		name  string
		cases []Case
		want  string
	}{
		{"per-repetition ratio", []Case{rec(RecordFanout, 100e3, ptr(2.9)), rec(RecordClientGo, 30e3, ptr(1.0))}, Fail + " 2.9×"},
		{"ratio of medians", []Case{rec(RecordFanout, 100e3, nil), rec(RecordClientGo, 25e3, nil)}, Pass + " 4.0×"},
		{"no client-go", []Case{rec(RecordFanout, 100e3, nil)}, NA + " -"},
		{"not measured", []Case{thr(Reference, 100, 10e6)}, NA + " -"},
	} {
		var got string
		for _, tg := range EvaluateTargets(tt.cases) {
			if tg.Name == "k8s record vs client-go record" {
				got = tg.Status + " " + tg.Measured
				if tg.Want != "≥ 3×" {
					t.Errorf("want %q", tg.Want)
				}
			}
		}
		if got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestFormat(t *testing.T) {
	for v, want := range map[float64]string{13.2e9: "13.20G", 137.04e6: "137.0M", 5400: "5.4k", 12: "12"} {
		if got := FormatRate(v); got != want {
			t.Errorf("FormatRate(%v) = %q, want %q", v, got, want)
		}
	}
	for v, want := range map[float64]string{13.24: "13.2×", 2.456: "2.46×", 1: "1.00×"} {
		if got := FormatRatio(ptr(v)); got != want {
			t.Errorf("FormatRatio(%v) = %q, want %q", v, got, want)
		}
	}
	if got := FormatRatio(nil); got != "-" {
		t.Errorf("FormatRatio(nil) = %q", got)
	}
	for v, want := range map[float64]string{1e8: "100M", 1e6: "1M", 1e4: "10k", 1e9: "1G", 10: "10"} {
		if got := axisRate(v); got != want {
			t.Errorf("axisRate(%v) = %q, want %q", v, got, want)
		}
	}
}

// The limit targets compare fanout wait pull with the limit ring in the
// same repetitions (RatioVsLimit): 1.1× at N=1 (issue 38), 1× from N=10 on;
// N/A where the ring was not measured. Raw channels at N=1 are no target
// any more, whatever they measured.
func TestLimitTargets(t *testing.T) {
	pull := Fanout(StrategyWait, APIPull)
	at := func(n int, r float64) Case {
		c := thr(pull, n, 100e6)
		c.RatioVsLimit = ptr(r)
		return c
	}
	cases := []Case{at(1, 1.08), at(10, 0.98), at(100, 1.3), thr(pull, 1000, 100e6), thr(Baseline, 1, 10e6)}
	got := map[string]string{}
	for _, tg := range EvaluateTargets(cases) {
		got[tg.Name] = tg.Status + " " + tg.Measured
		if strings.Contains(tg.Name, "raw chan") && strings.Contains(tg.Name, "N=1:") {
			t.Errorf("a target against raw channels at N=1: %+v", tg)
		}
	}
	if w := got["1 producer, lossless N=1: fanout wait pull / limit"]; w != Fail+" 1.08×" {
		t.Errorf("N=1 at 1.08×: %q", w)
	}
	cases[0].RatioVsLimit = ptr(1.1)
	want := map[string]string{
		"1 producer, lossless N=1: fanout wait pull / limit":    Pass + " 1.10×",
		"1 producer, lossless N=10: fanout wait pull / limit":   Fail + " 0.98×",
		"1 producer, lossless N=100: fanout wait pull / limit":  Pass + " 1.30×",
		"1 producer, lossless N=1000: fanout wait pull / limit": NA + " -",
	}
	for _, tg := range EvaluateTargets(cases) {
		got[tg.Name] = tg.Status + " " + tg.Measured
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: got %q, want %q", name, got[name], w)
		}
	}
}

// The filter target wants WithFilter at least as fast as reading by hand
// (the topics targets are tested in topics_test.go).
func TestTopicsAndFilterTargets(t *testing.T) {
	filter := func(s System, ratio float64) Case {
		c := newCase(KindFilter, s)
		c.RatioVsByHand = ptr(ratio)
		return c
	}
	cases := []Case{filter(FanoutFilter, 0.8), filter(FanoutByHand, 1)}
	want := map[string]string{
		"filter, 1 value in 10 kept: fanout WithFilter / reading all and discarding by hand": Pass + " 0.80×",
	}
	got := map[string]string{}
	for _, tg := range EvaluateTargets(cases) {
		got[tg.Name] = tg.Status + " " + tg.Measured
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: got %q, want %q", name, got[name], w)
		}
	}
}

// The filter targets (issue 38): read with Recv, WithFilter at least 0.8×
// reading everything and discarding by hand (its cost, an indirect call
// per value); through ResultChan, where the publisher sends only the kept
// values, at least as fast as by hand.
func TestFilterTargetsWantFourFifthsWithRecvAndOneThroughResultChan(t *testing.T) {
	filter := func(api string, ratio float64) Case {
		c := newCase(KindFilter, System{Name: SystemFanout, Strategy: StrategyWait, API: api, Queue: DefaultQueue})
		c.RatioVsByHand = ptr(ratio)
		return c
	}
	pull := "filter, 1 value in 10 kept: fanout WithFilter / reading all and discarding by hand"
	ch := "filter, 1 value in 10 kept, ResultChan: fanout WithFilter / receiving all and discarding by hand"
	for _, tt := range []struct {
		recv, resultChan float64
		want             [2]string
	}{
		{0.79, 1.0, [2]string{Fail + " 0.79× ≥ 0.8×", Pass + " 1.00× ≥ 1×"}},
		{0.85, 0.95, [2]string{Pass + " 0.85× ≥ 0.8×", Fail + " 0.95× ≥ 1×"}},
	} {
		got := EvaluateTargets([]Case{filter(APIFilter, tt.recv), filter(APIFilterChan, tt.resultChan)})
		for i, name := range []string{pull, ch} {
			if tg := targetNamed(t, got, name); tg.Status+" "+tg.Measured+" "+tg.Want != tt.want[i] {
				t.Errorf("%s: %s %s %s, want %s", name, tg.Status, tg.Measured, tg.Want, tt.want[i])
			}
		}
	}
}

// The targets against k8s judge the median of the ratios of the same
// repetitions (RatioVsK8s, the figure shown beside fanout's), not the
// ratio of the two medians, which a drift of the machine between
// repetitions moves.
func TestTargetsAgainstK8sJudgeThePairedRatio(t *testing.T) {
	ch := Fanout(StrategyWait, APIChan)
	paired := thr(ch, 100, 28e6)
	paired.RatioVsK8s = ptr(3.1)
	cases := []Case{paired, thr(Reference, 100, 10e6)}
	got := targetNamed(t, EvaluateTargets(cases), "ResultChan N=100: fanout wait chan / k8s wait q100")
	if got.Status != Pass || got.Measured != "3.1×" {
		t.Errorf("with a paired ratio of 3.1× (2.8× of the medians): %s %s, want PASS 3.1×", got.Status, got.Measured)
	}
	paired.RatioVsK8s = nil
	got = targetNamed(t, EvaluateTargets([]Case{paired, thr(Reference, 100, 10e6)}), "ResultChan N=100: fanout wait chan / k8s wait q100")
	if got.Status != Fail || got.Measured != "2.8×" {
		t.Errorf("without a paired ratio: %s %s, want FAIL 2.8× (the ratio of the medians)", got.Status, got.Measured)
	}
}

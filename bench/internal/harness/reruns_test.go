package harness

import (
	"math"
	"strings"
	"testing"
)

func inRun(run int, cases ...Case) []Case {
	for i := range cases {
		cases[i].Run = run
	}
	return cases
}

// The scheduler-bound targets take the median of the runs' ratios, and
// name each; a run that failed one (run 1 here) does not decide it.
func TestSchedulerBoundTargetsAreJudgedOnTheMedianOfTheRuns(t *testing.T) {
	pull, ch := Fanout(StrategyWait, APIPull), Fanout(StrategyWait, APIChan)
	ev := func(ratio float64) []Case {
		f, g := newCase(KindEvents, EventsFanout), newCase(KindEvents, EventsClientGo)
		f.Producers, g.Producers, f.RatioVsClientGo = 8, 8, ptr(ratio)
		return []Case{f, g}
	}
	var cases []Case
	for run, r := range []struct {
		p99      int64   // fanout wait pull's, against k8s's 100 µs
		p4, evts float64 // fanout 4 producers against 200 M/s with 1; events ratio
	}{{160e3, 30e6, 3.65}, {90e3, 170e6, 5.23}, {70e3, 140e6, 4.97}} {
		cases = append(cases, inRun(run+1, latP(pull, 1, r.p99), latP(ch, 1, 120e3), latP(Reference, 1, 100e3),
			thrP(pull, 100, 1, 200e6), thrP(pull, 100, 4, r.p4))...)
		cases = append(cases, inRun(run+1, ev(r.evts)...)...)
	}
	got := EvaluateTargets(cases)
	for name, want := range map[string]string{
		"p99 latency at light load: fanout wait pull / k8s wait q100": Pass + " 0.90× (median of 3 runs: 1.60×, 0.90×, 0.70×)",
		"p99 latency at light load: fanout wait chan / k8s wait q100": Fail + " 1.20× (median of 3 runs: 1.20×, 1.20×, 1.20×)",
		"lossless N=100: fanout wait pull, 4 producers / 1 producer":  Pass + " 0.70× (median of 3 runs: 0.15×, 0.85×, 0.70×)",
		"k8s events, 8 producers: fanout k8s/events / client-go tools/events (same sink calls)": Fail +
			" 4.97× (median of 3 runs: 3.65×, 5.23×, 4.97×)",
		"p99 latency, 4 producers: fanout wait pull / k8s wait q100 (4 producers)": NA + " -",
	} {
		if tg := targetNamed(t, got, name); tg.Status+" "+tg.Measured != want {
			t.Errorf("%s: %s %s, want %s", name, tg.Status, tg.Measured, want)
		}
	}
}

// Only the scheduler-bound targets see the reruns: every other target is
// judged on the first run's cases, whatever a rerun measured.
func TestRerunsCountOnlyTowardsTheSchedulerBoundTargets(t *testing.T) {
	pull := Fanout(StrategyWait, APIPull)
	cases := []Case{thr(pull, 100, 200e6), thr(Reference, 100, 10e6), thrP(pull, 100, 4, 160e6)}
	cases = append(cases, inRun(2, thr(pull, 100, 20e6), thrP(pull, 100, 4, 20e6))...)
	got := EvaluateTargets(cases)
	if tg := targetNamed(t, got, "lossless N=100: fanout wait pull / k8s wait q100"); tg.Measured != "20.0×" {
		t.Errorf("%s: %s, want the first run's 20.0×", tg.Name, tg.Measured)
	}
	// Two runs, 0.8× and 1.0×: the median is their mean.
	if tg := targetNamed(t, got, "lossless N=100: fanout wait pull, 4 producers / 1 producer"); tg.Measured != "0.90× (median of 2 runs: 0.80×, 1.00×)" {
		t.Errorf("%s: %s", tg.Name, tg.Measured)
	}
}

func TestRunsOfSplitsTheCasesByRun(t *testing.T) {
	pull := Fanout(StrategyWait, APIPull)
	runs := runsOf(append([]Case{thr(pull, 1, 1), thr(pull, 10, 1)}, inRun(3, thr(pull, 100, 1))...))
	if len(runs) != 3 || len(runs[0]) != 2 || len(runs[1]) != 0 || len(runs[2]) != 1 || runs[2][0].Watchers != 100 {
		t.Errorf("runs: %v", runs)
	}
	if runs := runsOf(nil); len(runs) != 1 || runs[0] != nil {
		t.Errorf("no cases: %v", runs)
	}
	if m, each := medianOfRuns(runs, func([]Case) float64 { return math.NaN() }); !math.IsNaN(m) || each != nil {
		t.Errorf("never measured: %v %v", m, each)
	}
}

// The report gives each run's scheduler-bound ratios and the median.
func TestReportShowsEachRunsSchedulerBoundRatios(t *testing.T) {
	pull := Fanout(StrategyWait, APIPull)
	res := &Results{Cases: inRun(1, latP(pull, 1, 50e3), latP(Reference, 1, 100e3)),
		Reruns: append(inRun(2, latP(pull, 1, 150e3), latP(Reference, 1, 100e3)), inRun(3, latP(pull, 1, 80e3), latP(Reference, 1, 100e3))...)}
	var b strings.Builder
	if err := reportReruns(&b, res); err != nil {
		t.Fatal(err)
	}
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"== scheduler-bound ratios", "run 1", "run 3", "median",
		"p99 latency at light load: fanout wait pull / k8s wait q100 0.50× 1.50× 0.80× 0.80×"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

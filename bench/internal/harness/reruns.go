package harness

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// The scheduler-bound targets compare how the scheduler interleaves two
// systems, or one system's producers, on a shared machine: p99 latency at
// 10,000 values/s against k8s (a hundred goroutines woken per value),
// fanout with 4 producers against 1, k8s/events against client-go with 8
// recording goroutines. The same binary passes and fails them from one run
// to the next (issue 22: 0.43× and 0.84× for 4 producers / 1, 0.72× and
// 1.61× for a p99 ratio, in two runs of one build), so, as issue 38
// decided, they are judged on the median of [Config].SchedulerRuns runs:
// the run of every group, and that many less one reruns, after every
// other group, of the cases these targets compare (fanout wait pull at
// N=100 with 1 and 4 producers; fanout wait pull and chan and k8s wait
// q100 at the light latency rate with each producer count measured; both
// events recorders with 8 producers). The reruns' cases are in
// [Results].Reruns, with [Case].Run 2 and up; the report gives each run's
// ratio and the median.

// schedulerBound is one scheduler-bound target: its name and condition,
// and the ratio it checks, from the cases of one run.
type schedulerBound struct {
	name, want string
	ok         func(float64) bool
	ratio      func(cases []Case) float64
}

// schedulerBoundTargets returns the scheduler-bound targets, in report
// order.
func schedulerBoundTargets() []schedulerBound {
	pull, ch := Fanout(StrategyWait, APIPull), Fanout(StrategyWait, APIChan)
	atMost1 := func(r float64) bool { return r <= 1 }
	p99 := func(name string, s System, producers int) schedulerBound {
		return schedulerBound{name, "≤ 1.0×", atMost1, func(cs []Case) float64 { return p99Ratio(cs, s, producers) }}
	}
	return []schedulerBound{
		p99("p99 latency at light load: "+pull.Label()+" / k8s wait q100", pull, 1),
		p99("p99 latency at light load: "+ch.Label()+" / k8s wait q100", ch, 1),
		{"lossless N=100: fanout wait pull, 4 producers / 1 producer", "≥ 0.7×", func(r float64) bool { return r >= 0.7 },
			func(cs []Case) float64 { return deliveredPerSec(cs, pull, 100, 4) / deliveredPerSec(cs, pull, 100, 1) }},
		p99("p99 latency, 4 producers: "+pull.Label()+" / k8s wait q100 (4 producers)", pull, 4),
		p99("p99 latency, 4 producers: "+ch.Label()+" / k8s wait q100 (4 producers)", ch, 4),
		{"k8s events, 8 producers: fanout k8s/events / client-go tools/events (same sink calls)",
			fmt.Sprintf("≥ %g×", MinEventsRatio8), func(r float64) bool { return r >= MinEventsRatio8 },
			func(cs []Case) float64 { return eventsRatio(cs, 8) }},
	}
}

// runsOf splits cases by [Case].Run: the first run (Run 0 or 1) first.
// There is always at least one run, perhaps empty.
func runsOf(cases []Case) [][]Case {
	out := [][]Case{nil}
	for _, c := range cases {
		r := max(c.Run, 1)
		for len(out) < r {
			out = append(out, nil)
		}
		out[r-1] = append(out[r-1], c)
	}
	return out
}

// medianOfRuns returns the median of ratio over the runs that measured
// it, and each of those runs' ratio in run order; NaN if none did.
func medianOfRuns(runs [][]Case, ratio func([]Case) float64) (float64, []float64) {
	var each []float64
	for _, cs := range runs {
		if r := ratio(cs); !math.IsNaN(r) {
			each = append(each, r)
		}
	}
	if len(each) == 0 {
		return math.NaN(), nil
	}
	return Median(each), each
}

// schedulerTargets evaluates the scheduler-bound targets on the median of
// the runs; the measured figure names each run's ratio when there are
// several.
func schedulerTargets(runs [][]Case) []Target {
	var out []Target
	for _, sb := range schedulerBoundTargets() {
		median, each := medianOfRuns(runs, sb.ratio)
		t := check(sb.name, sb.want, median, sb.ok(median), "%.2f×")
		if len(each) > 1 {
			t.Measured += fmt.Sprintf(" (median of %d runs: %s)", len(each), formatRatios(each))
		}
		out = append(out, t)
	}
	return out
}

func formatRatios(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.2f×", r)
	}
	return strings.Join(parts, ", ")
}

// rerunSteps returns the reruns of the scheduler-bound targets' cases,
// runs 2 to cfg.SchedulerRuns, each only where the first run measures the
// same settings.
func rerunSteps(cfg Config, res *Results) []step {
	pull, ch := Fanout(StrategyWait, APIPull), Fanout(StrategyWait, APIChan)
	var out []step
	for run := 2; run <= cfg.SchedulerRuns; run++ {
		about := fmt.Sprintf("rerun %d of %d for the scheduler-bound targets: ", run, cfg.SchedulerRuns)
		if slices.Contains(cfg.Watchers, 100) && slices.Contains(cfg.Producers, 1) && slices.Contains(cfg.Producers, 4) {
			for _, p := range []int{1, 4} {
				out = append(out, step{KindThroughput, about + fmt.Sprintf("fanout wait pull, 100 watchers, %s", plural(p, "producer")),
					rerun(run, func() ([]Case, error) { return throughputGroup(cfg, res, []System{pull}, 100, p) })})
			}
		}
		for _, p := range cfg.LatencyProducers {
			out = append(out, step{KindLatency, about + fmt.Sprintf("latency at %d events/s, %s", cfg.LatencyRate, plural(p, "producer")),
				rerun(run, func() ([]Case, error) {
					return latencyGroup(cfg, res, []System{pull, ch, Reference}, p, cfg.LatencyRate)
				})})
		}
		if slices.Contains(cfg.RecordProducers, 8) {
			out = append(out, step{KindEvents, about + "k8s events, 8 producers",
				rerun(run, func() ([]Case, error) { return eventsGroup(cfg, res, EventsSystems(), 8) })})
		}
	}
	return out
}

// rerun returns measure, its cases marked as of the given run.
func rerun(run int, measure func() ([]Case, error)) func() ([]Case, error) {
	return func() ([]Case, error) {
		cases, err := measure()
		for i := range cases {
			cases[i].Run = run
		}
		return cases, err
	}
}

// reportReruns writes each scheduler-bound ratio of every run and their
// median, if the run has reruns.
func reportReruns(b *strings.Builder, res *Results) error {
	if len(res.Reruns) == 0 {
		return nil
	}
	runs := runsOf(append(slices.Clone(res.Cases), res.Reruns...))
	fmt.Fprintf(b, "\n== scheduler-bound ratios: each run, and the median their targets are judged on ==\n")
	fmt.Fprintf(b, "   run 1 is the groups above; runs 2 to %d rerun only the cases these ratios compare, after every other group\n", len(runs))
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	head := []string{"  ratio"}
	for r := range runs {
		head = append(head, fmt.Sprintf("run %d", r+1))
	}
	fmt.Fprintf(tw, "%s\tmedian\t\n", strings.Join(head, "\t"))
	for _, sb := range schedulerBoundTargets() {
		row := []string{"  " + sb.name}
		for _, cs := range runs {
			row = append(row, fmtRatio(sb.ratio(cs)))
		}
		median, _ := medianOfRuns(runs, sb.ratio)
		fmt.Fprintf(tw, "%s\t%s\t\n", strings.Join(row, "\t"), fmtRatio(median))
	}
	return tw.Flush()
}

// fmtRatio renders r as "0.84×", or "-" if it is NaN.
func fmtRatio(r float64) string {
	if math.IsNaN(r) {
		return "-"
	}
	return fmt.Sprintf("%.2f×", r)
}

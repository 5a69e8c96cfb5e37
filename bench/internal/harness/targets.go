package harness

import (
	"fmt"
	"math"
)

// Target statuses.
const (
	Pass = "PASS"
	Fail = "FAIL"
	NA   = "N/A" // the run did not measure what the target needs
)

// Target is one of the project's performance targets, checked against the
// figures of one run.
type Target struct {
	// Name says what is compared.
	Name string `json:"name"`
	// Want is the condition, e.g. "≥ 20×".
	Want string `json:"want"`
	// Measured is the measured value, formatted; "-" if not measured.
	Measured string `json:"measured"`
	// Status is Pass, Fail or NA.
	Status string `json:"status"`
}

// IdleCPUBudget is the idle CPU, in ms per second above that of the
// harness process with no system at all (the floor: the Go runtime's own
// background work, which decays for some time after a busy phase), under
// which a system is said to burn no CPU.
const IdleCPUBudget = 1.0

// MaxAllocsPerEvent is the allocations per published event under which the
// publish path is said not to allocate: fewer than one per 100 events. An
// allocation per publish, or per wait for room, shows as 0.1 or more; what
// stays below is a reusable buffer of the broadcaster growing once more
// after the warm-up, one or two allocations per measurement.
const MaxAllocsPerEvent = 0.01

// MinRecordRatio is the least events/s of fanout's k8s/record, as a
// multiple of client-go's tools/record, recording into a no-op sink.
const MinRecordRatio = 3.0

// findCase returns the case of the given kind, system, N, producers and
// stalled watchers, or nil.
func findCase(cases []Case, kind string, s System, n, producers, stalled int) *Case {
	for i := range cases {
		c := &cases[i]
		if c.Kind == kind && c.System == s.Name && c.Strategy == s.Strategy && c.API == s.API &&
			c.Queue == s.Queue && c.Batch == s.batch() && c.Watchers == n && c.Producers == producers && c.StalledWatchers == stalled {
			return c
		}
	}
	return nil
}

// findOne returns the only case of the given kind and system, whatever its
// N, or nil.
func findOne(cases []Case, kind string, s System) *Case {
	for i := range cases {
		c := &cases[i]
		if c.Kind == kind && c.System == s.Name && c.Strategy == s.Strategy && c.API == s.API && c.Queue == s.Queue && c.Batch == s.batch() {
			return c
		}
	}
	return nil
}

func check(name, want string, measured float64, ok bool, format string) Target {
	if math.IsNaN(measured) {
		return Target{Name: name, Want: want, Measured: "-", Status: NA}
	}
	t := Target{Name: name, Want: want, Measured: fmt.Sprintf(format, measured), Status: Fail}
	if ok {
		t.Status = Pass
	}
	return t
}

// throughputRatio is the ratio of a's to b's delivered/s with n watchers
// and one producer, or NaN if either was not measured.
func throughputRatio(cases []Case, a, b System, n int) float64 {
	ca, cb := findCase(cases, KindThroughput, a, n, 1, 0), findCase(cases, KindThroughput, b, n, 1, 0)
	if ca == nil || cb == nil || ca.DeliveredPerSec == nil || cb.DeliveredPerSec == nil {
		return math.NaN()
	}
	return *ca.DeliveredPerSec / *cb.DeliveredPerSec
}

// EvaluateTargets checks the project's performance targets against cases,
// the results of one run, and returns them in report order. A target whose
// figures were not measured (e.g. N=1000 left out with -watchers) is NA.
func EvaluateTargets(cases []Case) []Target {
	pull, ch := Fanout(StrategyWait, APIPull), Fanout(StrategyWait, APIChan)
	var out []Target
	ratio := func(name string, a, b System, n int, min float64) {
		r := throughputRatio(cases, a, b, n)
		out = append(out, check(name, fmt.Sprintf("≥ %g×", min), r, r >= min, "%.1f×"))
	}
	ratio("lossless N=100: fanout wait pull / k8s wait q100", pull, Reference, 100, 20)
	ratio("lossless N=100: fanout wait pull / raw chan", pull, Baseline, 100, 4)
	ratio("lossless N=10: fanout wait pull / k8s wait q100", pull, Reference, 10, 10)
	ratio("lossless N=1000: fanout wait pull / k8s wait q100", pull, Reference, 1000, 10)
	ratio("ResultChan N=100: fanout wait chan / k8s wait q100", ch, Reference, 100, 3)

	// Allocations: the strategies that never arm a timer, then wait-timeout,
	// whose bounded wait may.
	allocs := func(name string, match func(Case) bool) {
		worst, where := math.NaN(), ""
		for _, c := range cases {
			if (c.Kind == KindThroughput || c.Kind == KindStall) && c.System == SystemFanout && c.AllocsPerEvent != nil && match(c) {
				if a := *c.AllocsPerEvent; math.IsNaN(worst) || a > worst {
					worst, where = a, fmt.Sprintf(" (%s, N=%d, P=%d)", c.Label, c.Watchers, c.Producers)
				}
			}
		}
		t := check(name, fmt.Sprintf("< %g", MaxAllocsPerEvent), worst, worst < MaxAllocsPerEvent, "%.4f")
		if t.Status != NA {
			t.Measured += where
		}
		out = append(out, t)
	}
	allocs("allocations per published event, worst fanout case, wait/drop/drop-oldest/evict",
		func(c Case) bool { return c.Strategy != StrategyWaitTimeout })
	allocs("allocations per published event, worst fanout case, wait-timeout",
		func(c Case) bool { return c.Strategy == StrategyWaitTimeout })

	idle := math.NaN()
	if c := findOne(cases, KindIdleMemory, pull); c != nil && c.IdleBytesPerWatcher != nil {
		idle = *c.IdleBytesPerWatcher
	}
	out = append(out, check("idle memory per watcher: fanout wait pull", "≤ 512 B", idle, idle <= 512, "%.0f B"))

	k8sLat := findOne(cases, KindLatency, Reference)
	for _, s := range []System{pull, ch} {
		r := math.NaN()
		if c := findOne(cases, KindLatency, s); c != nil && c.P99LatencyNs != nil && k8sLat != nil && k8sLat.P99LatencyNs != nil {
			r = float64(*c.P99LatencyNs) / float64(*k8sLat.P99LatencyNs)
		}
		out = append(out, check("p99 latency at light load: "+s.Label()+" / k8s wait q100", "≤ 1.0×", r, r <= 1, "%.2f×"))
	}

	floor := 0.0
	for _, c := range cases {
		if c.Kind == KindIdleCPU && c.Label == FloorLabel && c.IdleCPUMsPerSec != nil {
			floor = *c.IdleCPUMsPerSec
		}
	}
	for _, s := range []System{pull, ch} {
		v := math.NaN()
		if c := findOne(cases, KindIdleCPU, s); c != nil && c.IdleCPUMsPerSec != nil {
			v = *c.IdleCPUMsPerSec
		}
		t := check("idle CPU: "+s.Label(), fmt.Sprintf("≤ floor + %g ms/s", IdleCPUBudget), v, v <= floor+IdleCPUBudget, "%.3f ms/s")
		if t.Status != NA {
			t.Measured += fmt.Sprintf(" (floor %.3f)", floor)
		}
		out = append(out, t)
	}

	for _, st := range LossyStrategies {
		for _, api := range []string{APIPull, APIChan} {
			s := Fanout(st, api)
			r := math.NaN()
			for i := range cases {
				c := &cases[i]
				if c.Kind == KindStall && c.StalledWatchers > 0 && c.Label == s.Label() && c.StallRatio != nil {
					r = *c.StallRatio
				}
			}
			out = append(out, check("stalled watcher: "+s.Label()+" ns/publish stalled / not", "≤ 2×", r, r <= 2, "%.2f×"))
		}
	}

	// Recording Kubernetes events: fanout's k8s/record against client-go's
	// tools/record, the median of the per-repetition ratios of events/s.
	rec := math.NaN()
	if c := findOne(cases, KindRecord, RecordFanout); c != nil {
		if c.RatioVsK8s != nil {
			rec = *c.RatioVsK8s
		} else if g := findOne(cases, KindRecord, RecordClientGo); g != nil && c.DeliveredPerSec != nil && g.DeliveredPerSec != nil {
			rec = *c.DeliveredPerSec / *g.DeliveredPerSec
		}
	}
	out = append(out, check("k8s record vs client-go record", fmt.Sprintf("≥ %g×", MinRecordRatio), rec, rec >= MinRecordRatio, "%.1f×"))
	return out
}

package harness

import (
	"context"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// run is a sample of one run: values published in d.
func run(values int64, d time.Duration) sample {
	return sample{published: values, expected: values, delivered: values, elapsed: d, pubTime: d, settled: true}
}

// pairsAt returns a pair function whose k-th pair has, for its long run
// of 400,000 values, 1 ms of fixed cost and the k-th rate in M values/s
// (the last one from then on), and its short run of 100,000 values that
// rate too; it counts its calls and the plans it was given.
func pairsAt(ratesM ...float64) (pairFunc, *[]plan) {
	var plans []plan
	return func(p plan) (sample, sample, error) {
		r := ratesM[min(len(plans), len(ratesM)-1)] * 1e6
		plans = append(plans, p)
		at := func(v int64) time.Duration { return time.Millisecond + time.Duration(float64(v)/r*1e9) }
		return run(400_000, at(400_000)), run(100_000, at(100_000)), nil
	}, &plans
}

func noRecalibration(t *testing.T) func() (plan, error) {
	return func() (plan, error) {
		t.Error("recalibrated")
		return plan{}, nil
	}
}

// A pair whose difference agrees with its calibration is kept as it is.
func TestAPairThatAgreesWithItsCalibrationIsMeasuredOnce(t *testing.T) {
	pair, plans := pairsAt(15)
	g, err := remeasure(plan{400_000, 100_000, 10e6}, pair, noRecalibration(t))
	if err != nil || len(*plans) != 1 || g.note != "" || g.d.published != 300_000 || g.plan.rate != 10e6 {
		t.Errorf("%d pairs, %+v, %v", len(*plans), g, err)
	}
}

// A pair ten times faster than its calibration (a burst of load on its
// short run) is measured again, and the one that agrees is kept, said in
// the note.
func TestAPairThatDisagreesWithItsCalibrationIsMeasuredAgain(t *testing.T) {
	pair, plans := pairsAt(100, 12)
	g, err := remeasure(plan{400_000, 100_000, 10e6}, pair, noRecalibration(t))
	if err != nil || len(*plans) != 2 {
		t.Fatalf("%d pairs, %v", len(*plans), err)
	}
	if r := g.d.rate(); r < 11e6 || r > 13e6 {
		t.Errorf("kept %v/s, want the second pair's 12M/s", r)
	}
	if !strings.Contains(g.note, "(100.0M/s from the difference, 10.0M/s calibrated, ") || !strings.Contains(g.note, "measured 1 time more; the pair kept agrees (12.0M/s)") {
		t.Errorf("note %q", g.note)
	}
}

// A case whose pair disagrees twice in a row is calibrated anew (the load
// may have changed for good since its calibration) and measured with the
// new plan, which it keeps for its later repetitions.
func TestACaseThatGoesOnDisagreeingIsCalibratedAgain(t *testing.T) {
	pair, plans := pairsAt(100)
	recalibrated := 0
	g, err := remeasure(plan{400_000, 100_000, 10e6}, pair, func() (plan, error) {
		recalibrated++
		return plan{400_000, 100_000, 90e6}, nil
	})
	if err != nil || recalibrated != 1 || len(*plans) != 3 || g.plan.rate != 90e6 || (*plans)[2].rate != 90e6 || (*plans)[1].rate != 10e6 {
		t.Fatalf("%d pairs, %d calibrations, plan %+v, %v", len(*plans), recalibrated, g.plan, err)
	}
	if !strings.Contains(g.note, "measured 2 times more, calibrated anew at 90.0M/s; the pair kept agrees") {
		t.Errorf("note %q", g.note)
	}
}

// A case that disagrees with its new calibration too is measured
// MaxRemeasures times with it, and the last pair is kept with a note that
// says it still disagrees.
func TestAPairThatNeverAgreesIsKeptLastWithANote(t *testing.T) {
	pair, plans := pairsAt(100)
	g, err := remeasure(plan{400_000, 100_000, 10e6}, pair, func() (plan, error) { return plan{400_000, 100_000, 11e6}, nil })
	if err != nil || len(*plans) != 2+MaxRemeasures {
		t.Fatalf("%d pairs, %v", len(*plans), err)
	}
	if !strings.Contains(g.note, "measured 4 times more, calibrated anew at 11.0M/s; the pair kept still disagrees (100.0M/s from the difference, 11.0M/s calibrated") {
		t.Errorf("note %q", g.note)
	}
}

// A difference far above what the long run alone achieved says the short
// run took most of the long run's time: it disagrees, even within the
// calibrated rate; so does a difference that is not positive. With fixed
// events (no calibrated rate) nothing disagrees.
func TestAgreesComparesTheDifferenceWithTheLongRunAlone(t *testing.T) {
	p := plan{4000, 1000, 30e6}
	// The long run: 4,000 values in 100 µs + 100 µs; the short one took
	// 190 µs of that for its 1,000: a difference of 3,000 in 10 µs.
	l, s := run(4000, 200*time.Microsecond), run(1000, 190*time.Microsecond)
	if _, why := p.agrees(l, s); !strings.Contains(why, "from the long run alone") {
		t.Errorf("short run of most of the long one's time: %q", why)
	}
	if _, why := p.agrees(run(4000, time.Millisecond), run(1000, time.Millisecond)); why == "" {
		t.Error("a difference of no time agrees")
	}
	if d, why := (plan{4000, 1000, 0}).agrees(l, s); why != "" || d.published != 3000 {
		t.Errorf("fixed events: %q, %+v", why, d)
	}
	if _, why := p.agrees(run(4000, 150*time.Microsecond), run(1000, 50*time.Microsecond)); why != "" {
		t.Errorf("30M/s against 30M/s calibrated and 26.7M/s alone: %q", why)
	}
}

// Measured for real: a case whose calibration claims a rate no pair can
// reach is measured again, calibrated anew for its later repetitions,
// and the report's warnings say so.
func TestGuardedPairCalibratesAnewACaseNoPairAgreesWith(t *testing.T) {
	cfg := tinyConfig()
	cfg.Events, cfg.Target, cfg.MinEvents, cfg.MaxEvents = 0, 2*time.Millisecond, 200, 1_000_000
	res := &Results{}
	p := plan{long: 4000, short: 1000, rate: 1e15}
	d, err := guardedPair(cfg, res, variant{sys: Baseline}, 2, 1, &p, true)
	if err != nil {
		t.Fatal(err)
	}
	if p.rate == 1e15 || p.rate <= 0 || d.published <= 0 {
		t.Errorf("plan %+v, kept %+v", p, d)
	}
	if len(res.Warnings) == 0 || !strings.Contains(res.Warnings[0], "chan q100 N=2 P=1: its windows disagreed with its calibration") {
		t.Errorf("warnings %q", res.Warnings)
	}
}

// A measurement runs under the profiler label naming its system, so that
// -cpuprofile can be cut by system.
func TestAMeasurementCarriesItsSystemAsAProfilerLabel(t *testing.T) {
	var got string
	var ok bool
	labelled(FanoutFilter, func(ctx context.Context) { got, ok = pprof.Label(ctx, "system") })
	if !ok || got != FanoutFilter.Label() {
		t.Errorf("label system = %q (set %v), want %q", got, ok, FanoutFilter.Label())
	}
}

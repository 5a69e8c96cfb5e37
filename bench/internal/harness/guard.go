package harness

import (
	"context"
	"fmt"
	"runtime/pprof"
)

// The window guard. A pair's figure is the difference of its two runs
// ([sample.minus]), which a burst of outside load on one of them can throw
// far off: in one full run, fanout wait pull at N=100 came out so high that
// the lossy/lossless ratios read 0.06–0.07 and 4 producers / 1 producer
// 0.16, where a rerun of the same group minutes later gave 0.59, 0.64 and
// 0.69 (issue 38). So a pair whose windows disagree with its calibration
// is measured again, not reported.

// MaxWindowDisagreement is the factor by which a pair's rate (values
// published per second, from the difference of its runs) may differ from
// the rate its case was calibrated at, and from its long run's own rate,
// before the pair counts as disagreeing ([plan.agrees]). Repetitions of
// one case on the shared 2-core machine spread by up to about this much
// in a noisy spell; the failures it guards against were off by 4 to 10
// times.
const MaxWindowDisagreement = 2.0

// MaxRemeasures is how many times a case is measured with a new
// calibration after a pair and the pair measured again at once both
// disagreed with the old one, before the last pair is kept with a warning.
const MaxRemeasures = 3

// rate is the values published per second of a sample.
func (s sample) rate() float64 { return float64(s.published) / s.elapsed.Seconds() }

// within reports whether a and b are within a factor of
// [MaxWindowDisagreement] of each other.
func within(a, b float64) bool {
	return a > 0 && b > 0 && a <= b*MaxWindowDisagreement && b <= a*MaxWindowDisagreement
}

// agrees reports whether the pair (l, s), measured with p, agrees with its
// windows: its difference is positive, and its rate is within a factor of
// [MaxWindowDisagreement] of the calibrated rate and of the long run's
// own rate (which includes what a run costs once, so is a little lower
// where the difference is right; a difference far above it says the short
// run took most of the long run's time). It returns the difference and a
// description of the disagreement, if any. A plan with no calibrated rate
// (fixed events) has nothing to disagree with.
func (p plan) agrees(l, s sample) (sample, string) {
	d, ok := l.minus(s)
	switch {
	case p.rate == 0:
		return d, ""
	case !ok:
		return d, "the short run took as long as the long one"
	case !within(d.rate(), p.rate) || !within(d.rate(), l.rate()):
		return d, fmt.Sprintf("%s/s from the difference, %s/s calibrated, %s/s from the long run alone",
			FormatRate(d.rate()), FormatRate(p.rate), FormatRate(l.rate()))
	}
	return d, ""
}

// pairFunc measures one pair of a case with a plan, long run first.
type pairFunc func(p plan) (long, short sample, err error)

// guarded is what [remeasure] kept: the difference of the last pair
// measured, the plan it was measured with, and a note if any pair
// disagreed.
type guarded struct {
	d    sample
	plan plan
	note string
}

// remeasure measures a pair with p; if it disagrees with its windows
// ([plan.agrees]), it measures it again at once; if that one disagrees
// too, it calibrates anew with recalibrate (on a shared machine the load
// changes within seconds, and the calibration of a group's systems comes
// before all of their repetitions) and measures up to [MaxRemeasures]
// times with the new plan. It keeps the first pair that agrees, or the
// last one, and says in its note what it did.
func remeasure(p plan, pair pairFunc, recalibrate func() (plan, error)) (guarded, error) {
	first, again := "", 0
	for try := 0; ; try++ {
		if try == 2 {
			np, err := recalibrate()
			if err != nil {
				return guarded{}, err
			}
			p = np
		}
		l, s, err := pair(p)
		if err != nil {
			return guarded{}, err
		}
		d, why := p.agrees(l, s)
		if why != "" && try < 1+MaxRemeasures {
			if first == "" {
				first = why
			}
			again++
			continue
		}
		g := guarded{d: d, plan: p}
		if first != "" {
			g.note = fmt.Sprintf("its windows disagreed with its calibration (%s): measured %s more", first, plural(again, "time"))
			if try >= 2 {
				g.note += fmt.Sprintf(", calibrated anew at %s/s", FormatRate(p.rate))
			}
			if why == "" {
				g.note += fmt.Sprintf("; the pair kept agrees (%s/s)", FormatRate(d.rate()))
			} else {
				g.note += "; the pair kept still disagrees (" + why + ")"
			}
		}
		return g, nil
	}
}

// guardedPair measures v's pair with *p, shortFirst saying which run
// comes first, measuring again while its windows disagree with its
// calibration ([remeasure]); a new calibration replaces *p for the
// case's later repetitions. Every run's anomalies, and what the guard did,
// are added to res's warnings.
func guardedPair(cfg Config, res *Results, v variant, n, producers int, p *plan, shortFirst bool) (sample, error) {
	where := fmt.Sprintf("%s N=%d P=%d", v.sys.Label(), n, producers)
	pair := func(p plan) (sample, sample, error) {
		l, s, err := measurePair(v, n, producers, p, shortFirst)
		res.Warnings = append(res.Warnings, anomalies(v, where, l)...)
		res.Warnings = append(res.Warnings, anomalies(v, where, s)...)
		return l, s, err
	}
	var g guarded
	var err error
	labelled(v.sys, func(context.Context) {
		g, err = remeasure(*p, pair, func() (plan, error) { return calibrate(cfg, v, n, producers) })
	})
	if err != nil {
		return sample{}, err
	}
	*p = g.plan
	if g.note != "" {
		res.Warnings = append(res.Warnings, where+": "+g.note)
	}
	if g.d.short == 0 {
		res.Warnings = append(res.Warnings, where+": "+shortAsLong)
	}
	return g.d, nil
}

// labelled runs f with the profiler label system=s.Label() on its
// goroutine (and in the context it is given), inherited by the goroutines
// it starts, so that a CPU profile of a run (-cpuprofile) can be cut by
// system: go tool pprof -tagfocus=system=....
func labelled(s System, f func(context.Context)) {
	pprof.Do(context.Background(), pprof.Labels("system", s.Label()), f)
}

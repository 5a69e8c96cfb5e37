package harness

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
)

// variant is one system in one setting of a group: with or without stalled
// watchers.
type variant struct {
	sys     System
	stalled int
}

// sample is one throughput measurement.
type sample struct {
	published int64
	expected  int64 // published × read watchers
	delivered int64
	pubTime   time.Duration // first publish until every producer returned
	elapsed   time.Duration // first publish until every consumer returned
	mallocs   uint64        // allocations while the counted values were published
	counted   int64         // values published while allocations were counted
	libDrops  uint64        // drops the library counted (fanout only)
	settled   bool          // every goroutine of the measurement exited
}

func (s sample) deliveredPerSec() float64 { return float64(s.delivered) / s.elapsed.Seconds() }
func (s sample) nsPerPublish() float64 {
	return float64(s.elapsed.Nanoseconds()) / float64(s.published)
}
func (s sample) producerNs() float64     { return float64(s.pubTime.Nanoseconds()) / float64(s.published) }
func (s sample) allocsPerEvent() float64 { return float64(s.mallocs) / float64(s.counted) }
func (s sample) dropPct() float64 {
	if s.expected == 0 {
		return 0
	}
	return 100 * float64(s.expected-s.delivered) / float64(s.expected)
}

// measure runs one throughput measurement: it builds the system with n
// watchers (stalled of them never read), starts every consumer, then
// publishes events values from producers goroutines (events/producers each),
// closes the system once they return, and waits for every consumer and
// goroutine to exit. Timing starts at the first publish.
//
// Allocations are counted over the second half of each producer's values
// only: the producers meet half-way, the heap statistics are read (a stop
// of some microseconds, inside the timed span, while the consumers keep
// draining), and they go on. The first half is the warm-up in which a new
// broadcaster grows its reusable buffers, about log2(N) allocations once,
// which are not a per-event cost; the close is left out for the same reason.
func measure(v variant, n, producers, events int) (sample, error) {
	base := runtime.NumGoroutine()
	r, err := v.sys.start(n, v.stalled, nil)
	if err != nil {
		return sample{}, err
	}
	per := events / producers
	first := per / 2
	var half, done sync.WaitGroup
	half.Add(producers)
	done.Add(producers)
	gate, resume := make(chan struct{}), make(chan struct{})
	for range producers {
		go func() {
			defer done.Done()
			<-gate
			r.inst.publishN(first)
			half.Done()
			<-resume
			r.inst.publishN(per - first)
		}()
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	start := time.Now()
	close(gate)
	half.Wait()
	runtime.ReadMemStats(&m0)
	close(resume)
	done.Wait()
	pubTime := time.Since(start)
	runtime.ReadMemStats(&m1)
	r.finish()
	elapsed := time.Since(start)
	s := sample{
		published: int64(per * producers),
		expected:  int64(per*producers) * int64(n-v.stalled),
		delivered: r.delivered(),
		pubTime:   pubTime,
		elapsed:   elapsed,
		mallocs:   m1.Mallocs - m0.Mallocs,
		counted:   int64((per - first) * producers),
		libDrops:  r.inst.libDropped(),
		settled:   settle(base),
	}
	return s, nil
}

// settle waits (up to 2 s) until the goroutine count is back to base, so that
// no goroutine of one measurement runs during the next. It reports whether it
// got there.
func settle(base int) bool {
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Microsecond)
	}
	return true
}

// calibrate returns the events per measurement of v: cfg.Events if set, or
// else the count that makes one measurement take about cfg.Target, within
// [minEvents, cfg.MaxEvents], found by a small probe and then a full-size
// warm-up run (both discarded). A probe that already has the calibrated
// size is the warm-up: at 10,000 watchers one measurement of k8s takes
// seconds.
func calibrate(cfg Config, v variant, n, producers int) (int, error) {
	round := func(e int) int { return max(producers, e/producers*producers) }
	if cfg.Events > 0 {
		return round(cfg.Events), nil
	}
	lo := minEvents(cfg, n)
	events := min(max(100_000/n, 2*DefaultQueue), 20_000)
	for range 2 {
		s, err := measure(v, n, producers, round(events))
		if err != nil {
			return 0, err
		}
		perEvent := s.elapsed.Seconds() / float64(s.published)
		next := min(max(int(cfg.Target.Seconds()/perEvent), lo), cfg.MaxEvents)
		if round(next) == round(events) {
			break
		}
		events = next
	}
	return round(events), nil
}

// minEvents is the least events per measurement with n watchers:
// cfg.MinEvents up to 1000 watchers, then fewer in proportion, down to
// twice the queue length (200 at 10,000 watchers, 2 million deliveries).
func minEvents(cfg Config, n int) int {
	return min(cfg.MinEvents, max(2*DefaultQueue, cfg.MinEvents*1000/n))
}

// runInterleaved calibrates every variant, then runs cfg.Reps repetitions in
// which every variant is measured once, the order rotated by one variant per
// repetition. It returns the samples per variant.
func runInterleaved(cfg Config, res *Results, variants []variant, n, producers int) ([][]sample, error) {
	events := make([]int, len(variants))
	for i, v := range variants {
		e, err := calibrate(cfg, v, n, producers)
		if err != nil {
			return nil, err
		}
		events[i] = e
	}
	out := make([][]sample, len(variants))
	for rep := range cfg.Reps {
		for k := range variants {
			i := (k + rep) % len(variants)
			s, err := measure(variants[i], n, producers, events[i])
			if err != nil {
				return nil, err
			}
			v := variants[i]
			if !s.settled {
				res.Warnings = append(res.Warnings, fmt.Sprintf("%s N=%d P=%d: goroutines still running after the measurement", v.sys.Label(), n, producers))
			}
			if v.sys.Lossless() && s.delivered != s.expected {
				res.Warnings = append(res.Warnings, fmt.Sprintf("%s N=%d P=%d: lossless system delivered %d of %d values", v.sys.Label(), n, producers, s.delivered, s.expected))
			}
			out[i] = append(out[i], s)
		}
	}
	return out, nil
}

// summarize turns the samples of one variant into a case with medians.
func summarize(kind string, v variant, n, producers int, samples []sample) Case {
	c := newCase(kind, v.sys)
	c.Watchers, c.Producers, c.StalledWatchers, c.Reps = n, producers, v.stalled, len(samples)
	var dps, nsp, prod, apc, drop []float64
	for _, s := range samples {
		dps = append(dps, s.deliveredPerSec())
		nsp = append(nsp, s.nsPerPublish())
		prod = append(prod, s.producerNs())
		apc = append(apc, s.allocsPerEvent())
		drop = append(drop, s.dropPct())
		c.Published = s.published
	}
	c.DeliveredPerSec = ptr(Median(dps))
	c.SpreadPct = ptr(Spread(dps))
	c.NsPerPublish = ptr(Median(nsp))
	c.ProducerNsPerPublish = ptr(Median(prod))
	// The least over repetitions: an allocation per publish shows in every
	// one, while a runtime allocation of a parking consumer (a sudog after a
	// GC emptied the caches) or a buffer growing once shows in some only.
	c.AllocsPerEvent = ptr(slices.Min(apc))
	c.DropPct = ptr(Median(drop))
	return c
}

// throughputGroup measures every system with n watchers and the given number
// of producers, interleaved, and returns one case per system with its ratios
// against [Reference] and [Limit], those that are among systems: the median
// over the repetitions of the ratio of the two systems' delivered/s in the
// same repetition.
func throughputGroup(cfg Config, res *Results, systems []System, n, producers int) ([]Case, error) {
	variants := make([]variant, len(systems))
	for i, s := range systems {
		variants[i] = variant{sys: s}
	}
	samples, err := runInterleaved(cfg, res, variants, n, producers)
	if err != nil {
		return nil, err
	}
	cases := make([]Case, len(variants))
	for i, v := range variants {
		cases[i] = summarize(KindThroughput, v, n, producers, samples[i])
	}
	for r, s := range systems {
		switch s {
		case Reference:
			pairRatios(cases, samples, r, func(c *Case, v float64) { c.RatioVsK8s = ptr(v) })
		case Limit:
			pairRatios(cases, samples, r, func(c *Case, v float64) { c.RatioVsLimit = ptr(v) })
		}
	}
	return cases, nil
}

// pairRatios sets, with set, each case's median ratio of delivered/s to that
// of the system r. Each repetition is paired with r's in the same
// repetition, so that load that varies from one repetition to the next
// cancels.
func pairRatios(cases []Case, samples [][]sample, r int, set func(*Case, float64)) {
	for i := range cases {
		ratios := make([]float64, len(samples[i]))
		for k := range ratios {
			ratios[k] = samples[i][k].deliveredPerSec() / samples[r][k].deliveredPerSec()
		}
		set(&cases[i], Median(ratios))
	}
}

// stallGroup measures each lossy system with cfg.StallWatchers watchers, one
// producer, with no stalled watcher and with one, all interleaved. The
// stalled cases carry the ratio of their producer ns per publish to the
// unstalled one's: whether the stalled watcher slows the producer down.
func stallGroup(cfg Config, res *Results, systems []System) ([]Case, error) {
	n := cfg.StallWatchers
	var variants []variant
	for _, s := range systems {
		variants = append(variants, variant{sys: s}, variant{sys: s, stalled: 1})
	}
	samples, err := runInterleaved(cfg, res, variants, n, 1)
	if err != nil {
		return nil, err
	}
	cases := make([]Case, len(variants))
	for i, v := range variants {
		cases[i] = summarize(KindStall, v, n, 1, samples[i])
		if v.stalled > 0 {
			cases[i].StallRatio = ptr(*cases[i].ProducerNsPerPublish / *cases[i-1].ProducerNsPerPublish)
		}
	}
	return cases, nil
}

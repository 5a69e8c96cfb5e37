package harness

import (
	"fmt"
	"math"
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
	// ordered makes it a working-reader case: the producer publishes the
	// ordered sequence and every reader checks its order (see
	// [KindWorking]).
	ordered bool
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
	cpu       time.Duration // process CPU time from the first publish until every consumer returned
	broken    int64         // values that readers checking the order found out of order (working, topics)
	// long and short are, for a difference ([sample.minus]), the values
	// the long and the short run published; short is 0 for a single run.
	long, short int64
}

func (s sample) deliveredPerSec() float64 { return float64(s.delivered) / s.elapsed.Seconds() }
func (s sample) nsPerPublish() float64 {
	return float64(s.elapsed.Nanoseconds()) / float64(s.published)
}
func (s sample) producerNs() float64     { return float64(s.pubTime.Nanoseconds()) / float64(s.published) }
func (s sample) allocsPerEvent() float64 { return float64(s.mallocs) / float64(s.counted) }

// cpuPerDelivery is the process CPU time per delivered value, in ns; NaN if
// nothing was delivered, or if the CPU time is negative: a difference of
// two runs too short for the process's CPU clock to tell apart (the short
// run took more, from the noise of the runtime's background work).
func (s sample) cpuPerDelivery() float64 {
	if s.delivered <= 0 || s.cpu < 0 {
		return math.NaN()
	}
	return float64(s.cpu.Nanoseconds()) / float64(s.delivered)
}
func (s sample) dropPct() float64 {
	if s.expected == 0 {
		return 0
	}
	// A sample that is the difference of two runs can deliver a little
	// more than it expected (a lossy system dropped more in the short
	// run): that is no drop, not a negative one.
	return max(0, 100*(float64(s.expected)-float64(s.delivered))/float64(s.expected))
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
	if err := validateWorking(v, producers); err != nil {
		return sample{}, err
	}
	base := runtime.NumGoroutine()
	r, err := v.sys.startWith(n, setup{stalled: v.stalled, producers: producers, ordered: v.ordered})
	if err != nil {
		return sample{}, err
	}
	per := events / producers
	first := per / 2
	pr := startProducers(producers, per, publisher(v, r))
	runtime.GC()
	var m0, m1 runtime.MemStats
	cpu0, _ := processCPU()
	start := time.Now()
	close(pr.gate)
	pr.half.Wait()
	runtime.ReadMemStats(&m0)
	close(pr.resume)
	pr.done.Wait()
	pubTime := time.Since(start)
	runtime.ReadMemStats(&m1)
	r.finish()
	elapsed := time.Since(start)
	cpu1, _ := processCPU()
	s := sample{
		published: int64(per * producers),
		expected:  int64(per*producers) * v.sys.readers(n, v.stalled),
		delivered: r.delivered(),
		pubTime:   pubTime,
		elapsed:   elapsed,
		mallocs:   m1.Mallocs - m0.Mallocs,
		counted:   int64((per - first) * producers),
		libDrops:  r.inst.libDropped(),
		settled:   settle(base),
		cpu:       cpu1 - cpu0,
		broken:    r.outOfOrder(),
	}
	return s, nil
}

// publisher returns the function measure's producers publish n values
// with: r's payload, or, for working readers (one producer), the ordered
// sequence, going on where the last call stopped.
func publisher(v variant, r *running) func(n int) {
	if !v.ordered {
		return r.inst.publishN
	}
	sent := 0
	return func(k int) { publishOrdered(r.inst, sent, k); sent += k }
}

// producerRun is measure's publishing goroutines: each publishes the first
// half of its values once gate is closed, marks half, and publishes the
// rest once resume is closed, marking done.
type producerRun struct {
	half, done   sync.WaitGroup
	gate, resume chan struct{}
}

// startProducers starts producers goroutines that publish per values each
// with publish, stopping half-way ([producerRun]).
func startProducers(producers, per int, publish func(int)) *producerRun {
	p := &producerRun{gate: make(chan struct{}), resume: make(chan struct{})}
	p.half.Add(producers)
	p.done.Add(producers)
	for range producers {
		go func() {
			defer p.done.Done()
			<-p.gate
			publish(per / 2)
			p.half.Done()
			<-p.resume
			publish(per - per/2)
		}()
	}
	return p
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

// ShortShare is, in calibration and with a fixed [Config].Events, the ratio
// of a long run's events to a short run's (see [calibrate]).
const ShortShare = 4

// plan is the events of the two runs of a case's measurement pair, and the
// rate (values published per second, from the difference of its last
// probe pair) the calibration found; 0 if the events were fixed
// ([Config].Events) rather than calibrated.
type plan struct {
	long, short int
	rate        float64
}

// measurePair measures v with p.long and with p.short values, the short
// one first if shortFirst, and returns the long and the short samples.
func measurePair(v variant, n, producers int, p plan, shortFirst bool) (long, short sample, err error) {
	for _, first := range []bool{shortFirst, !shortFirst} {
		if first {
			short, err = measure(v, n, producers, p.short)
		} else {
			long, err = measure(v, n, producers, p.long)
		}
		if err != nil {
			return sample{}, sample{}, err
		}
	}
	return long, short, nil
}

// minus returns what the long run l measured beyond the short run s of the
// same case: its extra values, deliveries and time. Costs paid once per
// measurement (building the system, starting and parking the consumers,
// the close and teardown, a ticker's next tick) and the warm-up (growing
// queues and heap, as long as the short run is past it, see [calibrate])
// are in both and cancel, so the figure does not depend on the
// measurement's length. Allocations stay those of l (counted over its second half). If
// the difference is not positive (s took as long as l, which only noise
// can do), it returns l alone and false.
func (l sample) minus(s sample) (sample, bool) {
	d := l
	// A lossy system's deliveries vary from run to run, by more than the
	// difference when it drops nearly everything (evict): none, then.
	d.published, d.expected, d.delivered = l.published-s.published, l.expected-s.expected, max(0, l.delivered-s.delivered)
	d.pubTime, d.elapsed, d.libDrops = l.pubTime-s.pubTime, l.elapsed-s.elapsed, l.libDrops-s.libDrops
	d.cpu, d.broken = l.cpu-s.cpu, l.broken+s.broken // a value out of order in either run is one
	d.settled = l.settled && s.settled
	d.long, d.short = l.published, s.published
	if d.published <= 0 || d.elapsed <= 0 || d.pubTime <= 0 {
		l.long = l.published
		return l, false
	}
	return d, true
}

// calibrate returns the events of v's measurement pair: with cfg.Events,
// that many and a [ShortShare]th of it; otherwise the short run is long
// enough to get past the system's warm-up, and the long one adds the
// values that take about cfg.Target at the steady rate, within
// [minEvents, cfg.MaxEvents].
//
// It probes pairs of E/[ShortShare] and E values, E growing [ShortShare]
// times per probe, and stops at the first probe whose long run takes at
// least cfg.Target/2 and whose rate (from the difference, [sample.minus])
// agrees with those of the two previous probes ([steadyRates]), each at
// least cfg.Target/4 long: the rate is steady from the previous probe's short
// run on, which becomes the short run; or at the
// first whose long run takes 4 cfg.Target, whose short run becomes the
// short run. The long run adds at least twice the short run's values, so that
// the difference is not lost in the short run's noise. The search for the
// warm-up is for kelindar/event: its rate per value grows about fivefold
// over the first million values at 10 watchers, while fanout's is steady
// after a few thousand. Its queues grow to their 50,000-value bound, and
// from the small heap left by the runtime.GC before each run, that growth
// sets off collection after collection: with GOGC=off the same run is
// steady after 50,000 values (7.8 ms, 64 M/s, against 26 ms, 19 M/s). The probes (all discarded) warm the process up too.
func calibrate(cfg Config, v variant, n, producers int) (plan, error) {
	round := func(e int) int { return max(producers, e/producers*producers) }
	if cfg.Events > 0 {
		return plan{long: round(cfg.Events), short: round(cfg.Events / ShortShare)}, nil
	}
	// prev and prev2 are the rates of the two previous probes, 0 if a
	// long run was too short to tell a plateau of the warm-up from the
	// steady rate.
	events, prev, prev2 := min(max(100_000/n, 2*DefaultQueue), 20_000), 0.0, 0.0
	for {
		probe := plan{long: round(events), short: round(events / ShortShare)}
		l, s, err := measurePair(v, n, producers, probe, true)
		if err != nil {
			return plan{}, err
		}
		d, ok := l.minus(s)
		if !ok {
			d = l
		}
		rate := float64(d.published) / d.elapsed.Seconds()
		steady := ok && l.elapsed >= cfg.Target/2 && steadyRates(rate, prev, prev2)
		if steady || l.elapsed >= 4*cfg.Target || events >= cfg.MaxEvents {
			short := probe.short
			if steady { // the previous probe's rate, from its short run on, agrees
				short = round(events / (ShortShare * ShortShare))
			}
			extra := min(max(int(rate*cfg.Target.Seconds()), minEvents(cfg, n), 2*short), cfg.MaxEvents)
			return plan{round(short + extra), short, rate}, nil
		}
		events, prev, prev2 = ShortShare*events, rate, prev
		if l.elapsed < cfg.Target/4 {
			prev, prev2 = 0, 0
		}
	}
}

// steadyRates reports whether a probe's rate and those of the two probes
// before it agree within a tenth of each other: the rate is steady. One
// agreement within a quarter, as the harness asked before, came by chance
// in kelindar/event's long warm-up: at N=100 its figure was then 102 M/s
// with a 60 ms window and 304 M/s with a 600 ms one.
func steadyRates(rate, prev, prev2 float64) bool {
	near := func(a, b float64) bool { return b > 0 && math.Abs(a-b) <= b/10 }
	return near(rate, prev) && near(prev, prev2)
}

// minEvents is the least events per measurement with n watchers:
// cfg.MinEvents up to 1000 watchers, then fewer in proportion, down to
// twice the queue length (200 at 10,000 watchers, 2 million deliveries).
func minEvents(cfg Config, n int) int {
	return min(cfg.MinEvents, max(2*DefaultQueue, cfg.MinEvents*1000/n))
}

// runInterleaved calibrates every variant, then runs cfg.Reps repetitions in
// which every variant is measured once as a pair (a long and a short run,
// [measurePair]; again if its windows disagree with its calibration,
// [guardedPair]), the order of the variants rotated by one per repetition
// and that of the pair alternating. It returns, per variant, the
// differences of the pairs ([sample.minus]).
func runInterleaved(cfg Config, res *Results, variants []variant, n, producers int) ([][]sample, error) {
	plans := make([]plan, len(variants))
	for i, v := range variants {
		p, err := calibrate(cfg, v, n, producers)
		if err != nil {
			return nil, err
		}
		plans[i] = p
	}
	out := make([][]sample, len(variants))
	for rep := range cfg.Reps {
		for k := range variants {
			i := (k + rep) % len(variants)
			d, err := guardedPair(cfg, res, variants[i], n, producers, &plans[i], rep%2 == 0)
			if err != nil {
				return nil, err
			}
			out[i] = append(out[i], d)
		}
	}
	return out, nil
}

// shortAsLong is the warning of a pair whose difference is not positive.
const shortAsLong = "the short run took as long as the long one; the long run's figure is used"

// anomalies returns the warnings about one measurement of v.
func anomalies(v variant, where string, s sample) []string {
	var out []string
	if !s.settled {
		out = append(out, where+": goroutines still running after the measurement")
	}
	if v.sys.Lossless() && s.delivered != s.expected {
		out = append(out, fmt.Sprintf("%s: lossless system delivered %d of %d values", where, s.delivered, s.expected))
	}
	if s.broken > 0 && !v.sys.reorders() {
		out = append(out, fmt.Sprintf("%s: readers found %d values out of order", where, s.broken))
	}
	return out
}

// summarize turns the samples of one variant into a case with medians.
func summarize(kind string, v variant, n, producers int, samples []sample) Case {
	c := newCase(kind, v.sys)
	c.Watchers, c.Producers, c.StalledWatchers, c.Reps = n, producers, v.stalled, len(samples)
	var dps, nsp, prod, apc, drop, cpu []float64
	for _, s := range samples {
		dps = append(dps, s.deliveredPerSec())
		nsp = append(nsp, s.nsPerPublish())
		prod = append(prod, s.producerNs())
		apc = append(apc, s.allocsPerEvent())
		drop = append(drop, s.dropPct())
		if v := s.cpuPerDelivery(); !math.IsNaN(v) {
			cpu = append(cpu, v)
		}
		c.Published, c.ShortPublished = s.long, s.short
	}
	if len(cpu) > 0 {
		c.CPUNsPerDelivered = ptr(Median(cpu))
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

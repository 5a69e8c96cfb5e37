package harness

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
)

// latencyRun is what one latency run measured.
type latencyRun struct {
	// samples holds one publish→receive latency (ns) per delivered
	// value, unsorted.
	samples []int64
	// published is the values published, and took the time from the
	// epoch, when the first was due, until the last publish returned.
	published int
	took      time.Duration
}

// publishedPerSec is the rate the run published at: the asked rate if
// the system kept up, less if publishing waited for it.
func (r latencyRun) publishedPerSec() float64 { return float64(r.published) / r.took.Seconds() }

// measureLatency publishes rate events per second for d to n watchers of s,
// from the given number of producers, and returns the latency samples and
// the rate it achieved.
//
// Each value is a distinct *Event stamped with the monotonic time just
// before it is published; its consumer subtracts that from the time it
// received it (for a Recv batch, the time Recv returned). Values are evenly
// spaced, value i due at i/rate, and producer j publishes the values i with
// i mod producers = j, so that several producers share the same rate. The
// waits are nanosleep system calls ([sleepFine]), because time.Sleep lasts
// about a millisecond and would publish bursts of ten values instead of a
// steady rate, and spinning would keep one of the machine's cores busy. A
// single producer sleeps itself until its next value's due time; several
// are paced by one goroutine that sleeps and then hands each value's turn to
// its producer through a channel (see startPacer). A producer that falls
// behind (the sleep overshoots by some tens of microseconds) publishes at
// once, without skipping values, so the mean rate is exact.
func measureLatency(s System, n, producers, rate int, d time.Duration) (latencyRun, error) {
	events := latencyEvents(rate, d)
	base := runtime.NumGoroutine()
	rec := &recorder{capacity: events}
	r, err := s.startWith(n, setup{producers: producers, rec: rec})
	if err != nil {
		return latencyRun{}, err
	}
	payload := make([]Event, events)
	interval := time.Second / time.Duration(rate)
	runtime.GC()
	rec.epoch = time.Now()
	var wg sync.WaitGroup
	if producers == 1 {
		wg.Go(func() {
			for i := range events {
				pace(rec, i, interval)
				publishStamped(r, rec, &payload[i])
			}
		})
	} else {
		ticks := startPacer(&wg, rec, producers, events, interval)
		for j := range producers {
			wg.Go(func() {
				for i := j; i < events; i += producers {
					<-ticks[j]
					publishStamped(r, rec, &payload[i])
				}
			})
		}
	}
	wg.Wait()
	took := time.Duration(rec.now())
	r.finish()
	settle(base)
	var all []int64
	for _, l := range r.samples {
		all = append(all, l...)
	}
	return latencyRun{samples: all, published: events, took: took}, nil
}

// pace sleeps until value i is due.
func pace(rec *recorder, i int, interval time.Duration) {
	if wait := int64(time.Duration(i)*interval) - rec.now(); wait > 0 {
		sleepFine(time.Duration(wait))
	}
}

// publishStamped stamps e with the time and publishes it.
func publishStamped(r *running, rec *recorder, e *Event) {
	e.Stamp = rec.now()
	r.inst.publish(e)
}

// startPacer starts the goroutine that paces several producers: it sleeps
// until each value is due and then tells the producer whose value it is,
// through that producer's channel. Producers that each slept in the
// nanosleep system call themselves made the runtime hand their processors
// back and forth (a goroutine returning from a system call waits for a
// processor), which put a p99 of 13-16 ms on every system measured, raw
// channels included.
func startPacer(wg *sync.WaitGroup, rec *recorder, producers, events int, interval time.Duration) []chan struct{} {
	ticks := make([]chan struct{}, producers)
	for j := range ticks {
		ticks[j] = make(chan struct{}, events/producers+1)
	}
	wg.Go(func() {
		for i := range events {
			pace(rec, i, interval)
			ticks[i%producers] <- struct{}{}
		}
	})
	return ticks
}

// latencyEvents is the number of values one latency run publishes.
func latencyEvents(rate int, d time.Duration) int {
	return max(1, int(int64(rate)*int64(d)/int64(time.Second)))
}

// MaxKeptPerRun bounds the samples of one latency run kept for the pooled
// percentiles: a run with more (10,000 values to 100 watchers in 100 ms
// at 100,000 values/s, a million) keeps an evenly spaced subset of its
// sorted samples, which has the same quantiles to within one part in this
// bound, so that the pooled samples of a group do not take gigabytes. The
// light rate's runs (10,000 values/s) keep all of theirs.
const MaxKeptPerRun = 100_000

// thin returns sorted, or an evenly spaced subset of keep of its values
// if it has more.
func thin(sorted []int64, keep int) []int64 {
	if len(sorted) <= keep {
		return sorted
	}
	out := make([]int64, keep)
	for j := range out {
		out[j] = sorted[int(int64(j)*int64(len(sorted))/int64(keep))]
	}
	return out
}

// latencyTally gathers the runs of one system of a latency group.
type latencyTally struct {
	pooled        []int64   // every run's samples, thinned
	runP99, rates []float64 // each run's own p99, and the rate it published at
	samples       int64     // the samples measured, before thinning
}

func (t *latencyTally) add(run latencyRun) {
	slices.Sort(run.samples)
	t.runP99 = append(t.runP99, float64(Percentile(run.samples, 0.99)))
	t.rates = append(t.rates, run.publishedPerSec())
	t.samples += int64(len(run.samples))
	t.pooled = append(t.pooled, thin(run.samples, MaxKeptPerRun)...)
}

// latencyGroup measures each system's latency at rate values per second in
// cfg.LatencyReps interleaved runs that share cfg.LatencyDuration, and
// reports the percentiles of the pooled samples, the median of the runs'
// own p99, which a burst of load from outside the process during one run
// does not move, and the median of the rates the runs published at, which
// is below rate for a system that cannot keep up with it.
func latencyGroup(cfg Config, res *Results, systems []System, producers, rate int) ([]Case, error) {
	tally := make([]latencyTally, len(systems))
	d := cfg.LatencyDuration / time.Duration(cfg.LatencyReps)
	for rep := range cfg.LatencyReps {
		for k := range systems {
			i := (k + rep) % len(systems)
			run, err := measureLatency(systems[i], cfg.LatencyWatchers, producers, rate, d)
			if err != nil {
				return nil, err
			}
			tally[i].add(run)
		}
	}
	cases := make([]Case, len(systems))
	for i, s := range systems {
		t := &tally[i]
		slices.Sort(t.pooled)
		c := newCase(KindLatency, s)
		c.Watchers, c.Producers, c.Reps, c.LatencyRate = cfg.LatencyWatchers, producers, cfg.LatencyReps, rate
		c.Published = int64(latencyEvents(rate, d))
		c.P50LatencyNs = ptr(Percentile(t.pooled, 0.50))
		c.P99LatencyNs = ptr(Percentile(t.pooled, 0.99))
		c.P999LatencyNs = ptr(Percentile(t.pooled, 0.999))
		c.LatencySamples = ptr(t.samples)
		c.MedianRunP99LatencyNs = ptr(int64(Median(t.runP99)))
		c.PublishedPerSec = ptr(Median(t.rates))
		expected := c.Published * int64(cfg.LatencyReps) * int64(c.Watchers)
		if s.Lossless() && t.samples != expected {
			res.Warnings = append(res.Warnings, fmt.Sprintf("latency %s P=%d at %d/s: %d samples, want %d", s.Label(), producers, rate, t.samples, expected))
		}
		cases[i] = c
	}
	return cases, nil
}

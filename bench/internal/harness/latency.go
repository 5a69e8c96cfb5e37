package harness

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
)

// measureLatency publishes rate events per second for d to n watchers of s,
// from the given number of producers, and returns one publish→receive
// latency sample (ns) per delivered value, unsorted.
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
func measureLatency(s System, n, producers, rate int, d time.Duration) ([]int64, error) {
	events := latencyEvents(rate, d)
	base := runtime.NumGoroutine()
	rec := &recorder{capacity: events}
	r, err := s.startWith(n, setup{producers: producers, rec: rec})
	if err != nil {
		return nil, err
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
	r.finish()
	settle(base)
	var all []int64
	for _, l := range r.samples {
		all = append(all, l...)
	}
	return all, nil
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

// latencyGroup measures each system's latency in cfg.LatencyReps interleaved
// runs that share cfg.LatencyDuration, and reports the percentiles of the
// pooled samples, and the median of the runs' own p99, which a burst of
// load from outside the process during one run does not move.
func latencyGroup(cfg Config, res *Results, systems []System, producers int) ([]Case, error) {
	pooled := make([][]int64, len(systems))
	runP99 := make([][]float64, len(systems))
	d := cfg.LatencyDuration / time.Duration(cfg.LatencyReps)
	for rep := range cfg.LatencyReps {
		for k := range systems {
			i := (k + rep) % len(systems)
			samples, err := measureLatency(systems[i], cfg.LatencyWatchers, producers, cfg.LatencyRate, d)
			if err != nil {
				return nil, err
			}
			pooled[i] = append(pooled[i], samples...)
			slices.Sort(samples)
			runP99[i] = append(runP99[i], float64(Percentile(samples, 0.99)))
		}
	}
	cases := make([]Case, len(systems))
	for i, s := range systems {
		all := pooled[i]
		slices.Sort(all)
		c := newCase(KindLatency, s)
		c.Watchers, c.Producers, c.Reps = cfg.LatencyWatchers, producers, cfg.LatencyReps
		c.Published = int64(latencyEvents(cfg.LatencyRate, d))
		c.P50LatencyNs = ptr(Percentile(all, 0.50))
		c.P99LatencyNs = ptr(Percentile(all, 0.99))
		c.P999LatencyNs = ptr(Percentile(all, 0.999))
		c.LatencySamples = ptr(int64(len(all)))
		c.MedianRunP99LatencyNs = ptr(int64(Median(runP99[i])))
		expected := c.Published * int64(cfg.LatencyReps) * int64(c.Watchers)
		if s.Lossless() && int64(len(all)) != expected {
			res.Warnings = append(res.Warnings, fmt.Sprintf("latency %s P=%d: %d samples, want %d", s.Label(), producers, len(all), expected))
		}
		cases[i] = c
	}
	return cases, nil
}

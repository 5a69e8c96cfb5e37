package natsbench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/bench/internal/harness"
	fanoutnats "github.com/fanout-go/fanout/nats"
	"github.com/nats-io/nats-server/v2/server"
)

// runLatency measures the publish→receive latency of values a Forwarder
// sends, unframed (SystemForward) and in frames (SystemFramed), at
// cfg.LatencyRate values/s to cfg.Subscribers connections, each a
// Subscriber into cfg.LatencyWatchers watchers: cfg.Reps runs of
// cfg.LatencyDuration per system, interleaved.
func runLatency(cfg Config) ([]Case, error) {
	srv, err := startServer()
	if err != nil {
		return nil, err
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	frames := []int{0, cfg.Frame}
	pooled := make([][]int64, len(frames))
	runP99 := make([][]float64, len(frames))
	for rep := range cfg.Reps {
		for k := range frames {
			i := (rep + k) % len(frames)
			samples, err := measureLatency(srv, cfg, frames[i])
			if err != nil {
				return nil, fmt.Errorf("natsbench: latency, frame %d: %w", frames[i], err)
			}
			slices.Sort(samples)
			pooled[i] = append(pooled[i], samples...)
			runP99[i] = append(runP99[i], float64(harness.Percentile(samples, 0.99)))
		}
	}
	cases := make([]Case, len(frames))
	for i, frame := range frames {
		cases[i] = latencyCase(cfg, frame, pooled[i], runP99[i])
	}
	return cases, nil
}

func latencyCase(cfg Config, frame int, all []int64, runP99 []float64) Case {
	slices.Sort(all)
	name, api := SystemForward, "Forward → Subscriber → Broadcaster, Recv"
	if frame > 0 {
		name, api = SystemFramed, fmt.Sprintf("Forward (frames ≤ %d) → Subscriber → Broadcaster, Recv", frame)
	}
	events := latencyEvents(cfg)
	perRep := int64(events) * int64(cfg.Subscribers*cfg.LatencyWatchers)
	p := func(q float64) *int64 { v := harness.Percentile(all, q); return &v }
	medianP99 := int64(median(runP99))
	n := int64(len(all))
	return Case{Kind: KindLatency, Label: fmt.Sprintf("%s latency N=%d", name, cfg.LatencyWatchers), System: name, API: api,
		Queue: localQueue, Watchers: cfg.Subscribers * cfg.LatencyWatchers, Subscribers: cfg.Subscribers,
		WatchersPerSubscriber: cfg.LatencyWatchers, Producers: 1, Reps: cfg.Reps, Published: int64(events),
		PublishedPerSec: float64(cfg.LatencyRate), Frame: frame,
		P50LatencyNs: p(0.50), P99LatencyNs: p(0.99), MedianRunP99LatencyNs: &medianP99, LatencySamples: &n,
		Lost: perRep*int64(cfg.Reps) - n}
}

func latencyEvents(cfg Config) int {
	return max(1, int(int64(cfg.LatencyRate)*int64(cfg.LatencyDuration)/int64(time.Second)))
}

// latencyRig is one latency run's watchers: each keeps its samples.
type latencyRig struct {
	epoch   time.Time
	events  int
	samples [][]int64
	done    sync.WaitGroup
}

// measureLatency runs one latency measurement and returns its samples
// (ns), one per value and watcher: the time Recv returned the value less
// the time it was published, paced evenly at cfg.LatencyRate.
func measureLatency(srv *server.Server, cfg Config, frame int) ([]int64, error) {
	r := &rig{notify: make(chan struct{}, 1)}
	defer r.teardown()
	lr := &latencyRig{events: latencyEvents(cfg), samples: make([][]int64, cfg.Subscribers*cfg.LatencyWatchers)}
	for i := range cfg.Subscribers {
		if err := lr.subscriber(srv, i*cfg.LatencyWatchers, cfg.LatencyWatchers, r); err != nil {
			return nil, err
		}
	}
	nc, err := connect(srv, r)
	if err != nil {
		return nil, err
	}
	out := fanout.New[value](fanout.WithQueueLength(1024))
	defer out.Shutdown()
	fwd, err := fanoutnats.Forward(out, nc, fanoutnats.ForwardConfig[value]{Subject: subject, Frame: frame})
	if err != nil {
		return nil, err
	}
	defer func() { _ = fwd.Close(context.Background()) }()
	lr.epoch = time.Now()
	interval := time.Second / time.Duration(cfg.LatencyRate)
	for i := range lr.events {
		if wait := time.Duration(i)*interval - time.Since(lr.epoch); wait > 0 {
			harness.SleepFine(wait)
		}
		if err := out.Action(value{Seq: i, T: int64(time.Since(lr.epoch))}); err != nil {
			return nil, err
		}
	}
	if !waitGroupWithin(&lr.done, doneGuard) {
		return nil, errors.New("natsbench: latency: watchers still waiting")
	}
	var all []int64
	for _, s := range lr.samples {
		all = append(all, s...)
	}
	return all, nil
}

// subscriber is one connection: a Subscriber into a broadcaster of n
// watchers, each recording the latency of every value it receives in
// samples[first+i].
func (lr *latencyRig) subscriber(srv *server.Server, first, n int, r *rig) error {
	return subscriberProcess(srv, n, r, func(i int, w *fanout.Watcher[value]) {
		lr.done.Add(1)
		go func() {
			samples := make([]int64, 0, lr.events)
			defer func() { lr.samples[first+i] = samples; lr.done.Done() }()
			buf := make([]value, localQueue)
			for len(samples) < lr.events {
				k, err := w.Recv(context.Background(), buf)
				if err != nil {
					return
				}
				now := int64(time.Since(lr.epoch))
				for _, v := range buf[:k] {
					samples = append(samples, now-v.T)
				}
			}
		}()
	})
}

// waitGroupWithin waits for wg, for d at most, and reports whether it was
// done.
func waitGroupWithin(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

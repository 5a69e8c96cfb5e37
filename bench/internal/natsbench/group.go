package natsbench

import (
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// runGroup measures the systems at n watchers per subscriber on a server
// of their own: calibration (which warms up too), then the repetitions,
// interleaved.
func runGroup(cfg Config, n int) ([]Case, error) {
	srv, err := startServer()
	if err != nil {
		return nil, err
	}
	defer func() { srv.Shutdown(); srv.WaitForShutdown() }()
	// The order matters below: fanout, nats, raw, framed.
	systems := []system{fanoutSystem(cfg.Subscribers, n), natsSystem(cfg.Subscribers, n), rawSystem(),
		framedSystem(cfg.Subscribers, n, cfg.Frame)}
	values := make([]int, len(systems))
	for i, s := range systems {
		if values[i], err = calibrate(srv, s, cfg); err != nil {
			return nil, err
		}
	}
	samples := make([][]sample, len(systems))
	for rep := range cfg.Reps {
		for k := range systems {
			i := (rep + k) % len(systems)
			smp, err := systems[i].measure(srv, values[i], cfg.Window)
			if err != nil {
				return nil, fmt.Errorf("natsbench: %s, N=%d: %w", systems[i].name, n, err)
			}
			samples[i] = append(samples[i], smp)
		}
	}
	cases := make([]Case, len(systems))
	for i, s := range systems {
		cases[i] = summarize(s, cfg, samples[i])
	}
	cases[0].RatioVsNATS = ratioOf(samples[0], samples[1])
	cases[3].RatioVsNATS = ratioOf(samples[3], samples[1])
	cases[3].RatioVsRaw = ratioOf(samples[3], samples[2])
	cases[3].Frame = cfg.Frame
	return cases, nil
}

// ratioOf returns the median of the per-repetition ratios of a's
// deliveries per second to b's.
func ratioOf(a, b []sample) *float64 {
	ratios := make([]float64, len(a))
	for rep := range a {
		ratios[rep] = a[rep].deliveredPerSec() / b[rep].deliveredPerSec()
	}
	r := median(ratios)
	return &r
}

// calibrate returns the value count for which one measurement of s takes
// about cfg.Target, from a probe of cfg.MinValues values.
func calibrate(srv *server.Server, s system, cfg Config) (int, error) {
	probe, err := s.measure(srv, cfg.MinValues, cfg.Window)
	if err != nil {
		return 0, fmt.Errorf("natsbench: calibrating %s: %w", s.name, err)
	}
	perValue := probe.elapsed / time.Duration(cfg.MinValues)
	m := cfg.MaxValues
	if perValue > 0 {
		m = int(cfg.Target / perValue)
	}
	return min(max(m, cfg.MinValues), cfg.MaxValues), nil
}

func (s sample) deliveredPerSec() float64 { return float64(s.delivered) / s.elapsed.Seconds() }

func summarize(s system, cfg Config, smp []sample) Case {
	rates := make([]float64, len(smp))
	pubRates := make([]float64, len(smp))
	var lost int64
	for i, x := range smp {
		rates[i] = x.deliveredPerSec()
		pubRates[i] = float64(x.published) / x.elapsed.Seconds()
		lost += int64(x.published)*int64(s.deliveryPer) - x.delivered
	}
	med := median(rates)
	last := smp[len(smp)-1]
	queue := 0
	if s.name == SystemFanout || s.name == SystemFramed {
		queue = localQueue
	}
	return Case{
		Kind: Kind, Label: fmt.Sprintf("%s N=%d", s.name, s.n), System: s.name, API: s.api, Queue: queue,
		Watchers: s.subs * s.n, Subscribers: s.subs, WatchersPerSubscriber: s.n, Producers: 1, Reps: cfg.Reps,
		Published: int64(last.published), DeliveredPerSec: med, PublishedPerSec: median(pubRates),
		SpreadPct:   (slices.Max(rates) - slices.Min(rates)) / med * 100,
		NetworkMsgs: last.networkMsgs, NetworkMsgsPerValue: float64(last.networkMsgs) / float64(last.published),
		Lost: lost,
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

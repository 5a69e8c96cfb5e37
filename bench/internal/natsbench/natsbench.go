// Package natsbench measures github.com/fanout-go/fanout/nats: one producer
// publishes to NATS, and 3 subscriber connections, standing for 3
// processes, each deliver every value to N local watchers. It compares
//
//   - fanout: each connection has one subscription, a fanoutnats.Subscriber
//     that decodes each message once and publishes the value into a local
//     broadcaster with N watchers (WaitIfChannelFull, queue 100, each read
//     with Recv by its own goroutine);
//   - fanout framed: the same, with a producer that publishes into a local
//     broadcaster forwarded by a fanoutnats.Forwarder in frames (several
//     values per NATS message);
//   - nats: each connection has N subscriptions, one per watcher, each
//     decoding every message in its own handler (the nats.go client runs
//     one goroutine per subscription);
//
// and, as the ceiling, the raw NATS rate: one subscription, no decoding.
// Two more measurements follow: the latency of the Forwarder path at a
// fixed rate, unframed against framed (N = 100 per connection), and a
// durable JetStream Consume into lossless watchers, which acknowledges what
// they took.
// The server is embedded (nats-server, in-process connections, no port),
// so the figures are the client and server costs without a network.
//
// Method: the producer paces itself so that no subscriber lags more than a
// window of values (so that neither client nor server drops a message as a
// slow consumer); each measurement runs from the first publish until every
// watcher has received every value; the systems of a group run in turn,
// the order rotated per repetition, and medians are reported. Network
// messages are the server's in and out message counts over the
// measurement.
package natsbench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/fanout-go/fanout/bench/internal/harness"
)

// Kind is the kind of the JSON Lines objects of this group's throughput
// cases; KindLatency and KindJetStream those of its other measurements.
const (
	Kind          = "nats"
	KindLatency   = "nats_latency"
	KindJetStream = "nats_jetstream"
)

// The systems measured.
const (
	SystemFanout = "fanout+nats" // one Subscriber per connection, N local watchers
	SystemNATS   = "nats"        // one NATS subscription per watcher
	SystemRaw    = "nats-raw"    // one subscription, no decoding: the ceiling
	SystemFramed = "fanout+nats framed"
	// SystemForward is fanout+nats with the producer's values forwarded by a
	// Forwarder, unframed: the latency baseline of SystemFramed.
	SystemForward   = "fanout+nats forward"
	SystemJetStream = "fanout+jetstream durable" // a durable Consume into lossless watchers
)

// TargetRatio is the target at N = 100: fanout's delivered/s at least this
// many times that of one NATS subscription per watcher.
const TargetRatio = 5.0

// TargetFramedVsRaw is the target of frames at N = 100: delivered values/s
// at least this many times the raw message rate of one subscription in the
// same group.
const TargetFramedVsRaw = 5.0

// TargetLatencyTolerance is how much higher framed p99 latency may measure
// than unframed and still count as no worse: the run-to-run spread of the
// p99 on the benchmark VM.
const TargetLatencyTolerance = 1.10

// Config says what to measure.
type Config struct {
	// Watchers lists N, the watchers per subscriber connection.
	Watchers []int
	// Subscribers is the number of subscriber connections.
	Subscribers int
	// Reps is the number of repetitions; medians are reported.
	Reps int
	// Target is how long one measurement should take: each system's value
	// count is calibrated to it once per group.
	Target time.Duration
	// MinValues and MaxValues bound the calibrated value count.
	MinValues, MaxValues int
	// Window is the most values a subscriber may lag behind the producer.
	Window int
	// Frame is the most values per frame of the framed system.
	Frame int
	// LatencyRate, LatencyWatchers and LatencyDuration configure the
	// latency measurement: values/s, watchers per subscriber connection
	// and the time of each of Reps runs per system; 0 rate skips it.
	LatencyRate, LatencyWatchers int
	LatencyDuration              time.Duration
	// JetStreamValues and JetStreamWatchers configure the durable Consume
	// measurement: values read from the stream per run, lossless watchers;
	// 0 values skips it.
	JetStreamValues, JetStreamWatchers int
}

// DefaultConfig is what fanout-bench runs: N = 10 and 100, 3 subscriber
// connections, 5 repetitions of about 150 ms per system (about 15 s).
func DefaultConfig() Config {
	return Config{Watchers: []int{10, 100}, Subscribers: 3, Reps: 5, Target: 150 * time.Millisecond,
		MinValues: 1000, MaxValues: 2_000_000, Window: 4096, Frame: 256,
		LatencyRate: 10_000, LatencyWatchers: 100, LatencyDuration: 500 * time.Millisecond,
		JetStreamValues: 50_000, JetStreamWatchers: 100}
}

// QuickConfig is a smoke run of a few seconds: one repetition of about
// 20 ms per system.
func QuickConfig() Config {
	c := DefaultConfig()
	c.Reps, c.Target, c.MinValues = 1, 20*time.Millisecond, 100
	c.LatencyDuration, c.JetStreamValues = 100*time.Millisecond, 5000
	return c
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	if len(c.Watchers) == 0 || slices.ContainsFunc(c.Watchers, func(n int) bool { return n < 1 }) ||
		c.Subscribers < 1 || c.Reps < 1 || c.Target <= 0 || c.MinValues < 1 || c.MaxValues < c.MinValues || c.Window < 1 {
		return errors.New("natsbench: invalid config: need watchers, subscribers, reps, target, 1 <= MinValues <= MaxValues and a window")
	}
	if c.Frame < 2 || (c.LatencyRate > 0 && (c.LatencyWatchers < 1 || c.LatencyDuration <= 0)) ||
		(c.JetStreamValues > 0 && c.JetStreamWatchers < 1) || c.LatencyRate < 0 || c.JetStreamValues < 0 {
		return errors.New("natsbench: invalid config: need a frame of 2 or more, and latency and JetStream watchers when measured")
	}
	return nil
}

// Case is one measured system in one setting, and one JSON line. Fields
// shared with the harness's cases keep their names.
type Case struct {
	Kind   string `json:"kind"`   // "nats"
	Label  string `json:"label"`  // e.g. "fanout+nats N=100"
	System string `json:"system"` // SystemFanout, SystemNATS or SystemRaw
	API    string `json:"api"`    // how the watchers receive
	Queue  int    `json:"queue"`  // local watcher queue (fanout), else 0
	// Watchers is the total number of watchers, Subscribers × N;
	// WatchersPerSubscriber is N.
	Watchers              int `json:"watchers"`
	Subscribers           int `json:"subscribers"`
	WatchersPerSubscriber int `json:"watchers_per_subscriber"`
	Producers             int `json:"producers"`
	Reps                  int `json:"reps"`
	// Published is the values published per repetition.
	Published int64 `json:"published"`
	// DeliveredPerSec is the values received by all watchers per second
	// (median); PublishedPerSec the values published per second, which is
	// also the values per second each subscription received (the raw
	// message rate bounds it without frames).
	DeliveredPerSec float64 `json:"delivered_per_sec"`
	PublishedPerSec float64 `json:"published_per_sec"`
	SpreadPct       float64 `json:"spread_pct"`
	// RatioVsNATS is the median per-repetition ratio of DeliveredPerSec to
	// that of SystemNATS in the same group; nil for SystemNATS and the raw
	// ceiling.
	RatioVsNATS *float64 `json:"ratio_vs_nats"`
	// RatioVsRaw is the median per-repetition ratio of DeliveredPerSec to
	// the raw message rate of one subscription (SystemRaw) in the same
	// group: SystemFramed only.
	RatioVsRaw *float64 `json:"ratio_vs_raw"`
	// Frame is the most values per frame (SystemFramed), else 0.
	Frame int `json:"frame"`
	// Latency percentiles (ns) of the latency measurement, pooled over its
	// runs, and the median of the runs' own p99; nil for other cases.
	P50LatencyNs          *int64 `json:"p50_latency_ns"`
	P99LatencyNs          *int64 `json:"p99_latency_ns"`
	MedianRunP99LatencyNs *int64 `json:"median_run_p99_latency_ns"`
	LatencySamples        *int64 `json:"latency_samples"`
	// Acks is the acknowledgements a durable consumer sent per run
	// (SystemJetStream).
	Acks *int64 `json:"acks"`
	// NetworkMsgs is the server's messages in + out per repetition;
	// NetworkMsgsPerValue the same per published value.
	NetworkMsgs         int64   `json:"network_msgs"`
	NetworkMsgsPerValue float64 `json:"network_msgs_per_value"`
	// Lost is the deliveries that did not happen (0: lossless).
	Lost int64 `json:"lost"`
}

// Results is everything one run of the group measured.
type Results struct {
	Machine harness.Machine
	Config  Config
	Cases   []Case
	Targets []harness.Target
	Elapsed time.Duration
}

// Run measures every group of cfg. Progress lines go to progress, if not
// nil.
func Run(cfg Config, progress io.Writer) (*Results, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	start := time.Now()
	res := &Results{Machine: harness.DescribeMachine(), Config: cfg}
	for _, n := range cfg.Watchers {
		fmt.Fprintf(progress, "[%5.1fs] nats: %d subscribers × %d watchers\n", time.Since(start).Seconds(), cfg.Subscribers, n)
		cases, err := runGroup(cfg, n)
		if err != nil {
			return nil, err
		}
		res.Cases = append(res.Cases, cases...)
	}
	if cfg.LatencyRate > 0 {
		fmt.Fprintf(progress, "[%5.1fs] nats: latency at %d values/s\n", time.Since(start).Seconds(), cfg.LatencyRate)
		cases, err := runLatency(cfg)
		if err != nil {
			return nil, err
		}
		res.Cases = append(res.Cases, cases...)
	}
	if cfg.JetStreamValues > 0 {
		fmt.Fprintf(progress, "[%5.1fs] nats: JetStream durable Consume\n", time.Since(start).Seconds())
		c, err := runJetStream(cfg)
		if err != nil {
			return nil, err
		}
		res.Cases = append(res.Cases, c)
	}
	res.Targets = []harness.Target{target(res.Cases), framedTarget(res.Cases), latencyTarget(res.Cases)}
	res.Elapsed = time.Since(start)
	return res, nil
}

// framedTarget is frames against the raw message rate at N = 100.
func framedTarget(cases []Case) harness.Target {
	name := "nats: fanout+nats framed delivered values/s vs raw NATS msgs/s of one subscription, N=100 per subscriber"
	return ratioTarget(cases, SystemFramed, name, TargetFramedVsRaw, func(c Case) *float64 { return c.RatioVsRaw })
}

func target(cases []Case) harness.Target {
	name := "nats: fanout+nats vs one NATS subscription per watcher, N=100 per subscriber"
	return ratioTarget(cases, SystemFanout, name, TargetRatio, func(c Case) *float64 { return c.RatioVsNATS })
}

// ratioTarget is the target that system's ratio, as ratio returns it, is
// at least want at N = 100.
func ratioTarget(cases []Case, system, name string, want float64, ratio func(Case) *float64) harness.Target {
	t := harness.Target{Name: name, Want: fmt.Sprintf("≥ %.0f×", want), Measured: "-", Status: harness.NA}
	for _, c := range cases {
		if r := ratio(c); c.Kind == Kind && c.System == system && c.WatchersPerSubscriber == 100 && r != nil {
			t.Measured, t.Status = harness.FormatRatio(r), harness.Fail
			if *r >= want {
				t.Status = harness.Pass
			}
		}
	}
	return t
}

// latencyTarget is framed p99 latency against unframed (the medians of the
// runs' p99).
func latencyTarget(cases []Case) harness.Target {
	t := harness.Target{Name: "nats: p99 latency, Forward framed vs unframed",
		Want: fmt.Sprintf("≤ %.2f×", TargetLatencyTolerance), Measured: "-", Status: harness.NA}
	var framed, plain *int64
	for _, c := range cases {
		switch {
		case c.Kind == KindLatency && c.System == SystemFramed:
			framed = c.MedianRunP99LatencyNs
		case c.Kind == KindLatency && c.System == SystemForward:
			plain = c.MedianRunP99LatencyNs
		}
	}
	if framed == nil || plain == nil || *plain == 0 {
		return t
	}
	r := float64(*framed) / float64(*plain)
	t.Measured, t.Status = harness.FormatRatio(&r), harness.Fail
	if r <= TargetLatencyTolerance {
		t.Status = harness.Pass
	}
	return t
}

package harness

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Config says what to measure and for how long. [DefaultConfig] is what
// `make bench-full` runs, [HeadlineConfig] what `make bench` runs;
// [QuickConfig] is a smoke run of about 30 s.
type Config struct {
	// Watchers lists the watcher counts N of the throughput cases. From
	// [LargeWatchers] on, a group measures [LargeSystems] only.
	Watchers []int
	// Producers lists the numbers of concurrent producers of the
	// throughput cases.
	Producers []int
	// Reps is the number of measured repetitions of every case; medians
	// are reported. The systems of a group run interleaved, their order
	// rotated by one at each repetition.
	Reps int
	// Target is how long the values a long run adds to its short run
	// should take: each system's two event counts are calibrated once per
	// case and then fixed for all repetitions (see the package doc,
	// "Method").
	Target time.Duration
	// Events, if positive, fixes the events of the long run instead of
	// calibrating to Target; the short run publishes a [ShortShare]th.
	Events int
	// MinEvents and MaxEvents bound the events a long run adds to its
	// short run, and MaxEvents the probes of the calibration.
	MinEvents, MaxEvents int

	// StallWatchers is N for the stalled-watcher comparison (one of them
	// never reads).
	StallWatchers int

	// LatencyWatchers, LatencyRate (events/s) and LatencyDuration (per
	// system) define the light-load latency measurement. LatencyReps splits
	// LatencyDuration into that many interleaved runs whose samples are
	// pooled.
	LatencyWatchers int
	LatencyRate     int
	LatencyDuration time.Duration
	LatencyReps     int
	// LatencyProducers lists the numbers of producers of the latency
	// measurement; several producers share LatencyRate.
	LatencyProducers []int
	// SchedulerRuns is the runs the scheduler-bound targets are judged on,
	// the median of their ratios (see [schedulerBound]): the first run of
	// every group, and SchedulerRuns-1 reruns of the cases they compare.
	SchedulerRuns int

	// LatencyHighRate is the rate (events/s) of the high-rate latency
	// measurement, one producer, the same watchers, duration and systems
	// as the light one; 0 leaves it out.
	LatencyHighRate int

	// IdleWatchers is the number of unread watchers the idle memory is
	// measured with, but for fanout wait pull, which has
	// IdlePullWatchers; IdleMemReps the repetitions (median reported).
	IdleWatchers     int
	IdlePullWatchers int
	IdleMemReps      int

	// IdleCPUWatchers parked watchers are kept for IdleCPUDuration per
	// system while the process CPU time is measured.
	IdleCPUWatchers int
	IdleCPUDuration time.Duration

	// RecordEvents is the number of Kubernetes events recorded per
	// measurement of the record and events comparisons, the same for both
	// recorders so that they make the same sink calls.
	RecordEvents int
	// RecordProducers lists the numbers of goroutines recording
	// concurrently in the record and events comparisons, each about its
	// own pods.
	RecordProducers []int

	// TopicCounts lists the topic counts of the topics group, each with
	// [WatchersPerTopic] watchers per topic.
	TopicCounts []int
	// FilterWatchers is the watchers of the filter group, a multiple of
	// [FilterShare].
	FilterWatchers int
	// WorkingWatchers lists the watcher counts of the working-reader
	// group ([KindWorking]), one producer.
	WorkingWatchers []int

	// ReplayHistory is H of the replay comparison: the broadcaster's (or
	// the application's) history, and the values each late joiner starts
	// with.
	ReplayHistory int

	// Only, if not empty, limits the run to these kinds of case (the Kind*
	// constants); targets that need the others are then N/A.
	Only []string

	// Headline limits the throughput groups to [HeadlineSystems], and the
	// report to the headline table and the targets measured (see
	// [Headline]).
	Headline bool
}

// runs reports whether cases of the given kind are to be measured.
func (c Config) runs(kind string) bool { return len(c.Only) == 0 || slices.Contains(c.Only, kind) }

// DefaultConfig returns the configuration of `make bench-full`: N = 1, 10, 100,
// 1000 with 1 and 4 producers, 5 repetitions of a pair of runs whose
// difference takes ~60 ms, 1 s of latency per
// system with 1 and 4 producers, 100,000 idle fanout pull watchers and
// 10,000 of the other systems, 1 s of idle CPU per system, replay of 1000
// values and 20,000 recorded Kubernetes events per record measurement from
// 1 and 8 goroutines. It takes about 32 minutes on a 2-core machine
// (bench/README.md).
func DefaultConfig() Config {
	return Config{
		Watchers:         []int{1, 10, 100, 1000},
		Producers:        []int{1, 4},
		Reps:             5,
		Target:           60 * time.Millisecond,
		MinEvents:        500,
		MaxEvents:        20_000_000,
		StallWatchers:    100,
		LatencyWatchers:  100,
		LatencyRate:      10_000,
		LatencyDuration:  time.Second,
		LatencyReps:      10,
		LatencyProducers: []int{1, 4},
		LatencyHighRate:  100_000,
		SchedulerRuns:    3,
		IdleWatchers:     10_000,
		IdlePullWatchers: 100_000,
		IdleMemReps:      3,
		IdleCPUWatchers:  100,
		IdleCPUDuration:  time.Second,
		RecordEvents:     20_000,
		RecordProducers:  []int{1, 8},
		ReplayHistory:    1000,
		TopicCounts:      []int{1, 10, 100, 1000},
		FilterWatchers:   100,
		WorkingWatchers:  []int{1, 10, 100, 1000},
	}
}

// QuickConfig returns a smoke-test configuration that runs in about 30 s on
// a 2-core machine (32 s at load average 2.5): N = 10 and 100, one
// producer (latency too), 3 short repetitions, 1 and 10 topics, 2,000
// recorded events. Its figures are noisy.
func QuickConfig() Config {
	c := DefaultConfig()
	c.Watchers = []int{10, 100}
	c.Producers = []int{1}
	c.Reps = 3
	c.Target = 10 * time.Millisecond
	c.MinEvents = 200
	c.LatencyDuration = 200 * time.Millisecond
	c.LatencyProducers = []int{1}
	c.IdleWatchers = 1000
	c.IdlePullWatchers = 10_000
	c.IdleCPUDuration = 100 * time.Millisecond
	c.RecordEvents = 2000
	c.TopicCounts = []int{1, 10}
	c.WorkingWatchers = []int{100}
	return c
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	var errs []error
	if len(c.Watchers) == 0 {
		errs = append(errs, errors.New("no watcher counts"))
	}
	for _, n := range c.Watchers {
		if n < 1 {
			errs = append(errs, fmt.Errorf("watcher count %d", n))
		}
	}
	errs = append(errs, positive("producer", c.Producers), positive("latency producer", c.LatencyProducers),
		positive("record producer", c.RecordProducers))
	if c.Reps < 1 {
		errs = append(errs, fmt.Errorf("reps %d", c.Reps))
	}
	if c.Events < 0 {
		errs = append(errs, fmt.Errorf("events %d (0 to calibrate to Target)", c.Events))
	} else if c.Events == 0 && (c.Target <= 0 || c.MinEvents < 1 || c.MaxEvents < c.MinEvents) {
		errs = append(errs, errors.New("need Events, or Target with 1 <= MinEvents <= MaxEvents"))
	}
	errs = append(errs, c.groupErrors()...)
	for _, k := range c.Only {
		if !slices.Contains(Kinds, k) {
			errs = append(errs, fmt.Errorf("unknown kind %q (kinds: %s)", k, strings.Join(Kinds, ", ")))
		}
	}
	return errors.Join(errs...)
}

// groupErrors reports the settings of the groups other than throughput
// that cannot run.
func (c Config) groupErrors() []error {
	var errs []error
	if c.StallWatchers < 2 {
		errs = append(errs, fmt.Errorf("stall watchers %d (need 2)", c.StallWatchers))
	}
	if c.LatencyWatchers < 1 || c.LatencyRate < 1 || c.LatencyDuration <= 0 || c.LatencyReps < 1 || c.LatencyHighRate < 0 {
		errs = append(errs, errors.New("latency watchers, rate, duration and reps must be positive, the high rate not negative"))
	}
	if c.IdleWatchers < 1 || c.IdlePullWatchers < 1 || c.IdleMemReps < 1 || c.IdleCPUWatchers < 1 || c.IdleCPUDuration <= 0 {
		errs = append(errs, errors.New("idle watchers, reps and duration must be positive"))
	}
	if c.RecordEvents < 1 {
		errs = append(errs, fmt.Errorf("record events %d", c.RecordEvents))
	}
	if c.runs(KindTopics) {
		errs = append(errs, positive("topic", c.TopicCounts))
	}
	if c.runs(KindWorking) {
		errs = append(errs, positive("working watcher", c.WorkingWatchers))
	}
	if c.FilterWatchers < FilterShare || c.FilterWatchers%FilterShare != 0 {
		errs = append(errs, fmt.Errorf("filter watchers %d (need a positive multiple of %d)", c.FilterWatchers, FilterShare))
	}
	if c.SchedulerRuns < 1 {
		errs = append(errs, fmt.Errorf("scheduler runs %d (need 1 or more)", c.SchedulerRuns))
	}
	if c.ReplayHistory < 1 {
		errs = append(errs, fmt.Errorf("replay history %d", c.ReplayHistory))
	}
	return errs
}

// positive reports an empty list of counts, or one below 1.
func positive(what string, counts []int) error {
	if len(counts) == 0 {
		return fmt.Errorf("no %s counts", what)
	}
	for _, n := range counts {
		if n < 1 {
			return fmt.Errorf("%s count %d", what, n)
		}
	}
	return nil
}

// Kinds of [Case].
const (
	KindThroughput = "throughput"  // N watchers drained as fast as possible
	KindStall      = "stall"       // the same with one watcher never read, lossy strategies
	KindLatency    = "latency"     // publish→receive latency at a light, fixed rate
	KindIdleMemory = "idle_memory" // bytes per idle, unread watcher
	KindIdleCPU    = "idle_cpu"    // process CPU while watchers are parked
	KindRecord     = "record"      // Kubernetes events recorded into a no-op sink, k8s/record vs client-go
	KindReplay     = "replay"      // a late joiner starting with the last values published
	KindTopics     = "topics"      // T topics × 10 watchers, fanout Topics vs cskr/pubsub and watermill
	KindFilter     = "filter"      // watchers keeping a tenth of the values: WithFilter vs discarding by hand
)

// Kinds lists every kind of case, in report order.
var Kinds = []string{KindThroughput, KindWorking, KindStall, KindTopics, KindFilter, KindLatency, KindIdleMemory, KindIdleCPU, KindReplay, KindRecord, KindEvents}

// Case is the result of one measured case: one system in one setting. It is
// also one line of the JSON Lines output. Every figure is present in every
// line; the ones a kind does not measure are null.
type Case struct {
	// Kind is one of the Kind* constants.
	Kind string `json:"kind"`
	// Label is the system's [System.Label].
	Label string `json:"label"`
	// System, Strategy, API and Queue describe the system (see [System]).
	System   string `json:"system"`
	Strategy string `json:"strategy"`
	API      string `json:"api"`
	Queue    int    `json:"queue"`
	// Watchers is the number of watchers N, stalled ones included;
	// Producers the number of concurrent producers.
	Watchers  int `json:"watchers"`
	Producers int `json:"producers"`
	// StalledWatchers is the number of watchers nobody reads.
	StalledWatchers int `json:"stalled_watchers"`
	// Reps is the number of repetitions the medians are taken over.
	Reps int `json:"reps"`
	// Published is the number of values published per repetition (for
	// replay: values replayed); for throughput and stall, by the long run
	// of each repetition's pair.
	Published int64 `json:"published"`
	// ShortPublished is, for throughput and stall, the values the short
	// run of each pair published: the figures are those of the long run's
	// extra Published-ShortPublished values (see [calibrate]).
	ShortPublished int64 `json:"short_published"`
	// Batch is the number of values per publish call: 1 for single-value
	// publishing, 16 for fanout's ActionBatch system.
	Batch int `json:"batch"`
	// Topics is, for the topics kind, the topics the watchers are spread
	// over ([WatchersPerTopic] each); 0 elsewhere.
	Topics int `json:"topics"`
	// History and Replay are, for the replay kind, the history kept (by the
	// broadcaster, or by the application) and the values each late joiner
	// starts with; 0 elsewhere.
	History int `json:"history"`
	Replay  int `json:"replay"`
	// Run is 1 for the cases of the run's groups, and 2 and up for the
	// reruns of the scheduler-bound targets' cases ([Results].Reruns).
	Run int `json:"run"`

	// DeliveredPerSec is values received by all watchers per second, from
	// the first publish until every consumer has received its last value.
	DeliveredPerSec *float64 `json:"delivered_per_sec"`
	// SpreadPct is (max-min)/median of DeliveredPerSec over the
	// repetitions, in percent.
	SpreadPct *float64 `json:"spread_pct"`
	// RatioVsK8s compares DeliveredPerSec with that of k8s wait q100 in
	// the same group (same N and producers): the median over repetitions
	// of the ratio of the two measured in the same repetition. For the
	// record kind the reference is k8s's client-go tools/record instead
	// (the same as RatioVsClientGo); for replay, k8s WatchWithPrefix.
	RatioVsK8s *float64 `json:"ratio_vs_k8s_wait_q100"`
	// RatioVsLimit compares DeliveredPerSec with that of [Limit], the
	// ceiling reference, in the same group, the same way as RatioVsK8s;
	// null where limit was not measured (groups of several producers).
	// Throughput and working groups have it.
	RatioVsLimit *float64 `json:"ratio_vs_limit"`
	// RatioVsFanout is, for the topics kind, DeliveredPerSec over that of
	// fanout Topics with the same topics, and for the working kind over
	// that of fanout wait pull with the same watchers: the median of
	// per-repetition ratios.
	RatioVsFanout *float64 `json:"ratio_vs_fanout"`
	// RatioVsByHand is, for the filter kind, DeliveredPerSec over that of
	// the watchers reading everything and discarding by hand, and for the
	// topics kind over that of one Broadcaster per topic built by hand:
	// the median of per-repetition ratios.
	RatioVsByHand *float64 `json:"ratio_vs_by_hand"`
	// RatioVsClientGo is, for the record kind, the ratio of events/s
	// against client-go's tools/record with the same producers: the
	// median of the per-repetition ratios.
	RatioVsClientGo *float64 `json:"ratio_vs_client_go"`
	// NsPerPublish is the measurement's wall time, from the first publish
	// until every consumer has received its last value, divided by the
	// values published: the amortised cost of a publish, delivery
	// included.
	NsPerPublish *float64 `json:"ns_per_publish"`
	// ProducerNsPerPublish is the producers' wall time alone divided by
	// the values published. It is lower than NsPerPublish by the time the
	// consumers need to drain what is queued when the producers return,
	// which is most of the run when the events of a measurement are few
	// compared with the queues (k8s queue 1000 at N=1000).
	ProducerNsPerPublish *float64 `json:"producer_ns_per_publish"`
	// StallRatio, for a stalled case, is its ProducerNsPerPublish over
	// that of the same system with no stalled watcher.
	StallRatio *float64 `json:"stall_ratio"`
	// AllocsPerEvent is heap allocations (runtime.MemStats.Mallocs) while
	// the second half of the values was published, divided by those
	// values (the first half is the warm-up); the least over repetitions.
	AllocsPerEvent *float64 `json:"allocs_per_event"`
	// DropPct is the share of (published × read watchers) deliveries that
	// did not happen, in percent.
	DropPct *float64 `json:"drop_pct"`
	// NsPerReplayedValue is, for the replay kind, the time to register a
	// late joiner and read the values it starts with, per value.
	NsPerReplayedValue *float64 `json:"ns_per_replayed_value"`

	// P50LatencyNs, P99LatencyNs and P999LatencyNs are publish→receive
	// latency percentiles over LatencySamples samples.
	P50LatencyNs   *int64 `json:"p50_latency_ns"`
	P99LatencyNs   *int64 `json:"p99_latency_ns"`
	P999LatencyNs  *int64 `json:"p999_latency_ns"`
	LatencySamples *int64 `json:"latency_samples"`
	// MedianRunP99LatencyNs is the median over the latency runs of each
	// run's p99, less sensitive than P99LatencyNs to a burst of load from
	// outside the process.
	MedianRunP99LatencyNs *int64 `json:"median_run_p99_latency_ns"`
	// LatencyRate is, for the latency kind, the values per second the
	// producers were asked to publish: [Config].LatencyRate (light) or
	// [Config].LatencyHighRate; 0 elsewhere.
	LatencyRate int `json:"latency_rate"`
	// PublishedPerSec is, for the latency kind, the rate the producers
	// achieved (the median over the runs): LatencyRate for a system that
	// keeps up, less for one whose publish waited for its readers.
	PublishedPerSec *float64 `json:"published_per_sec"`

	// CPUNsPerDelivered is, for the kinds measured in pairs of runs
	// (throughput, stall, topics, filter, working), the process CPU time
	// (user + system, every goroutine of the harness and of the system)
	// per delivered value, from the difference of the pair: what a
	// delivery costs the machine, where delivered/s is what it costs in
	// wall time. A reader that yields rather than parks costs CPU while
	// it waits. The median of the repetitions whose difference of CPU time
	// is not negative; null if none (runs of some microseconds, as in the
	// harness's tests, too short for the process's CPU clock).
	CPUNsPerDelivered *float64 `json:"cpu_ns_per_delivered"`
	// OutOfOrder is, for the working and topics kinds, the values the
	// readers found out of order over every run of the case: 0 for a
	// system that delivers each watcher each producer's values in that
	// producer's order.
	OutOfOrder *int64 `json:"out_of_order"`

	// IdleBytesPerWatcher is the growth of HeapAlloc+StackInuse per idle
	// watcher.
	IdleBytesPerWatcher *float64 `json:"idle_bytes_per_watcher"`
	// IdleCPUMsPerSec is process CPU milliseconds per second of wall time
	// while the watchers are parked.
	IdleCPUMsPerSec *float64 `json:"idle_cpu_ms_per_sec"`

	// GCsPer10kEvents is, for the record and events kinds, the GC cycles
	// that ended while the counted half of the events was recorded, per
	// 10,000 of them (median of the repetitions); HeapMB is the heap in use
	// (HeapAlloc, MiB) as that half began. Both say how often the collector
	// ran in the process the figure comes from: a small heap makes it run
	// often, and the ratios against client-go move with it.
	GCsPer10kEvents *float64 `json:"gcs_per_10k_events"`
	HeapMB          *float64 `json:"heap_mb"`

	// PeakGoroutines is, for the events kind, the most goroutines seen
	// above the baseline while recording, over the repetitions.
	PeakGoroutines *float64 `json:"peak_goroutines"`

	// SinkCreates and SinkPatches are, for the record kind, the sink's
	// Create and Patch calls per repetition, the same for every record
	// case of a run (checked). They are shown in the report only.
	SinkCreates int64 `json:"-"`
	SinkPatches int64 `json:"-"`
}

func newCase(kind string, s System) Case {
	return Case{Kind: kind, Label: s.Label(), System: s.Name, Strategy: s.Strategy, API: s.API, Queue: s.Queue, Batch: s.batch()}
}

// Results is everything one run measured.
type Results struct {
	// Machine describes where it ran.
	Machine Machine
	// Config is what was run.
	Config Config
	// Cases holds every measured case, in report order, but Reruns.
	Cases []Case
	// Reruns holds the cases of the scheduler-bound targets' later runs
	// ([Config].SchedulerRuns), [Case].Run 2 and up, which count only
	// towards those targets' medians.
	Reruns []Case
	// Targets are the project's performance targets, checked against Cases.
	Targets []Target
	// Warnings lists anomalies seen during the run, such as a lossless
	// system that lost values or goroutines that did not exit.
	Warnings []string
	// Elapsed is the run's wall time.
	Elapsed time.Duration
}

// Run measures every case of cfg: throughput per (watchers, producers)
// group, the stalled-watcher comparison, latency per producers, idle
// memory, idle CPU, replay and the k8s record comparison per producers,
// then evaluates the targets. Progress lines go to progress, if not nil.
func Run(cfg Config, progress io.Writer) (*Results, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("harness: invalid config: %w", err)
	}
	if progress == nil {
		progress = io.Discard
	}
	start := time.Now()
	res := &Results{Machine: DescribeMachine(), Config: cfg}
	say := func(format string, args ...any) {
		fmt.Fprintf(progress, "[%5.1fs] "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
	}
	for _, st := range steps(cfg, res) {
		if !cfg.runs(st.kind) {
			continue
		}
		say("%s", st.about)
		cases, err := st.run()
		if err != nil {
			return nil, err
		}
		for _, c := range cases {
			if c.Run > 1 { // a rerun, see rerunSteps
				res.Reruns = append(res.Reruns, c)
			} else {
				c.Run = 1
				res.Cases = append(res.Cases, c)
			}
		}
	}
	res.Targets = EvaluateTargets(append(slices.Clone(res.Cases), res.Reruns...))
	res.Elapsed = time.Since(start)
	say("done")
	return res, nil
}

// step is one group of measurements of a run.
type step struct {
	kind  string
	about string // the progress line
	run   func() ([]Case, error)
}

// steps returns the groups of measurements of cfg, in report order.
func steps(cfg Config, res *Results) []step {
	var out []step
	for _, p := range cfg.Producers {
		for _, n := range cfg.Watchers {
			systems := ThroughputSystemsFor(n, p)
			if cfg.Headline {
				systems = headlineOnly(systems)
			}
			out = append(out, step{KindThroughput,
				fmt.Sprintf("throughput: %s, %s, %d systems", plural(n, "watcher"), plural(p, "producer"), len(systems)),
				func() ([]Case, error) { return throughputGroup(cfg, res, systems, n, p) }})
		}
	}
	for _, n := range cfg.WorkingWatchers {
		out = append(out, step{KindWorking, fmt.Sprintf("working readers: %s checking the order, 1 producer, %d systems",
			plural(n, "watcher"), len(WorkingSystems())),
			func() ([]Case, error) { return workingGroup(cfg, res, n) }})
	}
	out = append(out, step{KindStall, fmt.Sprintf("stalled watcher: %d watchers", cfg.StallWatchers),
		func() ([]Case, error) { return stallGroup(cfg, res, StallSystems()) }})
	for _, p := range cfg.Producers {
		for _, t := range cfg.TopicCounts {
			out = append(out, step{KindTopics, fmt.Sprintf("topics: %s × %d watchers, %s", plural(t, "topic"), WatchersPerTopic,
				plural(p, "producer")), func() ([]Case, error) { return topicsGroup(cfg, res, t, p) }})
		}
	}
	out = append(out, step{KindFilter, fmt.Sprintf("filter: %d watchers, each keeping 1 value in %d", cfg.FilterWatchers, FilterShare),
		func() ([]Case, error) { return filterGroup(cfg, res) }})
	out = append(latencySteps(cfg, res, out),
		step{KindIdleMemory, fmt.Sprintf("idle memory: %d watchers (fanout wait pull: %d)", cfg.IdleWatchers, cfg.IdlePullWatchers),
			func() ([]Case, error) { return idleMemoryGroup(cfg, res, IdleMemorySystems()) }},
		step{KindIdleCPU, fmt.Sprintf("idle CPU: %d parked watchers", cfg.IdleCPUWatchers),
			func() ([]Case, error) { return idleCPUGroup(cfg, res, IdleCPUSystems()) }},
		step{KindReplay, fmt.Sprintf("replay: late joiners starting with the last %d values", cfg.ReplayHistory),
			func() ([]Case, error) { return replayGroup(cfg, res, ReplaySystems()) }})
	for _, p := range cfg.RecordProducers {
		out = append(out, step{KindRecord,
			fmt.Sprintf("k8s record: %d events about %d pods per measurement, %s", recordEvents(cfg.RecordEvents, p), RecordPods,
				plural(p, "producer")),
			func() ([]Case, error) { return recordGroup(cfg, res, RecordSystems(), p) }})
	}
	for _, p := range cfg.RecordProducers {
		out = append(out, step{KindEvents,
			fmt.Sprintf("k8s events: %d events.k8s.io events about %d pods per measurement, %s", recordEvents(cfg.RecordEvents, p),
				RecordPods, plural(p, "producer")),
			func() ([]Case, error) { return eventsGroup(cfg, res, EventsSystems(), p) }})
	}
	return append(out, rerunSteps(cfg, res)...)
}

// latencySteps appends to out the latency groups: the light rate with each
// number of producers, and the high rate with one.
func latencySteps(cfg Config, res *Results, out []step) []step {
	for _, p := range cfg.LatencyProducers {
		out = append(out, step{KindLatency,
			fmt.Sprintf("latency: %d watchers at %d events/s, %s", cfg.LatencyWatchers, cfg.LatencyRate, plural(p, "producer")),
			func() ([]Case, error) { return latencyGroup(cfg, res, LatencySystems(p), p, cfg.LatencyRate) }})
	}
	if cfg.LatencyHighRate > 0 {
		out = append(out, step{KindLatency,
			fmt.Sprintf("latency: %d watchers at a high rate, %d events/s, 1 producer", cfg.LatencyWatchers, cfg.LatencyHighRate),
			func() ([]Case, error) { return latencyGroup(cfg, res, LatencySystems(1), 1, cfg.LatencyHighRate) }})
	}
	return out
}

func ptr[T any](v T) *T { return &v }

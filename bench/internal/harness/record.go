package harness

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fanout-go/fanout/k8s/record"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	clientrecord "k8s.io/client-go/tools/record"
)

// The k8s record comparison: recording Kubernetes events into a no-op sink,
// fanout's k8s/record against client-go's tools/record.
const (
	// SystemClientGo is k8s.io/client-go/tools/record, the reference of
	// the record comparison.
	SystemClientGo = "client-go"
	// APIRecord is the read path of the record systems: an event sink
	// started with StartRecordingToSink.
	APIRecord = "record"
	// RecordQueue is the sink queue of both recorders (client-go's, which
	// fanout's k8s/record copies): 1000 events, dropped when full.
	RecordQueue = 1000
	// RecordPods is the number of pods the events are about, in turn; every
	// event has the same type, reason and message, so an event is a repeat
	// (a Patch) but for the first one of each pod (a Create).
	RecordPods = 200
	// RecordBatch is the number of events recorded before the harness waits
	// until the sink has seen them all. It fits the 1000-event queue, so
	// that neither recorder drops.
	RecordBatch = 500
	// RecordBurst is the spam filter's burst (CorrelatorOptions.BurstSize),
	// so large that the filter never skips an event.
	RecordBurst = 1 << 30
)

// recordStallTimeout is how long the harness waits for a sink call before it
// gives up on a record measurement. A variable for the tests.
var recordStallTimeout = 10 * time.Second

// RecordFanout is github.com/fanout-go/fanout/k8s/record.
var RecordFanout = System{Name: SystemFanout, Strategy: StrategyDrop, API: APIRecord, Queue: RecordQueue}

// RecordClientGo is k8s.io/client-go/tools/record, the reference every
// ratio of the record comparison is computed against.
var RecordClientGo = System{Name: SystemClientGo, Strategy: StrategyDrop, API: APIRecord, Queue: RecordQueue}

// RecordSystems returns the systems of the record comparison.
func RecordSystems() []System { return []System{RecordFanout, RecordClientGo} }

// newRecordBroadcaster builds the event broadcaster of a record system, its
// correlator's spam filter lifted ([RecordBurst]), and returns it with its
// shutdown.
func newRecordBroadcaster(s System) (clientrecord.EventBroadcaster, func(), error) {
	opts := clientrecord.CorrelatorOptions{BurstSize: RecordBurst}
	switch s {
	case RecordFanout:
		b := record.New(record.WithCorrelatorOptions(opts))
		return b, b.Shutdown, nil
	case RecordClientGo:
		b := clientrecord.NewBroadcaster(clientrecord.WithCorrelatorOptions(opts))
		return b, b.Shutdown, nil
	}
	return nil, nil, fmt.Errorf("harness: %q is not a record system", s.Label())
}

// recordPods returns the pods the events are about.
func recordPods() []*v1.Pod {
	pods := make([]*v1.Pod, RecordPods)
	for i := range pods {
		pods[i] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("pod-", i), Namespace: "bench",
			UID: types.UID(fmt.Sprint("uid-", i))}}
	}
	return pods
}

// countingSink is a no-op event sink that counts its calls.
type countingSink struct{ creates, updates, patches atomic.Int64 }

func (s *countingSink) Create(e *v1.Event) (*v1.Event, error) { s.creates.Add(1); return e, nil }
func (s *countingSink) Update(e *v1.Event) (*v1.Event, error) { s.updates.Add(1); return e, nil }
func (s *countingSink) Patch(e *v1.Event, _ []byte) (*v1.Event, error) {
	s.patches.Add(1)
	return e, nil
}

func (s *countingSink) calls() int64 { return s.creates.Load() + s.updates.Load() + s.patches.Load() }

// waitFor spins, yielding the processor at each turn, until the sink has
// seen want calls. It gives up if no call arrives for recordStallTimeout.
func (s *countingSink) waitFor(want int64) error {
	last, since := s.calls(), time.Now()
	for spin := 1; ; spin++ {
		got := s.calls()
		if got >= want {
			return nil
		}
		runtime.Gosched()
		if spin%1024 == 0 {
			if got != last {
				last, since = got, time.Now()
			} else if time.Since(since) > recordStallTimeout {
				return fmt.Errorf("%d of %d events reached the sink, none for %s", got, want, recordStallTimeout)
			}
		}
	}
}

// sinkCalls counts the calls of each kind a sink received.
type sinkCalls struct{ creates, updates, patches int64 }

func (c sinkCalls) total() int64 { return c.creates + c.updates + c.patches }

func (c sinkCalls) String() string {
	return fmt.Sprintf("%d Create, %d Patch, %d Update", c.creates, c.patches, c.updates)
}

// recordSample is one record measurement.
type recordSample struct {
	events  int64
	calls   sinkCalls
	elapsed time.Duration // first event recorded until the sink saw the last
	mallocs uint64        // allocations while the counted events were recorded
	counted int64         // events recorded while allocations were counted
	settled bool          // every goroutine of the measurement exited
}

func (s recordSample) eventsPerSec() float64 { return float64(s.events) / s.elapsed.Seconds() }
func (s recordSample) nsPerEvent() float64 {
	return float64(s.elapsed.Nanoseconds()) / float64(s.events)
}
func (s recordSample) allocsPerEvent() float64 { return float64(s.mallocs) / float64(s.counted) }

// measureRecord builds the broadcaster of s with one counting no-op sink and
// one recorder (client-go's scheme resolves the pods' kind), and records
// events events, each about the next of the pods in turn, in batches of [RecordBatch]: after each batch it spins until the
// sink has seen every call so far. The clock runs from the first event
// recorded until the sink has seen the last. Allocations are counted over
// the second half of the events, as in [measure]: the first half, with the
// Create of each pod, is the warm-up. Then the broadcaster is shut down and
// the harness waits for its goroutines to exit.
func measureRecord(s System, pods []*v1.Pod, events int) (recordSample, error) {
	base := runtime.NumGoroutine()
	b, shutdown, err := newRecordBroadcaster(s)
	if err != nil {
		return recordSample{}, err
	}
	sink := &countingSink{}
	b.StartRecordingToSink(sink)
	rec := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "fanout-bench"})
	var sent int64
	recordN := func(n int64) error {
		for end := sent + n; sent < end; {
			batch := min(RecordBatch, end-sent)
			for i := range batch {
				rec.Event(pods[(sent+i)%int64(len(pods))], v1.EventTypeNormal, "Synced", "synced")
			}
			sent += batch
			if err := sink.waitFor(sent); err != nil {
				return err
			}
		}
		return nil
	}
	first := int64(events / 2)
	runtime.GC()
	var m0, m1 runtime.MemStats
	start := time.Now()
	err = recordN(first)
	runtime.ReadMemStats(&m0)
	if err == nil {
		err = recordN(int64(events) - first)
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&m1)
	shutdown()
	smp := recordSample{
		events:  int64(events),
		calls:   sinkCalls{sink.creates.Load(), sink.updates.Load(), sink.patches.Load()},
		elapsed: elapsed,
		mallocs: m1.Mallocs - m0.Mallocs,
		counted: int64(events) - first,
		settled: settle(base),
	}
	if err != nil {
		return smp, fmt.Errorf("harness: record %s: %w", s.Label(), err)
	}
	return smp, nil
}

// checkSameSinkCalls reports an error unless every sample of every system
// made exactly the same sink calls, Create, Patch and Update counted apart,
// one per event recorded: the recorders are compared doing the same work.
func checkSameSinkCalls(systems []System, samples [][]recordSample) error {
	var want sinkCalls
	var wantFrom string
	for i, s := range systems {
		for rep, smp := range samples[i] {
			if smp.calls.total() != smp.events {
				return fmt.Errorf("harness: record %s, repetition %d: %d sink calls (%s) for %d events",
					s.Label(), rep+1, smp.calls.total(), smp.calls, smp.events)
			}
			if wantFrom == "" {
				want, wantFrom = smp.calls, fmt.Sprintf("%s, repetition %d", s.Label(), rep+1)
				continue
			}
			if smp.calls != want {
				return fmt.Errorf("harness: record: different sink calls: %s in %s, repetition %d; %s in %s",
					smp.calls, s.Label(), rep+1, want, wantFrom)
			}
		}
	}
	return nil
}

// recordGroup runs the record comparison: a discarded warm-up of each
// system (up to two batches), then cfg.Reps repetitions in which every
// system records cfg.RecordEvents events, the order rotated by one system per
// repetition. It checks that every measurement made the same sink calls and
// returns one case per system, with its ratio against [RecordClientGo] if
// that is among systems: the median over the repetitions of the ratio of
// the two systems' events/s in the same repetition.
func recordGroup(cfg Config, res *Results, systems []System) ([]Case, error) {
	pods := recordPods()
	for _, s := range systems {
		if _, err := measureRecord(s, pods, min(cfg.RecordEvents, 2*RecordBatch)); err != nil {
			return nil, err
		}
	}
	samples := make([][]recordSample, len(systems))
	for rep := range cfg.Reps {
		for k := range systems {
			i := (k + rep) % len(systems)
			smp, err := measureRecord(systems[i], pods, cfg.RecordEvents)
			if err != nil {
				return nil, err
			}
			if !smp.settled {
				res.Warnings = append(res.Warnings, fmt.Sprintf("record %s: goroutines still running after the measurement", systems[i].Label()))
			}
			samples[i] = append(samples[i], smp)
		}
	}
	if err := checkSameSinkCalls(systems, samples); err != nil {
		return nil, err
	}
	cases := make([]Case, len(systems))
	for i, s := range systems {
		c := newCase(KindRecord, s)
		c.Watchers, c.Producers, c.Reps, c.Published = 1, 1, len(samples[i]), int64(cfg.RecordEvents)
		var eps, nse, apc []float64
		for _, smp := range samples[i] {
			eps = append(eps, smp.eventsPerSec())
			nse = append(nse, smp.nsPerEvent())
			apc = append(apc, smp.allocsPerEvent())
		}
		c.DeliveredPerSec = ptr(Median(eps))
		c.SpreadPct = ptr(Spread(eps))
		c.NsPerPublish = ptr(Median(nse))
		c.AllocsPerEvent = ptr(slices.Min(apc)) // as in summarize
		c.SinkCreates, c.SinkPatches = samples[i][0].calls.creates, samples[i][0].calls.patches
		cases[i] = c
	}
	if r := slices.Index(systems, RecordClientGo); r >= 0 {
		for i := range cases {
			ratios := make([]float64, len(samples[i]))
			for k := range ratios {
				ratios[k] = samples[i][k].eventsPerSec() / samples[r][k].eventsPerSec()
			}
			cases[i].RatioVsK8s = ptr(Median(ratios))
		}
	}
	return cases, nil
}

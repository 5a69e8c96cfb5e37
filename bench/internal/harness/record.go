package harness

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
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

// countingSink is a no-op event sink that counts its calls, in all and
// per pod (by the UID of the event's involved object).
type countingSink struct {
	creates, updates, patches atomic.Int64
	uids                      map[types.UID]int // pod index by UID, read-only
	byPod                     []podCalls        // per pod, then one for any other object
}

// podCalls counts the calls about one pod.
type podCalls struct{ creates, updates, patches atomic.Int64 }

func newCountingSink(pods []*v1.Pod) *countingSink {
	s := &countingSink{uids: make(map[types.UID]int, len(pods)), byPod: make([]podCalls, len(pods)+1)}
	for i, p := range pods {
		s.uids[p.UID] = i
	}
	return s
}

// pod returns the counters of the pod e is about. The per-pod counter is
// incremented before the total, so that a waiter that sees the total sees it.
func (s *countingSink) pod(e *v1.Event) *podCalls {
	if i, ok := s.uids[e.InvolvedObject.UID]; ok {
		return &s.byPod[i]
	}
	return &s.byPod[len(s.byPod)-1]
}

func (s *countingSink) Create(e *v1.Event) (*v1.Event, error) {
	s.pod(e).creates.Add(1)
	s.creates.Add(1)
	return e, nil
}

func (s *countingSink) Update(e *v1.Event) (*v1.Event, error) {
	s.pod(e).updates.Add(1)
	s.updates.Add(1)
	return e, nil
}

func (s *countingSink) Patch(e *v1.Event, _ []byte) (*v1.Event, error) {
	s.pod(e).patches.Add(1)
	s.patches.Add(1)
	return e, nil
}

func (s *countingSink) calls() int64 { return s.creates.Load() + s.updates.Load() + s.patches.Load() }

// snapshot returns the calls counted, in all and per pod.
func (s *countingSink) snapshot() (sinkCalls, []sinkCalls) {
	by := make([]sinkCalls, len(s.byPod))
	for i := range s.byPod {
		p := &s.byPod[i]
		by[i] = sinkCalls{p.creates.Load(), p.updates.Load(), p.patches.Load()}
	}
	return sinkCalls{s.creates.Load(), s.updates.Load(), s.patches.Load()}, by
}

// waitFor spins, yielding the processor at each turn, until the sink has
// seen want calls. It gives up if no call arrives for recordStallTimeout.
func (s *countingSink) waitFor(want int64) error {
	return spinUntil(s.calls, want, "events reached the sink")
}

// spinUntil spins, yielding the processor at each turn, until count()
// reaches want. It gives up if the count does not move for
// recordStallTimeout, with an error saying "<count> of <want> <what>".
func spinUntil(count func() int64, want int64, what string) error {
	last, since := count(), time.Now()
	for spin := 1; ; spin++ {
		got := count()
		if got >= want {
			return nil
		}
		runtime.Gosched()
		if spin%1024 == 0 {
			if got != last {
				last, since = got, time.Now()
			} else if time.Since(since) > recordStallTimeout {
				return fmt.Errorf("%d of %d %s, none for %s", got, want, what, recordStallTimeout)
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
	byPod   []sinkCalls   // the calls per pod, then about any other object
	elapsed time.Duration // first event recorded until the sink saw the last
	mallocs uint64        // allocations while the counted events were recorded
	counted int64         // events recorded while allocations were counted
	gcs     uint32        // GC cycles that ended while the counted events were recorded
	heap    uint64        // HeapAlloc as the counted events began, bytes
	settled bool          // every goroutine of the measurement exited
}

func (s recordSample) eventsPerSec() float64 { return float64(s.events) / s.elapsed.Seconds() }
func (s recordSample) nsPerEvent() float64 {
	return float64(s.elapsed.Nanoseconds()) / float64(s.events)
}
func (s recordSample) allocsPerEvent() float64 { return float64(s.mallocs) / float64(s.counted) }
func (s recordSample) gcsPer10k() float64      { return 1e4 * float64(s.gcs) / float64(s.counted) }

// countedHalf fills in what s learns from the heap statistics read as the
// counted events began (m0) and ended (m1).
func (s *recordSample) countedHalf(m0, m1 *runtime.MemStats, counted int64) {
	s.mallocs, s.counted = m1.Mallocs-m0.Mallocs, counted
	s.gcs, s.heap = m1.NumGC-m0.NumGC, m0.HeapAlloc
}

// recordEvents is the events a record measurement records: events rounded
// down to a multiple of producers, at least one per producer.
func recordEvents(events, producers int) int { return max(1, events/producers) * producers }

// measureRecord builds the broadcaster of s with one counting no-op sink and
// one recorder (client-go's scheme resolves the pods' kind), and records
// events events from the given number of goroutines (see [recordRounds]).
// The clock runs from the first event recorded until the sink has seen the
// last. Allocations are counted over the second half of the events, as in
// [measure]: the first half, with the Create of each pod, is the warm-up.
// Then the broadcaster is shut down and the harness waits for its
// goroutines to exit.
func measureRecord(s System, pods []*v1.Pod, events, producers int) (recordSample, error) {
	base := runtime.NumGoroutine()
	b, shutdown, err := newRecordBroadcaster(s)
	if err != nil {
		return recordSample{}, err
	}
	sink := newCountingSink(pods)
	b.StartRecordingToSink(sink)
	rec := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "fanout-bench"})
	rr := newRecordRounds(func(p *v1.Pod) { rec.Event(p, v1.EventTypeNormal, "Synced", "synced") }, sink.waitFor, pods,
		recordEvents(events, producers), producers)
	runtime.GC()
	var m0, m1 runtime.MemStats
	var counted int64
	start := time.Now()
	err = rr.run(func(sent int64) {
		runtime.ReadMemStats(&m0)
		counted = rr.total - sent
	})
	elapsed := time.Since(start)
	runtime.ReadMemStats(&m1)
	shutdown()
	smp := recordSample{events: rr.total, elapsed: elapsed}
	smp.countedHalf(&m0, &m1, counted)
	smp.calls, smp.byPod = sink.snapshot()
	smp.settled = settle(base)
	if err != nil {
		return smp, fmt.Errorf("harness: record %s: %w", s.Label(), err)
	}
	return smp, nil
}

// recordRounds records events about pods from several goroutines, in
// rounds: in each round every goroutine records its share, at most
// RecordBatch/producers events (at least two rounds, so that allocations
// can be counted over the second half), then the coordinator waits (wait:
// until the sink has seen every call so far, for the record comparison),
// so that the recorders' 1000-event queues never overflow. Goroutine j records about its own pods only, the pods i
// with i mod producers = j, in turn, so that the sink calls about each pod
// (a Create for its first event, a Patch for every repeat) do not depend on
// how the goroutines interleave. With one producer it records about every
// pod in turn, in batches of RecordBatch.
type recordRounds struct {
	record    func(*v1.Pod)          // records one event about a pod
	wait      func(sent int64) error // after each round, with the events recorded so far
	own       [][]*v1.Pod            // the pods of each producer
	per       int                    // events per producer
	share     int                    // events per producer per round
	total     int64
	start     []chan struct{} // closed to start each round
	done      sync.WaitGroup  // the producers that finished the round
	abandoned atomic.Bool     // the coordinator gave up: producers return
}

func newRecordRounds(record func(*v1.Pod), wait func(sent int64) error, pods []*v1.Pod, events, producers int) *recordRounds {
	rr := &recordRounds{record: record, wait: wait, own: make([][]*v1.Pod, producers), per: events / producers, total: int64(events)}
	for i, p := range pods {
		rr.own[i%producers] = append(rr.own[i%producers], p)
	}
	// At least two rounds, of at most RecordBatch events in all, as even
	// as can be.
	rounds := max(2, ceilDiv(rr.per, max(1, RecordBatch/producers)))
	rr.share = max(1, ceilDiv(rr.per, rounds))
	rr.start = make([]chan struct{}, ceilDiv(rr.per, rr.share))
	for i := range rr.start {
		rr.start[i] = make(chan struct{})
	}
	return rr
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// produce is producer j: it records its share of each round.
func (rr *recordRounds) produce(j int) {
	own, k := rr.own[j], 0
	for _, start := range rr.start {
		<-start
		if rr.abandoned.Load() {
			return
		}
		for end := min(k+rr.share, rr.per); k < end; k++ {
			rr.record(own[k%len(own)])
		}
		rr.done.Done()
	}
}

// run starts the producers and runs the rounds; half is called once, between
// two rounds, when half the events or more have been recorded and seen, or
// before the last round.
func (rr *recordRounds) run(half func(sent int64)) error {
	var producers sync.WaitGroup
	for j := range rr.own {
		producers.Go(func() { rr.produce(j) })
	}
	defer producers.Wait()
	var sent int64
	halved := false
	for r, start := range rr.start {
		if !halved && (2*sent >= rr.total || r == len(rr.start)-1) {
			halved = true
			half(sent)
		}
		rr.done.Add(len(rr.own))
		close(start)
		rr.done.Wait()
		sent += int64(min(rr.share, rr.per-r*rr.share) * len(rr.own))
		if err := rr.wait(sent); err != nil {
			rr.abandoned.Store(true)
			for _, ch := range rr.start[r+1:] {
				close(ch)
			}
			return err
		}
	}
	return nil
}

// checkSameSinkCalls reports an error unless every sample of every system
// made exactly the same sink calls, Create, Patch and Update counted apart,
// one per event recorded, and the same about each pod: the recorders are
// compared doing the same work.
func checkSameSinkCalls(systems []System, samples [][]recordSample) error {
	var want recordSample
	var wantFrom string
	for i, s := range systems {
		for rep, smp := range samples[i] {
			if smp.calls.total() != smp.events {
				return fmt.Errorf("harness: record %s, repetition %d: %d sink calls (%s) for %d events",
					s.Label(), rep+1, smp.calls.total(), smp.calls, smp.events)
			}
			if wantFrom == "" {
				want, wantFrom = smp, fmt.Sprintf("%s, repetition %d", s.Label(), rep+1)
				continue
			}
			if smp.calls != want.calls {
				return fmt.Errorf("harness: record: different sink calls: %s in %s, repetition %d; %s in %s",
					smp.calls, s.Label(), rep+1, want.calls, wantFrom)
			}
			if p := firstDiff(smp.byPod, want.byPod); p >= 0 {
				return fmt.Errorf("harness: record: different sink calls about pod %d: %s in %s, repetition %d; %s in %s",
					p, at(smp.byPod, p), s.Label(), rep+1, at(want.byPod, p), wantFrom)
			}
		}
	}
	return nil
}

// firstDiff returns the first index at which a and b differ, or -1.
func firstDiff(a, b []sinkCalls) int {
	for i := range max(len(a), len(b)) {
		if at(a, i) != at(b, i) {
			return i
		}
	}
	return -1
}

// at returns calls[i], or no calls past the end.
func at(calls []sinkCalls, i int) sinkCalls {
	if i < len(calls) {
		return calls[i]
	}
	return sinkCalls{}
}

// isSettled reports whether every goroutine of the measurement exited.
func (s recordSample) isSettled() bool { return s.settled }

// recordReps runs measure, which records the given number of events with
// one system, for a discarded warm-up of each system (up to two batches),
// then for cfg.Reps repetitions in which every system records
// cfg.RecordEvents events, the order rotated by one system per
// repetition. A measurement whose goroutines did not all exit adds a
// warning. samples[i] are systems[i]'s.
func recordReps[S interface{ isSettled() bool }](cfg Config, res *Results, systems []System, kind string, producers int,
	measure func(s System, events int) (S, error)) (samples [][]S, err error) {
	for _, s := range systems {
		if _, err := measure(s, min(cfg.RecordEvents, 2*RecordBatch)); err != nil {
			return nil, err
		}
	}
	samples = make([][]S, len(systems))
	for rep := range cfg.Reps {
		for k := range systems {
			i := (k + rep) % len(systems)
			var smp S
			labelled(systems[i], func(context.Context) { smp, err = measure(systems[i], cfg.RecordEvents) })
			if err != nil {
				return nil, err
			}
			if !smp.isSettled() {
				res.Warnings = append(res.Warnings, fmt.Sprintf("%s %s P=%d: goroutines still running after the measurement",
					kind, systems[i].Label(), producers))
			}
			samples[i] = append(samples[i], smp)
		}
	}
	return samples, nil
}

// recordGroup runs the record comparison with the given number of
// recording goroutines: a discarded warm-up of each system (up to two
// batches), then cfg.Reps repetitions in which every system records
// cfg.RecordEvents events, the order rotated by one system per repetition.
// It checks that every measurement made the same sink calls and returns one
// case per system, with its ratio against [RecordClientGo] if that is among
// systems: the median over the repetitions of the ratio of the two systems'
// events/s in the same repetition.
func recordGroup(cfg Config, res *Results, systems []System, producers int) ([]Case, error) {
	pods := recordPods()
	samples, err := recordReps(cfg, res, systems, KindRecord, producers, func(s System, events int) (recordSample, error) {
		return measureRecord(s, pods, events, producers)
	})
	if err != nil {
		return nil, err
	}
	if err := checkSameSinkCalls(systems, samples); err != nil {
		return nil, err
	}
	cases := make([]Case, len(systems))
	for i, s := range systems {
		cases[i] = summarizeRecord(s, producers, samples[i])
	}
	if r := slices.Index(systems, RecordClientGo); r >= 0 {
		for i := range cases {
			ratios := make([]float64, len(samples[i]))
			for k := range ratios {
				ratios[k] = samples[i][k].eventsPerSec() / samples[r][k].eventsPerSec()
			}
			cases[i].RatioVsClientGo = ptr(Median(ratios))
			cases[i].RatioVsK8s = cases[i].RatioVsClientGo // the field record cases had first
		}
	}
	return cases, nil
}

// summarizeRecord turns the samples of one record system into a case with
// medians.
func summarizeRecord(s System, producers int, samples []recordSample) Case {
	c := newCase(KindRecord, s)
	c.Watchers, c.Producers, c.Reps, c.Published = 1, producers, len(samples), samples[0].events
	var eps, nse, apc, gcs, heap []float64
	for _, smp := range samples {
		eps = append(eps, smp.eventsPerSec())
		nse = append(nse, smp.nsPerEvent())
		apc = append(apc, smp.allocsPerEvent())
		gcs = append(gcs, smp.gcsPer10k())
		heap = append(heap, float64(smp.heap)/(1<<20))
	}
	c.DeliveredPerSec = ptr(Median(eps))
	c.SpreadPct = ptr(Spread(eps))
	c.NsPerPublish = ptr(Median(nse))
	c.AllocsPerEvent = ptr(slices.Min(apc)) // as in summarize
	c.GCsPer10kEvents, c.HeapMB = ptr(Median(gcs)), ptr(Median(heap))
	c.SinkCreates, c.SinkPatches = samples[0].calls.creates, samples[0].calls.patches
	return c
}

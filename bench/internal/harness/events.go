package harness

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/fanout-go/fanout/k8s/events"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	clientevents "k8s.io/client-go/tools/events"
)

// The k8s events comparison: recording events.k8s.io/v1 events into a
// no-op sink, fanout's k8s/events against client-go's tools/events, with
// the record comparison's events, pods, producers and rounds
// ([Config].RecordEvents, [RecordPods], [Config].RecordProducers).
const (
	// KindEvents is the kind of its cases.
	KindEvents = "events"
	// APIEvents is the read path of its systems: a sink started with
	// StartRecordingToSinkWithContext.
	APIEvents = "events"
	// MinEventsRatio8 is the least events/s of fanout's k8s/events, as a
	// multiple of client-go's tools/events, with 8 goroutines recording.
	MinEventsRatio8 = 5.0
)

// EventsFanout is github.com/fanout-go/fanout/k8s/events.
var EventsFanout = System{Name: SystemFanout, Strategy: StrategyDrop, API: APIEvents, Queue: RecordQueue}

// EventsClientGo is k8s.io/client-go/tools/events, the reference of the
// events comparison.
var EventsClientGo = System{Name: SystemClientGo, Strategy: StrategyDrop, API: APIEvents, Queue: RecordQueue}

// EventsSystems returns the systems of the events comparison.
func EventsSystems() []System { return []System{EventsFanout, EventsClientGo} }

// newEventsBroadcaster builds the broadcaster of an events system on sink.
// done reports whether every event recorded so far has been handled
// (written, merged into its series or dropped) and, for client-go, shuts
// the broadcaster down to find out; shutdown shuts it down (again).
func newEventsBroadcaster(s System, sink clientevents.EventSink) (b clientevents.EventBroadcaster, done func(context.Context) error, err error) {
	switch s {
	case EventsFanout:
		fb, err := events.New(sink)
		if err != nil {
			return nil, nil, err
		}
		return fb, fb.Flush, nil
	case EventsClientGo:
		// client-go has no Flush; its sink and probe watchers end once
		// Shutdown has handed them every queued event, and up to v0.37
		// each event handed to the sink runs on a goroutine of its own:
		// the harness then waits until the goroutines are back to the
		// baseline (see measureEvents).
		b := clientevents.NewBroadcaster(sink)
		return b, func(context.Context) error { b.Shutdown(); return nil }, nil
	}
	return nil, nil, fmt.Errorf("harness: %q is not an events system", s.Label())
}

// eventsSink is a no-op events.k8s.io sink that counts its calls, in all
// and per pod, as [countingSink] does for core/v1.
type eventsSink struct{ *countingSink }

func (s eventsSink) count(e *eventsv1.Event, op func(*podCalls) *atomic.Int64, total *atomic.Int64) {
	p := &s.byPod[len(s.byPod)-1]
	if i, ok := s.uids[e.Regarding.UID]; ok {
		p = &s.byPod[i]
	}
	op(p).Add(1)
	total.Add(1)
}

func (s eventsSink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.count(e, func(p *podCalls) *atomic.Int64 { return &p.creates }, &s.creates)
	return e, nil
}

func (s eventsSink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.count(e, func(p *podCalls) *atomic.Int64 { return &p.updates }, &s.updates)
	return e, nil
}

func (s eventsSink) Patch(_ context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	s.count(e, func(p *podCalls) *atomic.Int64 { return &p.patches }, &s.patches)
	return e, nil
}

// eventsSample is one events measurement: a record sample, and the most
// goroutines seen above the baseline while recording.
type eventsSample struct {
	recordSample
	peakGoroutines int
}

// measureEvents builds the broadcaster of s with one counting no-op sink,
// one probe watcher that counts the events it is handed, and one
// recorder, and records n events about pods from producers
// goroutines, in rounds of at most [RecordBatch] events as the record
// comparison (producer j records about the pods i with i mod producers = j,
// all with the same type, reason, action and note, so that all but the
// first two events of each pod are merged into its series). After each
// round the harness spins until the probe has been handed every event,
// and for fanout until its Flush returns, which keeps the 1000-event
// queues from overflowing (fanout's recorder drops, counted, rather than
// queue more; client-go up to v0.37 queues the rest in goroutines of its
// own, which it is not waited for, to its advantage). The
// clock runs from the first event recorded until every event is handled:
// fanout's Flush; client-go's Shutdown and then every goroutine of the
// measurement gone. Goroutines are sampled by the producers every 64
// events and after each round. The rounds are the record comparison's
// ([recordRounds]).
func measureEvents(s System, pods []*v1.Pod, n, producers int) (eventsSample, error) {
	base := runtime.NumGoroutine()
	sink := eventsSink{newCountingSink(pods)}
	b, done, err := newEventsBroadcaster(s, sink)
	if err != nil {
		return eventsSample{}, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var probe atomic.Int64
	stopProbe, err := b.StartEventWatcher(func(apiruntime.Object) { probe.Add(1) })
	if err == nil {
		err = b.StartRecordingToSinkWithContext(ctx)
	}
	if err != nil {
		cancel()
		b.Shutdown()
		return eventsSample{}, err
	}
	rec := b.NewRecorder(scheme.Scheme, "fanout-bench")
	total := recordEvents(n, producers)
	var peak peakGoroutines
	fb, _ := b.(*events.Broadcaster)
	var recorded atomic.Int64
	er := newRecordRounds(func(p *v1.Pod) {
		rec.Eventf(p, nil, v1.EventTypeNormal, "Synced", "Sync", "synced")
		if recorded.Add(1)%64 == 0 {
			peak.sample()
		}
	}, eventsWaiter(fb, &probe, &peak), pods, total, producers)
	runtime.GC()
	var m0, m1 runtime.MemStats
	var counted int64
	start := time.Now()
	err = er.run(func(sent int64) {
		runtime.ReadMemStats(&m0)
		counted = er.total - sent
	})
	if err == nil {
		err = done(ctx)
	}
	settled := true
	if s == EventsClientGo {
		cancel()
		stopProbe()
		settled = spinSettle(base)
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&m1)
	smp := eventsSample{recordSample: recordSample{events: er.total, elapsed: elapsed},
		peakGoroutines: int(peak.n.Load()) - base}
	smp.countedHalf(&m0, &m1, counted)
	smp.calls, smp.byPod = sink.snapshot()
	if err == nil {
		err = checkEventsStats(fb, er.total)
	}
	cancel()
	stopProbe()
	b.Shutdown()
	smp.settled = settled && settle(base)
	if err != nil {
		return smp, fmt.Errorf("harness: events %s: %w", s.Label(), err)
	}
	return smp, nil
}

// peakGoroutines keeps the most goroutines seen by sample.
type peakGoroutines struct{ n atomic.Int64 }

func (p *peakGoroutines) sample() {
	n := int64(runtime.NumGoroutine())
	for old := p.n.Load(); n > old && !p.n.CompareAndSwap(old, n); old = p.n.Load() {
	}
}

// eventsWaiter returns the wait of a recording round: until the probe
// watcher has seen sent events (client-go), or until fanout's broadcaster
// fb is flushed. fanout's sink runner drops, counted, rather than queue
// more than 1000 events: Flush waits for it as well as for the probe,
// without spinning.
func eventsWaiter(fb *events.Broadcaster, probe *atomic.Int64, peak *peakGoroutines) func(sent int64) error {
	return func(sent int64) error {
		peak.sample()
		if fb == nil {
			return spinUntil(probe.Load, sent, "events handed to the probe watcher")
		}
		ctx, cancel := context.WithTimeout(context.Background(), recordStallTimeout)
		defer cancel()
		return fb.Flush(ctx)
	}
}

// checkEventsStats checks that fanout's broadcaster (nil for client-go)
// handled every one of the total events: each reaches the sink and the
// probe, written or merged by the one, handled by the other.
func checkEventsStats(fb *events.Broadcaster, total int64) error {
	if fb == nil {
		return nil
	}
	if st := fb.Stats(); st.Dropped() != 0 || st.Written+st.Merged != uint64(2*total) {
		return fmt.Errorf("%d events, stats %+v: some were dropped", total, st)
	}
	return nil
}

// spinSettle spins, yielding, until no more than base goroutines run, for
// at most recordStallTimeout.
func spinSettle(base int) bool {
	deadline := time.Now().Add(recordStallTimeout)
	for spin := 1; runtime.NumGoroutine() > base; spin++ {
		runtime.Gosched()
		if spin%1024 == 0 && time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// checkSameSeriesCalls reports an error unless every sample of every
// system made exactly the same sink calls, in all and about each pod, and
// those are a series' calls: about each pod one Create and, for a pod with
// two events or more, one Patch (the series of 2); the later events are
// merged into the series and make no call.
func checkSameSeriesCalls(systems []System, samples [][]eventsSample) error {
	var want eventsSample
	var wantFrom string
	for i, s := range systems {
		for rep, smp := range samples[i] {
			from := fmt.Sprintf("%s, repetition %d", s.Label(), rep+1)
			if p := notSeries(smp.byPod); p >= 0 {
				return fmt.Errorf("harness: events %s: %s about pod %d (%s in all for %d events)", from, at(smp.byPod, p), p, smp.calls, smp.events)
			}
			if wantFrom == "" {
				want, wantFrom = smp, from
				continue
			}
			if smp.calls != want.calls {
				return fmt.Errorf("harness: events: different sink calls: %s in %s; %s in %s", smp.calls, from, want.calls, wantFrom)
			}
			if p := firstDiff(smp.byPod, want.byPod); p >= 0 {
				return fmt.Errorf("harness: events: different sink calls about pod %d: %s in %s; %s in %s",
					p, at(smp.byPod, p), from, at(want.byPod, p), wantFrom)
			}
		}
	}
	return nil
}

// notSeries returns the index of the first pod whose calls are not a
// series' (at most one Create, then at most one Patch, no Update), or of
// the last entry (other objects) if it has calls, or -1.
func notSeries(byPod []sinkCalls) int {
	for i, c := range byPod {
		other := i == len(byPod)-1
		if (other && c != sinkCalls{}) || c.updates != 0 || c.creates > 1 || c.patches > c.creates {
			return i
		}
	}
	return -1
}

// eventsGroup runs the events comparison with the given number of
// recording goroutines, as [recordGroup] runs the record one: a discarded
// warm-up of each system, then cfg.Reps interleaved repetitions of
// cfg.RecordEvents events, the same sink calls checked, one case per
// system with its ratio against [EventsClientGo].
func eventsGroup(cfg Config, res *Results, systems []System, producers int) ([]Case, error) {
	pods := recordPods()
	samples, err := recordReps(cfg, res, systems, KindEvents, producers, func(s System, events int) (eventsSample, error) {
		return measureEvents(s, pods, events, producers)
	})
	if err != nil {
		return nil, err
	}
	if err := checkSameSeriesCalls(systems, samples); err != nil {
		return nil, err
	}
	cases := make([]Case, len(systems))
	for i, s := range systems {
		rs := make([]recordSample, len(samples[i]))
		peaks := make([]float64, len(samples[i]))
		for k, smp := range samples[i] {
			rs[k], peaks[k] = smp.recordSample, float64(smp.peakGoroutines)
		}
		cases[i] = summarizeRecord(s, producers, rs)
		cases[i].Kind = KindEvents
		cases[i].PeakGoroutines = ptr(slices.Max(peaks))
	}
	if r := slices.Index(systems, EventsClientGo); r >= 0 {
		for i := range cases {
			ratios := make([]float64, len(samples[i]))
			for k := range ratios {
				ratios[k] = samples[i][k].eventsPerSec() / samples[r][k].eventsPerSec()
			}
			cases[i].RatioVsClientGo = ptr(Median(ratios))
		}
	}
	return cases, nil
}

// eventsRatio is fanout's k8s/events against client-go's tools/events with
// the given producers (the median of the per-repetition ratios), or NaN.
func eventsRatio(cases []Case, producers int) float64 {
	if c := findOne(cases, KindEvents, EventsFanout, producers); c != nil && c.RatioVsClientGo != nil {
		return *c.RatioVsClientGo
	}
	return math.NaN()
}

// reportEvents writes one table per number of recording goroutines.
func reportEvents(b *strings.Builder, res *Results) error {
	for _, cs := range byProducers(casesOf(res.Cases, KindEvents)) {
		c0 := cs[0]
		fmt.Fprintf(b, "\n== k8s events (events.k8s.io/v1): %d events about %d pods into a no-op sink, %s, recorded in rounds of %d ==\n",
			c0.Published, RecordPods, plural(c0.Producers, "producer"), RecordBatch)
		fmt.Fprintf(b, "   same type/reason/action/note: per pod a Create, a Patch (series of 2), the rest merged; sink calls per repetition, the same for all (checked): %d Create + %d Patch\n",
			c0.SinkCreates, c0.SinkPatches)
		b.WriteString("   events/s = events / (first Eventf → every event handled: fanout Flush; client-go Shutdown and its goroutines gone)\n")
		b.WriteString("   goroutines = the most seen above the baseline while recording (producers and probe included)\n")
		b.WriteString("   GCs/10k = GC cycles per 10,000 events of the counted half; heap = in use as it began (the collector runs more often in a small heap)\n")
		tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
		head, labels := padLabels(cs)
		fmt.Fprintf(tw, "%s\tevents/s\tvs client-go\tns/event\tallocs/event\tgoroutines\tGCs/10k\theap\tspread\tevents/rep\t\n", head)
		for i, c := range cs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", labels[i], num(c.DeliveredPerSec, FormatRate),
				FormatRatio(c.RatioVsClientGo), num(c.NsPerPublish, f("%.0f")), num(c.AllocsPerEvent, f("%.1f")),
				num(c.PeakGoroutines, f("%.0f")), num(c.GCsPer10kEvents, f("%.1f")), num(c.HeapMB, f("%.0f MiB")),
				num(c.SpreadPct, f("%.0f%%")), c.Published)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

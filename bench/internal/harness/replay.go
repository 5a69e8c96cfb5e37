package harness

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/fanout-go/fanout"
	"k8s.io/apimachinery/pkg/watch"
)

// The replay comparison: what it costs a late joiner to resume from the
// last values published.
const (
	// APIReplay is fanout's WithReplay: the broadcaster keeps its history
	// (WithHistory) and the watcher starts with the last values of it.
	APIReplay = "replay"
	// APIPrefix is WatchWithPrefix (fanout or k8s) given the last values
	// from a history the application keeps itself.
	APIPrefix = "prefix"
)

// ReplayFanout is fanout's WithHistory(H) broadcaster and a watcher with
// WithReplay(H), read with Recv.
var ReplayFanout = System{Name: SystemFanout, Strategy: StrategyWait, API: APIReplay, Queue: DefaultQueue}

// ReplayFanoutPrefix is fanout's WatchWithPrefix given the application's
// history, read with Recv.
var ReplayFanoutPrefix = System{Name: SystemFanout, Strategy: StrategyWait, API: APIPrefix, Queue: DefaultQueue}

// ReplayK8s is k8s's WatchWithPrefix given the application's history, read
// from ResultChan; the reference of the replay ratios.
var ReplayK8s = System{Name: SystemK8s, Strategy: StrategyWait, API: APIPrefix, Queue: DefaultQueue}

// ReplaySystems returns the systems of the replay comparison.
func ReplaySystems() []System { return []System{ReplayFanout, ReplayFanoutPrefix, ReplayK8s} }

func replayLabel(s System) string {
	if s.API == APIReplay {
		return s.Name + " WithReplay"
	}
	return s.Name + " WatchWithPrefix + app history"
}

// joiner is a broadcaster that has published its history, and a way for a
// late joiner to start with the last values.
type joiner interface {
	// join registers a watcher that starts with the last h values and reads
	// them; it returns the watcher's Stop, not called yet.
	join(ctx context.Context) (stop func(), err error)
	// close shuts the broadcaster down.
	close()
}

// appHistory is the history an application keeps beside a broadcaster that
// has none: the last values published, in a ring, and the lock that makes
// publish-and-remember and copy-and-register atomic, so that a joiner's
// prefix and the live values it then receives have no gap and no duplicate.
type appHistory[T any] struct {
	mu      sync.Mutex
	ring    []T
	next    int  // where the next value goes
	full    bool // the ring has wrapped
	scratch []T  // the prefix, in order; both WatchWithPrefix copy it
}

func newAppHistory[T any](h int) *appHistory[T] {
	return &appHistory[T]{ring: make([]T, h), scratch: make([]T, 0, h)}
}

// add remembers v. Caller holds mu.
func (a *appHistory[T]) add(v T) {
	a.ring[a.next] = v
	a.next++
	if a.next == len(a.ring) {
		a.next, a.full = 0, true
	}
}

// last returns the history in order, oldest first. Caller holds mu.
func (a *appHistory[T]) last() []T {
	if !a.full {
		return append(a.scratch[:0], a.ring[:a.next]...)
	}
	return append(append(a.scratch[:0], a.ring[a.next:]...), a.ring[:a.next]...)
}

// replayPayload returns n distinct values, value i stamped i, so that a
// joiner can check it got the right ones in order.
func replayPayload(n int) []*Event {
	out := make([]*Event, n)
	for i := range out {
		out[i] = &Event{Stamp: int64(i)}
	}
	return out
}

// newJoiner builds s with history h and publishes 2h values.
func newJoiner(s System, h int) (joiner, error) {
	vs := replayPayload(2 * h)
	switch s {
	case ReplayFanout:
		b := fanout.New[*Event](fanout.WithHistory(h))
		for _, v := range vs {
			if err := b.Action(v); err != nil {
				return nil, err
			}
		}
		return &fanoutReplay{b: b, h: h, opt: fanout.WithReplay(h), want: int64(h), buf: make([]*Event, s.Queue)}, nil
	case ReplayFanoutPrefix:
		j := &fanoutPrefix{b: fanout.New[*Event](), hist: newAppHistory[*Event](h), buf: make([]*Event, s.Queue)}
		for _, v := range vs {
			if err := j.publish(v); err != nil {
				return nil, err
			}
		}
		return j, nil
	case ReplayK8s:
		j := &k8sPrefix{b: newK8s(s), hist: newAppHistory[watch.Event](h)}
		for _, v := range vs {
			if err := j.publish(v); err != nil {
				return nil, err
			}
		}
		return j, nil
	}
	return nil, fmt.Errorf("harness: %q is not a replay system", s.Label())
}

// errReplay reports a joiner that did not get the last values in order.
var errReplay = errors.New("harness: the joiner did not get the last values in order")

// checkStamp returns errReplay unless e is the value stamped want.
func checkStamp(e *Event, want int64) error {
	if e.Stamp != want {
		return fmt.Errorf("%w: value stamped %d, want %d", errReplay, e.Stamp, want)
	}
	return nil
}

// recvAll reads h values from w with Recv and buf, checking that they are
// the values stamped first, first+1, and so on.
func recvAll(ctx context.Context, w *fanout.Watcher[*Event], buf []*Event, h int, first int64) error {
	for got := 0; got < h; {
		n, err := w.Recv(ctx, buf[:min(len(buf), h-got)])
		for _, e := range buf[:n] {
			if err := checkStamp(e, first+int64(got)); err != nil {
				return err
			}
			got++
		}
		if err != nil {
			return fmt.Errorf("%w: %d of %d values, then %w", errReplay, got, h, err)
		}
	}
	return nil
}

type fanoutReplay struct {
	b    *fanout.Broadcaster[*Event]
	h    int
	opt  fanout.Option // WithReplay(h), made once
	want int64         // the stamp of the oldest value replayed
	buf  []*Event
}

func (f *fanoutReplay) join(ctx context.Context) (func(), error) {
	w, err := f.b.Watch(f.opt)
	if err != nil {
		return nil, err
	}
	return w.Stop, recvAll(ctx, w, f.buf, f.h, f.want)
}

func (f *fanoutReplay) close() { f.b.Shutdown() }

type fanoutPrefix struct {
	b    *fanout.Broadcaster[*Event]
	hist *appHistory[*Event]
	sent int64
	buf  []*Event
}

func (f *fanoutPrefix) publish(v *Event) error {
	f.hist.mu.Lock()
	defer f.hist.mu.Unlock()
	f.hist.add(v)
	f.sent++
	return f.b.Action(v)
}

func (f *fanoutPrefix) join(ctx context.Context) (func(), error) {
	f.hist.mu.Lock()
	w, err := f.b.WatchWithPrefix(f.hist.last())
	f.hist.mu.Unlock()
	if err != nil {
		return nil, err
	}
	h := len(f.hist.ring)
	return w.Stop, recvAll(ctx, w, f.buf, h, f.sent-int64(h))
}

func (f *fanoutPrefix) close() { f.b.Shutdown() }

type k8sPrefix struct {
	b    *watch.Broadcaster
	hist *appHistory[watch.Event]
	sent int64
}

func (k *k8sPrefix) publish(v *Event) error {
	k.hist.mu.Lock()
	defer k.hist.mu.Unlock()
	e := watch.Event{Type: watch.Added, Object: v}
	k.hist.add(e)
	k.sent++
	return k.b.Action(e.Type, e.Object)
}

// join reads the prefix from the channel: WatchWithPrefix has put all of it
// there before it returns, so h values are queued and no receive blocks.
func (k *k8sPrefix) join(context.Context) (func(), error) {
	k.hist.mu.Lock()
	w, err := k.b.WatchWithPrefix(k.hist.last())
	k.hist.mu.Unlock()
	if err != nil {
		return nil, err
	}
	h, ch := len(k.hist.ring), w.ResultChan()
	if len(ch) < h {
		return w.Stop, fmt.Errorf("%w: %d of %d values queued", errReplay, len(ch), h)
	}
	first := k.sent - int64(h)
	for i := range h {
		if err := checkStamp((<-ch).Object.(*Event), first+int64(i)); err != nil {
			return w.Stop, err
		}
	}
	return w.Stop, nil
}

func (k *k8sPrefix) close() { k.b.Shutdown() }

// replaySample is one replay measurement.
type replaySample struct {
	joins   int
	values  int64         // values replayed: joins × h
	elapsed time.Duration // registering and reading, Stop excluded
	mallocs uint64
	settled bool
}

func (s replaySample) perSec() float64 { return float64(s.values) / s.elapsed.Seconds() }
func (s replaySample) nsPerValue() float64 {
	return float64(s.elapsed.Nanoseconds()) / float64(s.values)
}
func (s replaySample) allocsPerValue() float64 { return float64(s.mallocs) / float64(s.values) }

// measureReplay builds s with history h, publishes 2h values, then joins
// joins times: each join registers a watcher that starts with the last h
// values and reads them all (checking them), timed, then stops it, untimed.
// Allocations are counted over every join, Stop included.
func measureReplay(s System, h, joins int) (replaySample, error) {
	base := runtime.NumGoroutine()
	j, err := newJoiner(s, h)
	if err != nil {
		return replaySample{}, err
	}
	smp, err := timeJoins(j, joins)
	j.close()
	smp.joins, smp.values, smp.settled = joins, int64(joins)*int64(h), settle(base)
	if err != nil {
		return smp, fmt.Errorf("harness: replay %s: %w", s.Label(), err)
	}
	return smp, nil
}

// timeJoins runs the joins of a replay measurement and returns the time
// spent registering and reading, and the allocations.
func timeJoins(j joiner, joins int) (replaySample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), recordStallTimeout)
	defer cancel()
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	var smp replaySample
	for range joins {
		t0 := time.Now()
		stop, err := j.join(ctx)
		smp.elapsed += time.Since(t0)
		if stop != nil {
			stop()
		}
		if err != nil {
			return smp, err
		}
	}
	runtime.ReadMemStats(&m1)
	smp.mallocs = m1.Mallocs - m0.Mallocs
	return smp, nil
}

// calibrateJoins returns the joins per replay measurement of s: about
// cfg.Target of joining, from a probe of 10 joins and a full-size warm-up
// (both discarded), or, with cfg.Events fixed, cfg.Events/h (at least 1).
func calibrateJoins(cfg Config, s System, h int) (int, error) {
	if cfg.Events > 0 {
		return max(1, cfg.Events/h), nil
	}
	joins := 10
	for range 2 {
		smp, err := measureReplay(s, h, joins)
		if err != nil {
			return 0, err
		}
		joins = min(max(int(cfg.Target.Seconds()/smp.elapsed.Seconds()*float64(joins)), 10), 1_000_000)
	}
	return joins, nil
}

// replayGroup measures each replay system: calibration, then cfg.Reps
// repetitions interleaved, the order rotated; medians, and the median of
// the per-repetition ratios of values/s against [ReplayK8s].
func replayGroup(cfg Config, res *Results, systems []System) ([]Case, error) {
	h := cfg.ReplayHistory
	joins := make([]int, len(systems))
	for i, s := range systems {
		n, err := calibrateJoins(cfg, s, h)
		if err != nil {
			return nil, err
		}
		joins[i] = n
	}
	samples := make([][]replaySample, len(systems))
	for rep := range cfg.Reps {
		for k := range systems {
			i := (k + rep) % len(systems)
			smp, err := measureReplay(systems[i], h, joins[i])
			if err != nil {
				return nil, err
			}
			if !smp.settled {
				res.Warnings = append(res.Warnings, fmt.Sprintf("replay %s: goroutines still running after the measurement", systems[i].Label()))
			}
			samples[i] = append(samples[i], smp)
		}
	}
	cases := make([]Case, len(systems))
	for i, s := range systems {
		cases[i] = summarizeReplay(s, h, samples[i])
	}
	if r := slices.Index(systems, ReplayK8s); r >= 0 {
		for i := range cases {
			ratios := make([]float64, len(samples[i]))
			for k := range ratios {
				ratios[k] = samples[i][k].perSec() / samples[r][k].perSec()
			}
			cases[i].RatioVsK8s = ptr(Median(ratios))
		}
	}
	return cases, nil
}

// summarizeReplay turns the samples of one replay system into a case.
func summarizeReplay(s System, h int, samples []replaySample) Case {
	c := newCase(KindReplay, s)
	c.Watchers, c.Producers, c.Reps, c.History, c.Replay = 1, 1, len(samples), h, h
	c.Published = samples[0].values
	var vps, nsv, apv []float64
	for _, smp := range samples {
		vps = append(vps, smp.perSec())
		nsv = append(nsv, smp.nsPerValue())
		apv = append(apv, smp.allocsPerValue())
	}
	c.DeliveredPerSec = ptr(Median(vps))
	c.SpreadPct = ptr(Spread(vps))
	c.NsPerReplayedValue = ptr(Median(nsv))
	c.AllocsPerEvent = ptr(slices.Min(apv))
	return c
}

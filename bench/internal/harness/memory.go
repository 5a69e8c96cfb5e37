package harness

import (
	"runtime"

	"github.com/fanout-go/fanout"
)

// idleSystem builds s with n watchers that nobody reads (a fanout
// ResultChan watcher has had ResultChan called once) and stores what must
// stay reachable in keep, which the caller allocated beforehand so that the
// harness's own bookkeeping is not counted. It returns the function that
// shuts the system down.
func idleSystem(s System, n int, keep []any) (func(), error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	switch s.Name {
	case SystemFanout:
		beh, _ := fanoutBehavior(s.Strategy)
		b := fanout.New[*Event](fanout.WithQueueLength(s.Queue), fanout.WithFullChannelBehavior(beh))
		for i := range n {
			w, err := b.Watch()
			if err != nil {
				b.Shutdown()
				return nil, err
			}
			if s.API == APIChan {
				w.ResultChan()
			}
			keep[i] = w
		}
		return b.Shutdown, nil
	case SystemK8s:
		b := newK8s(s)
		for i := range n {
			w, err := b.Watch()
			if err != nil {
				b.Shutdown()
				return nil, err
			}
			keep[i] = w
		}
		return b.Shutdown, nil
	case SystemTeivah, SystemKelindar:
		return idlePeer(s, n, keep), nil
	case SystemDisruptor:
		return idleDisruptor(s, n, keep)
	default:
		chans := make([]chan *Event, n)
		for i := range chans {
			chans[i] = make(chan *Event, s.Queue)
		}
		keep[0] = chans
		return func() {}, nil
	}
}

// heapAndStacks returns HeapAlloc+StackInuse after a full collection.
func heapAndStacks() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}

// measureIdleMemory returns the bytes an idle, unread watcher of s costs:
// HeapAlloc+StackInuse (so goroutines the system starts are counted; the
// harness starts none here) with n watchers registered, less the same once
// the system has been shut down and its goroutines have exited, divided by
// n, both taken after a forced GC. The baseline is taken after, not
// before: memory an earlier measurement left to be freed (a peer's
// goroutines still exiting, stacks they cached) would otherwise count in
// it and be freed while the system is built, giving negative figures.
func measureIdleMemory(s System, n int) (float64, error) {
	base := runtime.NumGoroutine()
	keep := make([]any, n)
	shutdown, err := idleSystem(s, n, keep)
	if err != nil {
		return 0, err
	}
	built := heapAndStacks()
	shutdown()
	clear(keep)
	settle(base)
	empty := heapAndStacks()
	runtime.KeepAlive(keep)
	return (float64(built) - float64(empty)) / float64(n), nil
}

// idleWatchers returns the number of idle watchers s is measured with:
// cfg.IdlePullWatchers for fanout wait pull, the cheapest per watcher, whose
// target is set at that N; cfg.IdleWatchers for the others, whose watchers
// hold a channel buffer or a goroutine (k8s q1000 alone would take 3.2 GB
// at 100,000 watchers).
func (c Config) idleWatchers(s System) int {
	if s == Fanout(StrategyWait, APIPull) {
		return c.IdlePullWatchers
	}
	return c.IdleWatchers
}

// idleMemoryGroup measures the idle memory of each system cfg.IdleMemReps
// times, interleaved, and reports the medians.
func idleMemoryGroup(cfg Config, _ *Results, systems []System) ([]Case, error) {
	vals := make([][]float64, len(systems))
	for rep := range cfg.IdleMemReps {
		for k := range systems {
			i := (k + rep) % len(systems)
			v, err := measureIdleMemory(systems[i], cfg.idleWatchers(systems[i]))
			if err != nil {
				return nil, err
			}
			vals[i] = append(vals[i], v)
		}
	}
	cases := make([]Case, len(systems))
	for i, s := range systems {
		c := newCase(KindIdleMemory, s)
		c.Watchers, c.Reps = cfg.idleWatchers(s), cfg.IdleMemReps
		c.IdleBytesPerWatcher = ptr(Median(vals[i]))
		cases[i] = c
	}
	return cases, nil
}

package harness

import (
	"fmt"
	"sync/atomic"

	"github.com/fanout-go/fanout"
)

// The filter group: [Config].FilterWatchers watchers, watcher i keeping
// the values v with v%[FilterShare] == i%[FilterShare], one producer,
// lossless; the figure is matching values delivered per second.

// Read paths of the filter group, as they appear in [System].API.
const (
	// APIFilter is fanout's WithFilter, read with Recv: each reader's
	// filter runs as it reads (a publisher sifts a full queue nobody is
	// reading), and Recv returns only the values it keeps.
	APIFilter = "filter"
	// APIByHand is the same watchers without a filter: each reads every
	// value with Recv and discards those it does not want.
	APIByHand = "by-hand"
	// APIFilterChan and APIByHandChan are the same two read through
	// ResultChan, as k8s watchers are: the publishers filter for a
	// channel watcher, and send only the kept values.
	APIFilterChan = "filter-chan"
	APIByHandChan = "by-hand-chan"
)

// isFilterAPI reports whether api is one of the filter group's.
func isFilterAPI(api string) bool {
	return api == APIFilter || api == APIByHand || api == APIFilterChan || api == APIByHandChan
}

// FilterShare is the share of the values a watcher of the filter group
// keeps: one in FilterShare.
const FilterShare = 10

// FanoutFilter is fanout wait pull whose watchers take their share of the
// values with WithFilter.
var FanoutFilter = System{Name: SystemFanout, Strategy: StrategyWait, API: APIFilter, Queue: DefaultQueue}

// FanoutByHand is fanout wait pull whose watchers read every value and
// discard by hand those not theirs.
var FanoutByHand = System{Name: SystemFanout, Strategy: StrategyWait, API: APIByHand, Queue: DefaultQueue}

// FanoutFilterChan and FanoutByHandChan are FanoutFilter and FanoutByHand
// read through ResultChan.
var (
	FanoutFilterChan = System{Name: SystemFanout, Strategy: StrategyWait, API: APIFilterChan, Queue: DefaultQueue}
	FanoutByHandChan = System{Name: SystemFanout, Strategy: StrategyWait, API: APIByHandChan, Queue: DefaultQueue}
)

// FilterSystems returns the systems of the filter group: the pull pair,
// then the channel pair, each filter first.
func FilterSystems() []System {
	return []System{FanoutFilter, FanoutByHand, FanoutFilterChan, FanoutByHandChan}
}

// mine reports whether watcher i keeps e.
func mine(i int, e *Event) bool { return e.Stamp%FilterShare == int64(i%FilterShare) }

// filterInstance publishes FilterShare preallocated values in turn, value
// k carrying k%FilterShare.
type filterInstance struct {
	fanoutInstance
	vs   []*Event
	next atomic.Uint64
}

func (f *filterInstance) publishN(n int) {
	for range n {
		_ = f.b.Action(f.vs[f.next.Add(1)%FilterShare])
	}
}

func (c *consumers) startFilter(s System, n int) error {
	b := fanout.New[*Event](fanout.WithQueueLength(s.Queue), fanout.WithFullChannelBehavior(fanout.WaitIfChannelFull))
	inst := &filterInstance{fanoutInstance: fanoutInstance{b: b, e: c.payload}}
	for k := range FilterShare {
		inst.vs = append(inst.vs, &Event{Stamp: int64(k)})
	}
	c.r.inst = inst
	for i := range n {
		var opts []fanout.Option
		if s.API == APIFilter || s.API == APIFilterChan {
			opts = append(opts, fanout.WithFilter(func(e *Event) bool { return mine(i, e) }))
		}
		w, err := b.Watch(opts...)
		if err != nil {
			b.Shutdown()
			return err
		}
		if s.API == APIFilterChan || s.API == APIByHandChan {
			ch := w.ResultChan()
			c.consume(i, func([]int64) (int64, []int64) { return drainMineChan(ch, i), nil })
			continue
		}
		buf := make([]*Event, s.Queue)
		c.consume(i, func([]int64) (int64, []int64) { return drainMine(w, buf, i), nil })
	}
	return nil
}

// drainMine reads w with Recv until it closes and counts the values
// watcher i keeps: with a filter all of them, by hand those that pass.
func drainMine(w *fanout.Watcher[*Event], buf []*Event, i int) int64 {
	var n int64
	drainBatches(func(dst []*Event) (int, bool) {
		k, more := recvPull(w, dst)
		for _, e := range dst[:k] {
			if mine(i, e) {
				n++
			}
		}
		return k, more
	}, buf, nil, nil)
	return n
}

// drainMineChan receives from ch until it closes and counts the values
// watcher i keeps, as drainMine does.
func drainMineChan(ch <-chan *Event, i int) int64 {
	var n int64
	for e := range ch {
		if mine(i, e) {
			n++
		}
	}
	return n
}

func filterLabel(s System) string {
	switch s.API {
	case APIFilter:
		return "fanout WithFilter"
	case APIFilterChan:
		return "fanout WithFilter, ResultChan"
	case APIByHandChan:
		return "fanout read all + discard, ResultChan"
	}
	return "fanout read all + discard"
}

// filterGroup measures the filter systems with cfg.FilterWatchers, one
// producer, interleaved, and returns one case per system with its ratio to
// reading and discarding by hand.
func filterGroup(cfg Config, res *Results) ([]Case, error) {
	cases, samples, err := measureOneProducer(cfg, res, KindFilter, FilterSystems(), cfg.FilterWatchers)
	if err != nil {
		return nil, err
	}
	set := func(c *Case, v float64) { c.RatioVsByHand = ptr(v) }
	for k := 0; k+1 < len(cases); k += 2 { // each filter against its read path's by-hand
		pairRatios(cases[k:k+2], samples[k:k+2], 1, set)
	}
	return cases, nil
}

func validateFilter(s System) error {
	if s.Name != SystemFanout || s.Strategy != StrategyWait {
		return fmt.Errorf("harness: the filter group measures fanout wait only, not %s %s", s.Name, s.Strategy)
	}
	return nil
}

// measureOneProducer measures systems with n watchers and one producer,
// interleaved, and returns a case of kind per system with the samples.
func measureOneProducer(cfg Config, res *Results, kind string, systems []System, n int) ([]Case, [][]sample, error) {
	variants := make([]variant, len(systems))
	for i, s := range systems {
		variants[i] = variant{sys: s}
	}
	samples, err := runInterleaved(cfg, res, variants, n, 1)
	if err != nil {
		return nil, nil, err
	}
	cases := make([]Case, len(variants))
	for i, v := range variants {
		cases[i] = summarize(kind, v, n, 1, samples[i])
	}
	return cases, samples, nil
}

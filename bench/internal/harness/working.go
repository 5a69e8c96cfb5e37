package harness

import (
	"fmt"
	"github.com/fanout-go/fanout"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/watch"
)

// The working-reader group: one producer, N watchers, lossless, each
// system at its default settings, measured as the throughput groups are;
// but every reader does a small, fixed amount of work per value, the same
// in every system: it checks that its values arrive in order. The producer
// publishes value k of a measurement as orderedPool[k&orderedMask], whose
// Stamp is k&orderedMask, and each reader compares every value's Stamp
// with the one it expects next. The readers of the throughput groups do
// nothing with a value, which flatters a system whose readers fall behind
// and park as soon as they do any work.

// KindWorking is the kind of the working-reader group's cases.
const KindWorking = "working"

// orderedMask is one less than the values of [orderedPool], a power of two
// above every queue of the group (kelindar's 50,000): a value is not
// published again while a reader may still be looking at the last one
// with its index, and a reader that skipped or repeated values would have
// to be off by a multiple of 65,536 to go unnoticed.
const orderedMask = 1<<16 - 1

// orderedPool holds the values the working group publishes in turn, value
// i carrying Stamp i. It is never written after it is built.
var orderedPool = func() []*Event {
	pool := make([]*Event, orderedMask+1)
	for i := range pool {
		pool[i] = &Event{Stamp: int64(i)}
	}
	return pool
}()

// publishOrdered publishes values from..from+n-1 of the ordered sequence,
// one publish call each.
func publishOrdered(inst instance, from, n int) {
	for k := from; k < from+n; k++ {
		inst.publish(orderedPool[k&orderedMask])
	}
}

// order is a reader's check that its values arrive in order. broken counts
// the values that were not the one expected; the check then goes on from
// the value seen.
type order struct{ want, broken int64 }

func (o *order) see(stamp int64) {
	if stamp != o.want {
		o.broken++
	}
	o.want = (stamp + 1) & orderedMask
}

// CskrPeer is github.com/cskr/pubsub/v2 as a broadcaster: every watcher
// subscribed to one topic, New(100) so that each Sub channel holds 100
// values, Pub(v, 0) blocking until every subscriber's channel took v;
// Shutdown closes the channels after the Pubs before it. The topics group
// measures it with several topics.
var CskrPeer = System{Name: SystemCskr, Strategy: StrategyWait, API: APIChan, Queue: DefaultQueue}

// WorkingSystems returns the systems of the working-reader group, each at
// its default settings: fanout wait pull at [fanout.DefaultQueueLength]
// ([FanoutAtDefaultQueue]), [Limit] at the same queue length, the peers
// ([Peers]), [CskrPeer], k8s wait q100, raw channels, fanout wait pull at
// 100, its default until v0.1.0, and at kelindar's queue length
// ([FanoutAtKelindarQueue]).
func WorkingSystems() []System {
	out := append([]System{FanoutAtDefaultQueue, workingLimit()}, Peers()...)
	return append(out, CskrPeer, Reference, Baseline, Fanout(StrategyWait, APIPull), FanoutAtKelindarQueue)
}

// workingLimit is [Limit] at fanout's default queue length.
func workingLimit() System {
	l := Limit
	l.Queue = fanout.DefaultQueueLength
	return l
}

// FanoutAtDefaultQueue is fanout wait pull at the library's default queue
// length, as a user who sets none has it.
var FanoutAtDefaultQueue = fanoutPullAt(fanout.DefaultQueueLength)

// workingGroup measures [WorkingSystems] with n working readers, one
// producer, interleaved, and returns one case per system with its ratios
// against fanout wait pull and [Limit] (medians of per-repetition ratios).
func workingGroup(cfg Config, res *Results, n int) ([]Case, error) {
	systems := WorkingSystems()
	variants := make([]variant, len(systems))
	for i, s := range systems {
		variants[i] = variant{sys: s, ordered: true}
	}
	samples, err := runInterleaved(cfg, res, variants, n, 1)
	if err != nil {
		return nil, err
	}
	cases := make([]Case, len(variants))
	for i, v := range variants {
		cases[i] = summarize(KindWorking, v, n, 1, samples[i])
		cases[i].OutOfOrder = outOfOrder(samples[i])
	}
	pairRatios(cases, samples, 0, func(c *Case, v float64) { c.RatioVsFanout = ptr(v) })
	pairRatios(cases, samples, 1, func(c *Case, v float64) { c.RatioVsLimit = ptr(v) })
	return cases, nil
}

// outOfOrder returns the values found out of order over every run of a
// case's samples.
func outOfOrder(samples []sample) *int64 {
	var broken int64
	for _, s := range samples {
		broken += s.broken
	}
	return ptr(broken)
}

// consumeOrdered starts the ordered consumer of watcher i, unless i is
// stalled: loop returns the values it received and those out of order.
func (c *consumers) consumeOrdered(i int, loop func() (n, broken int64)) {
	if i < c.stalled {
		return
	}
	c.started.Add(1)
	c.r.wg.Go(func() {
		c.started.Done()
		c.r.counts[i], c.r.broken[i] = loop()
	})
}

// consumeEvents starts the consumer of watcher i reading ch: in order if
// the setup asks for it, else counting (and recording latency).
func (c *consumers) consumeEvents(i int, ch <-chan *Event) {
	if c.ordered {
		c.consumeOrdered(i, func() (int64, int64) { return drainEventsOrdered(ch) })
		return
	}
	c.consume(i, func(lat []int64) (int64, []int64) { return drainChan(ch, c.rec, lat, stampOf) })
}

// consumeBatches starts the consumer of watcher i reading batches into buf
// with recv, as [consumers.consumeEvents] does a channel.
func (c *consumers) consumeBatches(i int, recv func([]*Event) (int, bool), buf []*Event) {
	if c.ordered {
		c.consumeOrdered(i, func() (int64, int64) { return drainBatchesOrdered(recv, buf) })
		return
	}
	c.consume(i, func(lat []int64) (int64, []int64) { return drainBatches(recv, buf, c.rec, lat) })
}

// consumeK8s starts the consumer of k8s watcher i, as
// [consumers.consumeEvents] does a channel of *Event.
func (c *consumers) consumeK8s(i int, ch <-chan watch.Event) {
	if c.ordered {
		c.consumeOrdered(i, func() (int64, int64) { return drainK8sOrdered(ch) })
		return
	}
	c.consume(i, func(lat []int64) (int64, []int64) { return drainChan(ch, c.rec, lat, k8sStampOf) })
}

// drainEventsOrdered receives from ch until it closes, checking the order.
func drainEventsOrdered(ch <-chan *Event) (n, broken int64) {
	var o order
	for e := range ch {
		o.see(e.Stamp)
		n++
	}
	return n, o.broken
}

// drainK8sOrdered receives from a k8s watcher's channel until it closes,
// checking the order of the *Event each watch.Event carries.
func drainK8sOrdered(ch <-chan watch.Event) (n, broken int64) {
	var o order
	for e := range ch {
		o.see(e.Object.(*Event).Stamp)
		n++
	}
	return n, o.broken
}

// drainBatchesOrdered calls recv with buf until it reports the end,
// checking the order of every value.
func drainBatchesOrdered(recv func([]*Event) (int, bool), buf []*Event) (n, broken int64) {
	var o order
	for {
		k, more := recv(buf)
		for _, e := range buf[:k] {
			o.see(e.Stamp)
		}
		n += int64(k)
		if !more {
			return n, o.broken
		}
	}
}

// validateWorking reports a working-reader measurement that cannot be
// made: the order of several producers' values is not defined.
func validateWorking(v variant, producers int) error {
	if v.ordered && producers != 1 {
		return fmt.Errorf("harness: %s: working readers check the order of one producer's values, not %d", v.sys.Label(), producers)
	}
	return nil
}

// reportWorking writes the working-reader group as two tables with a row
// per N and a column per system: delivered/s with fanout wait pull's ratio
// to it, then CPU per delivered value; and the values found out of order,
// if any.
func reportWorking(b *strings.Builder, res *Results) error {
	cs := casesOf(res.Cases, KindWorking)
	if len(cs) == 0 {
		return nil
	}
	b.WriteString("\n== working readers: 1 producer, lossless, default settings, every reader checking that its values arrive in order;\n")
	b.WriteString("   delivered values/s, in parentheses fanout wait pull / the system (median of per-repetition ratios) ==\n")
	err := pivot(b, cs, func(c Case) string {
		if c.RatioVsFanout == nil || *c.RatioVsFanout == 0 || is(&c, Fanout(StrategyWait, APIPull)) {
			return num(c.DeliveredPerSec, FormatRate)
		}
		return fmt.Sprintf("%s (%s)", num(c.DeliveredPerSec, FormatRate), FormatRatio(ptr(1 / *c.RatioVsFanout)))
	})
	if err != nil {
		return err
	}
	b.WriteString("\n== working readers: process CPU per delivered value, ns (user + system, from the same pairs of runs) ==\n")
	if err := pivot(b, cs, func(c Case) string { return num(c.CPUNsPerDelivered, f("%.1f")) }); err != nil {
		return err
	}
	var broken int64
	for _, c := range cs {
		if c.OutOfOrder != nil {
			broken += *c.OutOfOrder
		}
	}
	fmt.Fprintf(b, "values out of order, every system and run: %d\n", broken)
	return nil
}

// pivot writes cs as a table with a row per watcher count and a column
// per system, in the order of their first case, each cell cell(case).
func pivot(b *strings.Builder, cs []Case, cell func(Case) string) error {
	var labels []string
	var ns []int
	at := map[string]map[int]Case{}
	for _, c := range cs {
		if at[c.Label] == nil {
			at[c.Label] = map[int]Case{}
			labels = append(labels, c.Label)
		}
		if !slices.Contains(ns, c.Watchers) {
			ns = append(ns, c.Watchers)
		}
		at[c.Label][c.Watchers] = c
	}
	slices.Sort(ns)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "N\t%s\t\n", strings.Join(labels, "\t"))
	for _, n := range ns {
		row := []string{fmt.Sprint(n)}
		for _, l := range labels {
			c, ok := at[l][n]
			if !ok {
				row = append(row, "-")
				continue
			}
			row = append(row, cell(c))
		}
		fmt.Fprintf(tw, "%s\t\n", strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// workingTargets: issue 38's, with working readers at each system's
// default settings, fanout wait pull (queue 100) at least as fast as
// kelindar/event and go-disruptor at N = 1, 10, 100 and 1000 (the slower
// of the two ratios, named), and as the limit ring at N=1; from the
// per-repetition ratios.
func workingTargets(cases []Case) []Target {
	ratio := func(s System, n int) float64 {
		if c := findCase(cases, KindWorking, s, n, 1, 0); c != nil && c.RatioVsFanout != nil {
			return 1 / *c.RatioVsFanout
		}
		return math.NaN()
	}
	var out []Target
	for _, n := range LimitWatchers {
		worst, which := math.NaN(), ""
		for _, s := range []System{Kelindar, Disruptor} {
			if r := ratio(s, n); math.IsNaN(worst) || r < worst {
				worst, which = r, s.Label()
			}
		}
		t := atLeast(fmt.Sprintf("working readers, N=%d: fanout wait pull / kelindar, disruptor (each at its default settings)", n), worst, 1)
		if t.Status != NA {
			t.Measured += " (" + which + ")"
		}
		out = append(out, t)
	}
	return append(out, atLeast("working readers, N=1: fanout wait pull / limit (the same queue length)", ratio(workingLimit(), 1), 1))
}

package harness

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fanout-go/fanout"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// Names of the systems compared, as they appear in [System].Name and in the
// JSON output.
const (
	SystemFanout = "fanout" // github.com/fanout-go/fanout
	SystemK8s    = "k8s"    // k8s.io/apimachinery/pkg/watch.Broadcaster
	SystemChan   = "chan"   // one buffered channel per watcher, blocking sends
	// SystemTeivah is github.com/teivah/broadcast: Relay.Notify, blocking
	// sends into each Listener's channel.
	SystemTeivah = "teivah"
	// SystemKelindar is github.com/kelindar/event: Publish appends to each
	// subscriber's queue; the subscriber's goroutine, woken by the
	// dispatcher's 500 µs ticker, calls its handler.
	SystemKelindar = "kelindar"
)

// Full-queue strategies, as they appear in [System].Strategy.
const (
	StrategyWait        = "wait"
	StrategyDrop        = "drop"
	StrategyDropOldest  = "drop-oldest"
	StrategyEvict       = "evict"
	StrategyWaitTimeout = "wait-timeout"
)

// Read paths, as they appear in [System].API.
const (
	APIPull    = "pull"    // fanout's Watcher.Recv with a batch buffer
	APIChan    = "chan"    // a channel: fanout's ResultChan, k8s's ResultChan, teivah's Listener, a raw channel
	APIHandler = "handler" // a callback the library calls on its own goroutine (kelindar)
)

// DefaultQueue is the per-watcher queue length of the workload.
const DefaultQueue = 100

// WaitTimeout is the bound given to fanout.WaitTimeoutIfChannelFull.
const WaitTimeout = time.Millisecond

// DefaultBatch is the number of values per ActionBatch call of the batch
// system ([FanoutBatch]).
const DefaultBatch = 16

// LargeWatchers is the watcher count from which a throughput group measures
// only [LargeSystems], to keep the run short.
const LargeWatchers = 10_000

// Event is the payload every system carries, always as a pointer (*Event),
// so that no system pays for boxing a value: the throughput measurements
// publish one preallocated *Event over and over; the latency measurement
// publishes a distinct *Event per value, carrying its publish time. It
// implements runtime.Object so that the k8s broadcaster carries the very same
// pointer in its watch.Event.
type Event struct {
	// Stamp is the publish time in nanoseconds since the measurement's
	// epoch (monotonic clock). Only the latency measurement sets it.
	Stamp int64
}

// GetObjectKind implements runtime.Object.
func (e *Event) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (e *Event) DeepCopyObject() runtime.Object {
	c := *e
	return &c
}

// KelindarEventType is the event type *Event has for kelindar/event, which
// routes events by type.
const KelindarEventType = 1

// Type implements kelindar/event's Event.
func (e *Event) Type() uint32 { return KelindarEventType }

// System is one configuration of one system under test.
type System struct {
	// Name is SystemFanout, SystemK8s, SystemChan, one of the peers
	// (SystemTeivah, SystemKelindar) or, for the record comparison,
	// SystemClientGo.
	Name string
	// Strategy is the full-queue strategy (the Strategy* constants). The
	// raw-channel baseline uses blocking sends, so its strategy is wait.
	Strategy string
	// API is how the watchers are read: APIPull (fanout only), APIChan or
	// APIHandler (kelindar); APIReplay and APIPrefix for the replay
	// comparison, APIRecord for the record comparison.
	API string
	// Queue is the per-watcher queue length.
	Queue int
	// Batch is the number of values per publish call: 0 or 1 for
	// single-value publishing (Action), more for fanout's ActionBatch.
	Batch int
	// Topics is, for the topics group (API APITopics or APITopicsByHand), the number of
	// topics the watchers are spread over, [WatchersPerTopic] each; 0
	// elsewhere.
	Topics int
	// PacedByWait, for fanout, gives Strategy to the first watcher only and
	// WaitIfChannelFull to the others, so that the producer runs at the
	// pace of readers that keep up: the stalled-watcher comparison of
	// evict (see [StallSystems]).
	PacedByWait bool
}

// readers returns how many of n watchers, stalled of them unread, receive
// each value: one topic's in the topics group, the share that keeps it in
// the filter group, else every read watcher.
func (s System) readers(n, stalled int) int64 {
	switch {
	case isTopicsAPI(s.API):
		return int64(n-stalled) / int64(max(1, s.Topics))
	case isFilterAPI(s.API):
		return int64(n-stalled) / FilterShare
	}
	return int64(n - stalled)
}

// batch returns the values per publish call, at least 1.
func (s System) batch() int { return max(1, s.Batch) }

// Label names the system in tables and charts, e.g. "fanout wait pull",
// "k8s drop q1000" or, for the record comparison, "client-go tools/record".
func (s System) Label() string {
	switch {
	case s.API == APIRecord && s.Name == SystemFanout:
		return "fanout k8s/record"
	case s.API == APIRecord:
		return s.Name + " tools/record"
	case s.API == APIEvents && s.Name == SystemFanout:
		return "fanout k8s/events"
	case s.API == APIEvents:
		return s.Name + " tools/events"
	}
	switch s.API {
	case APIReplay, APIPrefix:
		return replayLabel(s)
	case APITopics, APITopicsByHand:
		return topicsLabel(s)
	case APIFilter, APIByHand, APIFilterChan, APIByHandChan:
		return filterLabel(s)
	}
	switch s.Name {
	case SystemFanout:
		l := fmt.Sprintf("fanout %s %s", s.Strategy, s.API)
		if s.Queue != DefaultQueue {
			l += fmt.Sprintf(" q%d", s.Queue)
		}
		if s.batch() > 1 {
			l += fmt.Sprintf(" b%d", s.batch())
		}
		if s.PacedByWait {
			l += " among wait"
		}
		return l
	case SystemK8s:
		return fmt.Sprintf("k8s %s q%d", s.Strategy, s.Queue)
	default: // chan and the peers, all lossless
		return fmt.Sprintf("%s q%d", s.Name, s.Queue)
	}
}

// Lossless reports whether the system delivers every value to every watcher.
func (s System) Lossless() bool { return s.Strategy == StrategyWait }

// Reference is the system every throughput ratio is computed against:
// k8s's broadcaster with WaitIfChannelFull and queue 100.
var Reference = System{Name: SystemK8s, Strategy: StrategyWait, API: APIChan, Queue: DefaultQueue}

// Baseline is the raw-channel baseline with queue 100.
var Baseline = System{Name: SystemChan, Strategy: StrategyWait, API: APIChan, Queue: DefaultQueue}

// Fanout returns the fanout system with the given strategy and API, queue 100.
func Fanout(strategy, api string) System {
	return System{Name: SystemFanout, Strategy: strategy, API: api, Queue: DefaultQueue}
}

// FanoutBatch returns fanout wait pull publishing with ActionBatch, batch
// values per call.
func FanoutBatch(batch int) System {
	s := Fanout(StrategyWait, APIPull)
	s.Batch = batch
	return s
}

// K8s returns the k8s broadcaster with the given strategy (wait or drop) and
// queue length.
func K8s(strategy string, queue int) System {
	return System{Name: SystemK8s, Strategy: strategy, API: APIChan, Queue: queue}
}

// Strategies lists fanout's built-in strategies in report order.
var Strategies = []string{StrategyWait, StrategyDrop, StrategyDropOldest, StrategyEvict, StrategyWaitTimeout}

// LossyStrategies lists the strategies that never make the producer wait.
var LossyStrategies = []string{StrategyDrop, StrategyDropOldest, StrategyEvict}

// ThroughputSystems returns every system of the throughput comparison, in
// report order: fanout (each strategy, pull then chan, with [Limit], the
// ceiling reference, next to fanout wait pull), fanout wait pull publishing
// batches of [DefaultBatch], k8s (wait and drop, queue 100 and 1000), the
// peers ([Peers]), fanout wait pull at kelindar's queue length and at
// go-disruptor's ring length ([FanoutAtKelindarQueue],
// [FanoutAtDisruptorRing]) and the raw-channel baseline.
func ThroughputSystems() []System {
	var out []System
	for _, st := range Strategies {
		out = append(out, Fanout(st, APIPull))
		if st == StrategyWait {
			out = append(out, Limit)
		}
		out = append(out, Fanout(st, APIChan))
	}
	out = append(out, FanoutBatch(DefaultBatch), K8s(StrategyWait, 100), K8s(StrategyDrop, 100),
		K8s(StrategyWait, 1000), K8s(StrategyDrop, 1000))
	return append(append(append(out, Peers()...), atPeerQueues()...), Baseline)
}

// LargeSystems returns the systems of a throughput group with
// [LargeWatchers] or more: the lossless ones the targets compare, fanout wait
// pull, [Limit], k8s wait q100, the peers, fanout at their queue lengths
// ([FanoutAtKelindarQueue], [FanoutAtDisruptorRing]) and the raw-channel
// baseline.
func LargeSystems() []System {
	out := append([]System{Fanout(StrategyWait, APIPull), Limit, Reference}, Peers()...)
	return append(append(out, atPeerQueues()...), Baseline)
}

// ThroughputSystemsFor returns the systems of the throughput group with n
// watchers and the given producers: [ThroughputSystems], or [LargeSystems]
// from [LargeWatchers] on; [Limit], a one-producer ring, and fanout at
// the peers' queue lengths, there for one-producer targets, only with one
// producer.
func ThroughputSystemsFor(n, producers int) []System {
	out := ThroughputSystems()
	if n >= LargeWatchers {
		out = LargeSystems()
	}
	if producers > 1 {
		out = slices.DeleteFunc(out, func(s System) bool { return s == Limit || slices.Contains(atPeerQueues(), s) })
	}
	return out
}

// StallSystems returns the lossy systems of the stalled-watcher comparison.
//
// An EvictIfChannelFull watcher is measured among WaitIfChannelFull ones
// ([System].PacedByWait): the question is what a stalled watcher costs
// the producer, and among 100 evicting watchers the producer, which no
// watcher holds back, evicts every one of them within a few queues'
// worth of values, stalled or not, so that both runs measured an empty
// broadcaster at random moments (their ratio ranged from 0.14× to 14.7×
// across runs of one build). Among readers that keep up, only the stalled
// watcher is evicted, and the ratio is its cost.
func StallSystems() []System {
	var out []System
	for _, st := range LossyStrategies {
		for _, api := range []string{APIPull, APIChan} {
			s := Fanout(st, api)
			s.PacedByWait = st == StrategyEvict
			out = append(out, s)
		}
	}
	return append(out, K8s(StrategyDrop, DefaultQueue))
}

// LatencySystems returns the systems of the latency comparison with the
// given number of producers: with one, fanout and k8s wait and drop, the
// peers, cskr/pubsub on one topic ([CskrPeer]) and raw channels; with
// more, the lossless systems the targets compare (fanout wait pull and
// chan, k8s wait q100) and raw channels. watermill's GoChannel, which
// delivers well under a million values per second (the topics group), is
// in neither: 10,000 values/s to 100 watchers is a million deliveries.
func LatencySystems(producers int) []System {
	if producers > 1 {
		return []System{Fanout(StrategyWait, APIPull), Fanout(StrategyWait, APIChan), Reference, Baseline}
	}
	out := []System{Fanout(StrategyWait, APIPull), Fanout(StrategyWait, APIChan),
		Fanout(StrategyDrop, APIPull), Fanout(StrategyDrop, APIChan),
		K8s(StrategyWait, 100), K8s(StrategyDrop, 100)}
	return append(append(out, Peers()...), CskrPeer, Baseline)
}

// IdleMemorySystems returns the systems of the idle-memory comparison.
func IdleMemorySystems() []System {
	out := []System{Fanout(StrategyWait, APIPull), Fanout(StrategyWait, APIChan),
		K8s(StrategyWait, 100), K8s(StrategyWait, 1000)}
	return append(append(out, Peers()...), Baseline)
}

// IdleCPUSystems returns the systems of the idle-CPU comparison.
func IdleCPUSystems() []System {
	out := []System{Fanout(StrategyWait, APIPull), Fanout(StrategyWait, APIChan), Reference}
	return append(append(out, Peers()...), Baseline)
}

func (s System) validate() error {
	if s.Batch < 0 || (s.batch() > 1 && s.Name != SystemFanout) {
		return fmt.Errorf("harness: %s cannot publish batches of %d", s.Name, s.Batch)
	}
	switch {
	case isTopicsAPI(s.API):
		return validateTopics(s)
	case isFilterAPI(s.API):
		return validateFilter(s)
	}
	switch s.Name {
	case SystemFanout:
		if _, err := fanoutBehavior(s.Strategy); err != nil {
			return err
		}
		if s.API != APIPull && s.API != APIChan {
			return fmt.Errorf("harness: fanout API %q", s.API)
		}
	case SystemK8s:
		if s.Strategy != StrategyWait && s.Strategy != StrategyDrop {
			return fmt.Errorf("harness: k8s has no strategy %q", s.Strategy)
		}
	case SystemChan:
		if s.Strategy != StrategyWait {
			return fmt.Errorf("harness: raw channels have no strategy %q", s.Strategy)
		}
	case SystemTeivah, SystemKelindar, SystemDisruptor, SystemCskr:
		if err := validatePeer(s); err != nil {
			return err
		}
	case SystemLimit:
		if s.Strategy != StrategyWait || s.API != APIPull {
			return fmt.Errorf("harness: %s is measured as %s %s only", s.Name, StrategyWait, APIPull)
		}
	default:
		return fmt.Errorf("harness: unknown system %q", s.Name)
	}
	if s.Queue <= 0 {
		return fmt.Errorf("harness: queue length %d", s.Queue)
	}
	return nil
}

func fanoutBehavior(strategy string) (fanout.FullChannelBehavior, error) {
	switch strategy {
	case StrategyWait:
		return fanout.WaitIfChannelFull, nil
	case StrategyDrop:
		return fanout.DropIfChannelFull, nil
	case StrategyDropOldest:
		return fanout.DropOldestIfChannelFull, nil
	case StrategyEvict:
		return fanout.EvictIfChannelFull, nil
	case StrategyWaitTimeout:
		return fanout.WaitTimeoutIfChannelFull(WaitTimeout), nil
	}
	return nil, fmt.Errorf("harness: unknown fanout strategy %q", strategy)
}

func k8sBehavior(strategy string) watch.FullChannelBehavior {
	if strategy == StrategyDrop {
		return watch.DropIfChannelFull
	}
	return watch.WaitIfChannelFull
}

// newK8s makes the k8s broadcaster. NewLongQueueBroadcaster gives its
// incoming queue the watchers' length (NewBroadcaster's is 25), the more
// generous of the two constructors.
func newK8s(s System) *watch.Broadcaster {
	return watch.NewLongQueueBroadcaster(s.Queue, k8sBehavior(s.Strategy))
}

// instance is a running system: its publish side. Its watchers' consumers
// are run by a running.
type instance interface {
	// publishN publishes the system's preallocated payload, one *Event, n
	// times back to back (in calls of [System].Batch values).
	publishN(n int)
	// publish publishes e once.
	publish(e *Event)
	// close ends intake once every producer has returned: the values
	// already accepted are still delivered, then the watchers close.
	close()
	// libDropped returns the drops the library counted, or 0 if it keeps
	// no such counter.
	libDropped() uint64
}

// tearer is an instance with work left once its consumers have returned.
type tearer interface {
	// teardown releases what the system holds, its goroutines included.
	teardown()
}

type fanoutInstance struct {
	b  *fanout.Broadcaster[*Event]
	e  *Event
	vs []*Event // the batch, every element e; nil for single-value publishing
}

func (f fanoutInstance) publishN(n int) {
	if f.vs == nil {
		for range n {
			_ = f.b.Action(f.e)
		}
		return
	}
	for n > 0 {
		k := min(n, len(f.vs))
		_, _ = f.b.ActionBatch(f.vs[:k])
		n -= k
	}
}
func (f fanoutInstance) publish(e *Event)   { _ = f.b.Action(e) }
func (f fanoutInstance) close()             { f.b.Shutdown() }
func (f fanoutInstance) libDropped() uint64 { return f.b.Stats().Dropped }

type k8sInstance struct {
	b *watch.Broadcaster
	e *Event
}

func (k k8sInstance) publishN(n int) {
	var o runtime.Object = k.e
	for range n {
		_ = k.b.Action(watch.Added, o)
	}
}
func (k k8sInstance) publish(e *Event)   { _ = k.b.Action(watch.Added, e) }
func (k k8sInstance) close()             { k.b.Shutdown() }
func (k k8sInstance) libDropped() uint64 { return 0 }

type chanInstance struct {
	chans []chan *Event
	e     *Event
}

func (c chanInstance) publishN(n int) {
	for range n {
		for _, ch := range c.chans {
			ch <- c.e
		}
	}
}
func (c chanInstance) publish(e *Event) {
	for _, ch := range c.chans {
		ch <- e
	}
}
func (c chanInstance) close() {
	for _, ch := range c.chans {
		close(ch)
	}
}
func (c chanInstance) libDropped() uint64 { return 0 }

// recorder turns receive times into latency samples.
type recorder struct {
	epoch time.Time
	// capacity preallocates each consumer's sample slice.
	capacity int
}

func (r *recorder) now() int64 { return int64(time.Since(r.epoch)) }

// running is a system with n watchers, each drained by its own consumer
// (a goroutine of the harness, or kelindar's handler), except the stalled
// ones, which nobody reads.
type running struct {
	inst    instance
	wg      sync.WaitGroup
	counts  []int64   // values received, per consumer; written on exit
	samples [][]int64 // latency samples, per consumer; written on exit
	broken  []int64   // values out of order, per ordered consumer; written on exit
}

// outOfOrder is the number of values the consumers found out of order.
func (r *running) outOfOrder() int64 {
	var t int64
	for _, b := range r.broken {
		t += b
	}
	return t
}

// consumers starts the consumers of a running system.
type consumers struct {
	setup
	r       *running
	started sync.WaitGroup
	payload *Event // what publishN publishes
}

// setup is how a measurement starts a system, beyond its watchers.
type setup struct {
	// stalled is the number of watchers nobody reads, the first ones.
	stalled int
	// producers is the number of goroutines that will publish
	// concurrently: go-disruptor is built for as many writers. 0 means 1.
	producers int
	// rec, if not nil, makes every consumer record each value's latency.
	rec *recorder
	// ordered makes every consumer check that its values arrive in order
	// (the working-reader group, [KindWorking]), recording no latency.
	ordered bool
}

// consume starts the consumer of watcher i, unless i is stalled, running
// loop with a latency slice preallocated if there is a recorder.
func (c *consumers) consume(i int, loop func(lat []int64) (int64, []int64)) {
	if i < c.stalled {
		return
	}
	var lat []int64
	if c.rec != nil {
		lat = make([]int64, 0, c.rec.capacity)
	}
	c.started.Add(1)
	c.r.wg.Go(func() {
		c.started.Done()
		c.r.counts[i], c.r.samples[i] = loop(lat)
	})
}

// start builds s with n watchers, starts a consumer for each watcher but the
// first stalled ones, and returns once every consumer has started. If rec is
// not nil, consumers record one latency sample per value. It is
// [System.startWith] for one producer.
func (s System) start(n, stalled int, rec *recorder) (*running, error) {
	return s.startWith(n, setup{stalled: stalled, rec: rec})
}

// startWith builds s with n watchers as su says, starts a consumer for each
// watcher but the first su.stalled ones, and returns once every consumer
// has started.
func (s System) startWith(n int, su setup) (*running, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	if s.PacedByWait && su.stalled > 1 {
		return nil, fmt.Errorf("harness: %s can leave one watcher unread, not %d: the others wait", s.Label(), su.stalled)
	}
	if su.stalled > 0 && (s.Name == SystemKelindar || s.Name == SystemDisruptor) {
		return nil, fmt.Errorf("harness: %s has no watcher that can be left unread", s.Label())
	}
	if su.ordered && su.rec != nil {
		return nil, fmt.Errorf("harness: %s: a reader checks the order or records latency, not both", s.Label())
	}
	c := &consumers{setup: su, payload: &Event{},
		r: &running{counts: make([]int64, n), samples: make([][]int64, n), broken: make([]int64, n)}}
	var err error
	switch {
	case isTopicsAPI(s.API):
		err = c.startTopics(s, n)
	case isFilterAPI(s.API):
		err = c.startFilter(s, n)
	case s.Name == SystemFanout:
		err = c.startFanout(s, n)
	case s.Name == SystemK8s:
		err = c.startK8s(s, n)
	case s.Name == SystemChan:
		c.startChan(s, n)
	case s.Name == SystemTeivah:
		c.startTeivah(s, n)
	case s.Name == SystemKelindar:
		c.startKelindar(n)
	case s.Name == SystemLimit:
		c.startLimit(s, n)
	case s.Name == SystemDisruptor:
		err = c.startDisruptor(s, n)
	case s.Name == SystemCskr:
		c.startCskrPeer(s, n)
	}
	if err != nil {
		return nil, err
	}
	c.started.Wait()
	return c.r, nil
}

func (c *consumers) startFanout(s System, n int) error {
	beh, _ := fanoutBehavior(s.Strategy)
	first := beh // the first watcher's behaviour
	if s.PacedByWait {
		beh = fanout.WaitIfChannelFull
	}
	b := fanout.New[*Event](fanout.WithQueueLength(s.Queue), fanout.WithFullChannelBehavior(beh))
	inst := fanoutInstance{b: b, e: c.payload}
	if s.batch() > 1 {
		inst.vs = make([]*Event, s.batch())
		for i := range inst.vs {
			inst.vs[i] = c.payload
		}
	}
	c.r.inst = inst
	for i := range n {
		var opts []fanout.Option
		if i == 0 {
			opts = append(opts, fanout.WithFullChannelBehavior(first))
		}
		w, err := b.Watch(opts...)
		if err != nil {
			b.Shutdown()
			return err
		}
		if s.API == APIChan {
			c.consumeEvents(i, w.ResultChan())
			continue
		}
		c.consumeBatches(i, func(dst []*Event) (int, bool) { return recvPull(w, dst) }, make([]*Event, min(s.Queue, MaxReadBatch)))
	}
	return nil
}

// MaxReadBatch bounds the buffer a fanout pull reader passes to Recv: the
// queue length up to it. A reader of [FanoutAtKelindarQueue] reads 1024
// values at a time rather than hold a 50,000-value buffer per watcher (4 GB
// with 10,000 of them).
const MaxReadBatch = 1024

func (c *consumers) startK8s(s System, n int) error {
	b := newK8s(s)
	c.r.inst = k8sInstance{b: b, e: c.payload}
	for i := range n {
		w, err := b.Watch()
		if err != nil {
			b.Shutdown()
			return err
		}
		c.consumeK8s(i, w.ResultChan())
	}
	return nil
}

func (c *consumers) startChan(s System, n int) {
	inst := chanInstance{chans: make([]chan *Event, n), e: c.payload}
	c.r.inst = inst
	for i := range n {
		ch := make(chan *Event, s.Queue)
		inst.chans[i] = ch
		c.consumeEvents(i, ch)
	}
}

// finish closes the system, waits for every consumer to return and tears
// the system down.
func (r *running) finish() {
	r.inst.close()
	r.wg.Wait()
	if t, ok := r.inst.(tearer); ok {
		t.teardown()
	}
}

// delivered is the number of values received by all consumers.
func (r *running) delivered() int64 {
	var t int64
	for _, c := range r.counts {
		t += c
	}
	return t
}

func stampOf(e *Event) int64 { return e.Stamp }

func k8sStampOf(e watch.Event) int64 { return e.Object.(*Event).Stamp }

// drainChan counts the values of ch until it closes; with a recorder it also
// records each value's latency. The counting loop does no other work.
func drainChan[T any](ch <-chan T, rec *recorder, lat []int64, stamp func(T) int64) (int64, []int64) {
	var n int64
	if rec == nil {
		for range ch {
			n++
		}
		return n, nil
	}
	for v := range ch {
		lat = append(lat, rec.now()-stamp(v))
		n++
	}
	return n, lat
}

// recvPull is one Recv of w into dst: the values, and false once w is
// closed.
func recvPull(w *fanout.Watcher[*Event], dst []*Event) (int, bool) {
	n, err := w.Recv(context.Background(), dst)
	return n, err == nil
}

// drainBatches calls recv with buf until it reports the end, counting the
// values; with a recorder it records each value's latency, all values of a
// batch being received at the same time.
func drainBatches(recv func([]*Event) (int, bool), buf []*Event, rec *recorder, lat []int64) (int64, []int64) {
	var total int64
	for {
		n, more := recv(buf)
		total += int64(n)
		if rec != nil && n > 0 {
			now := rec.now()
			for _, e := range buf[:n] {
				lat = append(lat, now-e.Stamp)
			}
		}
		if !more {
			return total, lat
		}
	}
}

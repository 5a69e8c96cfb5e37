package harness

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/cskr/pubsub/v2"
	"github.com/kelindar/event"
	"github.com/teivah/broadcast"
)

// The peers: popular in-process broadcast libraries, each in its idiomatic
// lossless use, measured as systems of their own.

// KelindarQueue is kelindar/event's per-subscriber queue bound, fixed by
// the library (NewDispatcher sets 50,000; nothing configures it). It is a
// soft bound: the publisher waits while a queue is at it, and the
// dispatcher's ticker lets it go on every 500 µs.
const KelindarQueue = 50_000

// Teivah is github.com/teivah/broadcast v0.1.0: Relay.Notify sends, blocking,
// into every Listener's channel (capacity 100) under a read lock; each
// watcher is a Listener whose channel a consumer goroutine ranges over;
// Relay.Close closes the channels once the producers are done.
var Teivah = System{Name: SystemTeivah, Strategy: StrategyWait, API: APIChan, Queue: DefaultQueue}

// Kelindar is github.com/kelindar/event v1.5.2: event.Publish appends the
// value to every subscriber's queue (waiting while one holds
// [KelindarQueue] values); each watcher is an event.Subscribe handler, run
// by the goroutine the library starts per subscriber, which the
// dispatcher's 500 µs ticker wakes to hand it the whole queue. The handler
// does no work but counting. The library has no close that drains, so the
// end of a measurement is a sentinel *Event published after the producers
// are done: each handler signals when it sees it (not counted); then the
// subscriptions are cancelled, the harness waits until the subscribers'
// goroutines have exited (at the next tick) and closes the dispatcher,
// which ends its ticker goroutine.
var Kelindar = System{Name: SystemKelindar, Strategy: StrategyWait, API: APIHandler, Queue: KelindarQueue}

// FanoutAtKelindarQueue is fanout wait pull with kelindar/event's queue
// length: the two at the same buffering. fanout's ring is shared, so its
// queue length costs one ring of [KelindarQueue] values, not one per
// watcher; its readers take at most [MaxReadBatch] values per Recv.
var FanoutAtKelindarQueue = System{Name: SystemFanout, Strategy: StrategyWait, API: APIPull, Queue: KelindarQueue}

// FanoutAtDisruptorRing is fanout wait pull with go-disruptor's ring
// length as its queue length ([DisruptorRing]): the two at the same
// buffering, as [FanoutAtKelindarQueue] is for kelindar/event. fanout's
// default queue is longer (1,024), the harness's usual one shorter (100,
// [DefaultQueue]).
var FanoutAtDisruptorRing = fanoutPullAt(DisruptorRing)

// atPeerQueues are the systems of fanout at a peer's queue length, there
// for the one-producer peer targets.
func atPeerQueues() []System { return []System{FanoutAtKelindarQueue, FanoutAtDisruptorRing} }

// Peers returns the peer systems.
func Peers() []System { return []System{Teivah, Kelindar, Disruptor} }

// fanoutPullAt returns fanout wait pull with the given queue length.
func fanoutPullAt(queue int) System {
	s := Fanout(StrategyWait, APIPull)
	s.Queue = queue
	return s
}

func validatePeer(s System) error {
	want := map[string]System{SystemTeivah: Teivah, SystemKelindar: Kelindar, SystemDisruptor: Disruptor, SystemCskr: CskrPeer}[s.Name]
	if s.Strategy != want.Strategy || s.API != want.API {
		return fmt.Errorf("harness: %s is measured as %s %s only", s.Name, want.Strategy, want.API)
	}
	switch {
	case s.Name == SystemKelindar && s.Queue != KelindarQueue:
		return fmt.Errorf("harness: kelindar's queue is %d, not configurable", KelindarQueue)
	case s.Name == SystemDisruptor && (s.Queue <= 0 || s.Queue&(s.Queue-1) != 0):
		return fmt.Errorf("harness: go-disruptor's ring holds a power of two values, not %d", s.Queue)
	}
	return nil
}

type teivahInstance struct {
	r *broadcast.Relay[*Event]
	e *Event
}

func (t teivahInstance) publishN(n int) {
	for range n {
		t.r.Notify(t.e)
	}
}
func (t teivahInstance) publish(e *Event)   { t.r.Notify(e) }
func (t teivahInstance) close()             { t.r.Close() }
func (t teivahInstance) libDropped() uint64 { return 0 }

func (c *consumers) startTeivah(s System, n int) {
	r := broadcast.NewRelay[*Event]()
	c.r.inst = teivahInstance{r: r, e: c.payload}
	for i := range n {
		c.consumeEvents(i, r.Listener(s.Queue).Ch())
	}
}

type kelindarInstance struct {
	d       *event.Dispatcher
	e       *Event
	end     *Event // the sentinel
	cancels []context.CancelFunc
	base    int // goroutines before the dispatcher was made
}

func (k *kelindarInstance) publishN(n int) {
	for range n {
		event.Publish(k.d, k.e)
	}
}
func (k *kelindarInstance) publish(e *Event)   { event.Publish(k.d, e) }
func (k *kelindarInstance) close()             { event.Publish(k.d, k.end) }
func (k *kelindarInstance) libDropped() uint64 { return 0 }

// teardown cancels every subscription, waits until the subscribers'
// goroutines have exited and closes the dispatcher. A cancelled subscriber
// exits when the ticker next wakes it, so the dispatcher is closed only
// after that: closed first, it would stop the ticker and leave them parked
// for ever.
func (k *kelindarInstance) teardown() {
	for _, cancel := range k.cancels {
		cancel()
	}
	settle(k.base + 1) // the dispatcher's ticker goroutine is left
	_ = k.d.Close()
}

// newKelindar makes a dispatcher. Its baseline of goroutines is taken once
// their number has stayed the same for a few milliseconds: goroutines of an
// earlier measurement still exiting would otherwise inflate it, and
// teardown, which counts down to it, would close the dispatcher before its
// subscribers had exited, leaving them parked for ever.
func newKelindar() *kelindarInstance {
	return &kelindarInstance{base: quietGoroutines(), d: event.NewDispatcher(), end: &Event{Stamp: -1}}
}

// quietGoroutines waits, for a second at most, until the number of
// goroutines has stayed the same for 5 ms, and returns it.
func quietGoroutines() int {
	n, same := runtime.NumGoroutine(), 0
	for deadline := time.Now().Add(time.Second); same < 5 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		if m := runtime.NumGoroutine(); m == n {
			same++
		} else {
			n, same = m, 0
		}
	}
	return n
}

func (c *consumers) startKelindar(n int) {
	k := newKelindar()
	k.e = c.payload
	c.r.inst = k
	k.cancels = make([]context.CancelFunc, 0, n)
	for i := range n {
		k.cancels = append(k.cancels, event.Subscribe(k.d, c.handler(i, k.end)))
	}
}

// handler returns the kelindar handler of watcher i: it counts the values
// (recording their latency if there is a recorder, checking their order if
// the setup asks for it) until it sees end, the sentinel, which it does not
// count.
func (c *consumers) handler(i int, end *Event) func(*Event) {
	var n int64
	var lat []int64
	var o order
	rec, ordered := c.rec, c.ordered
	if rec != nil {
		lat = make([]int64, 0, rec.capacity)
	}
	r := c.r
	r.wg.Add(1)
	return func(e *Event) {
		if e == end {
			r.counts[i], r.samples[i], r.broken[i] = n, lat, o.broken
			r.wg.Done()
			return
		}
		n++
		if ordered {
			o.see(e.Stamp)
		} else if rec != nil {
			lat = append(lat, rec.now()-e.Stamp)
		}
	}
}

// idlePeer builds peer s with n watchers nobody reads, stores what must stay
// reachable in keep and returns the function that shuts it down. A kelindar
// subscriber's goroutine is its own, parked until the ticker wakes it.
func idlePeer(s System, n int, keep []any) func() {
	if s.Name == SystemTeivah {
		r := broadcast.NewRelay[*Event]()
		for i := range n {
			keep[i] = r.Listener(s.Queue)
		}
		return r.Close
	}
	k := newKelindar()
	for i := range n {
		keep[i] = event.Subscribe(k.d, func(*Event) {})
	}
	return func() {
		for _, c := range keep[:n] {
			k.cancels = append(k.cancels, c.(context.CancelFunc))
		}
		k.teardown()
	}
}

type cskrPeerInstance struct {
	ps *pubsub.PubSub[int, *Event]
	e  *Event
}

func (k cskrPeerInstance) publishN(n int) {
	for range n {
		k.ps.Pub(k.e, 0)
	}
}
func (k cskrPeerInstance) publish(e *Event) { k.ps.Pub(e, 0) }

// close asks the library's goroutine to shut down: it does so after the
// Pubs before, closing every subscriber's channel, and then exits.
func (k cskrPeerInstance) close()             { k.ps.Shutdown() }
func (k cskrPeerInstance) libDropped() uint64 { return 0 }

// startCskrPeer builds [CskrPeer] with n watchers, all on topic 0.
func (c *consumers) startCskrPeer(s System, n int) {
	ps := pubsub.New[int, *Event](s.Queue)
	c.r.inst = cskrPeerInstance{ps: ps, e: c.payload}
	for i := range n {
		c.consumeEvents(i, ps.Sub(0))
	}
}

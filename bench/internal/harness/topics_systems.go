package harness

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/cskr/pubsub/v2"
	"github.com/fanout-go/fanout"
	"github.com/kelindar/event"
)

// The topic systems' instances, and the sequences their producers publish
// and their readers check.
//
// Each publishN call of a measurement (a producer makes two) is a source:
// source s publishes its k-th value to topic (o_s+k) mod T, o_s a topic
// of its own, and that value is topicPool()[s][k&topicSeqMask], whose
// Stamp is s<<32 | k&topicSeqMask. A watcher of topic t receives, from
// each source, values whose k grow by T from one to the next, which
// topicOrder checks: the work every reader does with a value, the same in
// every system.

// topicSources is the most sources (publishN calls) of one measurement,
// and maxTopicProducers the most producers of the topics group.
const (
	topicSources      = 16
	maxTopicProducers = topicSources / 2
)

// topicSeqMask keeps the k of a value's Stamp: a reader that skipped or
// repeated values would have to be off by a multiple of 4,096 publishes
// of their source to go unnoticed.
const topicSeqMask = 1<<12 - 1

// topicPool returns the values the sources publish, built once; they are
// never written after. topicPayloads are watermill's payloads, the same
// Stamps in 8 bytes.
var (
	topicPool = sync.OnceValue(func() [][]*Event {
		pool := make([][]*Event, topicSources)
		for s := range pool {
			evs := make([]Event, topicSeqMask+1)
			pool[s] = make([]*Event, len(evs))
			for k := range evs {
				evs[k].Stamp = int64(s)<<32 | int64(k)
				pool[s][k] = &evs[k]
			}
		}
		return pool
	})
	topicPayloads = sync.OnceValue(func() [][]message.Payload {
		pool := make([][]message.Payload, topicSources)
		for s := range pool {
			buf := make([]byte, (topicSeqMask+1)*WatermillPayload)
			pool[s] = make([]message.Payload, topicSeqMask+1)
			for k := range pool[s] {
				p := buf[k*WatermillPayload : (k+1)*WatermillPayload : (k+1)*WatermillPayload]
				binary.LittleEndian.PutUint64(p, uint64(s)<<32|uint64(k))
				pool[s][k] = p
			}
		}
		return pool
	})
)

// topicSeq hands out the sources of a measurement over its topics.
type topicSeq struct {
	topics  int
	sources atomic.Int32
	rr      atomic.Uint64 // publish's round-robin
}

// source returns the number of a new source and its first topic, spread
// over the topics.
func (q *topicSeq) source() (s, topic int) {
	s = int(q.sources.Add(1)-1) % topicSources
	return s, s * q.topics / topicSources
}

// each calls publish with every topic and value of a new source's n
// values, in order.
func (q *topicSeq) each(n int, publish func(topic, s, k int)) {
	s, topic := q.source()
	for k := range n {
		publish(topic, s, k&topicSeqMask)
		if topic++; topic == q.topics {
			topic = 0
		}
	}
}

// next returns the topic of publish, a single value outside the sources.
func (q *topicSeq) next() int { return int(q.rr.Add(1) % uint64(q.topics)) }

// topicOrder is a reader's check of its topic's values: from each source,
// k grows by the topics (modulo topicSeqMask+1). broken counts the values
// that did not; the check then goes on from the value seen.
type topicOrder struct {
	topics int64
	last   [topicSources]int64 // per source, k+1 of its last value; 0 before the first
	broken int64
}

func (o *topicOrder) see(stamp int64) {
	s, k := stamp>>32, stamp&topicSeqMask
	if s < 0 || s >= topicSources { // not a source's value
		o.broken++
		return
	}
	if l := o.last[s]; l != 0 && k != (l-1+o.topics)&topicSeqMask {
		o.broken++
	}
	o.last[s] = k + 1
}

// startTopics builds topic system s with n watchers, n/s.Topics per topic.
func (c *consumers) startTopics(s System, n int) error {
	if err := validateTopics(s); err != nil {
		return err
	}
	if n%s.Topics != 0 || c.stalled > 0 || c.rec != nil {
		return errTopicsSetup(s, n, c)
	}
	seq := &topicSeq{topics: s.Topics}
	switch {
	case s.API == APITopicsByHand:
		return c.startByHandTopics(s, seq, n)
	case s.Name == SystemFanout:
		return c.startFanoutTopics(s, seq, n)
	case s.Name == SystemKelindar:
		c.startKelindarTopics(seq, n)
		return nil
	case s.Name == SystemCskr:
		c.startCskr(s, seq, n)
		return nil
	}
	return c.startWatermill(s, seq, n)
}

func errTopicsSetup(s System, n int, c *consumers) error {
	return fmt.Errorf("harness: %d watchers over %d topics, %d stalled, latency %v: the topics group measures throughput, all read",
		n, s.Topics, c.stalled, c.rec != nil)
}

// consumeTopic starts the consumer of watcher i: loop returns the values
// it received and those out of order.
func (c *consumers) consumeTopic(i int, loop func() (n, broken int64)) {
	c.started.Add(1)
	c.r.wg.Go(func() {
		c.started.Done()
		c.r.counts[i], c.r.broken[i] = loop()
	})
}

// drainTopicPull reads w with Recv until it closes, checking the order.
func drainTopicPull(w *fanout.Watcher[*Event], queue, topics int) (n, broken int64) {
	buf := make([]*Event, queue)
	o := topicOrder{topics: int64(topics)}
	for {
		k, err := w.Recv(context.Background(), buf)
		for _, e := range buf[:k] {
			o.see(e.Stamp)
		}
		n += int64(k)
		if err != nil {
			return n, o.broken
		}
	}
}

// drainTopicChan reads ch until it closes, checking the order.
func drainTopicChan(ch <-chan *Event, topics int) (n, broken int64) {
	o := topicOrder{topics: int64(topics)}
	for e := range ch {
		o.see(e.Stamp)
		n++
	}
	return n, o.broken
}

type fanoutTopicsInstance struct {
	t   *fanout.Topics[int, *Event]
	seq *topicSeq
}

func (f *fanoutTopicsInstance) publishN(n int) {
	pool := topicPool()
	f.seq.each(n, func(topic, s, k int) { _ = f.t.Publish(topic, pool[s][k]) })
}
func (f *fanoutTopicsInstance) publish(e *Event)   { _ = f.t.Publish(f.seq.next(), e) }
func (f *fanoutTopicsInstance) close()             { f.t.Shutdown() }
func (f *fanoutTopicsInstance) libDropped() uint64 { return 0 }

func (c *consumers) startFanoutTopics(s System, seq *topicSeq, n int) error {
	t := fanout.NewTopics[int, *Event](fanout.WithQueueLength(s.Queue), fanout.WithFullChannelBehavior(fanout.WaitIfChannelFull))
	c.r.inst = &fanoutTopicsInstance{t: t, seq: seq}
	for i := range n {
		w, err := t.Watch(i % s.Topics)
		if err != nil {
			t.Shutdown()
			return err
		}
		c.consumeTopic(i, func() (int64, int64) { return drainTopicPull(w, s.Queue, s.Topics) })
	}
	return nil
}

// byHandTopicsInstance is one broadcaster per topic, in a map built up
// front and only read after.
type byHandTopicsInstance struct {
	bs  map[int]*fanout.Broadcaster[*Event]
	seq *topicSeq
}

func (h *byHandTopicsInstance) publishN(n int) {
	pool := topicPool()
	h.seq.each(n, func(topic, s, k int) { _ = h.bs[topic].Action(pool[s][k]) })
}
func (h *byHandTopicsInstance) publish(e *Event) { _ = h.bs[h.seq.next()].Action(e) }
func (h *byHandTopicsInstance) close() {
	for _, b := range h.bs {
		b.Shutdown()
	}
}
func (h *byHandTopicsInstance) libDropped() uint64 { return 0 }

func (c *consumers) startByHandTopics(s System, seq *topicSeq, n int) error {
	h := &byHandTopicsInstance{bs: make(map[int]*fanout.Broadcaster[*Event], s.Topics), seq: seq}
	for k := range s.Topics {
		h.bs[k] = fanout.New[*Event](fanout.WithQueueLength(s.Queue), fanout.WithFullChannelBehavior(fanout.WaitIfChannelFull))
	}
	c.r.inst = h
	for i := range n {
		w, err := h.bs[i%s.Topics].Watch()
		if err != nil {
			h.close()
			return err
		}
		c.consumeTopic(i, func() (int64, int64) { return drainTopicPull(w, s.Queue, s.Topics) })
	}
	return nil
}

// kelindarTopicEvent is a value of kelindar/event whose type is its
// topic: a user of the library routes by type.
type kelindarTopicEvent struct {
	e     *Event
	topic uint32
}

// Type implements kelindar/event's Event.
func (k kelindarTopicEvent) Type() uint32 { return k.topic }

// kelindarTopicsInstance is a dispatcher with one event type per topic.
// As with [Kelindar], the end of a measurement is a sentinel, published to
// every topic once the producers are done.
type kelindarTopicsInstance struct {
	*kelindarInstance
	seq *topicSeq
}

func (k *kelindarTopicsInstance) publishN(n int) {
	pool := topicPool()
	k.seq.each(n, func(topic, s, j int) { event.Publish(k.d, kelindarTopicEvent{pool[s][j], uint32(topic)}) })
}
func (k *kelindarTopicsInstance) publish(e *Event) {
	event.Publish(k.d, kelindarTopicEvent{e, uint32(k.seq.next())})
}
func (k *kelindarTopicsInstance) close() {
	for t := range k.seq.topics {
		event.Publish(k.d, kelindarTopicEvent{k.end, uint32(t)})
	}
}

// teardown cancels every subscription, waits until the subscribers'
// goroutines have exited (each type's ticker goroutine is left) and
// closes the dispatcher, as [kelindarInstance.teardown] does.
func (k *kelindarTopicsInstance) teardown() {
	for _, cancel := range k.cancels {
		cancel()
	}
	settle(k.base + k.seq.topics)
	_ = k.d.Close()
}

func (c *consumers) startKelindarTopics(seq *topicSeq, n int) {
	k := &kelindarTopicsInstance{kelindarInstance: newKelindar(), seq: seq}
	c.r.inst = k
	k.cancels = make([]context.CancelFunc, 0, n)
	for i := range n {
		k.cancels = append(k.cancels, event.SubscribeTo(k.d, uint32(i%seq.topics), c.topicHandler(i, k.end, seq.topics)))
	}
}

// topicHandler returns the kelindar handler of watcher i: it counts the
// values and checks their order until it sees end, the sentinel, which it
// does not count.
func (c *consumers) topicHandler(i int, end *Event, topics int) func(kelindarTopicEvent) {
	var n int64
	o := topicOrder{topics: int64(topics)}
	r := c.r
	r.wg.Add(1)
	return func(ev kelindarTopicEvent) {
		if ev.e == end {
			r.counts[i], r.broken[i] = n, o.broken
			r.wg.Done()
			return
		}
		n++
		o.see(ev.e.Stamp)
	}
}

type cskrInstance struct {
	ps  *pubsub.PubSub[int, *Event]
	seq *topicSeq
}

func (k *cskrInstance) publishN(n int) {
	pool := topicPool()
	k.seq.each(n, func(topic, s, j int) { k.ps.Pub(pool[s][j], topic) })
}
func (k *cskrInstance) publish(e *Event) { k.ps.Pub(e, k.seq.next()) }

// close asks the library's goroutine to shut down: it does so after the
// Pubs before, closing every subscriber's channel, and then exits.
func (k *cskrInstance) close()             { k.ps.Shutdown() }
func (k *cskrInstance) libDropped() uint64 { return 0 }

func (c *consumers) startCskr(s System, seq *topicSeq, n int) {
	ps := pubsub.New[int, *Event](s.Queue)
	c.r.inst = &cskrInstance{ps: ps, seq: seq}
	for i := range n {
		ch := ps.Sub(i % s.Topics)
		c.consumeTopic(i, func() (int64, int64) { return drainTopicChan(ch, s.Topics) })
	}
}

type watermillInstance struct {
	g        *gochannel.GoChannel
	names    []string // the topics
	seq      *topicSeq
	sent     atomic.Int64
	perTopic int
	acked    []atomic.Int64 // per watcher, messages acked
}

func (w *watermillInstance) publishN(n int) {
	pool := topicPayloads()
	w.seq.each(n, func(topic, s, k int) {
		_ = w.g.Publish(w.names[topic], message.NewMessage(watermill.NewUUID(), pool[s][k]))
	})
	w.sent.Add(int64(n))
}

func (w *watermillInstance) publish(e *Event) {
	p := make(message.Payload, WatermillPayload)
	binary.LittleEndian.PutUint64(p, uint64(e.Stamp))
	_ = w.g.Publish(w.names[w.seq.next()], message.NewMessage(watermill.NewUUID(), p))
	w.sent.Add(1)
}

// close waits until every published message has been acked by every
// watcher of its topic (GoChannel's Close discards those in flight), then
// closes GoChannel, which closes the subscribers' channels.
func (w *watermillInstance) close() {
	want := w.sent.Load() * int64(w.perTopic)
	for w.ackedAll() < want {
		time.Sleep(20 * time.Microsecond)
	}
	_ = w.g.Close()
}

func (w *watermillInstance) ackedAll() int64 {
	var t int64
	for i := range w.acked {
		t += w.acked[i].Load()
	}
	return t
}

func (w *watermillInstance) libDropped() uint64 { return 0 }

func (c *consumers) startWatermill(s System, seq *topicSeq, n int) error {
	g := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: int64(s.Queue),
		BlockPublishUntilSubscriberAck: s.Strategy == StrategyAck}, watermill.NopLogger{})
	w := &watermillInstance{g: g, seq: seq, perTopic: n / s.Topics, acked: make([]atomic.Int64, n)}
	for t := range s.Topics {
		w.names = append(w.names, "topic-"+strconv.Itoa(t))
	}
	c.r.inst = w
	for i := range n {
		ch, err := g.Subscribe(context.Background(), w.names[i%s.Topics])
		if err != nil {
			_ = g.Close()
			return err
		}
		acked := &w.acked[i]
		c.consumeTopic(i, func() (int64, int64) { return drainWatermill(ch, acked, s.Topics) })
	}
	return nil
}

// drainWatermill acks, counts and checks the order of every message of ch
// until it closes.
func drainWatermill(ch <-chan *message.Message, acked *atomic.Int64, topics int) (n, broken int64) {
	o := topicOrder{topics: int64(topics)}
	for m := range ch {
		o.see(int64(binary.LittleEndian.Uint64(m.Payload)))
		m.Ack()
		n++
		acked.Store(n)
	}
	return n, o.broken
}

package harness

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	"github.com/cskr/pubsub/v2"
	"github.com/fanout-go/fanout"
)

// The topics group: T topics with [WatchersPerTopic] watchers each, one
// producer publishing round-robin over the topics, every watcher reading
// everything on its topic; the figure is delivered values per second.

// Names of the topic systems.
const (
	// SystemCskr is github.com/cskr/pubsub/v2: one goroutine of the library
	// serves every Sub and Pub through one command channel and sends,
	// blocking, into each subscriber's channel.
	SystemCskr = "cskr"
	// SystemWatermill is github.com/ThreeDotsLabs/watermill's GoChannel.
	SystemWatermill = "watermill"
)

// APITopics is the read path of the topics group: each system's own
// per-topic subscription.
const APITopics = "topics"

// WatchersPerTopic is the watchers of each topic in the topics group.
const WatchersPerTopic = 10

// WatermillPayload is the payload of a watermill message: a user of
// GoChannel publishes []byte, so the harness sends a small one, the same
// 8 bytes every time, in a new message with a new UUID each publish.
const WatermillPayload = 8

// Watermill's GoChannel configurations, as they appear in [System].Strategy.
const (
	// StrategyAck is GoChannel with BlockPublishUntilSubscriberAck: Publish
	// returns once every subscriber of the topic has acked the message,
	// so at most one message per topic is in flight, delivered in order.
	StrategyAck = "ack"
	// StrategyAsync is GoChannel without it: Publish starts a goroutine
	// per message and subscriber and returns; nothing bounds the messages
	// in flight, and a subscriber may get them out of order. Lossless as
	// long as GoChannel is not closed before every message is acked.
	StrategyAsync = "async"
)

// FanoutTopics is fanout.Topics with the given topics: wait strategy, queue
// 100, each watcher a Watch(k) read with Recv.
func FanoutTopics(topics int) System {
	return System{Name: SystemFanout, Strategy: StrategyWait, API: APITopics, Queue: DefaultQueue, Topics: topics}
}

// Cskr is cskr/pubsub with the given topics: New(100), so each Sub channel
// holds 100 values; Pub(v, topic) blocks until every subscriber's channel
// took v.
func Cskr(topics int) System {
	return System{Name: SystemCskr, Strategy: StrategyWait, API: APITopics, Queue: DefaultQueue, Topics: topics}
}

// Watermill is GoChannel with the given configuration ([StrategyAck] or
// [StrategyAsync]) and topics, OutputChannelBuffer 100; each watcher ranges
// over its Subscribe channel and acks every message.
func Watermill(strategy string, topics int) System {
	return System{Name: SystemWatermill, Strategy: strategy, API: APITopics, Queue: DefaultQueue, Topics: topics}
}

// TopicSystems returns the systems of the topics group with the given
// topics.
func TopicSystems(topics int) []System {
	return []System{FanoutTopics(topics), Cskr(topics), Watermill(StrategyAck, topics), Watermill(StrategyAsync, topics)}
}

func topicsLabel(s System) string {
	switch s.Name {
	case SystemFanout:
		return "fanout Topics"
	case SystemWatermill:
		return fmt.Sprintf("watermill GoChannel %s q%d", s.Strategy, s.Queue)
	}
	return fmt.Sprintf("%s/pubsub q%d", s.Name, s.Queue)
}

func validateTopics(s System) error {
	want := StrategyWait
	if s.Name == SystemWatermill && s.Strategy == StrategyAsync {
		want = StrategyAsync
	} else if s.Name == SystemWatermill {
		want = StrategyAck
	}
	if s.Topics < 1 || s.Strategy != want {
		return fmt.Errorf("harness: %s with %d topics, strategy %q", s.Name, s.Topics, s.Strategy)
	}
	return nil
}

// startTopics builds topic system s with n watchers, n/s.Topics per topic.
func (c *consumers) startTopics(s System, n int) error {
	if err := validateTopics(s); err != nil {
		return err
	}
	if n%s.Topics != 0 || c.stalled > 0 {
		return fmt.Errorf("harness: %d watchers over %d topics, %d stalled", n, s.Topics, c.stalled)
	}
	switch s.Name {
	case SystemFanout:
		return c.startFanoutTopics(s, n)
	case SystemCskr:
		c.startCskr(s, n)
		return nil
	}
	return c.startWatermill(s, n)
}

// roundRobin hands out the topics 0..topics-1 in turn.
type roundRobin struct {
	topics int
	n      atomic.Uint64
}

func (r *roundRobin) next() int { return int(r.n.Add(1) % uint64(r.topics)) }

type fanoutTopicsInstance struct {
	t *fanout.Topics[int, *Event]
	e *Event
	roundRobin
}

func (f *fanoutTopicsInstance) publishN(n int) {
	for range n {
		_ = f.t.Publish(f.next(), f.e)
	}
}
func (f *fanoutTopicsInstance) publish(e *Event) {
	_ = f.t.Publish(f.next(), e)
}
func (f *fanoutTopicsInstance) close()             { f.t.Shutdown() }
func (f *fanoutTopicsInstance) libDropped() uint64 { return 0 }

func (c *consumers) startFanoutTopics(s System, n int) error {
	t := fanout.NewTopics[int, *Event](fanout.WithQueueLength(s.Queue), fanout.WithFullChannelBehavior(fanout.WaitIfChannelFull))
	c.r.inst = &fanoutTopicsInstance{t: t, e: c.payload, roundRobin: roundRobin{topics: s.Topics}}
	for i := range n {
		w, err := t.Watch(i % s.Topics)
		if err != nil {
			t.Shutdown()
			return err
		}
		buf := make([]*Event, s.Queue)
		c.consume(i, func(lat []int64) (int64, []int64) { return drainPull(w, buf, c.rec, lat) })
	}
	return nil
}

type cskrInstance struct {
	ps *pubsub.PubSub[int, *Event]
	e  *Event
	roundRobin
}

func (k *cskrInstance) publishN(n int) {
	for range n {
		k.ps.Pub(k.e, k.next())
	}
}
func (k *cskrInstance) publish(e *Event) { k.ps.Pub(e, k.next()) }

// close asks the library's goroutine to shut down: it does so after the
// Pubs before, closing every subscriber's channel, and then exits.
func (k *cskrInstance) close()             { k.ps.Shutdown() }
func (k *cskrInstance) libDropped() uint64 { return 0 }

func (c *consumers) startCskr(s System, n int) {
	ps := pubsub.New[int, *Event](s.Queue)
	c.r.inst = &cskrInstance{ps: ps, e: c.payload, roundRobin: roundRobin{topics: s.Topics}}
	for i := range n {
		ch := ps.Sub(i % s.Topics)
		c.consume(i, func(lat []int64) (int64, []int64) { return drainChan(ch, c.rec, lat, stampOf) })
	}
}

type watermillInstance struct {
	g        *gochannel.GoChannel
	names    []string // the topics
	payload  message.Payload
	next     atomic.Uint64
	perTopic int
	acked    []atomic.Int64 // per watcher, messages acked
}

func (w *watermillInstance) publishN(n int) {
	for range n {
		w.publish(nil)
	}
}

func (w *watermillInstance) publish(*Event) {
	topic := w.names[w.next.Add(1)%uint64(len(w.names))]
	_ = w.g.Publish(topic, message.NewMessage(watermill.NewUUID(), w.payload))
}

// close waits until every published message has been acked by every
// watcher of its topic (GoChannel's Close discards those in flight), then
// closes GoChannel, which closes the subscribers' channels.
func (w *watermillInstance) close() {
	want := int64(w.next.Load()) * int64(w.perTopic)
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

func (c *consumers) startWatermill(s System, n int) error {
	g := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: int64(s.Queue),
		BlockPublishUntilSubscriberAck: s.Strategy == StrategyAck}, watermill.NopLogger{})
	w := &watermillInstance{g: g, payload: make(message.Payload, WatermillPayload), perTopic: n / s.Topics,
		acked: make([]atomic.Int64, n)}
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
		c.consume(i, func([]int64) (int64, []int64) { return drainWatermill(ch, acked), nil })
	}
	return nil
}

// drainWatermill acks and counts every message of ch until it closes.
func drainWatermill(ch <-chan *message.Message, acked *atomic.Int64) int64 {
	var n int64
	for m := range ch {
		m.Ack()
		n++
		acked.Store(n)
	}
	return n
}

// topicsGroup measures the topic systems with the given topics, one
// producer, interleaved, and returns one case per system with its ratio to
// fanout Topics.
func topicsGroup(cfg Config, res *Results, topics int) ([]Case, error) {
	cases, samples, err := measureOneProducer(cfg, res, KindTopics, TopicSystems(topics), topics*WatchersPerTopic)
	if err != nil {
		return nil, err
	}
	for i := range cases {
		cases[i].Topics = topics
	}
	pairRatios(cases, samples, 0, func(c *Case, v float64) { c.RatioVsFanout = ptr(v) })
	return cases, nil
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

package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/fanout-go/fanout"
)

// The topics model drives a Topics[int, int] from one goroutine with a
// sequence of operations decoded from bytes, as the broadcaster's model test
// does, and checks every observable result against a plain reference model:
// what each watcher reads (a watcher of several topics: each topic's values
// in that topic's order, as many as are queued up to the buffer's length),
// ActionOrDrop's verdicts, the watchers' counters, which topics exist, each
// topic's Accepted count (a retired topic comes back fresh), and the
// family's TopicsStats. Watchers of one topic use every strategy and both
// read paths; watchers of several topics (WatchTopics, WatchAll) wait, drop
// new or drop old values, and read with Recv. They are not evicted here:
// the rest of an evicted one stops when its reader sees the eviction, which
// depends on where Recv's turn stands (topics_test.go covers it).
//
// Values are published with the family's methods, through a
// TopicPublisher kept for each topic across retirements, and several
// topics at once with PublishMessages. A watcher of several topics may be
// read through its channel (ResultChan): the model runs in a synctest
// bubble and waits, after each operation and before each receive, until
// the channel's goroutine can do no more. Such a watcher waits when full
// (it never drops, so what it holds does not depend on when that goroutine
// ran), and which of its values the goroutine took from which topic is not
// modelled: its reads are checked value by value as the others', and its
// counters by what they must add up to (see checkChanGroup).

const topicsModelTopics = 3

// topicsBehaviors are the strategies of the model's watchers; only those of
// one topic are evicted.
var topicsBehaviors = []fanout.FullChannelBehavior{
	fanout.WaitIfChannelFull,
	fanout.DropIfChannelFull,
	fanout.DropOldestIfChannelFull,
	fanout.EvictIfChannelFull,
}

// tmSub is the model of one watcher of one topic: a watcher of one topic
// has one, a watcher of several topics one per topic.
type tmSub struct {
	w         *tmWatcher
	topic     int
	viaChan   bool // read through its TopicsWatcher's channel: queue holds what is in it too
	q         int
	beh       int
	queue     []int
	closed    error
	delivered uint64
	dropFull  uint64
	dropOld   uint64
	dropEvic  uint64
}

// tmWatcher is the model of a watcher: w for one topic, g for several.
type tmWatcher struct {
	w       *fanout.Watcher[int]
	g       *fanout.TopicsWatcher[int, int]
	all     bool
	useChan bool
	q, beh  int
	subs    []*tmSub
	stopped bool // a TopicsWatcher stopped by its user
	quit    bool // a TopicsWatcher's Stop was called: its channel's goroutine ended
}

// tmTopic is the model of a topic.
type tmTopic struct {
	exists   bool
	accepted uint64
	history  []int
	subs     []*tmSub // the open watchers
}

type topicsModel struct {
	t         *testing.T
	tp        *fanout.Topics[int, int]
	history   int
	topics    [topicsModelTopics]tmTopic
	ws        []*tmWatcher
	pubs      [topicsModelTopics]*fanout.TopicPublisher[int, int]
	stopped   bool
	next      int
	published uint64
	unheard   uint64
	retired   uint64
	// publishing defers retiring a topic whose last watcher a publish
	// evicted until the publish is over.
	publishing bool
	log        []string
}

func (m *topicsModel) fail(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("%s\nops:\n  %s", fmt.Sprintf(format, args...), joinLines(m.log))
}

func (m *topicsModel) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf(format, args...))
}

// groups returns the watchers of every topic that are still registered.
func (m *topicsModel) groups() []*tmWatcher {
	var gs []*tmWatcher
	for _, mw := range m.ws {
		if mw.all && !mw.stopped {
			gs = append(gs, mw)
		}
	}
	return gs
}

// keep reports whether publishing to a topic that does not exist creates
// it: the family keeps a history or has watchers of every topic.
func (m *topicsModel) keep() bool { return m.history > 0 || len(m.groups()) > 0 }

// create makes topic exist, fresh, with a watcher of it for each watcher of
// every topic.
func (m *topicsModel) create(topic int) {
	tt := &m.topics[topic]
	if tt.exists {
		return
	}
	*tt = tmTopic{exists: true}
	for _, g := range m.groups() {
		m.addSub(g, topic)
	}
}

func (m *topicsModel) addSub(mw *tmWatcher, topic int) *tmSub {
	s := &tmSub{w: mw, topic: topic, q: mw.q, beh: mw.beh, viaChan: mw.g != nil && mw.useChan}
	mw.subs = append(mw.subs, s)
	m.topics[topic].subs = append(m.topics[topic].subs, s)
	return s
}

// leave closes s with err and, unless a publish is under way, retires its
// topic if that was its last watcher.
func (m *topicsModel) leave(s *tmSub, err error) {
	if s.closed != nil || m.stopped {
		return
	}
	s.closed = err
	tt := &m.topics[s.topic]
	tt.subs = slices.DeleteFunc(tt.subs, func(o *tmSub) bool { return o == s })
	if !m.publishing {
		m.retireIdle(s.topic)
	}
}

// retireIdle retires topic if it exists with no watcher and the family
// keeps no history: when its last watcher stops, or after the publish
// that evicted it.
func (m *topicsModel) retireIdle(topic int) {
	if tt := &m.topics[topic]; tt.exists && len(tt.subs) == 0 && m.history == 0 && !m.stopped {
		*tt = tmTopic{}
		m.retired++
	}
}

// fits returns how many of vs can be published to topic now without
// waiting.
func (m *topicsModel) fits(topic int, vs []int) int {
	n := len(vs)
	for _, s := range m.topics[topic].subs {
		if s.beh == 0 {
			n = min(n, max(0, s.q-s.queued())) // after Shutdown, Stop may queue again what a channel's goroutine held
		}
	}
	return n
}

// queued returns how many values its watcher holds: for a watcher read
// through a channel, those its channel's goroutine did not take, as its
// counters say (checkChanGroup checks what they add up to).
func (s *tmSub) queued() int {
	if s.viaChan {
		return s.w.g.Stats()[s.topic].Queued
	}
	return len(s.queue)
}

// deliver accepts v on topic, which exists.
func (m *topicsModel) deliver(topic, v int) {
	tt := &m.topics[topic]
	tt.accepted++
	if m.history > 0 {
		tt.history = append(tt.history, v)
		tt.history = tt.history[len(tt.history)-min(len(tt.history), m.history):]
	}
	for _, s := range slices.Clone(tt.subs) {
		switch {
		case len(s.queue) < s.q || s.viaChan: // a waiting one: it fits
			s.queue = append(s.queue, v)
		case s.beh == 1:
			s.dropFull++
		case s.beh == 2:
			s.queue = append(s.queue[1:], v)
			s.dropOld++
		case s.beh == 3:
			s.dropEvic++
			m.leave(s, fanout.ErrEvicted)
		}
	}
}

func (m *topicsModel) step(op, arg byte) {
	m.t.Helper()
	switch op % 8 {
	case 0:
		m.watch(op, arg)
	case 1:
		m.watchTopics(op, arg)
	case 2:
		m.watchAll(op, arg)
	case 3, 4:
		m.publish(int(arg)%topicsModelTopics, op&0x10 != 0, op&0x20 != 0)
	case 5:
		m.readOne(arg)
	case 6:
		m.stop(op, arg)
	case 7:
		if op&0x40 != 0 {
			m.publishMessages(op, arg)
		} else {
			m.publishBatch(int(arg)%topicsModelTopics, 1+int(arg>>2)%5, op&0x20 != 0)
		}
	}
	synctest.Wait() // the channels' goroutines did what they could
	m.check()
}

// watch registers a watcher of one topic: arg gives its topic, queue
// length, strategy and read path, op a replay.
func (m *topicsModel) watch(op, arg byte) {
	if len(m.ws) >= 6 {
		return
	}
	topic := int(arg) % topicsModelTopics
	mw := &tmWatcher{q: 1 + int(arg/3)%3, beh: int(arg/9) % len(topicsBehaviors), useChan: arg&0x80 != 0}
	replay := min(int(op>>4)&3, m.history)
	opts := []fanout.Option{fanout.WithQueueLength(mw.q), fanout.WithFullChannelBehavior(topicsBehaviors[mw.beh])}
	if replay > 0 {
		opts = append(opts, fanout.WithReplay(replay))
	}
	m.logf("watch topic=%d q=%d beh=%v chan=%v replay=%d", topic, mw.q, topicsBehaviors[mw.beh], mw.useChan, replay)
	w, err := m.tp.Watch(topic, opts...)
	if m.watchFailed(err) {
		return
	}
	mw.w = w
	if mw.useChan {
		w.ResultChan()
	}
	m.create(topic)
	s := m.addSub(mw, topic)
	h := m.topics[topic].history
	s.queue = slices.Clone(h[len(h)-min(replay, len(h)):])
	if len(s.queue) > 0 {
		s.q = max(s.q, len(s.queue)+1)
	}
	m.ws = append(m.ws, mw)
}

// watchFailed checks Watch's error: ErrStopped after Shutdown, else none.
func (m *topicsModel) watchFailed(err error) bool {
	m.t.Helper()
	if m.stopped {
		if !errors.Is(err, fanout.ErrStopped) {
			m.fail("watch after Shutdown: %v", err)
		}
		return true
	}
	if err != nil {
		m.fail("watch: %v", err)
	}
	return false
}

// groupOptions returns the options of a watcher of several topics, and
// its model: never evicted; read through its channel if op says so, and
// then waiting when full.
func groupOptions(op, arg byte) (*tmWatcher, []fanout.Option) {
	mw := &tmWatcher{q: 1 + int(arg/8)%3, beh: int(arg/32) % 3, useChan: op&0x40 != 0}
	if mw.useChan {
		mw.beh = 0
	}
	return mw, []fanout.Option{fanout.WithQueueLength(mw.q), fanout.WithFullChannelBehavior(topicsBehaviors[mw.beh])}
}

// watchTopics registers a watcher of the topics whose bits are set in arg
// (one at least), in an order op gives.
func (m *topicsModel) watchTopics(op, arg byte) {
	if len(m.ws) >= 6 {
		return
	}
	var topics []int
	for k := range topicsModelTopics {
		if arg&(1<<k) != 0 {
			topics = append(topics, k)
		}
	}
	if len(topics) == 0 {
		topics = []int{int(op>>4) % topicsModelTopics}
	}
	if op&0x80 != 0 {
		slices.Reverse(topics)
	}
	mw, opts := groupOptions(op, arg)
	m.logf("watchTopics %v q=%d beh=%v chan=%v", topics, mw.q, topicsBehaviors[mw.beh], mw.useChan)
	g, err := m.tp.WatchTopics(topics, opts...)
	if m.watchFailed(err) {
		return
	}
	mw.g = g
	if mw.useChan {
		g.ResultChan()
	}
	for _, topic := range topics {
		m.create(topic)
		m.addSub(mw, topic)
	}
	m.ws = append(m.ws, mw)
}

// watchAll registers a watcher of every topic.
func (m *topicsModel) watchAll(op, arg byte) {
	if len(m.ws) >= 6 {
		return
	}
	mw, opts := groupOptions(op, arg)
	m.logf("watchAll q=%d beh=%v chan=%v", mw.q, topicsBehaviors[mw.beh], mw.useChan)
	g, err := m.tp.WatchAll(opts...)
	if m.watchFailed(err) {
		return
	}
	mw.g, mw.all = g, true
	if mw.useChan {
		g.ResultChan()
	}
	for topic := range m.topics {
		if m.topics[topic].exists {
			m.addSub(mw, topic)
		}
	}
	m.ws = append(m.ws, mw)
}

// publish publishes a value to topic with Publish when that would not
// wait, else (or if orDrop) with PublishOrDrop: the family's methods, or
// the topic's TopicPublisher's if viaPublisher.
func (m *topicsModel) publish(topic int, orDrop, viaPublisher bool) {
	v := m.next
	m.next++
	if !m.topics[topic].exists && m.keep() && !m.stopped {
		m.create(topic)
	}
	fits := m.fits(topic, []int{v}) == 1
	var ok bool
	var err error
	p := m.pubs[topic]
	switch {
	case fits && !orDrop:
		m.logf("publish %d to %d (publisher %v)", v, topic, viaPublisher)
		if viaPublisher {
			err = p.Publish(v)
		} else {
			err = m.tp.Publish(topic, v)
		}
		ok = err == nil
	case viaPublisher:
		m.logf("publisher.PublishOrDrop %d to %d", v, topic)
		ok, err = p.PublishOrDrop(v)
	default:
		m.logf("publishOrDrop %d to %d", v, topic)
		ok, err = m.tp.PublishOrDrop(topic, v)
	}
	switch {
	case m.stopped:
		if ok || !errors.Is(err, fanout.ErrStopped) {
			m.fail("publish after Shutdown: %v %v", ok, err)
		}
	case err != nil:
		m.fail("publish %d to %d: %v", v, topic, err)
	case ok != fits:
		m.fail("publishOrDrop %d to %d = %v, want %v", v, topic, ok, fits)
	case fits:
		m.accept(topic, v)
	}
}

// accept counts vs as published to topic: delivered if the topic exists,
// else unheard.
func (m *topicsModel) accept(topic int, vs ...int) {
	m.published += uint64(len(vs))
	if !m.topics[topic].exists {
		m.unheard += uint64(len(vs))
		return
	}
	m.publishing = true
	for _, v := range vs {
		if len(m.topics[topic].subs) == 0 && m.history == 0 {
			m.unheard++ // a batch evicted the last watcher: nobody hears the rest
		}
		m.deliver(topic, v)
	}
	m.publishing = false
	m.retireIdle(topic)
}

// publishBatch publishes up to k values to topic with PublishBatch, as many
// as fit without waiting, the topic's TopicPublisher's if viaPublisher.
func (m *topicsModel) publishBatch(topic, k int, viaPublisher bool) {
	if !m.topics[topic].exists && m.keep() && !m.stopped {
		m.create(topic)
	}
	vs := make([]int, k)
	for i := range vs {
		vs[i] = m.next + i
	}
	vs = vs[:m.fits(topic, vs)]
	if len(vs) == 0 {
		return
	}
	m.next += len(vs)
	m.logf("publishBatch %v to %d (publisher %v)", vs, topic, viaPublisher)
	var n int
	var err error
	if viaPublisher {
		n, err = m.pubs[topic].PublishBatch(vs)
	} else {
		n, err = m.tp.PublishBatch(topic, vs)
	}
	if m.stopped {
		if n != 0 || !errors.Is(err, fanout.ErrStopped) {
			m.fail("publishBatch after Shutdown: %d %v", n, err)
		}
		return
	}
	if n != len(vs) || err != nil {
		m.fail("publishBatch %v to %d = %d, %v", vs, topic, n, err)
	}
	m.accept(topic, vs...)
}

// publishMessages publishes up to 6 values with PublishMessages, their
// topics in a cycle from arg with a stride op gives, as many of each
// topic's as fit without waiting.
func (m *topicsModel) publishMessages(op, arg byte) {
	stride := 1 + int(op>>5)&1
	room := map[int]int{}
	var order []int // the topics in the order of their first value
	var ms []fanout.Message[int, int]
	for i := range 1 + int(arg>>2)%6 {
		topic := (int(arg) + i*stride) % topicsModelTopics
		if _, seen := room[topic]; !seen {
			order = append(order, topic)
			if !m.topics[topic].exists && m.keep() && !m.stopped {
				m.create(topic)
			}
			room[topic] = m.fits(topic, make([]int, 8))
		}
		if room[topic] > 0 {
			room[topic]--
			ms = append(ms, fanout.Message[int, int]{Topic: topic, Value: m.next})
			m.next++
		}
	}
	m.logf("publishMessages %v", ms)
	n, err := m.tp.PublishMessages(ms)
	if m.stopped {
		if n != 0 || !errors.Is(err, fanout.ErrStopped) {
			m.fail("publishMessages after Shutdown: %d %v", n, err)
		}
		return
	}
	if n != len(ms) || err != nil {
		m.fail("publishMessages %v = %d, %v", ms, n, err)
	}
	for _, topic := range order {
		var vs []int
		for _, msg := range ms {
			if msg.Topic == topic {
				vs = append(vs, msg.Value)
			}
		}
		m.accept(topic, vs...)
	}
}

// readOne reads up to k values from a watcher without waiting.
func (m *topicsModel) readOne(arg byte) {
	if len(m.ws) == 0 {
		return
	}
	mw := m.ws[int(arg)%len(m.ws)]
	k := 1 + int(arg/16)%4
	m.checkRead(mw, k)
}

// checkRead reads up to k values from mw and checks them against the
// model: a watcher of one topic reads its queue's head; a watcher of
// several reads min(k, queued) values, each topic's the head of its queue.
func (m *topicsModel) checkRead(mw *tmWatcher, k int) int {
	m.t.Helper()
	got := m.read(mw, k)
	m.logf("read w%d k=%d -> %v", slices.Index(m.ws, mw), k, got)
	queued := 0
	for _, s := range mw.subs {
		queued += len(s.queue)
	}
	if len(got) != min(k, queued) {
		m.fail("watcher %d read %v, want %d values", slices.Index(m.ws, mw), got, min(k, queued))
	}
	for _, msg := range got {
		s := mw.sub(msg.Topic)
		if s == nil || len(s.queue) == 0 || s.queue[0] != msg.Value {
			m.fail("watcher %d read %v: %v is not the next value of its topic", slices.Index(m.ws, mw), got, msg)
		}
		s.queue = s.queue[1:]
		s.delivered++
	}
	return len(got)
}

// sub returns the watcher's model of topic. A watcher has one per topic: a
// watcher of every topic is registered on its topics while it is, so none
// of them retires and comes back meanwhile.
func (mw *tmWatcher) sub(topic int) *tmSub {
	for _, s := range mw.subs {
		if s.topic == topic {
			return s
		}
	}
	return nil
}

// read takes up to k values from mw without waiting, through its read
// path.
func (m *topicsModel) read(mw *tmWatcher, k int) []fanout.Message[int, int] {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if mw.g != nil && mw.useChan {
		return readChan(mw.g, k)
	}
	if mw.g != nil {
		buf := make([]fanout.Message[int, int], k)
		n, _ := mw.g.Recv(ctx, buf)
		return buf[:n]
	}
	topic := mw.subs[0].topic
	var got []fanout.Message[int, int]
	if !mw.useChan {
		buf := make([]int, k)
		n, _ := mw.w.Recv(ctx, buf)
		for _, v := range buf[:n] {
			got = append(got, fanout.Message[int, int]{Topic: topic, Value: v})
		}
		return got
	}
	for len(got) < k {
		select {
		case v, ok := <-mw.w.ResultChan():
			if !ok {
				return got
			}
			got = append(got, fanout.Message[int, int]{Topic: topic, Value: v})
			continue
		default:
		}
		break
	}
	return got
}

// readChan takes up to k values from g's channel, one at a time once its
// goroutine can do no more, and, once the channel is closed, the rest with
// Recv (what Stop left), without waiting.
func readChan(g *fanout.TopicsWatcher[int, int], k int) []fanout.Message[int, int] {
	var got []fanout.Message[int, int]
	for len(got) < k {
		synctest.Wait()
		select {
		case msg, ok := <-g.ResultChan():
			if ok {
				got = append(got, msg)
				continue
			}
			return append(got, recvNow(g, k-len(got))...)
		default:
		}
		break
	}
	return got
}

// recvNow takes up to k values from g with Recv, without waiting.
func recvNow(g *fanout.TopicsWatcher[int, int], k int) []fanout.Message[int, int] {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	buf := make([]fanout.Message[int, int], k)
	got := 0
	for got < k {
		n, _ := g.Recv(ctx, buf[got:])
		if n == 0 {
			break
		}
		got += n
	}
	return buf[:got]
}

// stop stops a watcher, or, rarely, shuts the family down.
func (m *topicsModel) stop(op, arg byte) {
	if op&0x80 != 0 && arg%4 == 0 {
		m.logf("shutdown")
		m.tp.Shutdown()
		m.shutdown()
		return
	}
	if len(m.ws) == 0 {
		return
	}
	mw := m.ws[int(arg)%len(m.ws)]
	m.logf("stop w%d", slices.Index(m.ws, mw))
	if mw.g != nil {
		mw.g.Stop()
		mw.quit = true
		if !m.stopped {
			mw.stopped = true
		}
	} else {
		mw.w.Stop()
	}
	for _, s := range mw.subs {
		m.leave(s, fanout.ErrWatcherStopped)
	}
}

// shutdown closes every open watcher with ErrStopped.
func (m *topicsModel) shutdown() {
	if m.stopped {
		return
	}
	for _, mw := range m.ws {
		for _, s := range mw.subs {
			if s.closed == nil {
				s.closed = fanout.ErrStopped
			}
		}
	}
	m.stopped = true
}

// check compares every counter with the model's.
func (m *topicsModel) check() {
	m.t.Helper()
	for i, mw := range m.ws {
		m.checkWatcher(i, mw)
	}
	n := 0
	for topic := range m.topics {
		tt := &m.topics[topic]
		st, ok := m.tp.Topic(topic)
		if ok != tt.exists || st.Accepted != tt.accepted {
			m.fail("topic %d: exists %v, accepted %d; model %v, %d", topic, ok, st.Accepted, tt.exists, tt.accepted)
		}
		if tt.exists {
			n++
		}
	}
	want := fanout.TopicsStats{Topics: n, Published: m.published, Unheard: m.unheard, Retired: m.retired}
	if got := m.tp.Stats(); got != want {
		m.fail("topics stats %+v, want %+v", got, want)
	}
}

// checkWatcher compares the counters of each of mw's topics, and Err.
func (m *topicsModel) checkWatcher(i int, mw *tmWatcher) {
	m.t.Helper()
	if err, want := mw.err(), m.wantErr(mw); !errors.Is(err, want) || (err == nil) != (want == nil) {
		m.fail("watcher %d: Err() = %v, want %v", i, err, want)
	}
	stats := map[int]fanout.WatcherStats{}
	if mw.g != nil && mw.useChan {
		m.checkChanGroup(i, mw)
		return
	}
	if mw.g != nil {
		stats = mw.g.Stats()
	} else {
		stats[mw.subs[0].topic] = mw.w.Stats()
	}
	for topic, st := range stats {
		s := mw.sub(topic)
		if s == nil || st.Queued != len(s.queue) || st.Delivered != s.delivered || st.DroppedFull != s.dropFull ||
			st.DroppedOldest != s.dropOld || st.DroppedEvicted != s.dropEvic {
			m.fail("watcher %d topic %d stats %+v, model %+v", i, topic, st, s)
		}
	}
}

// checkChanGroup checks the counters of a watcher of several topics read
// through its channel. Of each topic's values not read yet (the model's
// queue), those its watcher no longer holds are in the channel or held by
// its goroutine, and count as delivered. Together they are as many as the
// channel holds, and one more held if it is full; after Stop, those in the
// channel (the one held is queued again).
func (m *topicsModel) checkChanGroup(i int, mw *tmWatcher) {
	m.t.Helper()
	total, taken := 0, 0
	for topic, st := range mw.g.Stats() {
		s := mw.sub(topic)
		if s == nil {
			m.fail("watcher %d has a watcher of topic %d, not the model", i, topic)
		}
		k := len(s.queue) - st.Queued
		if k < 0 || st.Delivered != s.delivered+uint64(k) || st.Dropped != 0 {
			m.fail("watcher %d topic %d stats %+v, model %+v", i, topic, st, s)
		}
		total += len(s.queue)
		taken += k
	}
	inChan := len(mw.g.ResultChan())
	want, wantChan := min(total, mw.q+1), min(total, mw.q)
	if mw.quit {
		want, wantChan = inChan, inChan
	}
	if taken != want || inChan != wantChan {
		m.fail("watcher %d: %d values taken, %d in its channel, of %d; want %d, %d", i, taken, inChan, total, want, wantChan)
	}
}

func (mw *tmWatcher) err() error {
	if mw.g != nil {
		return mw.g.Err()
	}
	return mw.w.Err()
}

// wantErr returns what Err should say: a watcher of one topic, why it
// closed; a watcher of several, nil while one of its topics' watchers is
// open, and why it closed once all are closed and drained. A watcher of
// several topics that is closed but not drained is not checked: it
// returns what it returned.
func (m *topicsModel) wantErr(mw *tmWatcher) error {
	if mw.g == nil {
		return mw.subs[0].closed
	}
	drained := true
	for _, s := range mw.subs {
		if s.closed == nil {
			return nil
		}
		drained = drained && len(s.queue) == 0
	}
	switch {
	case !drained:
		return mw.err()
	case mw.stopped:
		return fanout.ErrWatcherStopped
	case len(mw.subs) == 0 && !m.stopped:
		return nil
	}
	return fanout.ErrStopped
}

// finish shuts the family down and checks that every watcher yields what
// the model holds, then closes with the model's reason.
func (m *topicsModel) finish() {
	m.t.Helper()
	m.tp.Shutdown()
	m.shutdown()
	for i, mw := range m.ws {
		for m.checkRead(mw, 64) > 0 {
		}
		want := fanout.ErrStopped // the model's shutdown closed what was open
		switch {
		case mw.stopped:
			want = fanout.ErrWatcherStopped
		case mw.g == nil:
			want = mw.subs[0].closed
		}
		var err error
		if mw.g != nil {
			_, err = mw.g.Next(context.Background())
		} else {
			_, err = mw.w.Next(context.Background())
		}
		if !errors.Is(err, want) {
			m.fail("watcher %d: Next after draining: %v, want %v", i, err, want)
		}
	}
	m.check()
}

// runTopicsModel runs ops; the first byte sets the family's history.
func runTopicsModel(t *testing.T, ops []byte) {
	m := &topicsModel{t: t}
	if len(ops) > 0 {
		m.history = int(ops[0]%8) / 5 * (1 + int(ops[0]%2)) // 0 mostly, else 1 or 2
		ops = ops[1:]
	}
	synctest.Test(t, func(t *testing.T) {
		m.t = t
		m.tp = fanout.NewTopics[int, int](fanout.WithHistory(m.history))
		for k := range m.pubs {
			m.pubs[k] = m.tp.Publisher(k)
		}
		t.Cleanup(m.release) // after a failure too
		for i := 0; i+1 < len(ops); i += 2 {
			m.step(ops[i], ops[i+1])
		}
		m.finish()
	})
}

// release ends the goroutines of the watchers' channels.
func (m *topicsModel) release() {
	for _, mw := range m.ws {
		if mw.g != nil {
			mw.g.Stop()
		}
	}
	m.tp.Shutdown()
}

func FuzzTopicsModel(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 0, 3, 0, 5, 0, 6, 0, 0, 0, 3, 0, 5, 0})          // watch, publish, read, stop: retired; again
	f.Add([]byte{0, 1, 3, 3, 0, 3, 1, 4, 2, 3, 0, 5, 0x30, 5, 0x30})          // WatchTopics of 0 and 1
	f.Add([]byte{0, 2, 0, 3, 0, 3, 1, 3, 2, 5, 0x30, 6, 0, 3, 1})             // WatchAll creates topics as published
	f.Add([]byte{5, 0x30, 0, 3, 0, 3, 0, 3, 0, 0x20, 0, 5, 0x31})             // history: replay
	f.Add([]byte{0, 0, 27, 3, 0, 3, 0, 3, 0, 5, 0})                           // an evicted watcher retires its topic
	f.Add([]byte{0, 0, 0, 3, 0, 3, 0, 0x13, 0, 7, 0x10, 5, 0x30})             // a full waiting watcher: refused
	f.Add([]byte{0, 1, 0x47, 7, 0x1c, 7, 0x1d, 7, 0x1e, 5, 0x30, 0x86, 0x04}) // batches, then Shutdown
	f.Add([]byte{0, 0, 0, 0x23, 0, 0x33, 0, 6, 0, 0x23, 0, 0, 0, 0x23, 0})    // a TopicPublisher across a retirement
	f.Add([]byte{0, 0, 0, 0, 1, 0x47, 0x1c, 0x67, 0x1d, 5, 0x30, 5, 0x31})    // PublishMessages
	f.Add([]byte{0, 0x41, 3, 3, 0, 3, 0, 3, 1, 3, 0, 5, 0x10, 6, 0, 5, 0x30}) // a channel: full, read, Stop
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 401 {
			ops = ops[:401]
		}
		runTopicsModel(t, ops)
	})
}

// TestTopicsModelRandom runs the topics model over random operation
// sequences in every test run (the fuzz target only runs its seeds
// without -fuzz).
func TestTopicsModelRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 3000 {
		ops := make([]byte, 1+2*(5+r.IntN(60)))
		for j := range ops {
			ops[j] = byte(r.UintN(256))
		}
		// Publishing and reading are more interesting than watching.
		for j := 1; j < len(ops); j += 2 {
			if r.IntN(3) == 0 {
				ops[j] = byte(3 + r.IntN(3))
			}
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { runTopicsModel(t, ops) })
	}
}

package fanout

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"sync/atomic"
)

// This file is the publish path of a Topics: finding a topic's broadcaster
// without a lock, publishing to it, and what a publish does when the topic
// does not exist, went away meanwhile, or lost its last watcher.

// topicsView is the map of topics that publishers read without a lock. A
// view's map is never changed once stored: the first creation or
// retirement after it copies the map into t.dirty and stores the same map
// again as stale. A publisher that misses a topic in a stale view (or
// finds a broadcaster there with no watcher: retired, or about to be)
// looks again under t.mu, and counts a miss; once the misses reach a
// quarter of the topics, dirty becomes the next view. So a publish whose
// topic exists costs a load, a look-up in a plain map and the
// broadcaster's publish; creation and retirement cost one copy of the map
// now and then, amortized over the look-ups they make go through the lock.
// (This is sync.Map's read-mostly scheme on a plain map: with 1,000 int
// keys, sync.Map.Load took 2 to 3 times as long as a look-up in a map.)
type topicsView[K comparable, T any] struct {
	topics map[K]*Broadcaster[T]
	stale  bool // t.dirty holds changes this map lacks
}

// changeLocked returns the map of topics to change: t.dirty, made from the
// view's map the first time after a new view, which it marks stale.
// Caller holds t.mu.
func (t *Topics[K, T]) changeLocked() map[K]*Broadcaster[T] {
	if t.dirty == nil {
		v := t.view.Load()
		t.dirty = maps.Clone(v.topics)
		if t.dirty == nil {
			t.dirty = map[K]*Broadcaster[T]{}
		}
		t.view.Store(&topicsView[K, T]{topics: v.topics, stale: true})
	}
	return t.dirty
}

// missLocked counts a publisher's look-up under t.mu and makes t.dirty the
// view once they reach a quarter of its topics. Caller holds t.mu.
func (t *Topics[K, T]) missLocked() {
	if t.dirty == nil {
		return
	}
	if t.misses++; t.misses > len(t.dirty)/4 {
		t.view.Store(&topicsView[K, T]{topics: t.dirty})
		t.dirty, t.misses = nil, 0
	}
}

// keep reports whether publishing to a topic that does not exist creates
// it: the family keeps a history or has watchers of every topic.
func (t *Topics[K, T]) keep() bool { return t.cfg.history > 0 || t.ngroups.Load() > 0 }

// ready reports whether a publisher that found b in a view may publish to
// it without looking again: b has watchers, or the family keeps a history.
// A retired broadcaster has neither (its Shutdown counted its watchers
// out). The fast paths of Publish do not ask: a retired broadcaster's fast
// path fails (it is shut down), and its slow path returns ErrStopped
// having accepted nothing, after which the publisher looks again.
func (t *Topics[K, T]) ready(b *Broadcaster[T]) bool {
	return b != nil && (b.watching() > 0 || t.cfg.history > 0)
}

// Publish publishes v to topic, as [Broadcaster.Action] does. With nobody
// listening to topic, it counts v as unheard and returns nil. After
// Shutdown it returns [ErrStopped].
func (t *Topics[K, T]) Publish(topic K, v T) error {
	b := t.view.Load().topics[topic]
	if b != nil && (b.tryOne(v) || b.yieldOne(v)) {
		return nil
	}
	return t.action(topic, b, nil, v)
}

// action publishes v to topic as Action, its fast path having failed on
// tried if not nil, and p the Publisher, if any.
func (t *Topics[K, T]) action(topic K, tried *Broadcaster[T], p *TopicPublisher[K, T], v T) error {
	_, err := t.publish(topic, tried, p, 1, func(b *Broadcaster[T]) (int, bool, error) {
		if b != tried {
			return oneTo(context.Background(), b, v)
		}
		vs := [1]T{v} // Action without the fast path that just failed
		_, n, given, err := b.publishSlow(context.Background(), vs[:], pubAction)
		return n, given, err
	})
	return err
}

// batchTo publishes vs to b bounded by ctx, as ActionBatchContext, for
// Topics.publish: it returns how many values b accepted and whether the
// first one it did not accept, if it was stopped, had been given to a
// channel watcher.
func batchTo[T any](ctx context.Context, b *Broadcaster[T], vs []T) (int, bool, error) {
	_, n, given, err := b.publishContext(ctx, vs)
	return n, given, err
}

// oneTo is batchTo for the one value v.
func oneTo[T any](ctx context.Context, b *Broadcaster[T], v T) (int, bool, error) {
	vs := [1]T{v}
	return batchTo(ctx, b, vs[:])
}

// PublishContext is [Topics.Publish] bounded by ctx, as
// [Broadcaster.ActionContext]: a ctx done when it is called makes it
// return ctx.Err() having published nothing, whether anyone listens to
// topic or not (after Shutdown, [ErrStopped]).
func (t *Topics[K, T]) PublishContext(ctx context.Context, topic K, v T) error {
	if err := t.ctxErr(ctx); err != nil {
		return err
	}
	_, err := t.publish(topic, nil, nil, 1, func(b *Broadcaster[T]) (int, bool, error) { return oneTo(ctx, b, v) })
	return err
}

// ctxErr is what PublishContext returns before it looks the topic up: the
// error of a nil ctx, else, unless the family's options are invalid or it
// is shut down (those errors come first, as in ActionContext), ctx.Err().
func (t *Topics[K, T]) ctxErr(ctx context.Context) error {
	switch {
	case ctx == nil:
		return errNilContext
	case t.err != nil || t.stopped.Load():
		return nil // publish returns their error
	}
	return ctx.Err()
}

// PublishOrDrop publishes v to topic if that needs no waiting, as
// [Broadcaster.ActionOrDrop]. With nobody listening, it returns true.
func (t *Topics[K, T]) PublishOrDrop(topic K, v T) (bool, error) {
	n, err := t.publish(topic, nil, nil, 1, func(b *Broadcaster[T]) (int, bool, error) { return orDrop(b, v) })
	return n == 1, err
}

// orDrop publishes v to b as ActionOrDrop, and returns how many values it
// accepted (ActionOrDrop never gives a value away before accepting it).
func orDrop[T any](b *Broadcaster[T], v T) (int, bool, error) {
	ok, err := b.ActionOrDrop(v)
	if !ok {
		return 0, false, err
	}
	return 1, false, err
}

// PublishBatch publishes vs to topic in order and contiguously, as
// [Broadcaster.ActionBatch], and returns how many were accepted: all of
// them with nobody listening to topic, none after Shutdown.
func (t *Topics[K, T]) PublishBatch(topic K, vs []T) (int, error) {
	return t.publish(topic, nil, nil, len(vs), func(b *Broadcaster[T]) (int, bool, error) { return batchTo(context.Background(), b, vs) })
}

// publish runs publish, of n values, on topic's broadcaster, if it exists,
// and returns how many values publish accepted; with no broadcaster, the n
// values are unheard. found, if not nil, is the broadcaster the caller
// found in a view or kept (a TopicPublisher), tried first. A topic retired
// between the look-up and the publish (its broadcaster shut down) is
// looked up again, under t.mu: the values were accepted by nobody. One
// retired after its publish accepted k values (a batch that waited for its
// last watcher, stopped) counts the rest unheard. So does one retired while
// its publish waited having given its value to a channel watcher (Action's
// early hand-off): that watcher holds the value, which is counted
// published, and heard. publish returns how many values the broadcaster
// accepted and whether the next one was given so. p, if not nil, is the
// Publisher to keep the broadcaster in.
func (t *Topics[K, T]) publish(topic K, found *Broadcaster[T], p *TopicPublisher[K, T], n int, publish func(*Broadcaster[T]) (int, bool, error)) (int, error) {
	if t.err != nil {
		return 0, t.err
	}
	for fresh := false; ; fresh = true {
		b, err := found, error(nil)
		if b == nil || fresh {
			b, err = t.forPublish(topic, fresh)
		}
		if err != nil {
			return 0, err
		}
		if p != nil && p.b.Load() != b {
			p.b.Store(b)
		}
		if b == nil {
			t.unheard.add(uint64(n))
			return n, nil
		}
		k, given, err := publish(b)
		if errors.Is(err, ErrStopped) && !t.stopped.Load() {
			if given {
				t.countGiven()
				k++
			}
			if k == 0 {
				continue // retired meanwhile
			}
			// Retired while a batch waited (its last watcher stopped):
			// the rest of it has nobody to go to.
			t.unheard.add(uint64(n - k))
			return n, nil
		}
		if t.cfg.history == 0 && b.watching() == 0 {
			t.retire(topic, b) // it evicted its last watcher
		}
		return k, err
	}
}

// countGiven counts as published a value that a retired topic's
// broadcaster did not accept but gave to a channel watcher before it was
// shut down: what it accepted went to gone, and so does this value.
func (t *Topics[K, T]) countGiven() {
	t.mu.Lock()
	t.gone++
	t.mu.Unlock()
}

// forPublish returns topic's broadcaster, creating it when the family keeps
// a history or has watchers of every topic, or nil when nobody listens. It
// looks in the view, unless fresh, and under t.mu when the view cannot
// tell.
func (t *Topics[K, T]) forPublish(topic K, fresh bool) (*Broadcaster[T], error) {
	if t.stopped.Load() {
		return nil, ErrStopped
	}
	if !fresh {
		v := t.view.Load()
		b := v.topics[topic]
		switch {
		case t.ready(b):
			return b, nil
		case b == nil && !v.stale && !t.keep():
			return nil, nil
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.missLocked()
	if t.stopped.Load() {
		return nil, ErrStopped
	}
	b := t.topicsLocked()[topic]
	if b != nil && b.watching() == 0 && !t.keep() {
		t.retireLocked(topic, b) // its last watcher was evicted: nobody to Stop it
		return nil, nil
	}
	if b == nil && t.keep() && t.liveGroupsLocked() {
		return t.topicLocked(topic)
	}
	return b, nil
}

// liveGroupsLocked reports whether the family has a multi-topic watcher
// that takes new topics, or a history, forgetting the watchers one of
// whose watchers was evicted (they take no new topic, see add; their
// reader's Stop would forget them, but a reader that was evicted is often
// one that does not look): with only those left, a publish to a topic
// nobody watches is unheard again, on the fast path, rather than create
// a topic and retire it at once. Caller holds t.mu.
func (t *Topics[K, T]) liveGroupsLocked() bool {
	if t.cfg.history > 0 {
		return true
	}
	for g := range t.groups {
		if g.evicted() {
			delete(t.groups, g)
		}
	}
	t.ngroups.Store(int32(len(t.groups)))
	return len(t.groups) > 0
}

// PublishMessages publishes each message's value to its topic: the values
// of each topic in their order and contiguously, as one
// [Topics.PublishBatch], the topics in the order of their first message.
// It returns how many values were accepted and, if not all, why: the
// error of the first topic that did not accept all of its values, whose
// first ones, and every value of the topics before it, are those accepted.
// ms is not retained.
func (t *Topics[K, T]) PublishMessages(ms []Message[K, T]) (int, error) {
	if t.err != nil {
		return 0, t.err
	}
	if t.stopped.Load() {
		return 0, ErrStopped
	}
	topics, vs, ends := byTopic(ms)
	total, from := 0, 0
	for i, topic := range topics {
		n, err := t.PublishBatch(topic, vs[from:ends[i]])
		total += n
		if err != nil {
			return total, err
		}
		from = ends[i]
	}
	return total, nil
}

// byTopic returns the topics of ms in the order of their first message, and
// the values of ms grouped by topic, each topic's in their order: topic i's
// are vs[ends[i-1]:ends[i]].
func byTopic[K comparable, T any](ms []Message[K, T]) (topics []K, vs []T, ends []int) {
	group := make([]int, len(ms))
	index := map[K]int{}
	for j, m := range ms {
		i, ok := index[m.Topic]
		if !ok {
			i = len(topics)
			index[m.Topic] = i
			topics = append(topics, m.Topic)
			ends = append(ends, 0)
		}
		group[j] = i
		ends[i]++
	}
	for i := 1; i < len(ends); i++ {
		ends[i] += ends[i-1]
	}
	next := make([]int, len(ends)) // where group i's next value goes
	for i := 1; i < len(ends); i++ {
		next[i] = ends[i-1]
	}
	vs = make([]T, len(ms))
	for j, m := range ms {
		vs[next[group[j]]] = m.Value
		next[group[j]]++
	}
	return topics, vs, ends
}

// TopicPublisher publishes to one topic of a [Topics], as the family's
// publish methods do, without looking the topic up each time: it keeps
// the topic's broadcaster while the topic exists, and finds the next one
// when the topic goes away and comes back (it keeps a retired topic's
// broadcaster until its next publish). Get one with [Topics.Publisher]. It
// is safe for concurrent use.
type TopicPublisher[K comparable, T any] struct {
	t     *Topics[K, T]
	topic K
	b     atomic.Pointer[Broadcaster[T]] // the topic's broadcaster when last looked up
}

// Publisher returns a [TopicPublisher] of topic. It creates nothing: a
// topic with no watcher and no history still costs nothing.
func (t *Topics[K, T]) Publisher(topic K) *TopicPublisher[K, T] {
	return &TopicPublisher[K, T]{t: t, topic: topic}
}

// Topic returns the topic it publishes to.
func (p *TopicPublisher[K, T]) Topic() K { return p.topic }

// Publish is [Topics.Publish] to its topic.
func (p *TopicPublisher[K, T]) Publish(v T) error {
	b := p.b.Load()
	if b != nil && (b.tryOne(v) || b.yieldOne(v)) {
		return nil
	}
	return p.t.action(p.topic, b, p, v)
}

// PublishContext is [Topics.PublishContext] to its topic.
func (p *TopicPublisher[K, T]) PublishContext(ctx context.Context, v T) error {
	if err := p.t.ctxErr(ctx); err != nil {
		return err
	}
	_, err := p.t.publish(p.topic, nil, p, 1, func(b *Broadcaster[T]) (int, bool, error) { return oneTo(ctx, b, v) })
	return err
}

// PublishOrDrop is [Topics.PublishOrDrop] to its topic.
func (p *TopicPublisher[K, T]) PublishOrDrop(v T) (bool, error) {
	n, err := p.t.publish(p.topic, nil, p, 1, func(b *Broadcaster[T]) (int, bool, error) { return orDrop(b, v) })
	return n == 1, err
}

// PublishBatch is [Topics.PublishBatch] to its topic.
func (p *TopicPublisher[K, T]) PublishBatch(vs []T) (int, error) {
	return p.t.publish(p.topic, nil, p, len(vs), func(b *Broadcaster[T]) (int, bool, error) { return batchTo(context.Background(), b, vs) })
}

// stripes is a counter that publishers add to without sharing a cache
// line, most of the time: each add goes to a stripe picked at random, and
// a load adds them up.
type stripes struct {
	s [16]struct {
		n atomicU64
		_ [56]byte
	}
}

func (c *stripes) add(n uint64) { c.s[rand.Uint32()%uint32(len(c.s))].n.Add(n) }

func (c *stripes) load() uint64 {
	var n uint64
	for i := range c.s {
		n += c.s[i].n.Load()
	}
	return n
}

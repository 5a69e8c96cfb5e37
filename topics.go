package fanout

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Topics is a family of broadcasters keyed by topic: a value published to a
// topic reaches the watchers of that topic, and those of several topics
// that include it ([Topics.WatchTopics], [Topics.WatchAll]), with the
// core's guarantees within the topic: one order, registration ordered with
// values, each watcher's full-queue strategy, replay ([WithHistory] given
// to [NewTopics] keeps the last values of each topic) and counters.
//
// A topic exists while it has watchers or a history; one with neither
// costs nothing: publishing to it only counts the value as unheard
// ([TopicsStats].Unheard), and a topic whose last watcher stops, or is
// evicted, goes away. After [Topics.Shutdown] the topics stay as they were.
//
// A Topics starts no goroutines. Create one with [NewTopics].
type Topics[K comparable, T any] struct {
	opts []Option
	cfg  config
	err  error

	mu      sync.RWMutex
	topics  map[K]*Broadcaster[T]
	groups  map[*TopicsWatcher[K, T]]struct{} // watchers of every topic (WatchAll)
	stopped bool

	published, unheard atomic.Uint64
	retired            atomic.Uint64
}

// Message is a value with the topic it was published to, as a watcher of
// several topics receives it.
type Message[K comparable, T any] struct {
	Topic K
	Value T
}

// TopicsStats is a snapshot of a [Topics]' counters.
type TopicsStats struct {
	// Topics is the number of topics that exist now.
	Topics int
	// Published counts values published, to any topic: each value of a
	// batch, and not those PublishOrDrop refused or a publish that failed
	// did not accept.
	Published uint64
	// Unheard counts those published to a topic with no watcher and no
	// history: accepted by nobody, as a broadcaster with no watcher does.
	Unheard uint64
	// Retired counts topics that went away when their last watcher left.
	Retired uint64
}

// NewTopics returns a family of topics. The options are those of [New], for
// every topic's broadcaster: the defaults of its watchers ([WithQueueLength],
// [WithFullChannelBehavior], ...), [WithHistory] and [WithWaitReport]. An
// invalid option is returned by every method that returns an error.
func NewTopics[K comparable, T any](opts ...Option) *Topics[K, T] {
	cfg := defaultConfig().with(opts)
	cfg.newOnly = ""
	err := cfg.validate()
	if err == nil {
		_, err = filterOf[T](cfg)
	}
	return &Topics[K, T]{opts: opts, cfg: cfg, err: err, topics: map[K]*Broadcaster[T]{},
		groups: map[*TopicsWatcher[K, T]]struct{}{}}
}

// Publish publishes v to topic, as [Broadcaster.Action] does. With nobody
// listening to topic, it counts v as unheard and returns nil. After
// Shutdown it returns [ErrStopped].
func (t *Topics[K, T]) Publish(topic K, v T) error {
	_, err := t.each(topic, 1, func(b *Broadcaster[T]) (int, error) { return one(b.Action(v)) })
	return err
}

// one returns how many values a publish of one value accepted: 1 if err is
// nil.
func one(err error) (int, error) {
	if err != nil {
		return 0, err
	}
	return 1, nil
}

// PublishContext is [Topics.Publish] bounded by ctx, as
// [Broadcaster.ActionContext].
func (t *Topics[K, T]) PublishContext(ctx context.Context, topic K, v T) error {
	if ctx == nil {
		return errNilContext
	}
	_, err := t.each(topic, 1, func(b *Broadcaster[T]) (int, error) { return one(b.ActionContext(ctx, v)) })
	return err
}

// PublishOrDrop publishes v to topic if that needs no waiting, as
// [Broadcaster.ActionOrDrop]. With nobody listening, it returns true.
func (t *Topics[K, T]) PublishOrDrop(topic K, v T) (bool, error) {
	n, err := t.each(topic, 1, func(b *Broadcaster[T]) (int, error) {
		ok, err := b.ActionOrDrop(v)
		if !ok {
			return 0, err
		}
		return 1, err
	})
	return n == 1, err
}

// PublishBatch publishes vs to topic in order and contiguously, as
// [Broadcaster.ActionBatch], and returns how many were accepted: all of
// them with nobody listening to topic, none after Shutdown.
func (t *Topics[K, T]) PublishBatch(topic K, vs []T) (int, error) {
	return t.each(topic, len(vs), func(b *Broadcaster[T]) (int, error) { return b.ActionBatch(vs) })
}

// each runs publish, of n values, on topic's broadcaster, if it exists, and
// returns and counts how many values publish accepted; with no
// broadcaster, the n values are unheard. A topic retired between the
// look-up and the publish (its broadcaster shut down) is looked up again:
// the values were accepted by nobody. One retired after its publish
// accepted k values (a batch that waited for its last watcher, stopped)
// counts the rest unheard.
func (t *Topics[K, T]) each(topic K, n int, publish func(*Broadcaster[T]) (int, error)) (int, error) {
	if t.err != nil {
		return 0, t.err
	}
	for {
		b, err := t.forPublish(topic)
		if err != nil {
			return 0, err
		}
		if b == nil {
			t.published.Add(uint64(n))
			t.unheard.Add(uint64(n))
			return n, nil
		}
		k, err := publish(b)
		if errors.Is(err, ErrStopped) && t.live() {
			if k == 0 {
				continue // retired meanwhile
			}
			// Retired while a batch waited (its last watcher stopped):
			// the rest of it has nobody to go to.
			t.published.Add(uint64(n))
			t.unheard.Add(uint64(n - k))
			return n, nil
		}
		t.published.Add(uint64(k))
		if t.cfg.history == 0 && b.watching() == 0 {
			t.retire(topic, b) // it evicted its last watcher
		}
		return k, err
	}
}

// forPublish returns topic's broadcaster, creating it when the family keeps
// a history or has watchers of every topic, or nil when nobody listens.
func (t *Topics[K, T]) forPublish(topic K) (*Broadcaster[T], error) {
	t.mu.RLock()
	b, stopped := t.topics[topic], t.stopped
	keep := t.cfg.history > 0 || len(t.groups) > 0
	t.mu.RUnlock()
	switch {
	case stopped:
		return nil, ErrStopped
	case b != nil && b.watching() == 0 && !keep:
		t.retire(topic, b) // its last watcher was evicted: nobody to Stop it
		return nil, nil
	case b != nil || !keep:
		return b, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.topicLocked(topic)
}

func (t *Topics[K, T]) live() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return !t.stopped
}

// topicLocked returns topic's broadcaster, creating it and registering the
// watchers of every topic on it. Caller holds t.mu.
func (t *Topics[K, T]) topicLocked(topic K) (*Broadcaster[T], error) {
	if t.stopped {
		return nil, ErrStopped
	}
	if b := t.topics[topic]; b != nil {
		return b, nil
	}
	b := New[T](t.opts...)
	t.topics[topic] = b
	for g := range t.groups {
		if err := g.add(topic, b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Watch registers a watcher of topic, creating the topic, as
// [Broadcaster.Watch] (options included). Stopping the topic's last watcher
// retires a topic without history.
func (t *Topics[K, T]) Watch(topic K, opts ...Option) (*Watcher[T], error) {
	if t.err != nil {
		return nil, t.err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b, err := t.topicLocked(topic)
	if err != nil {
		return nil, err
	}
	w, err := b.Watch(opts...)
	if err != nil {
		t.retireLocked(topic, b)
		return nil, err
	}
	w.extra().onStop = func() { t.retire(topic, b) }
	return w, nil
}

// retire removes topic if its broadcaster b has no watcher left and the
// family keeps no history. After Shutdown the topics stay as they were.
func (t *Topics[K, T]) retire(topic K, b *Broadcaster[T]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.retireLocked(topic, b)
}

func (t *Topics[K, T]) retireLocked(topic K, b *Broadcaster[T]) {
	if t.stopped || t.cfg.history > 0 || t.topics[topic] != b || b.watching() > 0 {
		return
	}
	delete(t.topics, topic)
	b.Shutdown()
	t.retired.Add(1)
}

// Topic returns the counters of topic's broadcaster, and whether the topic
// exists.
func (t *Topics[K, T]) Topic(topic K) (Stats, bool) {
	t.mu.RLock()
	b := t.topics[topic]
	t.mu.RUnlock()
	if b == nil {
		return Stats{}, false
	}
	return b.Stats(), true
}

// Stats returns the family's counters.
func (t *Topics[K, T]) Stats() TopicsStats {
	t.mu.RLock()
	n := len(t.topics)
	t.mu.RUnlock()
	return TopicsStats{Topics: n, Published: t.published.Load(), Unheard: t.unheard.Load(), Retired: t.retired.Load()}
}

// Shutdown shuts every topic down, as [Broadcaster.Shutdown]: values
// accepted stay readable, then every watcher closes with [ErrStopped]. It is
// idempotent and never waits on a consumer.
func (t *Topics[K, T]) Shutdown() {
	t.mu.Lock()
	t.stopped = true
	bs := make([]*Broadcaster[T], 0, len(t.topics))
	for _, b := range t.topics {
		bs = append(bs, b)
	}
	t.mu.Unlock()
	for _, b := range bs {
		b.Shutdown()
	}
}

// watching returns the number of registered watchers, without a lock.
func (b *Broadcaster[T]) watching() int { return int(b.nwatch.Load()) }

// WatchTopics registers a watcher of each of topics, read together through
// the returned [TopicsWatcher]: it receives the values of those topics
// accepted after it registered (and their replays), each topic's in that
// topic's order; values of different topics come in no particular order
// (their publishers are not ordered with each other). The options apply to
// each topic's watcher; its queue length must be positive and it takes no
// filter (the topics are the filter). A topic listed more than once is
// watched once: each of its values is received once.
func (t *Topics[K, T]) WatchTopics(topics []K, opts ...Option) (*TopicsWatcher[K, T], error) {
	g, err := t.newGroup(opts)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return nil, ErrStopped
	}
	seen := make(map[K]struct{}, len(topics))
	for _, topic := range topics {
		if _, dup := seen[topic]; dup {
			continue
		}
		seen[topic] = struct{}{}
		b, err := t.topicLocked(topic)
		if err == nil {
			err = g.add(topic, b)
		}
		if err != nil {
			g.stopLocked()
			return nil, err
		}
	}
	return g, nil
}

// WatchAll is [Topics.WatchTopics] of every topic, those that appear later
// included: a topic published to while it exists is created for it.
func (t *Topics[K, T]) WatchAll(opts ...Option) (*TopicsWatcher[K, T], error) {
	g, err := t.newGroup(opts)
	if err != nil {
		return nil, err
	}
	g.all = true
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return nil, ErrStopped
	}
	for topic, b := range t.topics {
		if err := g.add(topic, b); err != nil {
			g.stopLocked()
			return nil, err
		}
	}
	t.groups[g] = struct{}{}
	return g, nil
}

func (t *Topics[K, T]) newGroup(opts []Option) (*TopicsWatcher[K, T], error) {
	if t.err != nil {
		return nil, t.err
	}
	cfg := t.cfg.with(opts)
	switch {
	case cfg.queueLen == 0:
		return nil, errors.New("fanout: a watcher of several topics needs a queue: its length must be positive")
	case cfg.filter != nil:
		return nil, errors.New("fanout: a watcher of several topics takes no filter: the topics are its filter")
	}
	return &TopicsWatcher[K, T]{t: t, opts: opts, wake: make(chan struct{}, 1)}, nil
}

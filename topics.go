package fanout

import (
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
// Publishing to a topic that exists takes no lock of the family's and
// writes nothing of the family's: it looks the topic up in a map that only
// the creation and retirement of topics replace ([Topics.Publisher] skips
// even that), and publishes to the topic's broadcaster. A value nobody
// hears is counted in a counter spread over cache lines.
//
// A Topics starts no goroutines ([TopicsWatcher.ResultChan] starts one for
// its watcher). Create one with [NewTopics].
type Topics[K comparable, T any] struct {
	opts []Option
	cfg  config
	err  error

	// Read by publishers without a lock; written under mu.
	view    atomic.Pointer[topicsView[K, T]]
	stopped atomic.Bool
	ngroups atomicI32 // len(groups)
	// readers counts the ring readers of every topic, which each topic's
	// broadcaster keeps (Broadcaster.family): its readers yield before
	// they park when the other topics have many (familyYieldReaders).
	// Written when watchers come and go, never by a publish.
	readers atomicI32
	_       [64]byte

	unheard stripes // values published to a topic that did not exist

	done chan struct{} // closed by Shutdown: wakes readers of watchers with no topic

	mu sync.Mutex // creation, retirement, groups, Shutdown; guards what follows
	// dirty is the map of topics when it differs from the view's, which
	// it then replaces once publishers have missed it often enough
	// (see topicsView); nil while the view's is current.
	dirty   map[K]*Broadcaster[T]
	misses  int
	groups  map[*TopicsWatcher[K, T]]struct{} // watchers of every topic (WatchAll)
	retired uint64
	// gone is what the retired topics' broadcasters accepted, counted in
	// Published with the live topics' Accepted and the unheard values.
	gone uint64
}

// Message is a value with the topic it was published to, as a watcher of
// several topics receives it, and as [Topics.PublishMessages] takes it.
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
	// It includes the values a publisher that had found the topic (a
	// TopicPublisher, say) published after its last watcher left, counted
	// when the topic retires.
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
	t := &Topics[K, T]{opts: opts, cfg: cfg, err: err, done: make(chan struct{}), groups: map[*TopicsWatcher[K, T]]struct{}{}}
	t.view.Store(&topicsView[K, T]{})
	return t
}

// topicsLocked returns the current map of topics. Caller holds t.mu.
func (t *Topics[K, T]) topicsLocked() map[K]*Broadcaster[T] {
	if t.dirty != nil {
		return t.dirty
	}
	return t.view.Load().topics
}

// topicLocked returns topic's broadcaster, creating it and registering the
// watchers of every topic on it before publishers can find it. Caller
// holds t.mu.
func (t *Topics[K, T]) topicLocked(topic K) (*Broadcaster[T], error) {
	if t.stopped.Load() {
		return nil, ErrStopped
	}
	if b := t.topicsLocked()[topic]; b != nil {
		return b, nil
	}
	b := New[T](t.opts...)
	b.family = &t.readers // before any watcher: readers load it without a lock
	for g := range t.groups {
		if err := g.add(topic, b); err != nil {
			b.Shutdown() // a group that took it sees it stopped
			return nil, err
		}
	}
	t.changeLocked()[topic] = b
	return b, nil
}

// Watch registers a watcher of topic, creating the topic, as
// [Broadcaster.Watch] (options included). Stopping the topic's last watcher
// retires a topic without history.
func (t *Topics[K, T]) Watch(topic K, opts ...Option) (*Watcher[T], error) {
	if t.err != nil {
		return nil, t.err
	}
	if err := watchErr[T](t.cfg.with(opts)); err != nil {
		return nil, err // before the topic is made: no topic made and retired
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b, err := t.topicLocked(topic)
	if err != nil {
		return nil, err
	}
	w, err := b.Watch(append(opts[:len(opts):len(opts)], withExtra{})...)
	if err != nil {
		t.retireLocked(topic, b)
		return nil, err
	}
	w.x.onStop = func() { t.retire(topic, b) } // not yet shared with a Stop
	return w, nil
}

// retire removes topic if its broadcaster b has no watcher left and the
// family keeps no history. After Shutdown the topics stay as they were.
func (t *Topics[K, T]) retire(topic K, b *Broadcaster[T]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.retireLocked(topic, b)
}

// retireLocked retires topic, if b is still its broadcaster, with no
// watcher, in a family without history that is not shut down: nobody can
// register on b any more (that takes t.mu), and its Shutdown makes a
// publisher that found it in a view try again. What b accepted moves to
// gone once b accepts nothing more.
func (t *Topics[K, T]) retireLocked(topic K, b *Broadcaster[T]) {
	if t.stopped.Load() || t.cfg.history > 0 || t.topicsLocked()[topic] != b || b.watching() > 0 {
		return
	}
	delete(t.changeLocked(), topic)
	b.Shutdown()
	h, quiet := b.head.Load(), b.quietValues()
	t.gone += h - quiet
	t.unheard.add(quiet)
	t.retired++
}

// quietValues returns how many values b accepted while it had no watcher,
// once b accepts nothing more: those a publisher that found a topic's
// broadcaster before its last watcher left published to nobody.
func (b *Broadcaster[T]) quietValues() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.unwatched
	if b.nwatch.Load() == 0 {
		n += b.head.Load() - b.unwatchedFrom
	}
	return n
}

// Topic returns the counters of topic's broadcaster, and whether the topic
// exists.
func (t *Topics[K, T]) Topic(topic K) (Stats, bool) {
	t.mu.Lock()
	b := t.topicsLocked()[topic]
	t.mu.Unlock()
	if b == nil {
		return Stats{}, false
	}
	return b.Stats(), true
}

// Stats returns the family's counters. It is O(topics): Published adds up
// what each topic accepted.
func (t *Topics[K, T]) Stats() TopicsStats {
	t.mu.Lock()
	topics := t.topicsLocked()
	published := t.gone
	for _, b := range topics {
		published += b.head.Load()
	}
	s := TopicsStats{Topics: len(topics), Retired: t.retired}
	// Under t.mu, as a retiring topic moves its quiet values from its head
	// to unheard under it: read apart, they would count twice.
	s.Unheard = t.unheard.load()
	t.mu.Unlock()
	s.Published = published + s.Unheard
	return s
}

// Shutdown shuts every topic down, as [Broadcaster.Shutdown]: values
// accepted stay readable, then every watcher closes with [ErrStopped]. It is
// idempotent and never waits on a consumer.
func (t *Topics[K, T]) Shutdown() {
	t.mu.Lock()
	if !t.stopped.Load() {
		close(t.done)
	}
	t.stopped.Store(true)
	topics := t.topicsLocked()
	bs := make([]*Broadcaster[T], 0, len(topics))
	for _, b := range topics {
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
	if t.stopped.Load() {
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
	if t.stopped.Load() {
		return nil, ErrStopped
	}
	for topic, b := range t.topicsLocked() {
		if err := g.add(topic, b); err != nil {
			g.stopLocked()
			return nil, err
		}
	}
	t.groups[g] = struct{}{}
	t.ngroups.Store(int32(len(t.groups)))
	return g, nil
}

// newGroup returns a watcher of several topics with opts, checked as Watch
// checks them, so that a topic created later for a WatchAll takes them.
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
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &TopicsWatcher[K, T]{t: t, opts: opts, qlen: cfg.queueLen, wake: make(chan struct{}, 1)}, nil
}

// leaveGroups takes g out of the watchers of every topic.
func (t *Topics[K, T]) leaveGroups(g *TopicsWatcher[K, T]) {
	t.mu.Lock()
	delete(t.groups, g)
	t.ngroups.Store(int32(len(t.groups)))
	t.mu.Unlock()
}

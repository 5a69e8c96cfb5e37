package fanout

import (
	"context"
	"errors"
	"iter"
	"sync"
	"sync/atomic"
)

// TopicsWatcher receives the values of several topics of a [Topics]
// ([Topics.WatchTopics], [Topics.WatchAll]) as [Message]s. It is one
// watcher per topic, each with its own queue and strategy, read together:
// the watchers share one wake-up channel, so that a reader parks once for
// all of them. It starts no goroutine but the one of
// [TopicsWatcher.ResultChan]. Reads are serialised; every method is safe
// for concurrent use.
type TopicsWatcher[K comparable, T any] struct {
	t    *Topics[K, T]
	opts []Option
	qlen int // its watchers' queue length
	all  bool
	wake chan struct{} // every one of its watchers' wake-up channel
	// evictedAny is set when one of its watchers is evicted, by the
	// publisher that evicts it (see add).
	evictedAny atomic.Bool
	nilCtx     atomic.Bool // a range over All(nil) ended: Err reports it

	mu      sync.Mutex // guards subs, stopped, why, quitted, quit and held
	subs    []topicSub[K, T]
	stopped bool
	why     error // ErrWatcherStopped if stopped before the family shut down
	quitted bool  // Stop was called
	// quittedOnce is quitted, for a read that takes no lock (Recv).
	quittedOnce atomic.Bool
	// ResultChan's channel, and what ends the goroutine that fills it;
	// held are the values that goroutine had taken and not sent when
	// Stop ended it, which Recv returns first.
	// pumped is closed when that goroutine has ended.
	chOnce sync.Once
	ch     chan Message[K, T]
	quit   context.CancelFunc
	held   []Message[K, T]
	pumped chan struct{}

	readMu sync.Mutex // serialises reads; guards what follows
	next   int        // the watcher read first next time, for fairness
	tmp    []T
	heads  []uint64
	err    error // why it closed, once drained
}

type topicSub[K comparable, T any] struct {
	topic K
	b     *Broadcaster[T]
	w     *Watcher[T]
}

// add registers a watcher of topic on b for g. Caller holds g.t.mu. A
// group one of whose watchers was evicted is closing (its reader stops it
// when it finds out, see closedBy): it takes no new topic, which would
// hand it values accepted after its eviction.
func (g *TopicsWatcher[K, T]) add(topic K, b *Broadcaster[T]) error {
	if g.evicted() {
		return nil
	}
	w, err := b.Watch(append(g.opts[:len(g.opts):len(g.opts)], withExtra{})...)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.wake = g.wake                   // before any read: its parks wake g's reader
	w.x.evicted = &g.evictedAny       // under w.mu, which closeQueue holds
	if errors.Is(w.err, ErrEvicted) { // evicted before the flag was set
		g.evictedAny.Store(true)
	}
	w.mu.Unlock()
	g.mu.Lock()
	stopped := g.stopped
	if !stopped {
		w.x.onStop = func() { g.t.retire(topic, b) }
		g.subs = append(g.subs, topicSub[K, T]{topic, b, w})
	}
	g.mu.Unlock()
	if stopped {
		w.Stop()
		return nil
	}
	select { // a reader parked before it must look at it too
	case g.wake <- struct{}{}:
	default:
	}
	return nil
}

// evicted reports whether one of its watchers was evicted.
func (g *TopicsWatcher[K, T]) evicted() bool { return g.evictedAny.Load() }

func (g *TopicsWatcher[K, T]) snapshot() []topicSub[K, T] {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.subs
}

// Recv waits until at least one value of its topics is queued, moves up to
// len(buf) of them into buf, and returns how many, as [Watcher.Recv]: each
// topic's values in that topic's order, the topics taken in turn. Once
// every topic's watcher is closed and drained it returns 0 and the reason
// ([TopicsWatcher.Err]); if ctx ends first, 0 and ctx.Err(). With an empty
// buf it does not wait.
func (g *TopicsWatcher[K, T]) Recv(ctx context.Context, buf []Message[K, T]) (int, error) {
	if ctx == nil {
		return 0, errNilContext
	}
	if err := g.awaitPump(ctx); err != nil {
		return 0, err
	}
	return g.recv(ctx, buf)
}

// recv is Recv once ctx is checked and the goroutine of ResultChan, if
// Stop ended it, has left what it held to Recv; that goroutine reads with
// recv.
func (g *TopicsWatcher[K, T]) recv(ctx context.Context, buf []Message[K, T]) (int, error) {
	g.readMu.Lock()
	defer g.readMu.Unlock()
	if n := g.takeHeld(buf); n > 0 {
		return n, nil
	}
	for {
		subs := g.snapshot()
		n, open := g.poll(subs, buf)
		switch {
		case n > 0:
			return n, nil
		case len(buf) == 0:
			if g.drained() {
				return 0, g.closeErr()
			}
			return 0, nil
		case open == 0 && (len(subs) > 0 || g.closed()):
			return 0, g.closeErr()
		}
		if err := g.park(ctx, subs); err != nil {
			return 0, err
		}
	}
}

// poll takes what its topics' watchers hold, each in turn from g.next, and
// returns how many values it took and how many watchers are open. Caller
// holds g.readMu.
func (g *TopicsWatcher[K, T]) poll(subs []topicSub[K, T], buf []Message[K, T]) (n, open int) {
	if cap(g.tmp) < len(buf) {
		g.tmp = make([]T, len(buf))
	}
	g.heads = append(g.heads[:0], make([]uint64, len(subs))...)
	for j := range subs {
		i := (g.next + j) % len(subs)
		k, h, err := subs[i].w.poll(g.tmp[:len(buf)-n])
		for _, v := range g.tmp[:k] {
			buf[n] = Message[K, T]{Topic: subs[i].topic, Value: v}
			n++
		}
		clear(g.tmp[:k])
		g.heads[i] = h
		if err == nil {
			open++
		} else if g.err == nil || errors.Is(err, ErrEvicted) {
			g.closedBy(err)
		}
		if n == len(buf) {
			g.next = i + 1
			break
		}
	}
	return n, open
}

// closedBy records why one of its watchers closed. An evicted one evicts
// the whole watcher: the others stop, so that no topic is silently missing,
// and a watcher of every topic leaves the family, which would otherwise
// create each topic published to for it; the goroutine of ResultChan goes
// on until the rest is sent. Caller holds g.readMu, which leave does not
// take.
func (g *TopicsWatcher[K, T]) closedBy(err error) {
	g.err = err
	if errors.Is(err, ErrEvicted) {
		g.leave()
	}
}

// park lists every open watcher as parked in its broadcaster, looks at
// their heads once more (look), and waits for g.wake or ctx: with the
// bound of parkInFlight if a fast path held a broadcaster's bit as it
// looked, as Watcher.park does (returning at once instead spun for as long
// as that publisher held the bit).
func (g *TopicsWatcher[K, T]) park(ctx context.Context, subs []topicSub[K, T]) error {
	for i := range subs {
		if subs[i].w.closeErr() == nil {
			subs[i].w.enterPark()
		}
	}
	hook(hookReaderParking)
	var inFlight *Broadcaster[T]
	for i := range subs {
		switch subs[i].b.head.look(g.heads[i]) {
		case headMoved:
			return nil
		case headInFlight:
			inFlight = subs[i].b
		}
	}
	if inFlight != nil {
		return inFlight.sleepInFlight(ctx, g.wake)
	}
	select {
	case <-g.wake:
		return nil
	case <-g.t.done: // a watcher of no topic has no broadcaster to wake it
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// poll reads what the watcher holds now, without waiting, with its
// broadcaster's head as seen. For the watchers of a TopicsWatcher, which
// read the ring.
func (w *Watcher[T]) poll(buf []T) (n int, h uint64, err error) {
	n, wake, h, err := w.tryRecv(context.Background(), buf, nil, true)
	if wake != nil {
		w.waiters.Add(-1) // its caller parks another way (TopicsWatcher.park)
	}
	return n, h, err
}

// Next waits for one value, as [TopicsWatcher.Recv] with a buffer of one.
func (g *TopicsWatcher[K, T]) Next(ctx context.Context) (Message[K, T], error) {
	var one [1]Message[K, T]
	_, err := g.Recv(ctx, one[:])
	return one[0], err
}

// All returns an iterator over the values, as [Watcher.All]; a range with
// a nil ctx ends at once, and [TopicsWatcher.Err] then reports it.
func (g *TopicsWatcher[K, T]) All(ctx context.Context) iter.Seq[Message[K, T]] {
	return func(yield func(Message[K, T]) bool) {
		if ctx == nil {
			g.nilCtx.Store(true)
			return
		}
		for {
			m, err := g.Next(ctx)
			if err != nil || !yield(m) {
				return
			}
		}
	}
}

// Stop unregisters its watchers, as [Watcher.Stop]; what they hold stays
// readable. It is idempotent. It ends the goroutine of
// [TopicsWatcher.ResultChan], whose channel closes after the values
// already in it: the others stay readable with Recv.
func (g *TopicsWatcher[K, T]) Stop() {
	g.mu.Lock()
	quit := g.quit
	g.quitted = true
	g.quittedOnce.Store(true)
	g.mu.Unlock()
	if quit != nil {
		quit()
	}
	g.leave()
}

// leave unregisters its watchers and takes it out of the watchers of every
// topic.
func (g *TopicsWatcher[K, T]) leave() {
	g.t.leaveGroups(g)
	g.stop()
}

func (g *TopicsWatcher[K, T]) stop() {
	why := ErrWatcherStopped
	if g.t.isStopped() {
		why = ErrStopped
	}
	g.mu.Lock()
	subs := g.subs
	if !g.stopped {
		g.stopped, g.why = true, why
	}
	g.mu.Unlock()
	for _, s := range subs {
		s.w.Stop()
		g.t.retire(s.topic, s.b) // an evicted one too, which Stop does not
	}
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// stopLocked stops it while its Topics' lock is held (a failed
// registration): it retires the topics itself, since its watchers' Stop
// cannot take that lock.
func (g *TopicsWatcher[K, T]) stopLocked() {
	g.mu.Lock()
	subs := g.subs
	g.stopped = true
	g.mu.Unlock()
	for _, s := range subs {
		s.w.x.onStop = nil
		s.w.Stop()
		g.t.retireLocked(s.topic, s.b)
	}
}

func (g *TopicsWatcher[K, T]) closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopped || g.t.isStopped()
}

// closeErr returns why it closed: what its first watcher to close said
// (ErrEvicted first), else, with no watcher (WatchAll before any topic),
// what its Stop said, or ErrStopped.
func (g *TopicsWatcher[K, T]) closeErr() error {
	if g.err != nil {
		return g.err
	}
	g.mu.Lock()
	why := g.why
	g.mu.Unlock()
	if why != nil {
		return why
	}
	return ErrStopped
}

// Err returns why it closed, once every watcher of it is closed and
// drained: [ErrWatcherStopped], [ErrStopped] or [ErrEvicted] (one of its
// topics' watchers was evicted: the others were stopped); nil while open.
// Once a range over [TopicsWatcher.All] with a nil context has ended, it
// returns an error naming the nil context instead, as [Watcher.Err] does.
func (g *TopicsWatcher[K, T]) Err() error {
	if g.nilCtx.Load() {
		return errNilContext
	}
	if !g.drained() {
		return nil
	}
	g.readMu.Lock()
	defer g.readMu.Unlock()
	return g.closeErr()
}

// drained reports whether it is closed and every one of its watchers is
// closed and drained.
func (g *TopicsWatcher[K, T]) drained() bool {
	g.mu.Lock()
	held := len(g.held)
	g.mu.Unlock()
	if held > 0 || g.pumpEnding() != nil {
		return false
	}
	for _, s := range g.snapshot() {
		if s.w.closeErr() == nil || s.w.Stats().Queued > 0 {
			return false // open, or not drained
		}
	}
	return g.closed()
}

// Stats returns the counters of its watcher of each topic. A value that
// the goroutine of [TopicsWatcher.ResultChan] took counts as delivered,
// unless Stop left it to Recv.
func (g *TopicsWatcher[K, T]) Stats() map[K]WatcherStats {
	subs := g.snapshot()
	m := make(map[K]WatcherStats, len(subs))
	for _, s := range subs {
		m[s.topic] = s.w.Stats()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, h := range g.held {
		st := m[h.Topic]
		st.Queued++
		st.Delivered--
		m[h.Topic] = st
	}
	return m
}

func (t *Topics[K, T]) isStopped() bool { return t.stopped.Load() }

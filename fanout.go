package fanout

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fanout-go/fanout/internal/ring"
)

// Errors reported by broadcasters and watchers. Compare them with errors.Is.
var (
	// ErrStopped is returned by every publish and watch method once
	// [Broadcaster.Shutdown] has been called, and by a watcher's pull methods
	// once it has been drained after Shutdown. Its text is the one
	// k8s.io/apimachinery/pkg/watch uses.
	ErrStopped = errors.New("broadcaster already stopped")

	// ErrWatcherStopped is returned by a watcher's pull methods, and by
	// [Watcher.Err], once [Watcher.Stop] has been called and what was queued
	// has been read.
	ErrWatcherStopped = errors.New("fanout: watcher stopped")

	// ErrEvicted is returned by a watcher's pull methods, and by
	// [Watcher.Err], once the watcher has been closed by a
	// [FullChannelBehavior] returning [VerdictEvict] and what was queued has
	// been read.
	ErrEvicted = errors.New("fanout: watcher evicted: queue full")
)

// minRingSize keeps the shared ring from being tiny for small queue lengths,
// so that readers take batches of useful size.
const minRingSize = 64

// Broadcaster distributes every accepted value, in one total order, to every
// watcher registered before the value was accepted. See the package
// documentation for the guarantees and the cost of each path.
//
// A Broadcaster starts no goroutines. Create one with [New]; the zero value
// is not usable.
type Broadcaster[T any] struct {
	cfg     config
	ringCap int

	// act serialises Action and ActionContext callers (capacity 1). It is
	// held while a publisher waits for room, so that waiting publishers keep
	// their order, but not by ActionOrDrop, which never waits.
	act chan struct{}

	// mu guards the fields below and makes acceptance of a value, the
	// registration of a watcher and its removal one total order.
	mu        sync.Mutex
	stopped   bool
	done      chan struct{} // closed by Shutdown
	ring      *ring.Ring[T] // shared ring, allocated with the first shared watcher
	limit     uint64        // no shared watcher is full while head < limit
	shared    []*Watcher[T] // pull-API watchers reading the shared ring
	chans     []chanSlot[T] // watchers with their own channel
	nextID    uint64
	gen       uint64           // publish attempts, to tag pre-made decisions
	blocking  bool             // an Action is delivering to full channel watchers
	blocked   []blockedSend[T] // reused buffers of publish
	waitTimer *time.Timer      // reused by sendBlocked for bounded waits
	pending   []*Watcher[T]
	evicted   []*Watcher[T]
	// waitChans lists the channel watchers whose behaviour may wait: the
	// ones a strict publish checks for a full channel before delivering.
	waitChans []*Watcher[T]
	accepted  uint64
	refused   uint64

	head atomic.Uint64 // sequence number of the next value; stored under mu

	// roomWait counts publishers waiting for a shared-ring reader to make
	// room; readers signal room when it is non-zero.
	roomWait atomic.Int32
	room     chan struct{} // capacity 1

	// parkMu guards parked and Watcher.inPark: shared-ring readers waiting
	// for a value. nparked lets a publisher skip the lock when nobody waits.
	parkMu  sync.Mutex
	parked  []*Watcher[T]
	nparked atomic.Int32

	dropped atomic.Uint64
}

// chanSlot keeps a channel watcher's channel inline, so that a delivery that
// succeeds reads only this contiguous slice and the channel, not the watcher.
type chanSlot[T any] struct {
	ch chan T
	w  *Watcher[T]
}

type blockedSend[T any] struct {
	w       *Watcher[T]
	timeout time.Duration
}

// New returns a running broadcaster. The options set the defaults for its
// watchers: [WithQueueLength] (default [DefaultQueueLength]),
// [WithFullChannelBehavior] (default [WaitIfChannelFull]) and
// [WithDropHandler] (default none). Invalid values are reported by Watch.
func New[T any](opts ...Option) *Broadcaster[T] {
	cfg := defaultConfig().with(opts)
	ringCap := minRingSize
	for ringCap < min(cfg.queueLen, MaxQueueLength) {
		ringCap <<= 1
	}
	return &Broadcaster[T]{
		cfg:     cfg,
		ringCap: ringCap,
		act:     make(chan struct{}, 1),
		done:    make(chan struct{}),
		room:    make(chan struct{}, 1),
		limit:   math.MaxUint64,
	}
}

// Watch registers a watcher that receives every value accepted after Watch
// returns and none accepted before. Options override the broadcaster's
// defaults for this watcher. It returns [ErrStopped] after Shutdown, or an
// error describing an invalid option.
//
// Unlike k8s, Watch never waits for a blocked publisher.
func (b *Broadcaster[T]) Watch(opts ...Option) (*Watcher[T], error) {
	return b.watch(nil, opts)
}

// WatchWithPrefix is like [Broadcaster.Watch], but the watcher first receives
// the values of prefix, then every value accepted after registration, with no
// gap and no duplicate in between. As in k8s, the watcher's queue capacity
// becomes the larger of its queue length and len(prefix)+1. An empty prefix
// makes it the same as Watch. The prefix slice is not retained.
func (b *Broadcaster[T]) WatchWithPrefix(prefix []T, opts ...Option) (*Watcher[T], error) {
	return b.watch(prefix, opts)
}

func (b *Broadcaster[T]) watch(prefix []T, opts []Option) (*Watcher[T], error) {
	cfg := b.cfg.with(opts)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return nil, ErrStopped
	}
	b.nextID++
	w := &Watcher[T]{b: b, id: b.nextID, q: cfg.queueLen, behavior: cfg.behavior, onDrop: cfg.onDrop,
		mayWait: mayWait(cfg.behavior), end: math.MaxUint64}
	if len(prefix) == 0 && cfg.queueLen > 0 && cfg.queueLen <= b.ringCap && isWait(cfg.behavior) {
		if b.ring == nil {
			b.ring = ring.New[T](b.ringCap)
		}
		h := b.head.Load()
		w.cursor.Store(h)
		b.shared = append(b.shared, w)
		b.limit = min(b.limit, h+uint64(w.q))
		return w, nil
	}
	if len(prefix) > 0 {
		w.q = max(w.q, len(prefix)+1)
	}
	w.initChan(w.q)
	for _, v := range prefix {
		w.ch <- v // cannot block: capacity exceeds len(prefix)
	}
	b.addChan(w)
	return w, nil
}

// addChan registers a channel watcher. Caller holds b.mu.
func (b *Broadcaster[T]) addChan(w *Watcher[T]) {
	b.chans = append(b.chans, chanSlot[T]{ch: w.ch, w: w})
	if w.mayWait {
		b.waitChans = append(b.waitChans, w)
	}
}

// Action publishes v to every watcher, waiting as long as a watcher's
// [FullChannelBehavior] says to. It returns nil once v has been accepted:
// placed in every watcher's queue, or missed by a watcher as its behaviour
// decided. If Shutdown happens before v is accepted, it returns [ErrStopped]
// and v is not accepted (see "Waiting" in the package documentation for the
// watchers that may already hold it). After Shutdown it returns ErrStopped.
func (b *Broadcaster[T]) Action(v T) error {
	_, err := b.publish(context.Background(), v, false)
	return err
}

// ActionContext is [Broadcaster.Action] bounded by ctx: if ctx is done before
// v is accepted, it returns ctx.Err() and no watcher with room has received
// v. A ctx that can never end (such as context.Background()) makes it the
// same as Action.
func (b *Broadcaster[T]) ActionContext(ctx context.Context, v T) error {
	if ctx == nil {
		ctx = context.Background()
	}
	_, err := b.publish(ctx, v, false)
	return err
}

// ActionOrDrop publishes v if that needs no waiting, and never blocks on a
// consumer. It returns false, and no watcher gets v, when a watcher whose
// behaviour is to wait has a full queue, or when another publisher is waiting
// for room (ActionOrDrop never overtakes it). Watchers with lossy behaviours
// do not make it refuse: they apply their behaviour. A hand-off watcher
// (queue length 0) whose consumer is not ready at that instant misses v,
// counted as [DropFull]. After Shutdown it returns (false, [ErrStopped]).
func (b *Broadcaster[T]) ActionOrDrop(v T) (bool, error) {
	return b.publish(nil, v, true)
}

func (b *Broadcaster[T]) publish(ctx context.Context, v T, try bool) (bool, error) {
	var waitStart time.Time // when this call first had to wait, for timeouts
	if !try {
		select {
		case b.act <- struct{}{}:
		default:
			waitStart = time.Now()
			select {
			case b.act <- struct{}{}:
			case <-ctx.Done():
				return false, ctx.Err()
			case <-b.done:
				return false, ErrStopped
			}
		}
		defer func() { <-b.act }()
	}

	b.mu.Lock()
	b.gen++
	gen := b.gen
	strict := try || ctx.Done() != nil
	pending := b.pending[:0]
	seq := b.head.Load() // v's sequence number if accepted (head moves only here)
	marked := false      // some watcher's handed or skipGen refers to this call
	for {
		if b.stopped {
			b.mu.Unlock()
			return false, ErrStopped
		}
		// ActionOrDrop never overtakes a publisher that waits for room.
		if try && (b.blocking || b.roomWait.Load() > 0) {
			b.refused++
			b.mu.Unlock()
			return false, nil
		}

		// Fast path: b.limit caches min(cursor+queue length) over the shared
		// readers, so a publish reads no reader state until head reaches it;
		// refreshLimit's O(watchers) scan then runs about once per queue
		// length of values, not once per value.
		h := b.head.Load()
		if h >= b.limit {
			if try {
				if !b.refreshLimit(h) {
					b.refused++
					b.mu.Unlock()
					return false, nil
				}
			} else {
				// Announce the wait before reading cursors, so that a reader
				// that advances after our read sees roomWait and signals. It
				// stays announced until we hold the lock again, so that no
				// ActionOrDrop takes the room we were woken for.
				b.roomWait.Add(1)
				if !b.refreshLimit(h) {
					if waitStart.IsZero() {
						waitStart = time.Now()
					}
					b.mu.Unlock()
					var err error
					select {
					case <-b.room:
					case <-ctx.Done():
						err = ctx.Err()
					case <-b.done:
						err = ErrStopped
					}
					if err != nil {
						b.roomWait.Add(-1)
						return false, err
					}
					b.mu.Lock()
					b.roomWait.Add(-1)
					continue
				}
				b.roomWait.Add(-1)
			}
		}

		// Strict mode (ActionOrDrop, or a context that can end the wait):
		// no watcher with room may receive v before it is accepted, so first
		// wait for the full channel watchers that may wait. Only those are
		// looked at (b.waitChans): built-in lossy behaviours never wait.
		if strict && len(b.waitChans) > 0 {
			blocked := b.blocked[:0]
			for _, w := range b.waitChans {
				if w.handed == gen || w.skipGen == gen {
					continue
				}
				c := cap(w.ch)
				if c > 0 && len(w.ch) < c {
					continue
				}
				if c == 0 { // hand-off: a consumer may be ready right now
					if try {
						continue // decided at delivery
					}
					select {
					case w.ch <- v:
						w.handed = gen
						marked = true
						continue
					default:
					}
				}
				if w.preGen != gen {
					w.pre, w.preGen = w.decide(seq), gen
				}
				if w.pre.Verdict != VerdictWait {
					continue
				}
				if try {
					b.refused++
					b.mu.Unlock()
					return false, nil
				}
				blocked = append(blocked, blockedSend[T]{w: w, timeout: w.pre.Timeout})
			}
			if len(blocked) > 0 {
				marked = true
				if err := b.waitBlocked(ctx, v, blocked, &waitStart, gen); err != nil {
					return false, err
				}
				continue // the watchers may have changed meanwhile
			}
		}

		// Hand v to every channel watcher with room. A non-blocking send is a
		// single channel operation; the behaviour is consulted only when it
		// fails. In Action's (non-strict) mode, watchers with room get v
		// before the publisher waits for the full ones, so their consumers
		// keep working meanwhile, as with raw channels: holding v back from
		// them made Action 1.2x slower at 100 watchers and 1.4x at 1000
		// (lossless, queue 100, medians of 8 alternating runs).
		blocked := b.blocked[:0]
		pending = pending[:0]
		for i := range b.chans {
			cs := &b.chans[i]
			if marked {
				w := cs.w
				if w.handed == gen {
					continue
				}
				if w.skipGen == gen { // its bounded wait expired
					pending = append(pending, w)
					continue
				}
			}
			select {
			case cs.ch <- v:
				continue
			default:
			}
			w := cs.w
			if w.preGen != gen {
				w.pre, w.preGen = w.decide(seq), gen
			}
			if w.pre.Verdict == VerdictWait && !try {
				blocked = append(blocked, blockedSend[T]{w: w, timeout: w.pre.Timeout})
			} else {
				pending = append(pending, w)
			}
		}
		if len(blocked) == 0 {
			break
		}
		// Mark who already has v, so that the next pass skips them.
		marked = true
		for _, cs := range b.chans {
			cs.w.handed = gen
		}
		for _, w := range pending {
			w.handed = 0
		}
		for _, bs := range blocked {
			bs.w.handed = 0
		}
		if err := b.waitBlocked(ctx, v, blocked, &waitStart, gen); err != nil {
			clear(pending)
			b.pending = pending[:0]
			return false, err
		}
	}

	// Accept v. One write serves every shared reader, whatever their number:
	// with 100 readers that path moved 100-165M deliveries/s against 15-20M/s
	// for one channel send per watcher (2-core machine, queue 100, same runs),
	// which is why pull watchers that wait when full live on the ring.
	h := b.head.Load()
	if len(b.shared) > 0 {
		b.ring.Put(h, v)
	}
	b.head.Store(h + 1) // publishes the slot to readers (they load head first)
	b.accepted++

	// Apply the behaviour of the channel watchers that had no room.
	evicted := b.evicted[:0]
	for _, w := range pending {
		if w.skipGen == gen {
			w.drop(DropTimeout, seq)
			continue
		}
		select {
		case w.ch <- v: // the consumer made room meanwhile
			continue
		default:
		}
		d := w.pre
		switch d.Verdict {
		case VerdictDropOldest:
			if cap(w.ch) > 0 {
				select {
				case <-w.ch:
					w.drop(DropOldest, seq)
				default: // the consumer made room meanwhile
				}
				select {
				case w.ch <- v:
				default:
					w.drop(DropFull, seq)
				}
			} else {
				w.drop(DropFull, seq) // a hand-off has no oldest value
			}
		case VerdictEvict:
			w.drop(DropEvicted, seq)
			evicted = append(evicted, w)
		default: // VerdictDropNew, or a hand-off not ready for ActionOrDrop
			w.drop(DropFull, seq)
		}
	}
	clear(pending)
	b.pending = pending[:0]
	for i, w := range evicted {
		b.closeLocked(w, ErrEvicted)
		evicted[i] = nil
	}
	b.evicted = evicted[:0]
	b.wakeParked()
	b.mu.Unlock()
	return true, nil
}

// waitBlocked runs sendBlocked without b.mu, so that Watch, Stop, ResultChan
// and readers go on while b.blocking keeps other publishers out. Caller holds
// b.mu; on error it has been released.
func (b *Broadcaster[T]) waitBlocked(ctx context.Context, v T, blocked []blockedSend[T], waitStart *time.Time, gen uint64) error {
	if waitStart.IsZero() {
		*waitStart = time.Now()
	}
	b.blocking = true
	b.mu.Unlock()
	err := b.sendBlocked(ctx, v, blocked, *waitStart, gen)
	b.mu.Lock()
	b.blocking = false
	clear(blocked)
	b.blocked = blocked[:0]
	if err != nil {
		b.mu.Unlock()
	}
	return err
}

// sendBlocked hands v to full channel watchers that wait, before v is
// accepted. It runs without b.mu, holding b.act, while b.blocking keeps every
// other publisher out, so the value order on each channel is kept. A watcher
// whose bounded wait expires is marked to miss v; one that is stopped or
// evicted meanwhile left before v was accepted. It returns ErrStopped or
// ctx.Err() if the wait is cut short; then v is not accepted.
func (b *Broadcaster[T]) sendBlocked(ctx context.Context, v T, list []blockedSend[T], start time.Time, gen uint64) error {
	for _, bs := range list {
		w := bs.w
		w.sendMu.Lock()
		if w.chClosed {
			w.sendMu.Unlock()
			if b.isDone() {
				return ErrStopped
			}
			continue
		}
		var timeout <-chan time.Time
		if bs.timeout > 0 {
			left := bs.timeout - time.Since(start)
			if left <= 0 {
				w.skipGen = gen
				w.sendMu.Unlock()
				continue
			}
			// One timer per broadcaster, reset for each bounded wait:
			// waits are serialised by b.act, and since Go 1.23 a stopped
			// timer's channel is empty after Reset. A new timer per wait
			// cost up to 1.7 allocations per published value at N=1000
			// (benchmark harness, wait-timeout).
			if b.waitTimer == nil {
				b.waitTimer = time.NewTimer(left)
			} else {
				b.waitTimer.Reset(left)
			}
			timeout = b.waitTimer.C
		}
		var err error
		select {
		case w.ch <- v:
			w.handed = gen
		case <-w.stopCh:
			if b.isDone() { // Shutdown closes every watcher too
				err = ErrStopped
			}
		case <-b.done:
			err = ErrStopped
		case <-ctx.Done():
			err = ctx.Err()
		case <-timeout:
			w.skipGen = gen
		}
		if timeout != nil {
			b.waitTimer.Stop()
		}
		w.sendMu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

func (b *Broadcaster[T]) isDone() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// refreshLimit recomputes the shared-ring limit from the readers' cursors and
// reports whether sequence h may be published. Caller holds b.mu.
func (b *Broadcaster[T]) refreshLimit(h uint64) bool {
	limit := uint64(math.MaxUint64)
	for _, w := range b.shared {
		limit = min(limit, w.cursor.Load()+uint64(w.q))
	}
	b.limit = limit
	return h < limit
}

// signalRoom wakes a publisher waiting for a shared reader to make room.
func (b *Broadcaster[T]) signalRoom() {
	select {
	case b.room <- struct{}{}:
	default:
	}
}

// wakeParked wakes every shared-ring reader waiting for a value. Caller holds
// b.mu.
func (b *Broadcaster[T]) wakeParked() {
	if b.nparked.Load() == 0 {
		return
	}
	b.parkMu.Lock()
	for i, w := range b.parked {
		w.inPark = false
		w.signal()
		b.parked[i] = nil
	}
	b.parked = b.parked[:0]
	b.nparked.Store(0)
	b.parkMu.Unlock()
}

// closeLocked closes an open watcher for reason: it stops receiving, and what
// it had queued stays readable. Caller holds b.mu.
func (b *Broadcaster[T]) closeLocked(w *Watcher[T], reason error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	if w.mode == modeShared {
		b.shared = deleteWatcher(b.shared, w)
		h := b.head.Load()
		if w.cursor.Load() < h {
			// The ring will be reused: keep the pending values in a channel.
			b.moveToChanLocked(w, int(h-w.cursor.Load()))
		} else {
			w.end = h
		}
		if b.roomWait.Load() > 0 {
			b.signalRoom()
		}
	} else {
		if i := slices.IndexFunc(b.chans, func(s chanSlot[T]) bool { return s.w == w }); i >= 0 {
			b.chans = slices.Delete(b.chans, i, i+1)
		}
		if w.mayWait {
			b.waitChans = deleteWatcher(b.waitChans, w)
		}
	}
	w.err = reason
	if w.mode == modeChan {
		close(w.stopCh)
		w.sendMu.Lock()
		w.chClosed = true
		close(w.ch)
		w.sendMu.Unlock()
	}
	w.signal()
}

// moveToChanLocked switches a shared watcher to channel mode, moving its
// pending values into a new channel of the given capacity. Caller holds b.mu
// and w.mu.
func (b *Broadcaster[T]) moveToChanLocked(w *Watcher[T], capacity int) {
	h := min(b.head.Load(), w.end)
	c := w.cursor.Load()
	w.initChan(max(capacity, int(h-c)))
	var buf [32]T
	for c < h {
		n := b.ring.Copy(buf[:], c, h)
		for _, v := range buf[:n] {
			w.ch <- v
		}
		c += uint64(n)
	}
	w.cursor.Store(h)
	w.mode = modeChan
}

func deleteWatcher[T any](ws []*Watcher[T], w *Watcher[T]) []*Watcher[T] {
	if i := slices.Index(ws, w); i >= 0 {
		return slices.Delete(ws, i, i+1)
	}
	return ws
}

// Shutdown stops the broadcaster. It is idempotent, safe from any goroutine,
// and never waits on a consumer. It closes intake; releases publishers
// waiting for room (they return [ErrStopped]); and closes every watcher. Each
// value accepted before Shutdown stays readable from every watcher that was
// registered for it, after which the watcher's channel closes and its pull
// methods return ErrStopped. The broadcaster owns no goroutines, so there is
// nothing else to wait for. After Shutdown, Action, ActionContext, Watch and
// WatchWithPrefix return ErrStopped, ActionOrDrop returns (false,
// ErrStopped), and Stop is a no-op.
func (b *Broadcaster[T]) Shutdown() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	b.stopped = true
	close(b.done)
	chans := b.chans
	b.chans, b.waitChans = nil, nil // detached first: closing stays O(watchers)
	for _, cs := range chans {
		b.closeLocked(cs.w, ErrStopped)
	}
	// No value will be published again, so shared readers can drain the ring
	// where it is.
	h := b.head.Load()
	for _, w := range b.shared {
		w.mu.Lock()
		w.end = h
		w.err = ErrStopped
		w.signal()
		w.mu.Unlock()
	}
	b.shared = nil
	b.wakeParked()
}

// Stats is a snapshot of a broadcaster's counters.
type Stats struct {
	// Accepted counts values accepted for delivery.
	Accepted uint64
	// Refused counts ActionOrDrop calls that returned false.
	Refused uint64
	// Dropped counts values missed by watchers, all watchers and reasons
	// together, including watchers that have since been stopped.
	Dropped uint64
	// Watchers is the number of registered watchers.
	Watchers int
}

// Stats returns the broadcaster's counters.
func (b *Broadcaster[T]) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Stats{
		Accepted: b.accepted,
		Refused:  b.refused,
		Dropped:  b.dropped.Load(),
		Watchers: len(b.shared) + len(b.chans),
	}
}

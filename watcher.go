package fanout

import (
	"context"
	"iter"
	"sync"
	"sync/atomic"
)

const (
	modeShared uint8 = iota // reads the broadcaster's shared ring
	modeChan                // has its own channel
)

// Watcher receives the values of a [Broadcaster] accepted after it was
// registered, in the broadcaster's order. Read them with [Watcher.ResultChan]
// (k8s compatible) or with the pull methods [Watcher.Recv], [Watcher.Next]
// and [Watcher.All]. The styles may be mixed: once ResultChan has been
// called, the pull methods read that channel. Every method is safe for
// concurrent use.
type Watcher[T any] struct {
	// What the publisher touches for every value comes first, so that a
	// delivery reads one cache line of the watcher. Owned by the publisher
	// (b.mu, or
	// b.blocking's exclusive phase); the *Gen fields hold the publish
	// generation they refer to. ch is set before the watcher is published
	// to b.chans and never replaced.
	ch      chan T
	handed  uint64   // this watcher already has the value of this generation
	skipGen uint64   // this watcher's bounded wait for that value expired
	consec  uint64   // length of its current run of missed values
	missEnd uint64   // sequence number after its last missed value
	mayWait bool     // the behaviour may return VerdictWait
	pre     Decision // the behaviour's decision for the value of preGen
	preGen  uint64

	b        *Broadcaster[T]
	id       uint64
	q        int
	behavior FullChannelBehavior
	onDrop   func(Drop)

	// cursor is the sequence of the next shared-ring value to read. The
	// reader stores it after copying values out; the publisher reads it to
	// know how much room the reader has.
	cursor atomic.Uint64

	// mu guards mode, end, err and wake, and serialises shared-ring reads
	// with the switch to channel mode. Lock order: b.mu, then w.mu.
	mu      sync.Mutex
	mode    uint8
	end     uint64 // shared mode: no value at or past end is for this watcher
	err     error  // why the watcher closed; nil while open
	wake    chan struct{}
	waiters atomic.Int32
	inPark  bool // guarded by b.parkMu

	// Channel mode. stopCh is set with ch. sendMu is held by whoever sends
	// outside b.mu (a blocked Action) and by whoever closes ch, so a send
	// never meets a closed ch.
	stopCh   chan struct{}
	sendMu   sync.Mutex
	chClosed bool
	exposed  atomic.Bool // ResultChan has returned ch

	drops [numWatcherDropReasons]atomic.Uint64
}

func (w *Watcher[T]) initChan(capacity int) {
	w.ch = make(chan T, capacity)
	w.stopCh = make(chan struct{})
	w.mode = modeChan
}

// ID returns the watcher's identifier, unique within its broadcaster and
// used in [Drop] and [FullState].
func (w *Watcher[T]) ID() uint64 { return w.id }

// ResultChan returns the channel that carries the watcher's values, as in
// k8s.io/apimachinery/pkg/watch. It is closed after Stop, Shutdown or
// eviction, once the values queued before have been read; [Watcher.Err] then
// says why. The first call allocates the channel (of the watcher's queue
// capacity) and moves the watcher off the shared ring, so a watcher read only
// through the pull methods never pays for a channel. Later calls return the
// same channel.
func (w *Watcher[T]) ResultChan() <-chan T {
	if w.exposed.Load() {
		return w.ch
	}
	b := w.b
	b.mu.Lock()
	w.mu.Lock()
	if w.mode == modeShared {
		if w.err == nil {
			b.shared = deleteWatcher(b.shared, w)
			b.moveToChanLocked(w, w.q)
			b.addChan(w)
			if b.roomWait.Load() > 0 {
				b.signalRoom() // a publisher may wait on this watcher's ring room
			}
		} else {
			b.moveToChanLocked(w, 0)
			close(w.stopCh)
			w.chClosed = true
			close(w.ch)
		}
		w.signal()
	}
	w.exposed.Store(true)
	ch := w.ch
	w.mu.Unlock()
	b.mu.Unlock()
	return ch
}

// Stop unregisters the watcher. It is idempotent, safe from any goroutine
// (also one blocked reading this watcher), safe if nothing was ever read, and
// never waits on a consumer. A publisher waiting for this watcher's room is
// released. Values already queued stay readable; then the channel closes and
// the pull methods return [ErrWatcherStopped]. After Shutdown it is a no-op.
func (w *Watcher[T]) Stop() {
	b := w.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	b.closeLocked(w, ErrWatcherStopped)
}

// Err returns why the watcher closed: [ErrWatcherStopped], [ErrEvicted] or
// [ErrStopped]; nil while it is open.
func (w *Watcher[T]) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Recv waits until at least one value is queued, moves up to len(buf) of the
// oldest queued values into buf, and returns how many. Once the watcher is
// closed and drained it returns 0 and the reason ([Watcher.Err]); if ctx ends
// first it returns 0 and ctx.Err(). A nil ctx means no deadline.
//
// Recv is the fastest way to read: on the shared ring (the default for
// watchers that wait when full) it costs one uncontended lock per batch, not
// per value.
func (w *Watcher[T]) Recv(ctx context.Context, buf []T) (int, error) {
	if len(buf) == 0 {
		return 0, nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	b := w.b
	for {
		w.mu.Lock()
		// A publisher wakes a watcher once, however many goroutines are
		// parked on it; each one that wakes passes the wake-up on, so that
		// the others look again (and re-park, to be woken by the next value).
		if w.mode == modeChan {
			ch := w.ch
			if w.waiters.Load() > 0 {
				w.signal()
			}
			w.mu.Unlock()
			return w.recvChan(ctx, ch, buf)
		}
		c := w.cursor.Load()
		h := min(b.head.Load(), w.end)
		if c < h {
			n := b.ring.Copy(buf, c, h)
			w.cursor.Store(c + uint64(n))
			if w.waiters.Load() > 0 {
				w.signal()
			}
			w.mu.Unlock()
			if b.roomWait.Load() > 0 {
				b.signalRoom()
			}
			return n, nil
		}
		if err := w.err; err != nil {
			if w.waiters.Load() > 0 {
				w.signal()
			}
			w.mu.Unlock()
			return 0, err
		}
		if w.wake == nil {
			w.wake = make(chan struct{}, 1)
		}
		wake := w.wake
		w.waiters.Add(1)
		w.mu.Unlock()
		err := w.park(ctx, wake, c)
		w.waiters.Add(-1)
		if err != nil {
			return 0, err
		}
	}
}

// park waits until a value past cursor c may have been published, or the
// watcher changed mode or closed (both signal wake).
func (w *Watcher[T]) park(ctx context.Context, wake chan struct{}, c uint64) error {
	b := w.b
	b.parkMu.Lock()
	if !w.inPark {
		w.inPark = true
		b.parked = append(b.parked, w)
		b.nparked.Add(1)
	}
	b.parkMu.Unlock()
	// A publisher stores head before it loads nparked, and we added to
	// nparked before loading head: one of us sees the other.
	if b.head.Load() > c {
		return nil
	}
	done := ctx.Done()
	if done == nil { // no deadline: a plain receive, not a two-channel select
		<-wake
		return nil
	}
	select {
	case <-wake:
		return nil
	case <-done:
		return ctx.Err()
	}
}

func (w *Watcher[T]) recvChan(ctx context.Context, ch chan T, buf []T) (int, error) {
	n := 0
	for n < len(buf) {
		select {
		case v, ok := <-ch:
			if !ok {
				if n > 0 {
					return n, nil
				}
				return 0, w.Err()
			}
			buf[n] = v
			n++
			continue
		default:
		}
		if n > 0 {
			return n, nil
		}
		v, ok, err := recvWait(ctx, ch)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, w.Err()
		}
		buf[0] = v
		n = 1
	}
	return n, nil
}

// recvWait blocks for one value of ch or the end of ctx. Without a deadline
// it is a plain receive: two-channel selects are kept off the delivery path.
func recvWait[T any](ctx context.Context, ch chan T) (v T, ok bool, err error) {
	done := ctx.Done()
	if done == nil {
		v, ok = <-ch
		return v, ok, nil
	}
	select {
	case v, ok = <-ch:
		return v, ok, nil
	case <-done:
		return v, false, ctx.Err()
	}
}

// signal wakes one goroutine parked on this watcher, if any.
func (w *Watcher[T]) signal() {
	if w.wake != nil {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// Next waits for the oldest queued value and returns it, like [Watcher.Recv]
// with a one-element buffer.
func (w *Watcher[T]) Next(ctx context.Context) (T, error) {
	var one [1]T
	_, err := w.Recv(ctx, one[:])
	return one[0], err
}

// All returns an iterator over the watcher's values, each taken with
// [Watcher.Next]. It ends when the watcher closes and is drained, or when ctx
// ends; [Watcher.Err] or ctx.Err() tells which.
func (w *Watcher[T]) All(ctx context.Context) iter.Seq[T] {
	return func(yield func(T) bool) {
		for {
			v, err := w.Next(ctx)
			if err != nil || !yield(v) {
				return
			}
		}
	}
}

// decide consults the watcher's behaviour about the value of sequence
// number seq. Caller is the publisher.
func (w *Watcher[T]) decide(seq uint64) Decision {
	return w.behavior.OnFull(FullState{
		WatcherID:        w.id,
		QueueLength:      w.q,
		Dropped:          w.totalDrops(),
		ConsecutiveDrops: w.consecutive(seq),
	})
}

// consecutive returns how many values in a row, up to the one before seq,
// the watcher missed. A run is tracked by the sequence number of its last
// miss, so that a delivery, which ends it, writes nothing to the watcher.
func (w *Watcher[T]) consecutive(seq uint64) uint64 {
	if w.missEnd == seq && seq != 0 {
		return w.consec
	}
	return 0
}

// drop counts one missed value, of sequence number seq (a discarded oldest
// value is counted but does not extend a run: the new value was received).
// Caller is the publisher.
func (w *Watcher[T]) drop(r DropReason, seq uint64) {
	w.drops[r].Add(1)
	w.b.dropped.Add(1)
	if r != DropOldest {
		w.consec = w.consecutive(seq) + 1
		w.missEnd = seq + 1
	}
	if w.onDrop != nil {
		w.onDrop(Drop{WatcherID: w.id, Reason: r})
	}
}

func (w *Watcher[T]) totalDrops() uint64 {
	var n uint64
	for i := range w.drops {
		n += w.drops[i].Load()
	}
	return n
}

// WatcherStats is a snapshot of a watcher's queue and drop counters.
type WatcherStats struct {
	// Queued is the number of values waiting to be read.
	Queued int
	// QueueLength is the queue capacity.
	QueueLength int
	// Dropped is the number of values missed, all reasons together.
	Dropped uint64
	// DroppedFull, DroppedOldest, DroppedTimeout and DroppedEvicted count
	// the values missed per [DropReason].
	DroppedFull, DroppedOldest, DroppedTimeout, DroppedEvicted uint64
}

// Stats returns the watcher's counters. They stay readable after the watcher
// closes.
func (w *Watcher[T]) Stats() WatcherStats {
	s := WatcherStats{
		QueueLength:    w.q,
		DroppedFull:    w.drops[DropFull].Load(),
		DroppedOldest:  w.drops[DropOldest].Load(),
		DroppedTimeout: w.drops[DropTimeout].Load(),
		DroppedEvicted: w.drops[DropEvicted].Load(),
	}
	s.Dropped = s.DroppedFull + s.DroppedOldest + s.DroppedTimeout + s.DroppedEvicted
	w.mu.Lock()
	if w.mode == modeChan {
		s.Queued = len(w.ch)
	} else {
		s.Queued = int(min(w.b.head.Load(), w.end) - w.cursor.Load())
	}
	w.mu.Unlock()
	return s
}

package fanout

import (
	"errors"
	"math"
	"runtime"
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
	// Read by readers and publishers, rarely written. The padding keeps
	// each group below on cache lines of its own: a reader's loads of
	// ring and head do not take the publishers' lock word away from them.
	cfg  config
	err  error                        // an invalid option of New: returned by every call that can
	ring atomic.Pointer[ring.Ring[T]] // replaced (under mu) only when it grows
	done chan struct{}                // closed by Shutdown
	// nreaders is len(readers), for readers deciding whether to yield
	// before they park (see parkYields).
	nreaders atomicI32
	_        [64]byte

	// mu guards the fields below and makes acceptance of a value, the
	// registration of a watcher and its removal one total order. It is held
	// for O(1) work per value on the shared ring: reserving, storing and
	// advancing head. Waits, user callbacks and wake-ups happen outside it.
	mu sync.Mutex
	// fast is the head below which a publisher that finds nobody ahead
	// of it may accept values at once: min(limit, lap) when nothing else
	// stands in the way, 0 when something does (see fastBound). Every
	// unlock of mu recomputes it, so it is current whenever mu is taken.
	fast    uint64
	stopped bool
	ringOn  bool          // values are written to the ring: it has readers or a history
	limit   uint64        // no ring reader that waits, evicts or decides is full while head < limit
	blocker *Watcher[T]   // the reader that set limit, if known
	lap     uint64        // no ring slot a reader still refers to is overwritten while head < lap
	readers []*Watcher[T] // every ring reader
	// limiters are the ring readers that make the publisher wait or decide
	// per value once full (all but the lazy ones); lappers those whose queue
	// can hold values older than their queue length (all but WaitIfChannelFull
	// and EvictIfChannelFull), which refreshLap moves off the ring in time.
	limiters []*Watcher[T]
	lappers  []*Watcher[T]
	full     []*Watcher[T] // limiters decided about per value: full, not waiting
	nfull    int           // WaitIfChannelFull readers full at the last refreshLimit
	chans    []chanSlot[T] // watchers with their own channel
	// waitChans lists the channel watchers whose behaviour may wait: the
	// ones a strict publish checks for a full channel before delivering.
	waitChans []*Watcher[T]
	nextID    uint64
	gen       uint64 // publish attempts of one value, to tag decisions
	refused   uint64

	// The publish turn: held by a publisher that waits, or that calls a
	// user's OnFull, so that no other publisher overtakes it; the others
	// queue in turnQ, in order.
	turn  bool
	turnQ []chan struct{}

	// Reused by the publisher holding mu (or the turn).
	pending   []*Watcher[T]
	blocked   []blockedSend[T]
	undecided []undecided[T]

	// Written by publishers, read by every reader on every read.
	_         [64]byte
	head      atomicU64 // sequence number of the next value; stored under mu
	blockedAt atomicU64 // the sequence publishers wait to publish, plus one; 0: none
	nblocked  atomicI64 // full WaitIfChannelFull readers yet to make room for it
	_         [64]byte

	// roomWait counts publishers waiting for a ring reader to make room;
	// readers wake them all (roomWaiters, under roomMu) when it is
	// non-zero, so that they go on together instead of one after the other.
	roomWait    atomicI32
	roomMu      sync.Mutex
	roomWaiters []chan struct{}
	spareWake   []chan struct{}
	spareTimers []*time.Timer

	// parkMu guards parked and Watcher.inPark: ring readers waiting for a
	// value. nparked lets a publisher skip the lock when nobody waits.
	parkMu      sync.Mutex
	parked      []*Watcher[T]
	spareParked [][]*Watcher[T] // emptied lists of parked readers, for reuse
	nparked     atomicI32

	dropped uint64 // drops of the watchers no longer registered (under mu)
	panics  atomic.Uint64

	// holders are the WaitIfChannelFull watchers, whose progress bounds
	// Taken; taken is the last bound Taken returned (see taken.go). Both
	// under mu; holders outlive Shutdown, so that Taken follows their
	// draining.
	holders []*Watcher[T]
	taken   uint64
}

// fastBound returns the head below which a publisher may accept values
// without looking further: none while the broadcaster is stopped, a
// publisher holds the turn or waits for room, a watcher has a channel or a
// ring reader decided per value is full; else the ring limits. Caller holds
// b.mu.
func (b *Broadcaster[T]) fastBound() uint64 {
	if b.stopped || b.turn || len(b.chans) > 0 || len(b.full) > 0 || b.roomWait.Load() != 0 {
		return 0
	}
	return min(b.limit, b.lap)
}

// unlock recomputes b.fast and unlocks b.mu. Every unlock after a change of
// what fastBound reads goes through it, so that the fast paths, which read
// b.fast under b.mu, see what they would have computed themselves.
func (b *Broadcaster[T]) unlock() {
	b.fast = b.fastBound()
	b.mu.Unlock()
}

// chanSlot keeps a channel watcher's channel inline, so that a delivery that
// succeeds reads only this contiguous slice and the channel, not the watcher.
type chanSlot[T any] struct {
	ch   chan T
	w    *Watcher[T]
	sent uint64 // values sent into ch
}

type blockedSend[T any] struct {
	w       *Watcher[T]
	timeout time.Duration
}

type undecided[T any] struct {
	w   *Watcher[T]
	st  FullState
	d   Decision
	err error
}

// New returns a running broadcaster. The options set the defaults for its
// watchers, [WithQueueLength] (default [DefaultQueueLength]),
// [WithFullChannelBehavior] (default [WaitIfChannelFull]),
// [WithDropHandler] (default none) and [WithReplay] (default 0), and the
// broadcaster's [WithHistory] (default 0). An invalid option is returned by
// every method that returns an error, Action and Watch included.
func New[T any](opts ...Option) *Broadcaster[T] {
	cfg := defaultConfig().with(opts)
	cfg.historySet = false
	b := &Broadcaster[T]{
		cfg:   cfg,
		err:   cfg.validate(),
		done:  make(chan struct{}),
		limit: math.MaxUint64,
		lap:   math.MaxUint64,
		fast:  math.MaxUint64,
	}
	if b.err == nil && cfg.history > 0 {
		b.ensureRing(&Watcher[T]{})
		b.ringOn = true
	}
	return b
}

// ringSize returns the ring size a reader of queue length q and the history
// need: the history plus one, and twice the queue, so that a DropOldest
// reader that does not read settles at most once per q values. A lazy
// DropIfChannelFull reader has its oldest values copied off the ring when a
// publisher is about to overwrite them; a bigger ring for it (sixteen times
// the queue, once) made those copies rarer but let a free-running publisher
// lap its readers less often, so that they lost more and read less: at
// twice the queue they took 116 against 73 M values/s at N=100, 87 against
// 27 at N=10, 19 against 7 at N=1 (DropIfChannelFull through Recv, one
// publisher, medians of 5-7 interleaved runs of one binary), and a stalled
// reader still cost the publisher little (1.05x, harness stall group).
func (b *Broadcaster[T]) ringSize(w *Watcher[T]) int {
	return max(minRingSize, 2*w.q, b.cfg.history+1)
}

// ensureRing makes the ring big enough for the reader w. A
// bigger ring takes over the values of the old one; readers that still copy
// from the old one find them unchanged. Caller holds b.mu.
func (b *Broadcaster[T]) ensureRing(w *Watcher[T]) {
	need := b.ringSize(w)
	old := b.ring.Load()
	if old == nil {
		b.ring.Store(ring.New[T](need))
		return
	}
	if old.Cap() >= need {
		return
	}
	h := b.head.Load()
	from := h - min(h, uint64(old.Cap()))
	b.ring.Store(old.Grow(need, from, h))
}

// Watch registers a watcher that receives every value accepted after Watch
// returns and none accepted before (but the replayed ones, see
// [WithReplay]). Options override the broadcaster's defaults for this
// watcher. It returns [ErrStopped] after Shutdown, or an error describing an
// invalid option.
//
// Unlike k8s, Watch never waits for a blocked publisher.
func (b *Broadcaster[T]) Watch(opts ...Option) (*Watcher[T], error) {
	return b.watch(nil, opts)
}

// WatchWithPrefix is like [Broadcaster.Watch], but the watcher first receives
// the values of prefix, then every value accepted after registration, with no
// gap and no duplicate in between (with [WithReplay], the prefix comes
// first, then the replayed values). As in k8s, the watcher's queue capacity
// becomes the larger of its queue length and len(prefix)+1. An empty prefix
// makes it the same as Watch. The prefix slice is not retained.
func (b *Broadcaster[T]) WatchWithPrefix(prefix []T, opts ...Option) (*Watcher[T], error) {
	return b.watch(prefix, opts)
}

func (b *Broadcaster[T]) watch(prefix []T, opts []Option) (*Watcher[T], error) {
	if b.err != nil {
		return nil, b.err
	}
	cfg := b.cfg.with(opts)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.unlock()
	if b.stopped {
		return nil, ErrStopped
	}
	b.nextID++
	h := b.head.Load()
	k := min(uint64(cfg.replay), h)
	w := &Watcher[T]{b: b, id: b.nextID, q: cfg.queueLen, kind: kindOf(cfg.behavior), behavior: cfg.behavior,
		onDrop: cfg.onDrop, end: math.MaxUint64, commit: cfg.commit}
	w.lazy = w.kind.lazy() && w.onDrop == nil
	w.regSeq, w.lead = h, uint64(len(prefix))+k
	if w.kind == kindWait {
		b.holders = append(b.holders, w)
	}
	if len(prefix) > 0 || k > 0 {
		w.q = max(w.q, len(prefix)+int(k)+1)
	}
	if w.kind == kindCustom || w.kind == kindTimeout {
		w.ps = &pubState{}
	}
	if w.q == 0 {
		b.addChan(w, 0, nil)
		return w, nil
	}
	b.ensureRing(w)
	if len(prefix) > 0 {
		w.privq().PushSlice(prefix)
	}
	w.o, w.c = h-k, uint64(w.q-len(prefix))
	w.publishMarks()
	b.readers = append(b.readers, w)
	b.nreaders.Store(int32(len(b.readers)))
	if !w.lazy {
		b.limiters = append(b.limiters, w)
	}
	if w.kind != kindWait && w.kind != kindEvict {
		b.lappers = append(b.lappers, w)
	}
	b.ringOn = true
	if f := w.fullAt.Load(); f < b.limit {
		b.limit, b.blocker = f, w
	}
	b.lap = min(b.lap, w.pin.Load()+uint64(b.ring.Load().Cap()))
	return w, nil
}

// addChan makes w a channel watcher of the given capacity holding vals, and
// registers it. Caller holds b.mu (and w.mu once w is published).
func (b *Broadcaster[T]) addChan(w *Watcher[T], capacity int, vals []T) {
	cs := &chanState[T]{ch: make(chan T, capacity), stopCh: make(chan struct{}), in: uint64(len(vals))}
	for _, v := range vals {
		cs.ch <- v // cannot block: capacity >= len(vals)
	}
	w.cs, w.mode = cs, modeChan
	if w.ps == nil {
		w.ps = &pubState{}
	}
	b.chans = append(b.chans, chanSlot[T]{ch: cs.ch, w: w})
	if w.kind.mayWait() {
		b.waitChans = append(b.waitChans, w)
	}
}

// toChanLocked moves a ring watcher to channel mode: its queued values go
// into a new channel of its queue capacity (or more, if more are queued).
// Caller holds b.mu and w.mu.
func (b *Broadcaster[T]) toChanLocked(w *Watcher[T], log *dropLog) {
	h := min(b.head.Load(), w.end)
	if n, r := w.settle(h); n > 0 {
		w.count(r, n, log, nil)
	}
	vals := make([]T, w.queued(h))
	w.take(vals, h, b.ring.Load())
	if w.err == nil {
		b.removeReader(w)
		b.addChan(w, max(w.q, len(vals)), vals)
		if b.roomWait.Load() > 0 {
			b.signalRoom() // a publisher may wait on this watcher's ring room
		}
	} else {
		w.cs = &chanState[T]{ch: make(chan T, len(vals)), stopCh: make(chan struct{}), in: uint64(len(vals))}
		for _, v := range vals {
			w.cs.ch <- v
		}
		w.mode = modeChan
		w.closeChan()
	}
	w.signal()
}

// removeReader unregisters a ring reader. Caller holds b.mu.
func (b *Broadcaster[T]) removeReader(w *Watcher[T]) {
	b.readers = deleteWatcher(b.readers, w)
	b.nreaders.Store(int32(len(b.readers)))
	b.limiters = deleteWatcher(b.limiters, w)
	b.lappers = deleteWatcher(b.lappers, w)
	if b.blocker == w {
		b.blocker = nil
	}
	if w.inFull {
		b.full = deleteWatcher(b.full, w)
		w.inFull = false
	}
	if len(b.readers) == 0 && b.cfg.history == 0 {
		b.ringOn = false
	}
}

// closeLocked closes an open watcher for reason: it stops receiving, and what
// it had queued stays readable. Caller holds b.mu.
func (b *Broadcaster[T]) closeLocked(w *Watcher[T], reason error, log *dropLog) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return
	}
	w.err = reason
	defer func() { b.dropped += w.totalDrops() }() // its last drops are counted below
	if w.kind == kindWait && reason != ErrStopped {
		// It left: it holds nothing back. Shutdown's watchers still do,
		// until they have read what stays queued (see Taken).
		b.holders = deleteWatcher(b.holders, w)
	}
	if w.mode == modeChan {
		if i := slices.IndexFunc(b.chans, func(s chanSlot[T]) bool { return s.w == w }); i >= 0 {
			w.cs.in += b.chans[i].sent
			b.chans = slices.Delete(b.chans, i, i+1)
		}
		if w.kind.mayWait() {
			b.waitChans = deleteWatcher(b.waitChans, w)
		}
		w.closeChan()
		w.signal()
		return
	}
	b.removeReader(w)
	h := b.head.Load()
	if n, r := w.settle(h); n > 0 {
		w.count(r, n, log, nil)
	}
	w.evacuate(h, b.ring.Load()) // the ring will be reused
	w.end = h
	w.publishMarks()
	w.signal()
	if b.roomWait.Load() > 0 {
		b.signalRoom()
	}
}

// closeChan closes a channel watcher's channel. Caller holds w.mu.
func (w *Watcher[T]) closeChan() {
	cs := w.cs
	close(cs.stopCh)
	cs.sendMu.Lock()
	cs.chClosed = true
	close(cs.ch)
	cs.sendMu.Unlock()
}

// chanSent returns the values put in a channel watcher's channel. Caller
// holds b.mu.
func (b *Broadcaster[T]) chanSent(w *Watcher[T]) uint64 {
	n := w.cs.in
	for i := range b.chans {
		if b.chans[i].w == w {
			n += b.chans[i].sent
		}
	}
	return n
}

func deleteWatcher[T any](ws []*Watcher[T], w *Watcher[T]) []*Watcher[T] {
	if i := slices.Index(ws, w); i >= 0 {
		return slices.Delete(ws, i, i+1)
	}
	return ws
}

// signalRoom wakes every publisher waiting for a ring reader to make room.
func (b *Broadcaster[T]) signalRoom() {
	b.roomMu.Lock()
	for i, ch := range b.roomWaiters {
		select {
		case ch <- struct{}{}:
		default:
		}
		b.roomWaiters[i] = nil
	}
	b.roomWaiters = b.roomWaiters[:0]
	b.roomMu.Unlock()
}

// spareChan returns a channel of buffer one to wait on, reused (see
// waitForRoom). Caller holds b.mu.
func (b *Broadcaster[T]) spareChan() chan struct{} {
	b.roomMu.Lock()
	defer b.roomMu.Unlock()
	if n := len(b.spareWake); n > 0 {
		ch := b.spareWake[n-1]
		b.spareWake = b.spareWake[:n-1]
		return ch
	}
	return make(chan struct{}, 1)
}

// putChan keeps an empty channel from spareChan for reuse.
func (b *Broadcaster[T]) putChan(ch chan struct{}) {
	b.roomMu.Lock()
	b.spareWake = append(b.spareWake, ch)
	b.roomMu.Unlock()
}

// waitForRoom registers a room waiter's channel. Caller has counted itself
// in roomWait. The channels are kept for reuse by the broadcaster itself
// (not in a sync.Pool: a channel made in one testing/synctest bubble cannot
// be used in another), so that waiting does not allocate.
func (b *Broadcaster[T]) waitForRoom() chan struct{} {
	b.roomMu.Lock()
	var ch chan struct{}
	if n := len(b.spareWake); n > 0 {
		ch = b.spareWake[n-1]
		b.spareWake = b.spareWake[:n-1]
	} else {
		ch = make(chan struct{}, 1)
	}
	b.roomWaiters = append(b.roomWaiters, ch)
	b.roomMu.Unlock()
	return ch
}

// doneWaiting unregisters a room waiter's channel, if no reader took it
// meanwhile, and puts it back empty.
func (b *Broadcaster[T]) doneWaiting(ch chan struct{}) {
	b.roomMu.Lock()
	defer b.roomMu.Unlock()
	if i := slices.Index(b.roomWaiters, ch); i >= 0 {
		b.roomWaiters = slices.Delete(b.roomWaiters, i, i+1)
	}
	select { // readers send under roomMu: none can come after this
	case <-ch:
	default:
	}
	b.spareWake = append(b.spareWake, ch)
}

// wakeParked wakes every ring reader waiting for a value. It takes the list
// as a whole, so that publishers that accept values at the same time wake
// each reader once.
func (b *Broadcaster[T]) wakeParked() {
	b.parkMu.Lock()
	parked := b.parked
	b.parked = nil
	b.nparked.Store(0)
	for _, w := range parked {
		w.inPark = false
	}
	b.parkMu.Unlock()
	for i, w := range parked {
		w.signal() // w.wake was set before w was parked, under parkMu
		parked[i] = nil
	}
	// Reuse the storage; if readers parked meanwhile (in a list of their
	// own, see park), keep it for later.
	b.parkMu.Lock()
	switch {
	case b.parked == nil:
		b.parked = parked[:0]
	case cap(parked) > 0 && len(b.spareParked) < maxSpareParked:
		b.spareParked = append(b.spareParked, parked[:0])
	}
	b.parkMu.Unlock()
}

// takeSpareParked returns a kept empty list of parked readers, or nil.
// Caller holds b.parkMu.
func (b *Broadcaster[T]) takeSpareParked() []*Watcher[T] {
	k := len(b.spareParked)
	if k == 0 {
		return nil
	}
	l := b.spareParked[k-1]
	b.spareParked[k-1] = nil
	b.spareParked = b.spareParked[:k-1]
	return l
}

// maxSpareParked bounds the parked lists a broadcaster keeps for reuse: one
// per wake-up that can overlap with another, which concurrent publishers do.
const maxSpareParked = 4

// Shutdown stops the broadcaster. It is idempotent, safe from any goroutine,
// and never waits on a consumer. It closes intake; releases publishers
// waiting for room or for their turn (they return [ErrStopped]); and closes
// every watcher. Each value accepted before Shutdown stays readable from every
// watcher that was registered for it, after which the watcher's channel
// closes and its pull methods return ErrStopped. The broadcaster owns no
// goroutines, so there is nothing else to wait for. After Shutdown, Action,
// ActionContext, ActionBatch, Watch and WatchWithPrefix return ErrStopped,
// ActionOrDrop returns (false, ErrStopped), and Stop is a no-op.
func (b *Broadcaster[T]) Shutdown() {
	var log dropLog
	b.mu.Lock()
	if b.stopped {
		b.unlock()
		return
	}
	b.stopped = true
	close(b.done)
	b.signalRoom() // publishers waiting for room with a plain receive (see sleep)
	chans := b.chans
	b.chans, b.waitChans = nil, nil // detached first: closing stays O(watchers)
	for _, cs := range chans {
		cs.w.cs.in += cs.sent
		b.closeLocked(cs.w, ErrStopped, &log)
	}
	// No value will be published again, so ring readers can drain the
	// ring where it is.
	h := b.head.Load()
	for _, w := range b.readers {
		w.mu.Lock()
		if n, r := w.settle(h); n > 0 {
			w.count(r, n, &log, nil)
		}
		b.dropped += w.totalDrops()
		w.end, w.err, w.inFull = h, ErrStopped, false
		w.publishMarks()
		w.signal()
		w.mu.Unlock()
	}
	b.readers, b.limiters, b.lappers, b.full, b.blocker = nil, nil, nil, nil, nil
	b.nreaders.Store(0)
	b.unlock()
	b.wakeParked()
	log.report(b)
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
	// Panics counts panics recovered in the user's callbacks: OnFull (each
	// also a drop, [DropPanic]) and drop handlers.
	Panics uint64
	// Watchers is the number of registered watchers.
	Watchers int
}

// Stats returns the broadcaster's counters. It settles the drops of lazy
// ring readers (see [WithDropHandler]), so it costs O(watchers).
func (b *Broadcaster[T]) Stats() Stats {
	var log dropLog
	b.mu.Lock()
	h := b.head.Load()
	// Every accepted value took the next sequence number: head counts them.
	s := Stats{Accepted: h, Refused: b.refused, Dropped: b.dropped, Watchers: len(b.readers) + len(b.chans)}
	for _, w := range b.readers {
		if w.lazy {
			w.mu.Lock()
			if n, r := w.settle(h); n > 0 {
				w.count(r, n, &log, nil)
				w.publishMarks()
			}
			w.mu.Unlock()
		}
		s.Dropped += w.totalDrops()
	}
	for i := range b.chans {
		s.Dropped += b.chans[i].w.totalDrops()
	}
	b.unlock()
	log.report(b)
	s.Panics = b.panics.Load()
	return s
}

// dropNote is a settled drop (n values alike) to report to a drop handler.
type dropNote struct {
	f func(Drop)
	d Drop
	n uint64
}

// dropLog collects the drops settled while a lock is held, to report them
// once every lock is released: a handler may then call back into the
// broadcaster.
type dropLog struct {
	notes [4]dropNote
	k     int
	more  []dropNote
	// lapped reports that the ring lapped a reader that lost values: a
	// lossy reader falling behind. The publisher then yields its processor
	// once, after unlocking (see report).
	lapped bool
}

func (l *dropLog) add(f func(Drop), d Drop, n uint64) {
	if l.k > 0 && len(l.more) == 0 && d.Err == nil {
		if last := &l.notes[l.k-1]; last.d.WatcherID == d.WatcherID && last.d.Reason == d.Reason && last.d.Err == nil {
			last.n += n
			return
		}
	}
	if l.k < len(l.notes) {
		l.notes[l.k] = dropNote{f, d, n}
		l.k++
		return
	}
	l.more = append(l.more, dropNote{f, d, n})
}

// report calls the handlers, one call per value, containing panics.
func (l *dropLog) report(c panicCounter) {
	if l.lapped {
		// At most once per lap of the ring: a stalled reader costs a
		// publisher one yield per ring length of values, and a slow one
		// gets a turn to read before it loses more.
		runtime.Gosched()
	}
	for i := range l.k {
		l.notes[i].call(c)
	}
	for i := range l.more {
		l.more[i].call(c)
	}
	*l = dropLog{}
}

type panicCounter interface{ countPanic() }

func (b *Broadcaster[T]) countPanic() { b.panics.Add(1) }

func (n *dropNote) call(c panicCounter) {
	for range n.n {
		if safeCall(func() { n.f(n.d) }) != nil {
			c.countPanic()
		}
	}
}

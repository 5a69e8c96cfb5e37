package fanout

import (
	"errors"
	"math"
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

// errNilContext is returned by every call given a nil context.Context,
// which does nothing else.
var errNilContext = errors.New("fanout: nil context.Context: pass context.Background() for no deadline")

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
	// The fields are grouped by who writes them and under which lock;
	// DESIGN.md, section 2, is the table of owners, and section 5 the
	// invariants that hold whenever mu is free. The padding keeps each
	// group on cache lines of its own: a reader's loads of ring and head do
	// not take the publishers' lock word away from them.

	// Read by readers and publishers, rarely written.
	cfg  config
	err  error                        // an invalid option of New: returned by every call that can
	ring atomic.Pointer[ring.Ring[T]] // replaced (under mu) only when it grows
	done chan struct{}                // closed by Shutdown
	// nreaders is len(readers), for readers deciding whether to yield
	// before they park (see parkYields); nwatch the number of watchers
	// registered, ring readers and channel watchers, for a Topics. Both
	// stored under mu.
	nreaders, nwatch atomicI32
	// family, for the broadcaster of a topic, counts the ring readers of
	// every topic of its Topics: nreaders is added to it as it changes
	// (setReaders). Set before the first watcher registers; nil for a
	// broadcaster of New.
	family *atomicI32
	_      [64]byte

	// mu makes acceptance of a value, the registration of a watcher and
	// its removal one total order, and guards everything down to head.
	mu broadcasterMu
	// fast is the head below which a publisher that finds nobody ahead
	// of it may accept values at once (fastBound; DESIGN.md, I1).
	fast    uint64
	stopped bool
	ringOn  bool          // values are written to the ring: it has readers or a history
	limit   uint64        // no ring reader that waits, evicts or decides is full while head < limit (I4)
	blocker *Watcher[T]   // the reader that set limit, if known
	lap     uint64        // no ring slot a reader still refers to is overwritten while head < lap (I3, I4)
	readers []*Watcher[T] // every ring reader
	// limiters are the ring readers that make the publisher wait or decide
	// per value once full (all but the lazy ones); lappers those whose queue
	// can hold values older than their queue length (all but WaitIfChannelFull
	// and EvictIfChannelFull), which refreshLap moves off the ring in time.
	limiters []*Watcher[T]
	lappers  []*Watcher[T]
	full     []*Watcher[T] // limiters decided about per value: full, not waiting
	// toSift lists the full filtered readers with raw values to sift
	// before the value in hand (see sift.go).
	toSift []*Watcher[T]
	nfull  int           // WaitIfChannelFull readers full at the last refreshLimit
	chans  []chanSlot[T] // watchers with their own channel
	// waitChans lists the channel watchers whose behaviour may wait: the
	// ones a strict publish checks for a full channel before delivering.
	waitChans []*Watcher[T]
	// holders are the WaitIfChannelFull watchers, whose progress bounds
	// Taken; they outlive Shutdown until drained. taken is the last bound
	// Taken returned (taken.go).
	holders []*Watcher[T]
	taken   uint64
	nextID  uint64
	gen     uint64 // publish attempts of one value, to tag decisions
	refused uint64
	dropped uint64 // drops of the watchers no longer registered, at their close
	// unwatched counts the values accepted while no watcher was
	// registered, up to unwatchedFrom, the sequence number from which none
	// has been since (for Topics, whose retired topic counts them
	// unheard): registration and Stop keep them, not the publish path.
	unwatched, unwatchedFrom uint64
	// lateDropped counts the drops of closed watchers after their close
	// (see Watcher.count): a filter that panics as what stays queued is
	// drained. Stats adds it to dropped.
	lateDropped atomicU64
	// filterChans are the channel watchers with a filter: a publisher asks
	// their filters about every value (no lock held) before the channel
	// pass.
	filterChans []*Watcher[T]
	// chansAsked is the generation whose value every filter of
	// filterChans has been asked about (or is being asked, by the
	// publisher that holds the turn for it); 0 after a filter channel
	// watcher registers. It saves unfiltered a pass over filterChans.
	chansAsked uint64
	// nbounded counts the watchers whose waits can be bounded (a timeout
	// or a user's behaviour): without them, no wait needs its start time.
	nbounded int

	// The publish turn (turn.go): held by a publisher that waits with
	// values of its call accepted, calls a user's OnFull or asks filters,
	// sifts, or blocks on a channel watcher; the others queue in turnQ, in
	// order.
	turn  bool
	turnQ []chan struct{}

	// Scratch lists of the publisher holding mu (or the turn, across an
	// unlock), and the pools of wait channels, timers and first gaps
	// (pool.go).
	pending     []*Watcher[T]
	blocked     []blockedSend[T]
	undecided   []undecided[T]
	spareWake   []chan struct{}
	spareTimers []*time.Timer
	segSlab     []seg

	// Written by publishers, read by every reader on every read.
	_         [64]byte
	head      headWord  // sequence number of the next value, and the fast path's bit (head.go)
	blockedAt atomicU64 // the sequence publishers wait to publish, plus one; 0: none (I2)
	nblocked  atomicI64 // full WaitIfChannelFull readers yet to make room for it (I11)
	_         [64]byte

	// Publishers waiting for a ring reader's room (room.go): readers that
	// make room wake them all when roomWait is non-zero.
	roomWait    atomicI32
	roomMu      roomMu
	roomWaiters []chan struct{}

	// Ring readers waiting for a value (park.go). nparked lets a publisher
	// skip parkMu when nobody waits.
	parkMu      parkMu
	parked      []*Watcher[T]
	spareParked [][]*Watcher[T] // emptied lists of parked readers, for reuse
	parkTimers  []*time.Timer   // of the bounded sleeps (sleepInFlight), for reuse
	nparked     atomicI32
	// woke is set by a wake-up of parked readers and cleared by a
	// publisher that yields to them when they have no room (yieldFast).
	woke atomicI32

	panics      atomic.Uint64
	waitReports atomic.Uint64 // WithWaitReport's reports made

	// waits are the publish calls sleeping for a full watcher, for
	// Snapshot (waiting.go). Guarded by mu; last, so that the fields
	// above keep their places on their cache lines.
	waits []waitEntry

	//lint:ignore U1000 what the fanoutcheck build keeps; nothing without it
	checkState
}

// fastBound returns the head below which a publisher may accept values
// without looking further: none while the broadcaster is stopped, a
// publisher holds the turn or waits for room, the sequence publishers wait
// for is set (blockedAt: only the slow path clears it, when it accepts
// that sequence), a watcher has a channel or a ring reader decided per
// value is full; else the ring limits. Caller holds b.mu.
func (b *Broadcaster[T]) fastBound() uint64 {
	if b.fastBlocked() {
		return 0
	}
	return min(b.limit, b.lap)
}

// fastBlocked reports whether something other than the ring limits keeps
// publishers off the fast path (see fastBound). Caller holds b.mu or
// head's busy bit.
func (b *Broadcaster[T]) fastBlocked() bool {
	return b.stopped || b.turn || len(b.chans) > 0 || len(b.full) > 0 || b.roomWait.Load() != 0 || b.blockedAt.Load() != 0
}

// unlock recomputes b.fast and unlocks b.mu. Every unlock after a change of
// what fastBound reads goes through it, so that the fast paths, which read
// b.fast holding the busy bit of head (held with b.mu), see what they would
// have computed themselves.
func (b *Broadcaster[T]) unlock() {
	b.fast = b.fastBound()
	b.mu.Unlock()
}

// chanSlot keeps a channel watcher's channel inline, so that a delivery that
// succeeds reads only this contiguous slice and the channel, not the watcher.
type chanSlot[T any] struct {
	ch     chan T
	w      *Watcher[T]
	sent   uint64 // values sent into ch
	filter bool   // w has a filter: look at what it said before sending
}

// New returns a running broadcaster. The options set the defaults for its
// watchers, [WithQueueLength] (default [DefaultQueueLength]),
// [WithFullChannelBehavior] (default [WaitIfChannelFull]),
// [WithDropHandler] (default none) and [WithReplay] (default 0), and the
// broadcaster's [WithHistory] (default 0). An invalid option is returned by
// every method that returns an error, Action and Watch included.
func New[T any](opts ...Option) *Broadcaster[T] {
	cfg := defaultConfig().with(opts)
	cfg.newOnly = ""
	b := &Broadcaster[T]{
		cfg:   cfg,
		err:   cfg.validate(),
		done:  make(chan struct{}),
		limit: math.MaxUint64,
		lap:   math.MaxUint64,
		fast:  math.MaxUint64,
	}
	b.mu.head = &b.head
	b.setCheck()
	if b.err == nil {
		_, b.err = filterOf[T](cfg)
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
	// also a drop, [DropPanic]), filters, drop handlers, wait reports, and
	// a batch runner's Select and Finished ([BatchConfig]).
	Panics uint64
	// WaitReports counts the reports of publishers waiting for a full
	// watcher longer than the threshold of [WithWaitReport].
	WaitReports uint64
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
	s := Stats{Accepted: h, Refused: b.refused, Dropped: b.dropped + b.lateDropped.Load(), Watchers: len(b.readers) + len(b.chans)}
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
	s.WaitReports = b.waitReports.Load()
	return s
}

func (b *Broadcaster[T]) countPanic() { b.panics.Add(1) }

// countPanics adds n recovered panics to b's count. It writes the counter
// only if n > 0: filtered readers call it after every read, and the
// counter shares a cache line with parkMu, which the readers contend for
// (an Add of 0 cost a filtered read 1–6%).
func (b *Broadcaster[T]) countPanics(n int) {
	if n > 0 {
		b.panics.Add(uint64(n))
	}
}

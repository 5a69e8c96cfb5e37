package fanout

import (
	"sync/atomic"

	"github.com/fanout-go/fanout/internal/fifo"
)

const (
	modeRing uint8 = iota // reads the broadcaster's shared ring
	modeChan              // has its own channel
)

// Watcher receives the values of a [Broadcaster] accepted after it was
// registered, in the broadcaster's order. Read them with [Watcher.ResultChan]
// (k8s compatible) or with the pull methods [Watcher.Recv], [Watcher.Next]
// and [Watcher.All]. The styles may be mixed: once ResultChan has been
// called, the pull methods read that channel. Every method is safe for
// concurrent use.
type Watcher[T any] struct {
	// fullAt and pin are the ring reader's marks for the publisher (see
	// reader.go): stored by whoever changes the queue, under mu. They come
	// first, with what the publisher reads beside them, so that a scan of
	// the readers touches one cache line of each.
	fullAt atomicU64
	pin    atomicU64
	kind   kind
	lazy   bool  // a lossy built-in without drop handler: drops settled lazily
	keeps  bool  // has a filter (WithFilter): w.x.keep is set; never changes
	inFull bool  // listed in b.full (guarded by b.mu)
	mode   uint8 // guarded by mu
	inPark bool  // guarded by b.parkMu
	nilCtx bool  // a range over All(nil) ended: Err reports it; guarded by mu

	waiters atomicI32
	exposed atomic.Bool // ResultChan has returned cs.ch

	b  *Broadcaster[T]
	id uint64
	q  int // queue capacity
	// regSeq is head when the watcher registered, lead the number of
	// values it receives before the value of regSeq (prefix and replay).
	regSeq, lead uint64
	// x holds what only some features use (names, filters, commits,
	// topics); nil for a watcher that uses none, which keeps a watcher in
	// the 256-byte size class.
	x        *watcherExtra[T]
	behavior FullChannelBehavior
	onDrop   func(Drop)

	// Guarded by the broadcaster's mu.
	ps *pubState     // decisions and runs of misses; nil for the kinds that need none
	cs *chanState[T] // channel mode; set once, under mu too

	// mu guards what follows and serialises reads. Lock order: b.mu, then
	// w.mu.
	mu    watcherMu
	o, c  uint64
	end   uint64 // no value at or past end is for this watcher
	priv  *fifo.FIFO[T]
	segs  []seg
	taken uint64 // values handed to the consumer by the pull methods
	err   error  // why the watcher closed; nil while open
	wake  chan struct{}

	drops [numWatcherDropReasons]atomicU64
}

// watcherExtra is the part of a watcher that only some features use.
type watcherExtra[T any] struct {
	name string // WithName
	// onStop is called by the first Stop, with no lock held: a Topics
	// retires a topic whose last watcher left. Set before the watcher is
	// returned.
	onStop func()
	// evicted, if set, is set when the watcher is evicted (closeQueue):
	// a TopicsWatcher's flag, shared by its watchers. Set under mu.
	evicted *atomic.Bool
	// committed is the first sequence the consumer had not taken at its
	// last Commit (see taken.go); stored under b.mu.
	committed atomic.Uint64
	commit    bool // WithCommit: holds Taken back until Commit
	// keep is the watcher's filter (WithFilter); filtered counts what it
	// rejected. A filtered ring reader (sift.go) keeps, guarded by mu, the
	// sequence number of each value of priv in meta (rawBit set while
	// the filter has not seen it), and in reading the values its readers
	// took and are filtering, and in readingFrom the sequence number of
	// the first of each batch being filtered (for Taken: see keptFloor).
	// sift and siftMeta are the raw values a
	// publisher sifts, from siftFrom (see sift): their slice headers
	// change under b.mu and mu.
	keep     func(T) bool
	filtered atomicU64
	meta     fifo.FIFO[uint64]
	reading  uint64
	// readingFrom has an entry per read in flight, a few at most.
	readingFrom []uint64
	sift        []T
	// afterSift is the channel a ResultChan called during a sift
	// returned, which the sift moves the watcher to (chanAfterSift).
	afterSift chan T
	siftMeta  []uint64
	siftFrom  uint64
	// active counts the goroutines reading a filtered reader, guarded
	// by mu: a lossless one that a goroutine reads makes room by itself,
	// and a publisher waits for it rather than sift it (needsSift).
	// perValue is inFull, for its readers (see madeRoom).
	active   int32
	perValue atomic.Bool
}

// nameOf returns the watcher's name, "" for none.
func (w *Watcher[T]) nameOf() string {
	if w.x == nil {
		return ""
	}
	return w.x.name
}

// filteredCount returns how many values the filter rejected.
func (w *Watcher[T]) filteredCount() uint64 {
	if w.x == nil {
		return 0
	}
	return w.x.filtered.Load()
}

// keeper returns the watcher's filter, nil for none.
func (w *Watcher[T]) keeper() func(T) bool {
	if w.x == nil {
		return nil
	}
	return w.x.keep
}

// commits reports whether the watcher was registered WithCommit.
func (w *Watcher[T]) commits() bool { return w.x != nil && w.x.commit }

// pubState is what the publisher keeps about a watcher whose full queue it
// decides about per value. Guarded by the broadcaster's mu.
type pubState struct {
	pre     Decision // the behaviour's decision for the value of preGen
	preErr  error    // the panic, when pre is verdictPanic
	preGen  uint64
	keepGen uint64     // the generation of the value keepOut is about
	keepOut keepResult // what the filter said about it
	keepErr error      // its panic, when keepOut is filterPanicked
	skipGen uint64     // the watcher misses the value of this generation
	handed  uint64     // channel mode: it already has the value of this generation
	consec  uint64     // length of its current run of missed values
	missEnd uint64     // sequence number after its last missed value
}

// chanState is a channel-mode watcher's channel. ch and stopCh never change
// once set. sendMu is held by whoever sends outside the broadcaster's mu (a
// waiting Action) and by whoever closes ch, so a send never meets a closed
// ch.
type chanState[T any] struct {
	ch       chan T
	stopCh   chan struct{}
	sendMu   sendMu
	chClosed bool
	// in counts the values put in ch, but those its slot in b.chans
	// counts (guarded by the broadcaster's mu) and inBlocked.
	in uint64
	// inBlocked counts the values a blocked send (sendBlocked), which
	// runs without the broadcaster's lock, put in ch and has not yet
	// moved to in.
	inBlocked atomic.Uint64
	// delivered is the largest Delivered reported: Stats never reports
	// less (see queueStats). Guarded by the watcher's mu.
	delivered uint64
	// seqs records what went into ch, for a lossless watcher with a
	// filter (see Taken); nil for the others. Guarded by b.mu.
	seqs *seqRing
}

// ID returns the watcher's identifier, unique within its broadcaster and
// used in [Drop] and [FullState].
func (w *Watcher[T]) ID() uint64 { return w.id }

// Name returns the name given with [WithName], or "".
func (w *Watcher[T]) Name() string { return w.nameOf() }

// ResultChan returns the channel that carries the watcher's values, as in
// k8s.io/apimachinery/pkg/watch. It is closed after Stop, Shutdown or
// eviction, once the values queued before have been read; [Watcher.Err] then
// says why. The first call allocates the channel (of the watcher's queue
// capacity, or more if more values are queued) and moves the watcher and its
// queued values off the shared ring, so a watcher read only through the
// pull methods never pays for a channel. Later calls return the same
// channel.
func (w *Watcher[T]) ResultChan() <-chan T {
	if w.exposed.Load() {
		return w.cs.ch // set before exposed
	}
	b := w.b
	var log dropLog
	b.mu.Lock()
	w.mu.Lock()
	if w.mode == modeRing && w.sifting() > 0 {
		// A publisher is sifting it, asking its filter (that filter may be
		// the caller): the sift moves it to the channel as it ends.
		ch := w.chanAfterSift(b.head.Load())
		w.mu.Unlock()
		b.unlock()
		return ch
	}
	if w.mode == modeRing {
		b.toChanLocked(w, &log, nil)
	}
	ch := w.cs.ch
	w.exposed.Store(true)
	w.mu.Unlock()
	b.unlock()
	log.report(b)
	return ch
}

// Stop unregisters the watcher. It is idempotent, safe from any goroutine
// (also one blocked reading this watcher), safe if nothing was ever read, and
// never waits on a consumer. A publisher waiting for this watcher's room is
// released. Values already queued stay readable; then the channel closes and
// the pull methods return [ErrWatcherStopped]. After Shutdown it is a no-op.
//
// A watcher read through [Watcher.ResultChan] may find, as the last value
// in its channel, one that is accepted only after Stop returned: a
// publisher may hand its value to a channel watcher before the value is
// accepted ([Broadcaster.Action] to those with room before it waits for a
// full one; the other publish methods to a full one that waits, as soon as
// it has room, while they wait for another), and a channel cannot take a
// value back (see "Waiting" in the package documentation). Watchers read
// with the pull methods never receive a value accepted after Stop.
func (w *Watcher[T]) Stop() {
	b := w.b
	var log dropLog
	b.mu.Lock()
	first := !b.stopped && w.err == nil // w.err is set under b.mu and w.mu
	if first {
		b.closeLocked(w, ErrWatcherStopped, &log)
	}
	b.unlock()
	log.report(b)
	if first && w.x != nil && w.x.onStop != nil {
		w.x.onStop()
	}
}

// Err returns why the watcher closed: [ErrWatcherStopped], [ErrEvicted] or
// [ErrStopped]; nil while it is open. Once a range over [Watcher.All] with a
// nil context has ended, Err returns an error naming the nil context
// instead, whether the watcher is open or closed: that loop ends at once,
// and Err is the only way it can report the mistake.
func (w *Watcher[T]) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.nilCtx {
		return errNilContext
	}
	return w.err
}

// closeErr returns why the watcher closed; nil while it is open.
func (w *Watcher[T]) closeErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// count records n missed values for reason r and notes them for the drop
// handler. A closed watcher's drops until its close are in its
// broadcaster's total (b.dropped, added in the hold of w.mu that set
// w.err); those it makes later, a filter panicking as its queue is
// drained, go to b.lateDropped too. Caller holds w.mu or b.mu (w.err is
// set under both).
func (w *Watcher[T]) count(r DropReason, n uint64, log *dropLog, err error) {
	w.drops[r].Add(n)
	if w.err != nil {
		w.b.lateDropped.Add(n)
	}
	if w.onDrop != nil {
		log.add(w.onDrop, Drop{WatcherID: w.id, WatcherName: w.nameOf(), Reason: r, Err: err}, n)
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
	// ID and Name are the watcher's [Watcher.ID] and [Watcher.Name].
	ID   uint64
	Name string
	// Queued is the number of values waiting to be read. For a watcher
	// with a filter read through the pull methods, it includes those the
	// filter has not seen yet (see "Filters" in the package documentation).
	Queued int
	// QueueLength is the queue capacity.
	QueueLength int
	// Delivered counts the values the consumer has taken: read with the
	// pull methods or received from the channel that ResultChan returned.
	Delivered uint64
	// Filtered counts the values the watcher's filter rejected
	// ([WithFilter]): missed on purpose, not dropped.
	Filtered uint64
	// Dropped is the number of values missed, all reasons together.
	Dropped uint64
	// DroppedFull, DroppedOldest, DroppedTimeout, DroppedEvicted and
	// DroppedPanic count the values missed per [DropReason].
	DroppedFull, DroppedOldest, DroppedTimeout, DroppedEvicted, DroppedPanic uint64
}

// Stats returns the watcher's counters. They stay readable after the watcher
// closes. Drops that are settled lazily (see [WithDropHandler]) are
// counted as soon as they happen.
func (w *Watcher[T]) Stats() WatcherStats {
	var log dropLog
	s := WatcherStats{ID: w.id, Name: w.nameOf(), QueueLength: w.q}
	s.Queued, s.Delivered = w.queueStats(&log)
	log.report(w.b)
	s.Filtered = w.filteredCount()
	s.DroppedFull = w.drops[DropFull].Load()
	s.DroppedOldest = w.drops[DropOldest].Load()
	s.DroppedTimeout = w.drops[DropTimeout].Load()
	s.DroppedEvicted = w.drops[DropEvicted].Load()
	s.DroppedPanic = w.drops[DropPanic].Load()
	s.Dropped = s.DroppedFull + s.DroppedOldest + s.DroppedTimeout + s.DroppedEvicted + s.DroppedPanic
	return s
}

// queueStats returns the number of values queued and delivered, settling
// the drops of a lazy ring reader first.
func (w *Watcher[T]) queueStats(log *dropLog) (queued int, delivered uint64) {
	b := w.b
	w.mu.Lock()
	if w.mode == modeRing {
		defer w.mu.Unlock()
		h := min(b.head.Load(), w.end)
		if n, r := w.settle(h); n > 0 {
			w.count(r, n, log, nil)
			w.publishMarks()
		}
		return w.queued(h), w.taken
	}
	w.mu.Unlock()
	// A channel watcher stays one: its counts need the broadcaster's lock.
	b.mu.Lock()
	defer b.unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	queued = len(w.cs.ch)
	d := w.taken + b.chanSent(w)
	d -= min(d, uint64(queued))
	// A blocked send counts a value an instant after putting it in ch:
	// meanwhile d is one low. Delivered is a counter; it never goes down.
	w.cs.delivered = max(w.cs.delivered, d)
	return queued, w.cs.delivered
}

// backlog returns the number of values the pull methods will have handed out
// once everything queued now has been read: those handed out so far and
// those queued. A recorder's Flush waits for its runners to reach it.
func (w *Watcher[T]) backlog() uint64 {
	var log dropLog
	queued, delivered := w.queueStats(&log)
	log.report(w.b)
	return delivered + uint64(queued)
}

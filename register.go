package fanout

import (
	"math"
	"slices"

	"github.com/fanout-go/fanout/internal/guard"
)

// Watch registers a watcher that receives every value accepted after Watch
// returns and none accepted before (but the replayed ones, see
// [WithReplay]). Options override the broadcaster's defaults for this
// watcher. It returns [ErrStopped] after Shutdown, or an error describing an
// invalid option.
//
// Unlike k8s, Watch never waits for a blocked publisher.
func (b *Broadcaster[T]) Watch(opts ...Option) (*Watcher[T], error) {
	return b.watch(nil, false, opts)
}

// WatchWithPrefix is like [Broadcaster.Watch], but the watcher first receives
// the values of prefix, then every value accepted after registration, with no
// gap and no duplicate in between (with [WithReplay], the prefix comes
// first, then the replayed values). As in k8s, the watcher's queue capacity
// becomes the larger of its queue length and len(prefix)+1 (plus the values
// replayed; values a filter leaves out count too). So an empty or nil
// prefix makes it the same as Watch but at queue length 0, where, as in k8s,
// the watcher gets a queue of 1 instead of a hand-off channel. The prefix
// slice is not retained.
func (b *Broadcaster[T]) WatchWithPrefix(prefix []T, opts ...Option) (*Watcher[T], error) {
	return b.watch(prefix, true, opts)
}

// watch registers a watcher; withPrefix says it came from WatchWithPrefix,
// whose capacity rule holds even for an empty prefix.
func (b *Broadcaster[T]) watch(prefix []T, withPrefix bool, opts []Option) (*Watcher[T], error) {
	if b.err != nil {
		return nil, b.err
	}
	cfg := b.cfg.with(opts)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	keep, err := filterOf[T](cfg)
	if err != nil {
		return nil, err
	}
	npre, prefixPanics := len(prefix), []error(nil)
	if keep != nil {
		prefix, prefixPanics = filterPrefix(keep, prefix)
	}
	var log dropLog // a filter's panics on the prefix or a replay
	defer log.report(b)
	b.mu.Lock()
	defer b.unlock()
	if b.stopped {
		return nil, ErrStopped
	}
	h := b.head.Load()
	k := min(uint64(cfg.replay), h)
	w := b.newWatcher(cfg, keep, h, len(prefix), k)
	if withPrefix || k > 0 {
		// k8s's rule for a prefix, an empty one included, with the
		// values replayed. The values given, not the ones a filter
		// keeps: the queue length does not depend on what it says.
		w.q = max(w.q, npre+int(k)+1)
	}
	if w.keeper() != nil {
		b.countPrefix(w, uint64(npre-len(prefix)-len(prefixPanics)), prefixPanics, &log)
		if w.q == 0 {
			b.addFiltered(w, prefix, h-k, h, &log)
			return w, nil
		}
		w.lead = uint64(npre) + k // the values given: those left out are counted
	}
	if w.q == 0 {
		b.addChan(w, 0, nil, nil, nil)
		return w, nil
	}
	b.addReader(w, prefix, h-k)
	return w, nil
}

// watchErr returns the error Watch would return for the options that made
// cfg, nil if it would take them.
func watchErr[T any](cfg config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	_, err := filterOf[T](cfg)
	return err
}

// newWatcher makes the watcher that watch registers, with the head at h,
// kept values of its prefix left by its filter keep and k values replayed,
// and counts it where b counts watchers by kind. Caller holds b.mu.
func (b *Broadcaster[T]) newWatcher(cfg config, keep func(T) bool, h uint64, kept int, k uint64) *Watcher[T] {
	b.nextID++
	if b.nwatch.Add(1) == 1 { // every path of watch registers the watcher
		b.unwatched += h - b.unwatchedFrom
	}
	w := &Watcher[T]{b: b, id: b.nextID, q: cfg.queueLen, kind: kindOf(cfg.behavior), behavior: cfg.behavior,
		onDrop: cfg.onDrop, end: math.MaxUint64}
	if cfg.name != "" || cfg.commit || keep != nil || cfg.extra {
		w.x = &watcherExtra[T]{name: cfg.name, commit: cfg.commit, keep: keep}
		w.keeps = keep != nil
		w.x.committed.Store(h)
	}
	w.lazy = w.kind.lazy() && w.onDrop == nil && keep == nil
	w.regSeq, w.lead = h, uint64(kept)+k
	if w.kind == kindWait {
		b.holders = append(b.holders, w)
	}
	if w.kind.bounded() {
		b.nbounded++
	}
	if w.kind.bounded() || w.keeper() != nil {
		w.ps = &pubState{}
	}
	return w
}

// countPrefix counts the values of its prefix that the filter of w left
// out (filtered) or panicked on (panics, each a drop logged in log, which
// the caller reports once it has unlocked). Caller holds b.mu.
func (b *Broadcaster[T]) countPrefix(w *Watcher[T], filtered uint64, panics []error, log *dropLog) {
	w.x.filtered.Add(filtered)
	for _, err := range panics {
		w.count(DropPanic, 1, log, err)
	}
	b.countPanics(len(panics))
}

// addFiltered registers the filtered hand-off watcher w: it has a channel
// of its own, and its publisher asks the filter about each value before
// the channel pass. It starts with the kept values of prefix and of the
// accepted values from..h. (A filtered watcher with a queue is a ring
// reader, see sift.go.) Caller holds b.mu.
func (b *Broadcaster[T]) addFiltered(w *Watcher[T], prefix []T, from, h uint64, log *dropLog) {
	vals, seqs := b.filterStart(w, prefix, from, h, log)
	b.addChan(w, w.q, vals, seqs, nil)
}

// addReader registers w as a ring reader holding prefix, then the values of
// the ring from sequence from on. Caller holds b.mu.
func (b *Broadcaster[T]) addReader(w *Watcher[T], prefix []T, from uint64) {
	b.ensureRing(w)
	if len(prefix) > 0 {
		w.privq().PushSlice(prefix)
		if w.filtering() {
			w.x.meta.PushSlice(make([]uint64, len(prefix))) // kept, before any sequence
		}
	}
	w.o, w.c = from, uint64(w.q-len(prefix))
	w.publishMarks()
	b.readers = append(b.readers, w)
	b.setReaders(len(b.readers))
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
}

// addChan makes w a channel watcher of the given capacity holding vals, and
// registers it. Caller holds b.mu (and w.mu once w is published).
func (b *Broadcaster[T]) addChan(w *Watcher[T], capacity int, vals []T, seqs []uint64, ch chan T) {
	cs := w.newChan(capacity, vals, seqs, ch)
	w.cs, w.mode = cs, modeChan
	if w.ps == nil {
		w.ps = &pubState{}
	}
	b.chans = append(b.chans, chanSlot[T]{ch: cs.ch, w: w, filter: w.keeper() != nil})
	if w.kind.mayWait() {
		b.waitChans = append(b.waitChans, w)
	}
	if w.keeper() != nil {
		b.filterChans = append(b.filterChans, w)
		b.chansAsked = 0 // not asked about the value in hand (see unfiltered)
	}
}

// filterPrefix returns the values of prefix that keep keeps, before the
// watcher exists: with no lock held. A value it panics on is left out, and
// its panic returned, to be counted and reported once the watcher exists.
func filterPrefix[T any](keep func(T) bool, prefix []T) (vals []T, panics []error) {
	for _, v := range prefix {
		ok := false
		if err := guard.Call(func() { ok = keep(v) }); err != nil {
			panics = append(panics, err)
			continue
		}
		if ok {
			vals = append(vals, v)
		}
	}
	return vals, panics
}

// filterStart returns the values a new watcher with a filter starts with,
// and their sequence numbers (0 for the prefix's): prefix (filtered
// already), then the values of the ring from sequence from to h (a replay)
// that its filter keeps. Caller holds b.mu: the replay is the one place a
// filter runs with a lock held (see WithFilter). A panic of the filter is
// a drop logged in log, which the caller reports once it has unlocked.
func (b *Broadcaster[T]) filterStart(w *Watcher[T], prefix []T, from, h uint64, log *dropLog) ([]T, []uint64) {
	vals := slices.Clone(prefix)
	seqs := make([]uint64, len(prefix), len(prefix)+int(h-from))
	if from == h {
		return vals, seqs
	}
	replay := make([]T, h-from)
	b.ring.Load().Copy(replay, from, h)
	for i, v := range replay {
		switch out, err := w.filter(v); out {
		case kept:
			vals, seqs = append(vals, v), append(seqs, from+uint64(i))
		case filteredOut:
			w.x.filtered.Add(1)
		default:
			w.count(DropPanic, 1, log, err)
			b.countPanic()
		}
	}
	return vals, seqs
}

// newChan returns a channel of the given capacity for w holding vals, of
// sequence numbers seqs (needed for a lossless watcher with a filter only).
func (w *Watcher[T]) newChan(capacity int, vals []T, seqs []uint64, ch chan T) *chanState[T] {
	if ch == nil {
		ch = make(chan T, capacity)
	}
	capacity = cap(ch)
	cs := &chanState[T]{ch: ch, stopCh: make(chan struct{}), in: uint64(len(vals))}
	for _, v := range vals {
		cs.ch <- v // cannot block: capacity >= len(vals)
	}
	if w.keeper() != nil && w.kind == kindWait && capacity > 0 {
		cs.seqs = newSeqRing(capacity)
		for _, s := range seqs {
			cs.seqs.push(s)
		}
	}
	return cs
}

// toChanLocked moves a ring watcher to channel mode: its queued values go
// into ch, or if nil a new channel of its queue capacity (or more, if more
// are queued). ch, made by chanAfterSift, has room for them. Caller holds
// b.mu and w.mu.
func (b *Broadcaster[T]) toChanLocked(w *Watcher[T], log *dropLog, ch chan T) {
	h := min(b.head.Load(), w.end)
	if n, r := w.settle(h); n > 0 {
		w.count(r, n, log, nil)
	}
	var vals []T
	if w.filtering() {
		vals = b.takeFiltered(w, h, log)
	} else {
		vals = make([]T, w.queued(h))
		w.take(vals, nil, false, h, b.ring.Load())
	}
	if w.err == nil {
		b.removeReader(w)
		b.addChan(w, max(w.q, len(vals)), vals, w.keptSeqs(len(vals)), ch)
		if b.roomWait.Load() > 0 {
			b.signalRoom() // a publisher may wait on this watcher's ring room
		}
	} else {
		w.cs = w.newChan(len(vals), vals, nil, ch)
		w.mode = modeChan
		w.closeChan()
	}
	w.signal()
}

// removeReader unregisters a ring reader. Caller holds b.mu.
func (b *Broadcaster[T]) removeReader(w *Watcher[T]) {
	b.readers = deleteWatcher(b.readers, w)
	b.setReaders(len(b.readers))
	b.limiters = deleteWatcher(b.limiters, w)
	b.lappers = deleteWatcher(b.lappers, w)
	if b.blocker == w {
		b.blocker = nil
	}
	if w.inFull {
		b.full = deleteWatcher(b.full, w)
		w.setInFull(false)
	}
	if len(b.readers) == 0 && b.cfg.history == 0 {
		b.ringOn = false
	}
}

// closeLocked closes an open watcher for reason: it stops receiving, and what
// it had queued stays readable. Caller holds b.mu.
func (b *Broadcaster[T]) closeLocked(w *Watcher[T], reason error, log *dropLog) {
	w.mu.Lock()
	closed := b.closeQueue(w, reason, log)
	w.mu.Unlock()
	if closed {
		b.unlist(w, reason)
	}
}

// closeQueue closes w's queue for reason if it is open, and reports
// whether it did: from then on its readers find it closed once drained.
// It is the part of closing that its readers can see, so that an eviction
// happens in the same hold of w.mu as the look that found the queue full
// (see apply). The caller holds b.mu and w.mu, and calls unlist before it
// releases b.mu.
func (b *Broadcaster[T]) closeQueue(w *Watcher[T], reason error, log *dropLog) bool {
	if w.err != nil {
		return false
	}
	if reason == ErrEvicted && w.x != nil && w.x.evicted != nil {
		w.x.evicted.Store(true)
	}
	if w.mode == modeChan {
		w.err = reason
		b.dropped += w.totalDrops() // the drops from now on are late (see count)
		w.closeChan()
		w.signal()
		return true
	}
	h := b.head.Load()
	if n, r := w.settle(h); n > 0 {
		w.count(r, n, log, nil)
	}
	w.err = reason
	b.dropped += w.totalDrops()  // as above
	w.evacuate(h, b.ring.Load()) // the ring will be reused
	w.end = h
	w.publishMarks()
	w.signal()
	return true
}

// unlist takes w, just closed by closeQueue for reason, off the
// broadcaster's lists and counts, and wakes the publishers that may wait
// for its room. Caller holds b.mu.
func (b *Broadcaster[T]) unlist(w *Watcher[T], reason error) {
	if b.nwatch.Add(-1) == 0 {
		b.unwatchedFrom = b.head.Load()
	}
	if w.kind.bounded() {
		b.nbounded--
	}
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
		if w.keeper() != nil {
			b.filterChans = deleteWatcher(b.filterChans, w)
		}
		return
	}
	b.removeReader(w)
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
	n := w.cs.in + w.cs.inBlocked.Load()
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
	b.chans, b.waitChans, b.filterChans = nil, nil, nil // detached first: closing stays O(watchers)
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
		b.dropped += w.totalDrops() // in the hold that closes it (see count)
		w.end, w.err = h, ErrStopped
		w.setInFull(false)
		w.publishMarks()
		w.signal()
		w.mu.Unlock()
	}
	b.readers, b.limiters, b.lappers, b.full, b.blocker = nil, nil, nil, nil, nil
	b.setReaders(0)
	if b.nwatch.Load() > 0 {
		b.unwatchedFrom = h
	}
	b.nwatch.Store(0) // the channel watchers counted themselves out above
	b.unlock()
	b.wakeParked()
	log.report(b)
}

func (b *Broadcaster[T]) isDone() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// setReaders stores n, the number of ring readers, in nreaders, and adds
// the change to the family's count if b is a topic's. Caller holds b.mu.
func (b *Broadcaster[T]) setReaders(n int) {
	d := int32(n) - b.nreaders.Load()
	b.nreaders.Store(int32(n))
	if b.family != nil && d != 0 {
		b.family.Add(d)
	}
}

package fanout

import (
	"context"
	"errors"
	"slices"

	"github.com/fanout-go/fanout/internal/guard"
	"github.com/fanout-go/fanout/internal/ring"
)

// This file holds the filtered ring reader: a watcher registered WithFilter
// with a queue, read through the pull methods (DESIGN.md, §7). It reads the
// shared ring like any reader, and its filter runs where no lock is held:
//
//   - the reader takes raw values off its queue under w.mu, as any reader,
//     and asks the filter about them once it has released the lock
//     (tryRecvKept);
//   - a publisher that finds it full first sifts it (sift): it takes the
//     raw values off the queue holding the publish turn, asks the filter
//     with no lock held, and puts the kept ones back in priv. Only if the
//     kept values alone fill the queue is the watcher full, and then the
//     publisher asks the filter about the value in hand before it waits for
//     or drops anything (undecided, apply).
//
// So the filter is asked once about each value, by whoever takes it off
// the ring, and a publisher waits for such a watcher only for a value it
// keeps, when it holds a queue's worth of kept values. priv can hold raw
// values too (those a closing moved off the ring): meta says which.

// rawBit marks a meta entry whose value the filter has not seen.
const rawBit = 1 << 63

// siftChunk bounds the values a reader filters per lock hold.
const siftChunk = 256

// filtering reports whether w is a filtered ring reader's state: a filter
// and a queue of its own on the ring.
func (w *Watcher[T]) filtering() bool { return w.keeps }

// sifting returns the number of values a publisher is sifting for w.
func (w *Watcher[T]) sifting() int {
	if w.x == nil {
		return 0
	}
	return len(w.x.sift)
}

// keepRaw filters vals in place, where the first len(meta) values have
// their meta (the filter has seen those not marked raw) and the rest are
// raw, and returns the values kept at the front, their number, and the
// rejected and panicking ones; the kept values' meta, unmarked, moves with
// them. Called with no lock held. A panic costs that value only. vals past
// the kept ones are left as they are: a caller that keeps the slice clears
// them (a reader's buf is the caller's, and clearing it cost a filtered
// read up to 5%).
func (w *Watcher[T]) keepRaw(vals []T, meta []uint64) (n int, rejected uint64, panics []error) {
	var k keepRun[T]
	k.keep = w.x.keep
	for k.i < len(vals) {
		err := guard.Call(func() { k.run(vals, meta) })
		if err != nil {
			panics = append(panics, err)
			k.i++
			k.skipped++
		}
	}
	return k.n, uint64(k.i - k.n - k.skipped), panics
}

// keepRun is the state of keepRaw's loop: its position i, the values kept
// n, and the panicking ones skipped; every value before i is one of
// the three or rejected.
type keepRun[T any] struct {
	keep          func(T) bool
	i, n, skipped int
}

// run asks k.keep about vals from k.i on, moving the kept ones (and their
// meta, for the first len(meta)) to the front. It works on locals and
// stores its position before each call of the filter, so that a panic
// (recovered by keepRaw) leaves k exact: a store per value rather than
// the loop's state read and written through the closure.
func (k *keepRun[T]) run(vals []T, meta []uint64) {
	keep, i, n := k.keep, k.i, k.n
	for ; i < len(meta); i++ {
		k.i = i
		if meta[i]&rawBit == 0 || keep(vals[i]) {
			vals[n], meta[n] = vals[i], meta[i]&^rawBit
			n++
			k.n = n
		}
	}
	for ; i < len(vals); i++ {
		k.i = i
		if keep(vals[i]) {
			vals[n] = vals[i]
			n++
			k.n = n
		}
	}
	k.i = i
}

// rawRead is what a filtered reader's own read (tryRecvKept) learns from
// take: the meta of the values taken from priv, which come first; the
// others are raw. priv is rarely read (it holds values only after a sift
// or a close), so a read takes at most privChunk of its values at a time:
// the reader declares a rawRead per Recv, and zeroing siftChunk entries
// was 3% of a filtered read's time.
type rawRead struct {
	meta     [privChunk]uint64
	fromPriv int
	from     uint64 // the sequence number of the first value taken (takeFor)
	// in reports that the read counts in w.x.active (see recvFiltered).
	in bool
	// taken is the number of values the read took and has not counted
	// yet (counted): not 0 only while the filter is asked about them, or
	// if it ended the goroutine (see leaveRead).
	taken uint64
}

// privChunk bounds the values of priv a filtered reader's read takes.
const privChunk = 32

// takeFor is take for tryRecv: rr, if not nil, receives the meta of the
// values taken from priv and their number. Caller holds w.mu.
func (w *Watcher[T]) takeFor(rr *rawRead, buf []T, h uint64, rg *ring.Ring[T]) int {
	if rr == nil {
		n, _ := w.take(buf, nil, false, h, rg)
		return n
	}
	rr.from = w.firstQueued()
	n, fromPriv := w.take(buf, rr.meta[:], false, h, rg)
	rr.fromPriv = fromPriv
	return n
}

// tryRecvKept is tryRecv for a filtered ring reader, the read rr: it takes
// at most siftChunk values off the queue (and no more than buf holds),
// filters them with no lock held, and counts them in a second hold of w.mu,
// until the filter keeps one or nothing is left. So it may return fewer
// values than are queued: filling buf could take many small rounds, two
// locks each. The hold that counts kept values also counts rr out of
// w.x.active.
func (w *Watcher[T]) tryRecvKept(ctx context.Context, buf []T, rr *rawRead) (int, chan struct{}, uint64, error) {
	for {
		part := buf[:min(len(buf), siftChunk)]
		n, wake, h, err := w.tryRecv(ctx, part, rr, true)
		if err == errToChan { // ResultChan was called meanwhile
			return w.tryRecv(ctx, buf, nil, true)
		}
		if n == 0 {
			return 0, wake, h, err
		}
		rr.taken = uint64(n)
		k, rejected, panics := w.keepRaw(part[:n], rr.meta[:rr.fromPriv])
		w.counted(rr, uint64(n), uint64(k), rejected, panics)
		if k > 0 {
			return k, nil, h, nil
		}
	}
}

// errToChan tells tryRecvKept that the watcher was moved to a channel
// while it read: the publishers filter for it from then on.
var errToChan = errors.New("fanout: moved to a channel")

// recvFiltered is Recv for a watcher with a filter: the goroutine counts
// as reading it (w.x.active, see needsSift) from its first hold of w.mu to
// its last, parked included. A read that returns values counts itself out
// in the hold that counts them (counted), any other in leaveRead: no
// atomic of its own on the way.
func (w *Watcher[T]) recvFiltered(ctx context.Context, buf []T) (int, error) {
	var rr rawRead
	defer w.leaveRead(&rr) // deferred: a filter may end the goroutine (Goexit)
	return w.recv(ctx, buf, &rr)
}

// enterRead counts the read rr in w.x.active, once. Caller holds w.mu.
func (w *Watcher[T]) enterRead(rr *rawRead) {
	if !rr.in {
		w.x.active++
		rr.in = true
	}
}

// exitRead counts the read rr out of w.x.active. Caller holds w.mu; one
// ending Recv passed hookReadLeaving before it locked.
func (w *Watcher[T]) exitRead(rr *rawRead) {
	if rr.in {
		w.x.active--
		rr.in = false
	}
}

// leaveRead ends the read rr of a filtered reader, counting it out of
// w.x.active if it has not been. Publishers may wait for it because it was
// being read (see needsSift): if it leaves without having made room for
// the sequence they wait for, they are to look again, and may sift it. A
// lossless one was counted among the full readers they wait for (nblocked,
// I11) and counts itself out of them, as one that made room does
// (madeRoom): whichever of the reader and the publisher counts last sees
// the count at 0 or below, and the reader then wakes the publisher, which
// registered before it counted, or the publisher does not sleep. A reader
// that was not counted (it began reading after the publisher counted)
// wakes the publisher early, which counts again.
func (w *Watcher[T]) leaveRead(rr *rawRead) {
	var lost *dropLog
	if rr.in {
		lost = w.exitLeaving(rr)
	}
	w.wakeAfterRead()
	if lost != nil {
		// Last: the drop handler runs on a goroutine that is unwinding;
		// it may end it too, or publish and wait for this reader's room.
		lost.report(w.b)
	}
}

// exitLeaving counts the read rr out of w.x.active as it leaves, and, if
// it took values it did not count (rr.taken: its filter ended the
// goroutine, runtime.Goexit, while it was asked about them, and the
// deferred leaveRead runs as it unwinds), counts them as dropped
// (DropPanic) in the same hold: without it they would stay counted as
// being filtered, and Taken below them for ever. It returns those drops,
// for leaveRead to report once the read is counted out. A read counts in
// before it takes anything, and out only with the values it counts, so a
// read with values taken is counted in.
func (w *Watcher[T]) exitLeaving(rr *rawRead) *dropLog {
	var lost *dropLog
	hook(hookReadLeaving)
	w.mu.Lock()
	if n := rr.taken; n > 0 {
		lost = new(dropLog)
		w.doneReading(rr, n)
		w.count(DropPanic, n, lost, errFilterExited)
	}
	w.exitRead(rr)
	w.mu.Unlock()
	return lost
}

// wakeAfterRead is leaveRead's wake-up (W10), the read counted out.
func (w *Watcher[T]) wakeAfterRead() {
	b := w.b
	bs := b.blockedAt.Load()
	if bs == 0 || w.fullAt.Load() >= bs {
		return
	}
	if w.kind == kindWait {
		if b.nblocked.Add(-1) <= 0 {
			b.signalRoom()
		}
		return
	}
	if b.roomWait.Load() > 0 {
		b.signalRoom()
	}
}

// errFilterExited is the error of the drops of a read whose filter ended
// its goroutine.
var errFilterExited = errors.New("fanout: the filter ended its goroutine (runtime.Goexit)")

// setInFull records whether w is listed in b.full; a filtered reader's
// reads look at it (see madeRoom). Caller holds b.mu.
func (w *Watcher[T]) setInFull(in bool) {
	w.inFull = in
	if w.keeps {
		w.x.perValue.Store(in)
	}
}

// firstQueued returns the sequence number of the first value queued for
// the ring reader w, the first that take would take: priv's, else the
// first closed range's, else the window's. Caller holds w.mu.
func (w *Watcher[T]) firstQueued() uint64 {
	if w.x != nil {
		if m, ok := w.x.meta.Front(); ok {
			return m &^ rawBit
		}
	}
	if len(w.segs) > 0 {
		return w.segs[0].a
	}
	return w.o
}

// startReading counts the n values, from rr.from on, that a filtered
// reader's read took into rr and is about to filter: until counted, Taken
// stays below them (see keptFloor). Caller holds w.mu.
func (w *Watcher[T]) startReading(rr *rawRead, n uint64) {
	w.x.reading += n
	w.x.readingFrom = append(w.x.readingFrom, rr.from)
}

// counted moves n values taken off the queue by the read rr (tryRecvKept),
// from its filtering count to what became of them, each panic of the
// filter a drop; if the filter kept any, the read is over and counts itself
// out of w.x.active. A drop log is made only for panics: zeroing one per
// read cost a filtered read 5%.
func (w *Watcher[T]) counted(rr *rawRead, n, kept, rejected uint64, panics []error) {
	if kept > 0 {
		hook(hookReadLeaving)
	}
	var log *dropLog
	w.mu.Lock()
	w.doneReading(rr, n)
	w.taken += kept
	w.x.filtered.Add(rejected)
	if kept > 0 {
		w.exitRead(rr)
	}
	if len(panics) > 0 {
		log = new(dropLog)
		for _, err := range panics {
			w.count(DropPanic, 1, log, err)
		}
	}
	w.mu.Unlock()
	if log != nil {
		w.b.countPanics(len(panics))
		log.report(w.b)
	}
}

// doneReading ends the filtering count of the n values, from the sequence
// number rr.from on, that the read rr took (see startReading). Caller holds
// w.mu.
func (w *Watcher[T]) doneReading(rr *rawRead, n uint64) {
	rr.taken = 0
	w.x.reading -= n
	from, rf := rr.from, w.x.readingFrom
	if len(rf) == 1 && rf[0] == from { // one read in flight: the common case
		w.x.readingFrom = rf[:0]
		return
	}
	if i := slices.Index(rf, from); i >= 0 {
		w.x.readingFrom = slices.Delete(rf, i, i+1)
	}
}

// unload takes the raw values of a full filtered reader off its queue,
// with the ring rg at head h, into w.x.sift, for a publisher to sift. The
// window's room stays: fullAt does not move. Caller holds b.mu and w.mu.
func (w *Watcher[T]) unload(h uint64, rg *ring.Ring[T]) {
	x := w.x
	for _, s := range w.segs {
		x.sift, x.siftMeta = appendRaw(x.sift, x.siftMeta, rg, s.a, s.b)
	}
	w.segs = w.segs[:0]
	if end := w.windowEnd(h); w.o < end {
		x.sift, x.siftMeta = appendRaw(x.sift, x.siftMeta, rg, w.o, end)
		w.c -= end - w.o
		w.o = end
	}
	if len(x.siftMeta) > 0 {
		x.siftFrom = x.siftMeta[0] &^ rawBit
	}
	w.publishMarks()
}

// appendRaw appends the ring values of sequences [a, b) to vals, and their
// sequence numbers, marked raw, to meta.
func appendRaw[T any](vals []T, meta []uint64, rg *ring.Ring[T], a, b uint64) ([]T, []uint64) {
	n := len(vals)
	vals = append(vals, make([]T, b-a)...)
	rg.Copy(vals[n:], a, b)
	for s := a; s < b; s++ {
		meta = append(meta, s|rawBit)
	}
	return vals, meta
}

// needsSift reports whether a publisher is to sift the full filtered reader
// w, with the head at h: it holds raw values on the ring and, if it is
// lossless, no goroutine is reading it (one that is makes room by itself:
// the publisher waits for it as for any reader, rather than take over its
// work). A lossy one is always sifted, so that no value it would reject is
// dropped. Caller holds b.mu, not w.mu.
func (w *Watcher[T]) needsSift(h uint64) bool {
	if !w.filtering() || w.mode != modeRing || w.sifting() > 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.kind == kindWait && w.x.active > 0 {
		return false
	}
	return w.rawQueued(h)
}

// hasRaw reports whether the filtered reader w holds values on the ring,
// with the head at h, that its filter has not seen. Caller holds b.mu, not
// w.mu.
func (w *Watcher[T]) hasRaw(h uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rawQueued(h)
}

// rawQueued is hasRaw. Caller holds w.mu.
func (w *Watcher[T]) rawQueued(h uint64) bool {
	return len(w.segs) > 0 || w.windowEnd(h) > w.o
}

// sift filters the raw values of the full filtered readers listed in
// b.toSift: it takes them off their queues, asks the filters holding the
// publish turn but no lock (so that nothing is accepted meanwhile, and a
// filter may call the broadcaster), and puts the kept ones back. It holds
// b.mu on entry and return.
func (p *pub[T]) sift() {
	b := p.b
	p.takeTurn()
	ws := b.toSift
	b.toSift = nil
	hook(hookSiftListed)
	h, rg := b.head.Load(), b.ring.Load()
	// A reader (of a lossy one, which is sifted while it is read) may
	// have taken its raw values since it was listed: with nothing
	// unloaded, sifting would say 0 while the sift went on, and
	// ResultChan would move it to a channel under the sift, which reads
	// its sift fields with no lock held. Such a watcher is left out.
	kept := ws[:0]
	for _, w := range ws {
		w.mu.Lock()
		w.unload(h, rg)
		w.mu.Unlock()
		if w.sifting() > 0 {
			kept = append(kept, w)
		}
	}
	clear(ws[len(kept):])
	ws = kept
	if len(ws) == 0 {
		return // the caller looks again, holding b.mu
	}
	b.unlock()
	p.announce()
	hook(hookSifting)
	results := make([]siftResult, len(ws))
	for i, w := range ws {
		results[i] = w.siftValues()
	}
	b.mu.Lock()
	for i, w := range ws {
		if w.reload(results[i], &p.log) && b.roomWait.Load() > 0 {
			p.rewake = true
		}
	}
}

// siftResult is what the filter said about the values being sifted.
type siftResult struct {
	kept     int
	rejected uint64
	panics   []error
}

// siftValues asks the filter about the values in w.x.sift, keeping those
// it keeps at the front, with their sequence numbers in w.x.siftMeta.
// Called with no lock held: only the sifting publisher touches them (the
// others read len(w.x.sift) and siftFrom only, which do not change).
func (w *Watcher[T]) siftValues() siftResult {
	var r siftResult
	r.kept, r.rejected, r.panics = w.keepRaw(w.x.sift, w.x.siftMeta)
	return r
}

// reload puts the kept values of a sift at the end of priv, makes room for
// the others, and wakes the reader; if ResultChan was called meanwhile, it
// then moves w to that channel. It reports whether the reader then has
// room. Caller holds b.mu.
func (w *Watcher[T]) reload(r siftResult, log *dropLog) bool {
	x := w.x
	w.mu.Lock()
	defer w.mu.Unlock()
	w.privq().PushSlice(x.sift[:r.kept])
	x.meta.PushSlice(x.siftMeta[:r.kept])
	x.filtered.Add(r.rejected)
	for _, err := range r.panics {
		w.count(DropPanic, 1, log, err)
	}
	w.b.countPanics(len(r.panics))
	w.c += uint64(len(x.sift) - r.kept) // room for the values left out
	clear(x.sift)
	x.sift, x.siftMeta = x.sift[:0], x.siftMeta[:0]
	w.publishMarks()
	w.signal()
	if ch := x.afterSift; ch != nil {
		x.afterSift = nil
		w.b.toChanLocked(w, log, ch) // sifting no more: the queue is whole
		w.exposed.Store(true)
		return true
	}
	return w.fullAt.Load() > w.b.head.Load()
}

// storeKept queues the value v of s, which the filter of the full reader w
// kept when the publisher asked (see apply), in priv: the window starts at
// s, with room. Caller holds b.mu and w.mu.
func (w *Watcher[T]) storeKept(v T, s uint64) {
	w.privq().Push(v)
	w.x.meta.Push(s)
	w.o, w.c = s+1, w.c-1
	w.publishMarks()
}

// passOver moves the window of w, which starts at s, past the value of s,
// which its filter rejected (or panicked on). Caller holds b.mu and w.mu.
func (w *Watcher[T]) passOver(s uint64) {
	w.o = s + 1
	w.publishMarks()
}

// filteredFull reports whether the publisher asked the filter of w, a full
// filtered reader, about the value of generation gen.
func (w *Watcher[T]) filteredFull(gen uint64) bool {
	return w.mode == modeRing && w.filtering() && w.ps.keepGen == gen
}

// chanAfterSift returns the channel of the first ResultChan called while a
// publisher sifts w, with the head at h: made once, with room for every
// value queued and being sifted, for reload to move w to as the sift ends.
// ResultChan cannot move w itself, as a sift holds values off its queue,
// nor wait for the sift: its caller may be the filter the sift asks.
// Caller holds b.mu and w.mu.
func (w *Watcher[T]) chanAfterSift(h uint64) chan T {
	x := w.x
	if x.afterSift == nil {
		x.afterSift = make(chan T, max(w.q, w.queued(h)+len(x.sift)))
	}
	return x.afterSift
}

// takeFiltered takes every value queued for the filtered reader w, with
// the head at h, for its move to a channel: the raw ones go through the
// filter there, holding the locks (see WithFilter). The sequence numbers
// of the values kept are left in w.x.siftMeta for keptSeqs. Caller holds
// b.mu and w.mu, and no publisher sifts w (see chanAfterSift).
func (b *Broadcaster[T]) takeFiltered(w *Watcher[T], h uint64, log *dropLog) []T {
	n := w.queued(h)
	vals, meta := make([]T, n), make([]uint64, n)
	n, _ = w.take(vals, meta, true, h, b.ring.Load())
	k, rejected, panics := w.keepRaw(vals[:n], meta[:n])
	clear(vals[k:n])
	w.x.filtered.Add(rejected)
	for _, err := range panics {
		w.count(DropPanic, 1, log, err)
	}
	b.countPanics(len(panics))
	w.x.siftMeta = meta[:k]
	return vals[:k]
}

// keptSeqs returns the sequence numbers of the n values takeFiltered
// kept, for a channel watcher's Taken, and forgets them; nil for a watcher
// without a filter.
func (w *Watcher[T]) keptSeqs(n int) []uint64 {
	if !w.filtering() {
		return nil
	}
	seqs := w.x.siftMeta[:n]
	w.x.siftMeta = nil
	return seqs
}

// applyFiltered applies what the filter of the full reader w said about
// the value v of s: it passes over a rejected value, counted as filtered
// (or, if the filter panicked, as a drop), and queues a kept one in priv
// if w has room now. It reports whether that settled v for w; if not, w's
// behaviour decides. Caller holds b.mu and w.mu.
func (p *pub[T]) applyFiltered(w *Watcher[T], v T, s uint64) bool {
	switch w.ps.keepOut {
	case filteredOut:
		w.x.filtered.Add(1)
		w.notReceived(s)
		w.passOver(s)
		return true
	case filterPanicked:
		w.count(DropPanic, 1, &p.log, w.ps.keepErr)
		w.missed(s)
		w.passOver(s)
		return true
	}
	if w.o+w.c > s {
		w.storeKept(v, s)
		return true
	}
	return false
}

// keptFloor lowers f, a filtered reader's progress, to the sequence number
// of the oldest value of priv, of a sift, or of a read that is filtering
// what it took (see progress): a value is taken once Recv returned it, or
// the filter rejected it. Caller holds b.mu, not w.mu.
func (w *Watcher[T]) keptFloor(f uint64) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.x.readingFrom {
		f = min(f, s)
	}
	if m, ok := w.x.meta.Front(); ok {
		f = min(f, m&^rawBit)
	}
	if w.sifting() > 0 {
		f = min(f, w.x.siftFrom)
	}
	return f
}

package fanout

import (
	"github.com/fanout-go/fanout/internal/ring"

	"github.com/fanout-go/fanout/internal/fifo"
)

// This file holds a watcher's state on the broadcaster's shared ring: every
// watcher with a queue read through the pull methods lives there, whatever
// its behaviour. All methods here are called with w.mu held.
//
// A watcher's queue is, oldest first:
//
//   - priv: values it holds itself (a prefix, or values moved out of the
//     ring before the publisher overwrote them);
//   - segs: closed ranges of ring sequences that were accepted for it;
//   - the window: the ring values from sequence o on, of which the first c
//     are for it (those below the broadcaster's head are there already, the
//     rest are room). A DropOldest watcher's window is every value from o
//     on, trimmed to the newest q values by settle.
//
// fullAt = o+c is the first sequence that finds the queue full: the
// publisher waits for it (WaitIfChannelFull) or applies the behaviour there
// (evict, timeouts, a user's behaviour). pin is the oldest ring sequence the
// queue still refers to: the publisher never overwrites it (it moves the
// values to priv first, see evacuate), so a reader copies from the ring
// without racing it. The two lossy built-ins, DropIfChannelFull and
// DropOldestIfChannelFull, cost the publisher nothing per value when the
// watcher has no drop handler (w.lazy): their drops are worked out from the
// sequences by settle, when the watcher is read, its statistics are taken, or
// its values are about to be overwritten. With a drop handler they are
// decided per value like the others, so that each drop is reported before
// the publish that made it returns.

// privq returns the private queue, made on first use.
func (w *Watcher[T]) privq() *fifo.FIFO[T] {
	if w.priv == nil {
		w.priv = new(fifo.FIFO[T])
	}
	return w.priv
}

// seg is a range [a, b) of ring sequences accepted for a watcher.
type seg struct{ a, b uint64 }

// lazyOldest reports whether the window is a lazy DropOldest one: every
// value from o on, trimmed by settle.
func (w *Watcher[T]) lazyOldest() bool { return w.lazy && w.kind == kindDropOldest }

// windowEnd returns the end of the window's values below head h. The
// window may start past h: a publisher that made the watcher miss the value
// of h moves it on before it stores h+1.
func (w *Watcher[T]) windowEnd(h uint64) uint64 {
	if w.lazyOldest() {
		return max(w.o, h)
	}
	return max(w.o, min(h, w.o+w.c))
}

// queued returns the number of values queued, with the ring at head h,
// after settle(h).
func (w *Watcher[T]) queued(h uint64) int {
	n := w.priv.Len() + int(w.windowEnd(h)-w.o) + w.sifting()
	for _, s := range w.segs {
		n += int(s.b - s.a)
	}
	return n
}

// settle works out the drops of a lazy watcher up to head h: a DropIfChannelFull
// window that filled up has missed everything after it, and a
// DropOldestIfChannelFull queue keeps only its newest q values. It returns
// the number of values missed and why.
func (w *Watcher[T]) settle(h uint64) (uint64, DropReason) {
	if !w.lazy {
		return 0, DropFull
	}
	switch w.kind {
	case kindDropNew:
		full := w.o + w.c
		if h <= full {
			return 0, DropFull
		}
		if w.c > 0 {
			w.segs = append(w.segs, seg{w.o, full})
		}
		w.o, w.c = h, 0
		return h - full, DropFull
	case kindDropOldest:
		n := w.queued(h) - w.q
		if n <= 0 {
			return 0, DropOldest
		}
		gone := w.priv.Drop(n)
		w.o += uint64(n - gone)
		return uint64(n), DropOldest
	}
	return 0, DropFull
}

// take moves up to len(buf) of the oldest queued values into buf, with the
// ring rg at head h, and returns how many it moved and how many of them
// came from priv. Values read from priv or segs make room at the end of the
// window; values read from the window move it on. meta, nil but for a
// filtered reader, receives the meta of each value taken from priv (at
// most len(meta) of them: while priv holds more, nothing is taken from the
// ring); those taken from the ring are raw, and meta receives their
// sequence numbers, marked raw, only if ringSeqs (a filtered reader's own
// reads need only know that they are raw).
func (w *Watcher[T]) take(buf []T, meta []uint64, ringSeqs bool, h uint64, rg *ring.Ring[T]) (n, fromPriv int) {
	if meta == nil {
		n = w.priv.Pop(buf)
	} else {
		n = w.priv.Pop(buf[:min(len(buf), len(meta))])
		w.x.meta.Pop(meta[:n])
		if w.priv.Len() > 0 {
			buf = buf[:n] // the ring's values come after priv's
		}
	}
	fromPriv = n
	if !ringSeqs {
		meta = nil
	}
	for n < len(buf) && len(w.segs) > 0 {
		s := &w.segs[0]
		k := rg.Copy(buf[n:], s.a, s.b)
		markRaw(meta, n, k, s.a)
		s.a += uint64(k)
		n += k
		if s.a == s.b {
			w.popSeg()
		}
	}
	if !w.lazyOldest() {
		w.c += uint64(n) // settle left h <= o+c, so this adds only room
	}
	if n < len(buf) {
		k := rg.Copy(buf[n:], w.o, w.windowEnd(h))
		markRaw(meta, n, k, w.o)
		w.o += uint64(k)
		n += k
	}
	return n, fromPriv
}

// markRaw records in meta, if not nil, that its entries from i on are the
// k raw values of sequences from s on.
func markRaw(meta []uint64, i, k int, s uint64) {
	if meta == nil {
		return
	}
	for j := range k {
		meta[i+j] = (s + uint64(j)) | rawBit
	}
}

// popSeg drops the first closed range, keeping the storage (a reader that
// falls behind again reuses it instead of allocating: 1.6 allocations per
// value with 1000 lossy readers and 4 publishers, when it was re-sliced).
func (w *Watcher[T]) popSeg() {
	n := copy(w.segs, w.segs[1:])
	w.segs = w.segs[:n]
}

// publishMarks stores fullAt and pin for the publisher.
func (w *Watcher[T]) publishMarks() {
	w.fullAt.Store(w.o + w.c)
	if len(w.segs) > 0 {
		w.pin.Store(w.segs[0].a)
	} else {
		w.pin.Store(w.o)
	}
}

// evacuate moves every queued value that is still in the ring rg (head h)
// into priv, so that the ring can be overwritten; the window then starts at
// h. It costs one copy of at most the queue length.
func (w *Watcher[T]) evacuate(h uint64, rg *ring.Ring[T]) {
	var buf [64]T
	for _, s := range w.segs {
		for s.a < s.b {
			k := rg.Copy(buf[:], s.a, s.b)
			w.pushRaw(buf[:k], s.a)
			s.a += uint64(k)
		}
	}
	w.segs = w.segs[:0]
	end := w.windowEnd(h)
	for w.o < end {
		k := rg.Copy(buf[:], w.o, end)
		w.pushRaw(buf[:k], w.o)
		w.o += uint64(k)
		if !w.lazyOldest() {
			w.c -= uint64(k)
		}
	}
	clear(buf[:])
}

// pushRaw appends to priv the values vs, of sequences from s on, which a
// filtered reader's filter has not seen.
func (w *Watcher[T]) pushRaw(vs []T, s uint64) {
	w.privq().PushSlice(vs)
	if w.filtering() {
		for i := range vs {
			w.x.meta.Push((s + uint64(i)) | rawBit)
		}
	}
}

// skip makes the watcher, full at sequence s, miss the value of s: what its
// window holds becomes a closed range and the window starts after s, with
// no room until the reader makes some. Caller is the publisher, holding
// b.mu.
func (w *Watcher[T]) skip(s uint64) {
	if w.c > 0 && w.o < s {
		if w.segs == nil {
			w.segs = w.b.firstSegs()
		}
		w.segs = append(w.segs, seg{w.o, min(s, w.o+w.c)})
	}
	w.o, w.c = s+1, 0
}

// dropOldest discards the oldest queued value of the watcher, full at
// sequence s, so that the window takes s. It reports whether there was a
// value to discard. Caller is the publisher.
func (w *Watcher[T]) dropOldest(s uint64) bool {
	switch {
	case w.priv.Drop(1) == 1:
		if w.filtering() {
			w.x.meta.Drop(1)
		}
		w.c++
	case len(w.segs) > 0:
		w.segs[0].a++
		if w.segs[0].a == w.segs[0].b {
			w.popSeg()
		}
		w.c++
	case w.o < s:
		w.o++
	default:
		return false
	}
	return true
}

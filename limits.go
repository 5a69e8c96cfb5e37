package fanout

import (
	"math"

	"github.com/fanout-go/fanout/internal/ring"
)

// refresh recomputes the ring limits when head s reaches one. Each costs a
// scan of the readers concerned, about once per queue length of values while
// the readers keep up. Caller holds b.mu.
func (b *Broadcaster[T]) refresh(s uint64, log *dropLog) {
	if len(b.full) > 0 {
		b.pruneFull(s)
	}
	if s >= b.lap {
		if b.refreshLap(s, log) {
			log.lapped = true
		}
	}
	if s >= b.limit {
		b.refreshLimit(s)
	}
}

// refreshLimit recomputes the limit from the readers that wait, evict or are
// decided per value: the full ones of the latter two are listed in b.full,
// the full WaitIfChannelFull ones counted in b.nfull.
func (b *Broadcaster[T]) refreshLimit(s uint64) {
	limit, nfull := uint64(math.MaxUint64), 0
	b.blocker = nil
	for _, w := range b.limiters {
		if w.inFull {
			continue
		}
		f := w.fullAt.Load()
		switch {
		case f > s:
		case w.needsSift(s):
			b.toSift = append(b.toSift, w) // full until sifted
		case w.kind == kindWait && (!w.filtering() || w.pin.Load() < s):
			// A filtered one being read, with values on the ring,
			// makes room as any reader does (see needsSift).
			nfull++
		default:
			w.setInFull(true)
			b.full = append(b.full, w)
			continue
		}
		if f < limit {
			limit, b.blocker = f, w
		}
	}
	b.limit, b.nfull = limit, nfull
}

// raiseFast is the fast path's refresh, called holding head's busy bit
// (which every holder of b.mu holds too, so nothing it reads can change)
// when head h has reached fast. If only the readers' room stopped the fast
// path and every limiter has made room for h since the last refresh, it
// recomputes limit as refreshLimit would and fast as unlock would, and
// reports true; else it changes nothing and the caller takes the slow path,
// which also settles lossy readers (lap), counts full ones and waits
// (DESIGN.md, section 4). A lossless publisher and its readers thus go
// round the ring without b.mu: with one reader the slow path per lap was
// a tenth of the publisher's time.
func (b *Broadcaster[T]) raiseFast(h uint64) bool {
	if h >= b.lap || b.fastBlocked() {
		return false
	}
	limit, blocker := uint64(math.MaxUint64), (*Watcher[T])(nil)
	for _, w := range b.limiters {
		f := w.fullAt.Load()
		if f <= h || w.inFull {
			return false
		}
		if f < limit {
			limit, blocker = f, w
		}
	}
	b.limit, b.blocker, b.nfull = limit, blocker, 0
	b.fast = min(limit, b.lap)
	return true
}

// refreshLap settles the readers whose oldest value the value of s would
// overwrite, moving their values off the ring, and recomputes the lap. It
// reports whether a reader lost values.
func (b *Broadcaster[T]) refreshLap(s uint64, log *dropLog) bool {
	lap := uint64(math.MaxUint64)
	rg := b.ring.Load()
	size := uint64(rg.Cap())
	lost := false
	for _, w := range b.lappers {
		if w.pin.Load()+size <= s && b.lapReader(w, s, rg, log) {
			lost = true
		}
		lap = min(lap, w.pin.Load()+size)
	}
	b.lap = lap
	return lost
}

// pruneFull takes the readers that made room off b.full.
func (b *Broadcaster[T]) pruneFull(s uint64) {
	keep := b.full[:0]
	for _, w := range b.full {
		// A filtered reader asked about the value in hand stays, to
		// take it as the filter said (see apply); one full again with
		// raw values its window took while it had room is sifted.
		f := w.fullAt.Load()
		if f > s && !w.filteredFull(b.gen) {
			w.setInFull(false)
			if f < b.limit {
				b.limit, b.blocker = f, w
			}
			continue
		}
		if f <= s && w.needsSift(s) {
			b.toSift = append(b.toSift, w)
		}
		keep = append(keep, w)
	}
	clear(b.full[len(keep):])
	b.full = keep
}

// lapReader makes the ring slot of sequence s-size free for s: the reader
// settles its drops and moves what the ring still holds for it into its own
// queue. A DropOldest reader only settles: that leaves it the newest q values,
// which the ring (at least twice the queue length) keeps for q more values.
func (b *Broadcaster[T]) lapReader(w *Watcher[T], s uint64, rg *ring.Ring[T], log *dropLog) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, r := w.settle(s)
	if n > 0 {
		w.count(r, n, log, nil)
	}
	if !w.lazyOldest() {
		w.evacuate(s, rg)
	}
	w.publishMarks()
	return n > 0
}

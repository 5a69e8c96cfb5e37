package fanout

import (
	"math"
	"time"
)

// The broadcaster keeps the channels and timers its publishers wait on for
// reuse, so that waiting does not allocate; not in a sync.Pool, because a
// channel or timer made in one testing/synctest bubble cannot be used in
// another. These pools are guarded by b.mu: every publisher takes and gives
// back under it (see DESIGN.md, "Locks"); those of the parked readers
// (park.go) by b.parkMu.

// popSpare takes the last value kept in spares, if any, and clears its
// slot. Caller holds the lock that guards spares.
func popSpare[E any](spares *[]E) (e E, ok bool) {
	n := len(*spares)
	if n == 0 {
		return e, false
	}
	e = (*spares)[n-1]
	var zero E
	(*spares)[n-1] = zero
	*spares = (*spares)[:n-1]
	return e, true
}

// takeChan returns an empty channel of buffer one to wait on. Caller holds
// b.mu.
func (b *Broadcaster[T]) takeChan() chan struct{} {
	if ch, ok := popSpare(&b.spareWake); ok {
		return ch
	}
	return make(chan struct{}, 1)
}

// putChan keeps an empty channel from takeChan for reuse. Caller holds b.mu.
func (b *Broadcaster[T]) putChan(ch chan struct{}) {
	b.spareWake = append(b.spareWake, ch)
}

// takeTimer returns a stopped timer, to be set with Reset and given back
// with putTimer (a new timer per bounded wait cost up to 1.7 allocations
// per published value at N=1000, benchmark harness, wait-timeout). Caller
// holds b.mu.
func (b *Broadcaster[T]) takeTimer() *time.Timer {
	if t, ok := popSpare(&b.spareTimers); ok {
		return t
	}
	return stoppedTimer()
}

// stoppedTimer returns a new timer, stopped.
func stoppedTimer() *time.Timer {
	t := time.NewTimer(math.MaxInt64)
	t.Stop()
	return t
}

// putTimer stops t and keeps it for reuse; since Go 1.23 a stopped timer's
// channel is empty after Reset. Caller holds b.mu.
func (b *Broadcaster[T]) putTimer(t *time.Timer) {
	t.Stop()
	b.spareTimers = append(b.spareTimers, t)
}

// segSlabLen is the number of watchers' first gaps one allocation holds.
const segSlabLen = 64

// firstSegs returns an empty slice of capacity one for the first gap of a
// watcher that has never had one, cut from a slab shared by segSlabLen
// watchers: the first value a watcher misses by its verdict (skip) would
// otherwise allocate (a 16-byte append per watcher, 0.015 allocations per
// published value at N=1000, 4 producers, wait-timeout, in the harness).
// A watcher whose gaps outgrow it grows its own by append. Caller holds
// b.mu.
func (b *Broadcaster[T]) firstSegs() []seg {
	if len(b.segSlab) == 0 {
		b.segSlab = make([]seg, segSlabLen)
	}
	s := b.segSlab[:0:1]
	b.segSlab = b.segSlab[1:]
	return s
}

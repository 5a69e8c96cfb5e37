package fanout

import (
	"math"
	"time"
)

// The broadcaster keeps the channels and timers its publishers wait on for
// reuse, so that waiting does not allocate; not in a sync.Pool, because a
// channel or timer made in one testing/synctest bubble cannot be used in
// another. Both pools are guarded by b.mu: every publisher takes and gives
// back under it (see DESIGN.md, "Locks").

// takeChan returns an empty channel of buffer one to wait on. Caller holds
// b.mu.
func (b *Broadcaster[T]) takeChan() chan struct{} {
	if n := len(b.spareWake); n > 0 {
		ch := b.spareWake[n-1]
		b.spareWake[n-1] = nil
		b.spareWake = b.spareWake[:n-1]
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
	if n := len(b.spareTimers); n > 0 {
		t := b.spareTimers[n-1]
		b.spareTimers[n-1] = nil
		b.spareTimers = b.spareTimers[:n-1]
		return t
	}
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

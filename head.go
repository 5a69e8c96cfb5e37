package fanout

import (
	"runtime"
	"sync/atomic"
)

// headBusy is the bit of Broadcaster.head that makes its holder the only
// one who may change what the fast path reads (DESIGN.md, section 3): a
// fast-path publisher holds it for the store of its values, and every
// holder of Broadcaster.mu for its whole critical section. The fast path
// thus costs one compare-and-swap and one store, not a lock, a store and
// an unlock.
//
// headWanted is set by a holder of Broadcaster.mu that waits for the busy
// bit: fast paths stand aside (they take the slow path, which waits for
// the mutex), so that a stream of fast publishers cannot starve Watch,
// Stop or Shutdown. The sequence has the other 62 bits: at a value per
// nanosecond, for 146 years.
const (
	headBusy   = 1 << 63
	headWanted = 1 << 62
	headBits   = headBusy | headWanted
)

// headWord is Broadcaster.head: the sequence number of the next value, and
// the busy bit. Load returns the sequence alone, so readers never see the
// bit.
type headWord struct {
	_ noCopy
	_ [0]atomic.Uint64 // 64-bit alignment on 32-bit platforms
	v uint64
}

// Load returns the sequence number of the next value.
func (h *headWord) Load() uint64 { return atomic.LoadUint64(&h.v) &^ headBits }

// Store sets the sequence number; the caller holds the bit, and keeps it.
func (h *headWord) Store(s uint64) { atomic.StoreUint64(&h.v, s|headBusy) }

// tryHold takes the bit if nobody holds or wants it, and returns the
// sequence. A compare-and-swap that fails because another fast path moved
// head meanwhile is tried again, a few times, rather than sending the
// caller down the slow path.
func (h *headWord) tryHold() (uint64, bool) {
	for range holdTries {
		v := atomic.LoadUint64(&h.v)
		if v&headBits != 0 {
			return v, false
		}
		if atomic.CompareAndSwapUint64(&h.v, v, v|headBusy) {
			return v, true
		}
	}
	return 0, false
}

// holdTries is how many times tryHold tries.
const holdTries = 4

// release sets the sequence to s and gives the bit up: what the holder
// wrote before is visible to whoever takes the bit or loads s next.
func (h *headWord) release(s uint64) { atomic.StoreUint64(&h.v, s) }

// holdSpins is how many times hold tries before it yields the processor
// between tries: the other holder, a fast-path publisher, holds the bit
// for a few stores only, unless it was descheduled.
const holdSpins = 64

// hold takes the bit, waiting for a fast-path publisher that holds it,
// and says it wants the bit meanwhile (a fast path's release clears that:
// the next try says it again).
func (h *headWord) hold() {
	for i := 0; ; i++ {
		v := atomic.LoadUint64(&h.v)
		if v&headBusy == 0 {
			if atomic.CompareAndSwapUint64(&h.v, v, v&^headWanted|headBusy) {
				return
			}
			continue
		}
		if v&headWanted == 0 {
			atomic.CompareAndSwapUint64(&h.v, v, v|headWanted)
		}
		if i >= holdSpins {
			runtime.Gosched()
		}
	}
}

// releaseHeld gives the bit up, keeping the sequence.
func (h *headWord) releaseHeld() { h.release(h.Load()) }

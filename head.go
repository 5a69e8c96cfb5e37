package fanout

import (
	"runtime"
	"sync/atomic"
)

// headBusy is the bit of Broadcaster.head that makes its holder the only
// one who may change what the fast path reads (DESIGN.md, section 3): a
// fast-path publisher holds it for the store of its values, and every
// holder of Broadcaster.mu for its whole critical section, with headLocked
// set too. The fast path thus costs one compare-and-swap and one plain
// store, not a lock, a store and an unlock.
//
// headWanted is set by a holder of Broadcaster.mu that waits for the busy
// bit: fast paths stand aside (they take the slow path, which waits for
// the mutex), so that a stream of fast publishers cannot starve Watch,
// Stop or Shutdown.
//
// headLocked is set with headBusy by a holder of b.mu: a reader about to
// park tells the two holders apart (look). A holder of b.mu publishes
// head with a sequentially consistent store and then looks for parked
// readers, as the reader adds itself before it looks at head; a fast path
// releases the bit with a plain store (release), after which it may not
// see a reader that counted itself meanwhile: a reader that looks while
// one holds the bit sleeps with a bound (DESIGN.md, W1). The sequence
// has the other 61 bits: at a value per nanosecond, for 73 years.
const (
	headBusy   = 1 << 63
	headWanted = 1 << 62
	headLocked = 1 << 61
	headBits   = headBusy | headWanted | headLocked
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

// Store sets the sequence number; the caller holds b.mu, and keeps the
// bits.
func (h *headWord) Store(s uint64) { atomic.StoreUint64(&h.v, s|headBusy|headLocked) }

// tryHold takes the busy bit for a fast path if nobody holds or wants it,
// and returns the sequence. A compare-and-swap that fails because another fast
// path moved head meanwhile is tried again, a few times, rather than
// sending the caller down the slow path.
func (h *headWord) tryHold() (uint64, bool) {
	for range holdTries {
		v := atomic.LoadUint64(&h.v)
		if v&(headBusy|headWanted) != 0 {
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

// release ends a fast path's hold: it stores v, the new sequence, and
// gives the bit up. What
// the holder wrote before is visible to whoever takes the bit or loads the
// sequence next. It is a plain store where the platform makes one a
// release (storeRelease): nobody but the holder changes the word while a
// fast path holds the bit.
func (h *headWord) release(v uint64) { storeRelease(&h.v, v) }

// holdSpins is how many times hold tries before it yields the processor
// between tries: the other holder, a fast-path publisher, holds the bit
// for a few stores (or a scan of the limiters, raiseFast), unless it was
// descheduled.
const holdSpins = 64

// hold takes the bit for a holder of b.mu, waiting for a fast-path
// publisher that holds it, and says it wants the bit meanwhile (a fast
// path's release clears that: the next try says it again).
func (h *headWord) hold() {
	for i := 0; ; i++ {
		v := atomic.LoadUint64(&h.v)
		if v&headBusy == 0 {
			if atomic.CompareAndSwapUint64(&h.v, v, v&^headWanted|headBusy|headLocked) {
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

// releaseHeld gives up the bit of a holder of b.mu, keeping the sequence.
func (h *headWord) releaseHeld() { atomic.StoreUint64(&h.v, h.Load()) }

// A parking reader's last look at head (look).
const (
	headIdle     = iota // the sequence is still the one the reader saw: sleep
	headMoved           // values were published since: read them
	headInFlight        // a fast path holds the bit: sleep, but not for long
)

// look is a parking reader's last look at head, having counted itself in
// nparked. A publisher that takes the busy bit after this look sees the
// reader in nparked (its compare-and-swap orders its look after ours), and
// a holder of b.mu stores head with a fence before it looks; but a fast
// path that holds the bit now may have looked at nparked before the reader
// counted itself, and its plain store of head is no fence that would make
// it look again. The reader then sleeps with a bound (parkInFlight): the
// next publish wakes it as any does, and if there is none, the bound does.
func (h *headWord) look(s uint64) int {
	v := atomic.LoadUint64(&h.v)
	switch {
	case v&^headBits > s:
		return headMoved
	case v&headBusy == 0 || v&headLocked != 0:
		return headIdle
	}
	return headInFlight
}

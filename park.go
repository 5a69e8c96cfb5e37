package fanout

import (
	"context"
	"runtime"
	"time"
)

// enterPark lists w among the parked readers of its broadcaster, so that
// the next publisher wakes it (W1). The caller then looks at head again
// before it sleeps.
func (w *Watcher[T]) enterPark() {
	b := w.b
	b.parkMu.Lock()
	if !w.inPark {
		w.inPark = true
		if b.parked == nil { // taken by a wake-up still signalling
			b.parked = b.takeSpareParked()
		}
		b.parked = append(b.parked, w)
		b.nparked.Add(1)
	}
	b.parkMu.Unlock()
}

// wakeParked wakes every ring reader waiting for a value. It takes the list
// as a whole, so that publishers that accept values at the same time wake
// each reader once.
func (b *Broadcaster[T]) wakeParked() {
	b.woke.Store(1)
	b.parkMu.Lock()
	parked := b.parked
	if len(parked) <= wakeUnderLock {
		// A few: signal them holding parkMu, and keep the list. Taking
		// it and giving its storage back cost a second lock of parkMu
		// per wake-up, which one reader and one publisher make once per
		// queue's worth of values.
		for i, w := range parked {
			w.inPark = false
			w.signal()
			parked[i] = nil
		}
		b.parked = parked[:0]
		b.nparked.Store(0)
		b.parkMu.Unlock()
		return
	}
	b.parked = nil
	b.nparked.Store(0)
	for _, w := range parked {
		w.inPark = false
	}
	b.parkMu.Unlock()
	for i, w := range parked {
		w.signal() // w.wake was set before w was parked, under parkMu
		parked[i] = nil
	}
	// Reuse the storage; if readers parked meanwhile (in a list of their
	// own, see park), keep it for later.
	b.parkMu.Lock()
	switch {
	case b.parked == nil:
		b.parked = parked[:0]
	case cap(parked) > 0 && len(b.spareParked) < maxSpareParked:
		b.spareParked = append(b.spareParked, parked[:0])
	}
	b.parkMu.Unlock()
}

// takeSpareParked returns a kept empty list of parked readers, or nil.
// Caller holds b.parkMu.
func (b *Broadcaster[T]) takeSpareParked() []*Watcher[T] {
	l, _ := popSpare(&b.spareParked)
	return l
}

// wakeUnderLock is the number of parked readers up to which a wake-up
// signals them without releasing parkMu: a signal is a non-blocking send on
// a buffered channel, so a reader that parks meanwhile waits for a few
// sends at most.
const wakeUnderLock = 8

// maxSpareParked bounds the parked lists a broadcaster keeps for reuse: one
// per wake-up that can overlap with another, which concurrent publishers do.
const maxSpareParked = 4

// parkYields is how many times a reader with nothing to read yields before
// it parks, when the broadcaster has at least parkYieldReaders ring readers;
// it yields before it lists itself among the parked (see park).
// With many readers a yield hands the processor to another reader that has
// values to take, and saves this one a park and a wake-up; with few, there
// is nobody to hand it to, and looking at head again only takes its cache
// line away from the publisher. Lossless pull, medians of 7 interleaved runs
// of one binary, M deliveries/s, no yield against two: N=1 32 against 29,
// N=10 125 against 80, N=100 wash (150 against 160), N=1000 175 against
// 255, N=10000 50 against 104; with 4 publishers N=10 55 against 30, N=1000
// 160 against 225. Yielding before the reader lists itself, rather than
// after: readers checking the order of their values, N=1000, 1 publisher,
// queue 100, 75-81 against 88-106 M deliveries/s (3 interleaved runs of
// BenchmarkWorkingReaders); enterPark's lock had been 17% of the CPU
// profile, 1% after.
const (
	parkYields       = 2
	parkYieldReaders = 128
)

// familyYieldReaders is how many ring readers the other topics of a
// reader's Topics have at least for it to yield before it parks, whatever
// its own broadcaster's count. The readers of one broadcaster run out of
// values together, so that with a few of them a yield only hands the
// processor to another that has nothing either (one broadcaster, N=10,
// queue 1,024: 38 ns per value without yields, 62-103 with); the readers
// of other topics, published to in their turn, mostly have values to
// take. Topics with 10 watchers per topic, the harness's workload,
// interleaved runs of one binary, ns per publish without yields against
// with: 2 topics 70 against 81-93 (why the bound is not lower), 3 topics
// 76-107 against 72-81, 5 topics 163-166 against 75-82; 10 topics
// 115-131 against 71-81, 100 topics 102 against 45-48, 1,000 topics
// 94-112 against 71-85; with 4 producers, 10 topics 123-128 against
// 90-99, 100 topics 84-89 against 44, 1,000 topics 93-99 against 51-74.
// Parks fell from 0.05-0.14 per publish to 0.001-0.003.
const familyYieldReaders = 32

// lossyYieldReaders is how many ring readers a broadcaster has at least
// for a reader that drops (DropIfChannelFull, DropOldestIfChannelFull,
// with or without a drop handler or filter) to yield before it parks. A
// lossless reader's publisher waits for the slowest reader, and the
// readers run out of values together; a lossy reader's publisher never
// waits for it, so that parking only has the publisher wake it again at
// its next value, a value at a time: a yield lets the publisher store a
// batch first. Pull at queue 100, one publisher, interleaved runs of one
// binary, M deliveries/s without yields against with: drop N=50 137-143
// against 172-184, drop-oldest 143-180 against 186-206; N=100 drop 63-159
// against 189-255, drop-oldest 52-160 against 224-233; N=32 a wash
// (114-166 against 140-157), N=10 and 20 noise either way (why the bound
// is not lower).
const lossyYieldReaders = 32

// yieldsBeforePark reports whether reader w with nothing to read yields
// before it parks: its broadcaster has many readers, or many readers for a
// reader that drops, or it reads a topic whose family has many readers
// elsewhere.
func (w *Watcher[T]) yieldsBeforePark() bool {
	b := w.b
	n := b.nreaders.Load()
	if n >= parkYieldReaders || (w.kind.lazy() && n >= lossyYieldReaders) { // lazy: the two that drop
		return true
	}
	return b.crowdedFamily(n)
}

// crowdedFamily reports whether the Topics family of b, if any, has at
// least familyYieldReaders ring readers besides the n of b.
func (b *Broadcaster[T]) crowdedFamily(n int32) bool {
	f := b.family
	return f != nil && f.Load()-n >= familyYieldReaders
}

// park waits until a value past head h may have been published, or the
// watcher changed mode or closed (both signal wake).
func (w *Watcher[T]) park(ctx context.Context, wake chan struct{}, h uint64) error {
	b := w.b
	// With many readers, yielding first lets a publisher that is about to
	// store more do so, and saves the park and the wake-up (see parkYields
	// for when, and the figures). The yields come before the reader lists
	// itself: one that finds a value after a yield has not taken parkMu,
	// which a thousand readers and their publisher contend for, nor
	// received a wake-up it no longer needs. Idle readers still park at
	// once after that.
	if w.yieldsBeforePark() {
		for range parkYields {
			if b.head.Load() > h {
				return nil
			}
			runtime.Gosched()
		}
		hook(hookReaderYielded)
	}
	w.enterPark()
	hook(hookReaderParking)
	// A publisher stores head before it loads nparked, and we added to
	// nparked before loading head: one of us sees the other, but for a
	// fast path that holds head's bit as we look (see look; DESIGN.md,
	// W1).
	switch b.head.look(h) {
	case headMoved:
		return nil
	case headInFlight:
		return b.sleepInFlight(ctx, wake)
	}
	done := ctx.Done()
	if done == nil { // no deadline: a plain receive, not a two-channel select
		<-wake
		return nil
	}
	select {
	case <-wake:
		return nil
	case <-done:
		return ctx.Err()
	}
}

// signal wakes one goroutine parked on this watcher, if any. Callers hold
// w.mu, but wakeParked, which holds nothing: w.wake is set once, under
// w.mu, before the watcher's first park (tryRecv), and never changes, and
// wakeParked only signals watchers it found parked (DESIGN.md, W1).
func (w *Watcher[T]) signal() {
	if w.wake != nil {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// passWake passes a wake-up on to another goroutine parked on this watcher:
// a publisher wakes a watcher once, however many goroutines are parked on
// it, so each one that wakes and returns lets the next look again (to
// re-park, if nothing is left, until the next value). Caller holds w.mu.
func (w *Watcher[T]) passWake() {
	if w.waiters.Load() > 0 {
		w.signal()
	}
}

// parkInFlight bounds the sleep of a reader that parked while a fast path
// held head's bit (headWord.look): that publisher may not wake it, the
// next one will, and if none comes the bound does. In a run of ten
// million values to one reader, about one park in a hundred and fifty was
// such a park, and the next publish woke it every time.
const parkInFlight = 50 * time.Microsecond

// sleepInFlight is park's sleep for a reader that looked at head while a
// fast path held its bit: until wake, ctx ends, or parkInFlight passes.
func (b *Broadcaster[T]) sleepInFlight(ctx context.Context, wake chan struct{}) error {
	t := b.takeInFlightTimer()
	defer b.putInFlightTimer(t)
	select {
	case <-wake:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// takeInFlightTimer returns a timer of parkInFlight, reusing one that a
// bounded sleep gave back (pool.go: a timer per sleep cost 0.14
// allocations per value with two hundred readers parking at once).
func (b *Broadcaster[T]) takeInFlightTimer() *time.Timer {
	b.parkMu.Lock()
	t, ok := popSpare(&b.parkTimers)
	b.parkMu.Unlock()
	if !ok {
		t = stoppedTimer()
	}
	t.Reset(parkInFlight)
	return t
}

// putInFlightTimer stops t and keeps it for the next bounded sleep. Since
// Go 1.23 no stale value is left in t.C after Stop; with the older timers
// (asynctimerchan=1) one may be, and makes a later sleep return at once:
// that reader then looks again.
func (b *Broadcaster[T]) putInFlightTimer(t *time.Timer) {
	t.Stop()
	b.parkMu.Lock()
	b.parkTimers = append(b.parkTimers, t)
	b.parkMu.Unlock()
}

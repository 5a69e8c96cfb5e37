//go:build fanoutcheck

package fanout

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Under the fanoutcheck build tag (make test runs the core's tests once
// with it), every lock records who holds it, taking a lock out of the
// order of DESIGN.md (section 3) panics, every release of the broadcaster's lock checks
// the invariants of DESIGN.md that can be checked there, and the hook
// points (hooks.go) call the function a test set for them. The checks of
// every watcher run at each release while a broadcaster has at most
// checkAll ring readers; past that, those of checkWindow of them, in turn.

// The engine's locks, each a sync.Mutex with its rank in the lock order of
// DESIGN.md, section 3: a goroutine takes them in this order only, and never
// two of the same rank at once.
const (
	rankBroadcaster = iota + 1 // Broadcaster.mu: the order, the registrations
	rankWatcher                // Watcher.mu: one watcher's queue, its reads
	rankSend                   // chanState.sendMu: a blocked send against the close
	rankRoom                   // Broadcaster.roomMu: the publishers waiting for room
	rankPark                   // Broadcaster.parkMu: the parked readers (a leaf)
)

// broadcasterMu is Broadcaster.mu. Its release runs the invariant checks
// (set up by New), whoever releases it, so that a release that bypasses
// Broadcaster.unlock is checked too.
type broadcasterMu struct {
	check func()
	mu    sync.Mutex // not embedded: nothing takes it without the bit
	head  *headWord  // its busy bit is held with the lock (head.go)
}

func (m *broadcasterMu) Lock() {
	acquire(rankBroadcaster)
	m.mu.Lock()
	m.head.hold()
}

func (m *broadcasterMu) Unlock() {
	if m.check != nil {
		m.check()
	}
	m.head.releaseHeld()
	m.mu.Unlock()
	release(rankBroadcaster)
}

// watcherMu is Watcher.mu.
type watcherMu struct{ sync.Mutex }

func (m *watcherMu) Lock() {
	acquire(rankWatcher)
	m.Mutex.Lock()
}

func (m *watcherMu) TryLock() bool {
	if !m.Mutex.TryLock() {
		return false
	}
	acquire(rankWatcher)
	return true
}

func (m *watcherMu) Unlock() {
	m.Mutex.Unlock()
	release(rankWatcher)
}

// sendMu is chanState.sendMu.
type sendMu struct{ sync.Mutex }

func (m *sendMu) Lock() {
	acquire(rankSend)
	m.Mutex.Lock()
}

func (m *sendMu) Unlock() {
	m.Mutex.Unlock()
	release(rankSend)
}

// roomMu is Broadcaster.roomMu.
type roomMu struct{ sync.Mutex }

func (m *roomMu) Lock() {
	acquire(rankRoom)
	m.Mutex.Lock()
}

func (m *roomMu) Unlock() {
	m.Mutex.Unlock()
	release(rankRoom)
}

// parkMu is Broadcaster.parkMu.
type parkMu struct{ sync.Mutex }

func (m *parkMu) Lock() {
	acquire(rankPark)
	m.Mutex.Lock()
}

func (m *parkMu) Unlock() {
	m.Mutex.Unlock()
	release(rankPark)
}

// setCheck makes every release of b.mu check b's invariants.
func (b *Broadcaster[T]) setCheck() { b.mu.check = b.checkInvariants }

// held maps a goroutine (curg) to the ranks of the locks it holds, a bit
// each. Only the goroutine itself changes its entry (atomically: a g is
// reused by later goroutines). Entries are kept, so that a lock allocates
// nothing once its goroutine has an entry.
var (
	heldMu sync.RWMutex
	held   = map[uintptr]*atomic.Uint32{}
)

var rankNames = [...]string{"", "Broadcaster.mu", "Watcher.mu", "chanState.sendMu", "Broadcaster.roomMu", "Broadcaster.parkMu"}

func heldBy(g uintptr) *atomic.Uint32 {
	heldMu.RLock()
	m := held[g]
	heldMu.RUnlock()
	if m == nil {
		m = new(atomic.Uint32)
		heldMu.Lock()
		held[g] = m
		heldMu.Unlock()
	}
	return m
}

func acquire(r int) {
	m := heldBy(curg())
	if h := m.Load(); h>>r != 0 {
		panic(fmt.Sprintf("fanout: lock order: taking %s while holding %s", rankNames[r], heldNames(h)))
	}
	m.Or(1 << r)
}

func release(r int) {
	m := heldBy(curg())
	if m.Load()&(1<<r) == 0 {
		panic(fmt.Sprintf("fanout: lock order: releasing %s, which this goroutine does not hold", rankNames[r]))
	}
	m.And(^uint32(1 << r))
}

func heldNames(m uint32) string {
	var s []string
	for r := range rankNames {
		if m&(1<<r) != 0 {
			s = append(s, rankNames[r])
		}
	}
	return fmt.Sprint(s)
}

// hooks holds the function a test set for each hook point.
var hooks [numHookPoints]atomic.Pointer[func()]

func hook(p hookPoint) {
	if f := hooks[p].Load(); f != nil {
		(*f)()
	}
}

// setHook makes every goroutine that reaches p call f, until the returned
// function is called.
func setHook(p hookPoint, f func()) (restore func()) {
	hooks[p].Store(&f)
	return func() { hooks[p].Store(nil) }
}

// checkInvariants panics with the first invariant of DESIGN.md that b
// breaks. Caller holds b.mu, about to release it.
func (b *Broadcaster[T]) checkInvariants() {
	if err := b.invariantError(); err != nil {
		panic("fanout: invariant broken: " + err.Error())
	}
}

func (b *Broadcaster[T]) invariantError() error {
	ws := b.checkedReaders()
	return errors.Join(b.checkFast(), b.checkCounters(), b.checkLists(ws), b.checkReaders(ws), b.checkChans())
}

// checkFast: the fast bound is what fastBound computes (every unlock after
// a change recomputed it).
func (b *Broadcaster[T]) checkFast() error {
	if f := b.fastBound(); b.fast != f {
		return fmt.Errorf("fast bound %d, fastBound() %d (an unlock after a change did not recompute it)", b.fast, f)
	}
	return nil
}

// checkCounters: the atomics and the turn are consistent.
func (b *Broadcaster[T]) checkCounters() error {
	h := b.head.Load()
	var errs []error
	if bs := b.blockedAt.Load(); bs != 0 && bs != h+1 {
		errs = append(errs, fmt.Errorf("blockedAt %d with head %d: a sequence publishers wait for was accepted without clearing it", bs, h))
	}
	if n := b.roomWait.Load(); n < 0 {
		errs = append(errs, fmt.Errorf("roomWait %d < 0", n))
	}
	if n := b.nparked.Load(); n < 0 {
		errs = append(errs, fmt.Errorf("nparked %d < 0", n))
	}
	if len(b.turnQ) > 0 && !b.turn {
		errs = append(errs, fmt.Errorf("%d publishers queued for a turn nobody holds", len(b.turnQ)))
	}
	if int(b.nreaders.Load()) != len(b.readers) {
		errs = append(errs, fmt.Errorf("nreaders %d, %d readers", b.nreaders.Load(), len(b.readers)))
	}
	if int(b.nwatch.Load()) != len(b.readers)+len(b.chans) {
		errs = append(errs, fmt.Errorf("nwatch %d, %d readers and %d channel watchers", b.nwatch.Load(), len(b.readers), len(b.chans)))
	}
	if b.stopped && (len(b.readers) > 0 || len(b.chans) > 0) {
		errs = append(errs, errors.New("watchers still registered after Shutdown"))
	}
	if b.taken > h {
		errs = append(errs, fmt.Errorf("Taken %d past head %d", b.taken, h))
	}
	return errors.Join(errs...)
}

// The per-watcher checks run for every ring reader while there are at most
// checkAll of them, else for checkWindow of them per release, in turn: a
// suite with 10,000 watchers would take hours otherwise.
const (
	checkAll    = 256
	checkWindow = 32
)

// checkedReaders returns the ring readers whose checks run at this release.
func (b *Broadcaster[T]) checkedReaders() []*Watcher[T] {
	if len(b.readers) <= checkAll {
		return b.readers
	}
	b.checkNext = (b.checkNext + checkWindow) % len(b.readers)
	return b.readers[b.checkNext:min(len(b.readers), b.checkNext+checkWindow)]
}

// checkLists: the publisher's lists of ring readers are the readers they
// say they are.
func (b *Broadcaster[T]) checkLists(ws []*Watcher[T]) error {
	var errs []error
	if len(ws) < len(b.readers) {
		return nil // membership costs O(readers) per reader
	}
	for _, w := range ws {
		inLimiters, inLappers, inFull := contains(b.limiters, w), contains(b.lappers, w), contains(b.full, w)
		if inLimiters == w.lazy {
			errs = append(errs, fmt.Errorf("watcher %d: in limiters %v, lazy %v", w.id, inLimiters, w.lazy))
		}
		if inLappers != (w.kind != kindWait && w.kind != kindEvict) {
			errs = append(errs, fmt.Errorf("watcher %d (%v): in lappers %v", w.id, w.kind, inLappers))
		}
		if inFull != w.inFull || inFull && !inLimiters {
			errs = append(errs, fmt.Errorf("watcher %d: in full %v, inFull %v", w.id, inFull, w.inFull))
		}
	}
	for _, w := range b.holders {
		if w.kind != kindWait {
			errs = append(errs, fmt.Errorf("watcher %d in holders is not lossless", w.id))
		}
	}
	return errors.Join(errs...)
}

// checkReaders: each ring reader's marks keep the ring safe, and its
// counts add up.
func (b *Broadcaster[T]) checkReaders(ws []*Watcher[T]) error {
	h := b.head.Load()
	size := uint64(0)
	if rg := b.ring.Load(); rg != nil {
		size = uint64(rg.Cap())
	}
	var errs []error
	for _, w := range ws {
		f, pin := w.fullAt.Load(), w.pin.Load()
		switch {
		case w.mode != modeRing || w.err != nil:
			errs = append(errs, fmt.Errorf("watcher %d is listed as a ring reader but is not one", w.id))
		case h > pin+size:
			errs = append(errs, fmt.Errorf("watcher %d: head %d overwrote its pinned sequence %d (ring %d)", w.id, h, pin, size))
		case !w.inFull && !w.lazy && f < b.limit:
			errs = append(errs, fmt.Errorf("watcher %d: full at %d below the limit %d", w.id, f, b.limit))
		case w.kind != kindWait && w.kind != kindEvict && pin+size < b.lap:
			errs = append(errs, fmt.Errorf("watcher %d: pin %d + ring %d below the lap %d", w.id, pin, size, b.lap))
		case w.kind == kindWait && h > f:
			errs = append(errs, fmt.Errorf("lossless watcher %d: head %d past its room %d", w.id, h, f))
		}
		if err := w.checkCounts(h); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkCounts: every value accepted since the watcher registered, with
// those it started with, was taken, is queued or was dropped (or, for a
// lazy DropIfChannelFull reader, is a drop not yet settled). Skipped while
// a reader holds w.mu.
func (w *Watcher[T]) checkCounts(h uint64) error {
	if !w.mu.TryLock() {
		return nil
	}
	defer w.mu.Unlock()
	if w.fullAt.Load() != w.o+w.c {
		return fmt.Errorf("watcher %d: fullAt %d, o+c %d", w.id, w.fullAt.Load(), w.o+w.c)
	}
	unsettled := uint64(0)
	if w.lazy && w.kind == kindDropNew && h > w.o+w.c {
		unsettled = h - (w.o + w.c)
	}
	got := w.taken + uint64(w.queued(h)) + w.totalDrops() + unsettled + w.filteredCount() + w.reading()
	if want := h - w.regSeq + w.lead; got != want {
		return fmt.Errorf("watcher %d: taken %d + queued %d + dropped %d + unsettled %d + filtered %d + being filtered %d = %d, want %d accepted since it registered",
			w.id, w.taken, w.queued(h), w.totalDrops(), unsettled, w.filteredCount(), w.reading(), got, want)
	}
	return nil
}

// reading returns the values the readers of w took off its queue and are
// filtering. Caller holds w.mu.
func (w *Watcher[T]) reading() uint64 {
	if w.x == nil {
		return 0
	}
	return w.x.reading
}

// checkChans: the channel watchers are open channel watchers.
func (b *Broadcaster[T]) checkChans() error {
	var errs []error
	for i := range b.chans[:min(len(b.chans), checkAll)] {
		w := b.chans[i].w
		if w.mode != modeChan || w.err != nil || w.cs.ch != b.chans[i].ch {
			errs = append(errs, fmt.Errorf("watcher %d is listed as a channel watcher but is not an open one", w.id))
		}
		if w.kind.mayWait() != contains(b.waitChans, w) {
			errs = append(errs, fmt.Errorf("watcher %d: may wait %v, in waitChans %v", w.id, w.kind.mayWait(), !w.kind.mayWait()))
		}
	}
	return errors.Join(errs...)
}

func contains[T any](ws []*Watcher[T], w *Watcher[T]) bool {
	for _, x := range ws {
		if x == w {
			return true
		}
	}
	return false
}

// checkState is what the checks keep in a Broadcaster.
type checkState struct {
	checkNext int // the first ring reader of the next window
}

// checkDrained: a closed ring reader that has been drained has taken, or
// dropped, every value accepted for it between its registration and its
// close (the value that evicted it, missed after its end, aside). Caller
// holds w.mu.
func (w *Watcher[T]) checkDrained(h uint64) {
	drops := w.totalDrops()
	if w.err == ErrEvicted {
		drops-- // the value that found it full, after its end
	}
	got := w.taken + w.filteredCount() + w.reading() + drops
	if want := min(h, w.end) - w.regSeq + w.lead; got != want {
		panic(fmt.Sprintf("fanout: invariant broken: watcher %d closed (%v) and drained: taken %d + dropped %d = %d, want %d (end %d, registered at %d, lead %d)",
			w.id, w.err, w.taken, drops, got, want, w.end, w.regSeq, w.lead))
	}
}

package fanout

import (
	"context"
	"errors"
	"runtime"
	"time"
)

// This file is the publish path. A publish call goes through these phases,
// each a function below:
//
//	yield    (before the slow path, but for ActionOrDrop) the fast path
//	         failed because another publisher holds head, holds the
//	         publish turn or waits for room: yield the processor and try it
//	         again, a few times (yieldFast)
//	enter    lock; wait for the publish turn if a publisher holds it
//	reserve  the fast path: as many values as the ring readers have room
//	         for, when no watcher is full and none has a channel: store them
//	         and advance head, O(1) whatever the number of watchers
//	one      the slow path, one value at a time:
//	  refresh   recompute the ring limits, settle readers about to be
//	            overwritten, list the full ones decided per value
//	  decide    ask the user's behaviours about full watchers (no lock held)
//	  wait      wait for room (no lock held, holding the turn)
//	  accept    apply the full watchers' verdicts, store, advance head,
//	            hand the value to channel watchers
//	leave    pass the turn on, unlock, then wake readers and report drops
//
// The lock is held only in enter, reserve, one's bookkeeping and leave's
// first step; waits, user callbacks, wake-ups and drop handlers run without
// it.

// errRefused ends an ActionOrDrop that would have to wait.
var errRefused = errors.New("fanout: publish refused")

type pubMode uint8

const (
	// pubAction waits without limit; channel watchers with room get the
	// value before the publisher waits for the full ones.
	pubAction pubMode = iota
	// pubStrict waits until ctx ends; no watcher with room gets the value
	// before it is accepted.
	pubStrict
	// pubTry never waits.
	pubTry
)

// Action publishes v to every watcher, waiting as long as a watcher's
// [FullChannelBehavior] says to. It returns nil once v has been accepted:
// placed in every watcher's queue, or missed by a watcher as its behaviour
// decided. If Shutdown happens before v is accepted, it returns [ErrStopped]
// and v is not accepted (see "Waiting" in the package documentation for the
// watchers that may already hold it). After Shutdown it returns ErrStopped.
func (b *Broadcaster[T]) Action(v T) error {
	if b.tryOne(v) || b.yieldOne(v) {
		return nil
	}
	vs := [1]T{v}
	_, _, _, err := b.publishSlow(context.Background(), vs[:], pubAction)
	return err
}

// tryOne is the fast path for one value, inline: it accepts v if head is
// below b.fast: nobody holds the turn or waits for room, no watcher has a
// channel or is full, and the ring readers have room (see fastBound), or
// if raiseFast finds that the readers made room since. It holds only the
// busy bit of head, not b.mu (DESIGN.md, sections 3 and 4), and wakes the
// parked readers after giving it up. (Through publish, with its
// slice of one, the same took a third longer with one watcher: 38 against
// 29 ns per value.)
func (b *Broadcaster[T]) tryOne(v T) bool {
	if b.err != nil {
		return false
	}
	h, ok := b.head.tryHold()
	if !ok {
		return false // the lock's holder may change fast: take the slow path
	}
	if h >= b.fast && !b.raiseFast(h) { // raised, fast is past h
		b.head.release(h) // fast is as fastBound would say, or unchanged
		return false
	}
	if b.ringOn {
		b.ring.Load().Put(h, v)
	}
	b.head.release(h + 1)     // fast stays as fastBound says: moving head changes nothing it reads
	if b.nparked.Load() > 0 { // no fence needed: see headWord.look
		b.wakeParked()
	}
	return true
}

// ActionContext is [Broadcaster.Action] bounded by ctx: if ctx is done before
// v is accepted (already done when called included), it returns ctx.Err()
// and no watcher with room has received v. After Shutdown it returns
// [ErrStopped], whatever the state of ctx. A ctx that can never end (such
// as context.Background()) makes it the same as Action.
func (b *Broadcaster[T]) ActionContext(ctx context.Context, v T) error {
	vs := [1]T{v}
	_, err := b.ActionBatchContext(ctx, vs[:])
	return err
}

// ActionOrDrop publishes v if that needs no waiting, and never blocks on a
// consumer. It returns false, and no watcher gets v, when a watcher whose
// behaviour is to wait has a full queue, or when another publisher holds the
// publish turn (it waits, or asks a behaviour; ActionOrDrop never overtakes
// it). Watchers with lossy behaviours do not make it refuse: they apply
// their behaviour. A hand-off watcher (queue length 0) whose consumer is not
// ready at that instant misses v, counted as [DropFull]. After Shutdown it
// returns (false, [ErrStopped]).
func (b *Broadcaster[T]) ActionOrDrop(v T) (bool, error) {
	if b.tryOne(v) {
		return true, nil
	}
	vs := [1]T{v}
	n, err := b.publish(context.Background(), vs[:], pubTry)
	if errors.Is(err, errRefused) {
		return false, nil
	}
	return n == 1, err
}

// ActionBatch publishes the values of vs in order, like that many calls of
// [Broadcaster.Action], but contiguously: no other publisher's value is
// accepted between two of them, and each watcher's behaviour applies to each
// value. It returns how many values were accepted (the first n of vs) and,
// if not all, why: [ErrStopped]. Values published together cost one lock
// and one wake-up of the waiting readers, not one per value. vs is not
// retained.
func (b *Broadcaster[T]) ActionBatch(vs []T) (int, error) {
	return b.publish(context.Background(), vs, pubAction)
}

// ActionBatchContext is [Broadcaster.ActionBatch] bounded by ctx: it
// returns ctx.Err() with the number of values accepted before ctx was done,
// and no watcher with room has received the value that was waiting. After
// Shutdown it returns [ErrStopped], whatever the state of ctx.
func (b *Broadcaster[T]) ActionBatchContext(ctx context.Context, vs []T) (int, error) {
	_, n, _, err := b.publishContext(ctx, vs)
	return n, err
}

// publishContext is every publish method bounded by a context. A context
// already done is ctx.Err(), but after Shutdown, which every publish
// method reports as ErrStopped. One that can never end makes it Action.
func (b *Broadcaster[T]) publishContext(ctx context.Context, vs []T) (first uint64, n int, given bool, err error) {
	if ctx == nil {
		return 0, 0, false, errNilContext
	}
	if err := ctx.Err(); err != nil {
		if b.isDone() {
			return 0, 0, false, ErrStopped
		}
		return 0, 0, false, err
	}
	mode := pubStrict
	if ctx.Done() == nil {
		mode = pubAction
	}
	return b.publishAt(ctx, vs, mode)
}

// publish is every publish method: it accepts the values of vs in order,
// waiting as mode says, and returns how many it accepted.
func (b *Broadcaster[T]) publish(ctx context.Context, vs []T, mode pubMode) (int, error) {
	_, n, _, err := b.publishAt(ctx, vs, mode)
	return n, err
}

// publishAt is publish that also returns the sequence number of the first
// value accepted (the n accepted took first, first+1, ...), and, when it
// returns ErrStopped, whether the first value not accepted had been given
// to a channel watcher (Action's early hand-off): a watcher holds it,
// which Topics counts as heard.
func (b *Broadcaster[T]) publishAt(ctx context.Context, vs []T, mode pubMode) (first uint64, n int, given bool, err error) {
	if b.err != nil {
		return 0, 0, false, b.err
	}
	if len(vs) == 0 {
		if b.isDone() {
			return 0, 0, false, ErrStopped // as every publish after Shutdown
		}
		return 0, 0, false, nil
	}
	// The fast path, inline: nobody holds the turn or waits for room, and
	// the ring readers have room for all of vs. Building the call's state
	// below cost about a third of Action's time with one watcher.
	if h, ok := b.head.tryHold(); ok {
		if end := h + uint64(len(vs)); end <= b.fast || b.raiseFast(h) && end <= b.fast { // fast > 0: nobody waits for room
			b.put(h, vs)
			b.head.release(end)       // fast stays as fastBound says
			if b.nparked.Load() > 0 { // see headWord.look
				b.wakeParked()
			}
			return h, len(vs), false, nil
		}
		b.head.release(h)
	}
	if mode != pubTry {
		if first, ok := b.yieldFast(vs); ok {
			return first, len(vs), false, nil
		}
	}
	return b.publishSlow(ctx, vs, mode)
}

// publishSlow is publishAt when the fast path cannot take every value.
func (b *Broadcaster[T]) publishSlow(ctx context.Context, vs []T, mode pubMode) (first uint64, n int, given bool, err error) {
	if b.err != nil {
		return 0, 0, false, b.err
	}
	p := pub[T]{b: b, ctx: ctx, mode: mode}
	if err := p.enter(); err != nil {
		return 0, 0, false, err
	}
	n, err = p.run(vs)
	given = errors.Is(err, ErrStopped) && p.inHandGiven()
	p.leave(n)
	return p.first, n, given, err
}

// publishYields is how many times a publisher whose fast path another
// publisher closed yields its processor and tries again before it takes the
// slow path. The slow path makes concurrent publishers take b.mu and the
// publish turn one after the other, each hand-over a park and a wake-up,
// while the publisher ahead of them, waiting for room, holds the turn for a
// few microseconds at most: 4 producers, pull readers at queue 100, M
// deliveries/s in interleaved runs of one binary, without yields against
// with 3: 10 readers 52-67 against 124-188, 100 readers 184-188 against
// 161-219, channel readers 6-11 against 7-9; Topics, one topic of 10
// readers, queue 1,024, 68-86 against 280-338. A publisher facing a
// channel watcher or a full watcher decided per value never yields
// (fastClosedByPublisher), and one facing ring readers without room only
// as fastClosedByRoom says.
const publishYields = 3

// yieldFast is the fast path tried again for vs, before the slow path, as
// long as what keeps the caller off it is another publisher: one holding
// head's busy bit or b.mu, the publish turn, or waiting for room. Between
// two tries it yields the processor, which lets the readers that publisher
// waits for make room, and the publisher finish. It also yields once
// (roomYields) when what keeps it off is the room of ring readers it may
// just have woken (fastClosedByRoom). It reports whether it accepted vs,
// and the sequence number of the first. A yield is no wait: nothing
// parks, so no wake-up is owed (DESIGN.md, section 3).
//
// Its first try repeats the fast path that just failed, at once: that
// costs a publisher facing a channel watcher one more look at head per
// value (within the noise: 0.94-0.99x), but tells why it failed, and
// another fast path holds head's bit only for a few stores. Having tryOne
// and the batch fast path report why they failed instead (looking at the
// turn and the waiters while holding the bit), with or without a first
// try before yielding, measured 0.76-0.82x with 4 producers on one topic
// (interleaved runs of two binaries, 209-316 against 285-372 M
// deliveries/s), so the fast paths stay as they are.
func (b *Broadcaster[T]) yieldFast(vs []T) (uint64, bool) {
	if b.err != nil {
		return 0, false
	}
	for i := 0; ; i++ {
		if h, ok := b.head.tryHold(); ok {
			end := h + uint64(len(vs))
			if end <= b.fast || b.raiseFast(h) && end <= b.fast {
				b.put(h, vs)
				b.head.release(end)
				if b.nparked.Load() > 0 {
					b.wakeParked()
				}
				return h, true
			}
			other := b.fastClosedByPublisher()
			room := !other && i < roomYields && b.fastClosedByRoom(h)
			b.head.release(h)
			if !other && !room {
				return 0, false
			}
		}
		if i == publishYields {
			return 0, false
		}
		hook(hookPublisherYielding)
		runtime.Gosched()
	}
}

// yieldOne is yieldFast for the one value v, for the callers of tryOne.
func (b *Broadcaster[T]) yieldOne(v T) bool {
	vs := [1]T{v}
	_, ok := b.yieldFast(vs[:])
	return ok
}

// fastClosedByPublisher reports whether the fast path is closed only
// because another publisher holds the publish turn, waits for room or for
// the sequence it blocked at: not by Shutdown, a channel watcher or a full
// watcher decided per value, which stay. Caller holds head's busy bit.
func (b *Broadcaster[T]) fastClosedByPublisher() bool {
	return (b.turn || b.roomWait.Load() != 0 || b.blockedAt.Load() != 0) &&
		!b.stopped && len(b.chans) == 0 && len(b.full) == 0
}

// fastClosedByRoom reports whether the publisher holding head's busy bit
// at h is to yield to the ring readers whose room closed its fast path:
// nothing else closed it (not a lap, the turn, Shutdown, a channel or a
// watcher decided per value), parked readers were woken since a publisher
// last yielded so (woke), and there are at most roomYieldReaders of them,
// and not many in the other topics of a Topics (as yieldsBeforePark).
//
// A reader that parked after draining its queue is woken onto the
// publisher's processor, which the publisher keeps while it fills the
// queue; without the yield it then parks itself, and the reader, once it
// has made room, wakes it: two parks and two wake-ups per queue's worth of
// values. The yield runs the woken readers at once, and the publisher after
// them. Readers that keep working are never parked, so that their
// publisher does not poll their room by yielding (woke stays 0): with
// every full reader, and 3 yields, readers checking the order of their
// values at queue 1,024 lost 15% at N = 1. Interleaved runs of one binary
// each, 6 pairs, ns per value, medians before/after: readers doing nothing
// at queue 100, N = 1 1.15x and N = 10 1.08x as fast; working readers at
// queue 1,024, N = 1 0.99x, N = 10 0.98x (within the noise). Without woke,
// a single yield: N = 1 1.18x, N = 10 1.07x, working N = 10 0.89x.
// Caller holds head's busy bit.
func (b *Broadcaster[T]) fastClosedByRoom(h uint64) bool {
	if h >= b.lap || b.turn || b.stopped || len(b.chans) > 0 || len(b.full) > 0 {
		return false
	}
	if b.woke.Load() == 0 {
		return false
	}
	b.woke.Store(0)
	n := b.nreaders.Load()
	return n <= roomYieldReaders && !b.crowdedFamily(n)
}

// roomYields is how many times a publisher whose fast path the room of
// readers it woke closed yields before it waits (fastClosedByRoom), and
// roomYieldReaders how many ring readers its broadcaster has at most for
// it to yield: with more, a yield hands the processor to one reader among
// many (N = 100 measured no gain, N = 1,000 a loss, with 3 yields).
const (
	roomYields       = 1
	roomYieldReaders = 32
)

// pub is one publish call.
type pub[T any] struct {
	b     *Broadcaster[T]
	ctx   context.Context
	mode  pubMode
	turn  bool          // holds the publish turn
	next  chan struct{} // the publisher to hand the turn to, once unlocked
	start time.Time     // when the call first had to wait, for timeouts

	accepted  int      // values of this call accepted so far
	first     uint64   // the sequence number of the first of them
	announced int      // of those, how many the parked readers were woken for
	rewake    bool     // publishers waiting for room must look again (see tookBlocked)
	reported  []uint64 // the watchers its waits were reported for (WithWaitReport): once per call and watcher

	// When a snapshot first saw the untimed wait for the value of
	// generation seenGen, kept across its wake-ups (waiting.go).
	seen    time.Time
	seenGen uint64

	// The value in hand: its sequence number plus one, and the generation
	// that tags the decisions taken for it.
	seq, gen uint64
	marked   bool // some watcher's handed or skipGen refers to gen
	handed   bool // a channel watcher was given the value before it was accepted
	offered  bool // the channel watchers with room have the value
	deadline time.Time

	log dropLog
}

// announce wakes the parked ring readers if this call accepted values since
// it last did, before it waits or calls a user's behaviour with the lock
// released: a reader that parked before those values must be woken to read
// them, or a batch waiting for its room would wait forever. Caller does not
// hold b.mu.
func (p *pub[T]) announce() {
	if p.rewake {
		p.rewake = false
		p.b.signalRoom()
	}
	if p.accepted > p.announced {
		p.announced = p.accepted
		if p.b.nparked.Load() > 0 {
			p.b.wakeParked()
		}
	}
}

// leave ends the call: it passes the turn on and unlocks, then wakes the
// next publisher and the parked readers, and reports the drops.
func (p *pub[T]) leave(accepted int) {
	b := p.b
	if p.turn {
		p.releaseTurn()
	}
	b.unlock()
	if p.next != nil {
		p.next <- struct{}{} // buffered: the next publisher takes it when it wakes
	}
	if p.rewake {
		b.signalRoom()
	}
	if accepted > 0 && b.nparked.Load() > 0 {
		b.wakeParked()
	}
	p.log.report(b)
}

// run accepts the values of vs in order. It holds b.mu on entry and return.
func (p *pub[T]) run(vs []T) (int, error) {
	b := p.b
	n := 0
	for n < len(vs) {
		// The turn first: waiting for it releases the lock, and Shutdown
		// may come meanwhile.
		if err := p.yieldTurn(); err != nil { // taken while we waited for room
			return n, err
		}
		if b.stopped {
			return n, ErrStopped
		}
		if k := b.reserve(len(vs) - n); k > 0 {
			if p.handed {
				p.heardInHand(b.head.Load())
			}
			if n == 0 {
				p.first = b.head.Load()
			}
			if b.store(vs[n : n+k]) {
				p.rewake = true
			}
			n += k
			p.accepted = n
			continue
		}
		ok, err := p.one(vs[n])
		if err != nil {
			return n, err
		}
		if ok {
			n++
			p.accepted = n
		}
	}
	return n, nil
}

// reserve returns how many of the next n values can be accepted on the fast
// path: no channel watcher, no full ring reader, and room below the limits.
func (b *Broadcaster[T]) reserve(n int) int {
	if len(b.chans) > 0 || len(b.full) > 0 {
		return 0
	}
	h := b.head.Load()
	lim := min(b.limit, b.lap)
	if h >= lim {
		return 0
	}
	return int(min(uint64(n), lim-h))
}

// store accepts vs on the ring: one write per value, whatever the number of
// readers, then one store of head, which publishes them to the readers
// (they load head before copying). It reports whether publishers wait for
// room for the value it took: they must be woken to look again (see
// rewake).
func (b *Broadcaster[T]) store(vs []T) bool {
	h := b.head.Load()
	b.put(h, vs)
	b.head.Store(h + uint64(len(vs)))
	return b.tookBlocked()
}

// put writes vs to the ring from sequence h, if it is on. The caller holds
// the busy bit of head.
func (b *Broadcaster[T]) put(h uint64, vs []T) {
	if b.ringOn {
		rg := b.ring.Load()
		for i, v := range vs {
			rg.Put(h+uint64(i), v)
		}
	}
}

// one is the slow path for the value v: it returns true once v is
// accepted, false when it had to wait or decide first (the caller then
// tries again, the broadcaster having changed meanwhile).
func (p *pub[T]) one(v T) (bool, error) {
	b := p.b
	s := b.head.Load()
	p.begin(s)
	if s >= b.limit {
		// From here, a WaitIfChannelFull reader that leaves the full set
		// counts itself out of nblocked (see waitFull).
		b.nblocked.Store(0)
		b.blockedAt.Store(s + 1)
	}
	b.refresh(s, &p.log)
	if len(b.toSift) > 0 {
		p.sift()
		return false, nil
	}
	if s >= b.limit { // a WaitIfChannelFull reader is full: no need to ask anyone
		return false, p.waitFull(s)
	}
	if p.undecided(b.full, s) {
		return false, p.decide(v)
	}
	if p.blocked(b.full, s) {
		return false, p.waitRoom(s)
	}
	if len(b.chans) > 0 {
		if len(b.filterChans) > 0 && p.unfiltered() {
			return false, p.decide(v)
		}
		p.chanPass(v)
		if p.undecided(b.pending, s) {
			return false, p.decide(v)
		}
		if p.blocked(b.pending, s) {
			return false, p.sendBlocked(v)
		}
	}
	p.accept(v, s)
	return true, nil
}

// heardInHand is called as the value of s is accepted: if it was the
// value in hand, given to a channel watcher before it was accepted, and
// every watcher left meanwhile, a watcher that left holds it: it is not
// unwatched. Caller holds b.mu.
func (p *pub[T]) heardInHand(s uint64) {
	b := p.b
	if p.handed && p.seq == s+1 && b.watching() == 0 && b.unwatchedFrom == s {
		b.unwatchedFrom = s + 1
	}
}

// inHandGiven reports whether the value in hand, not accepted, was given to
// a channel watcher. Caller holds b.mu.
func (p *pub[T]) inHandGiven() bool {
	return p.handed && p.seq == p.b.head.Load()+1
}

// begin starts a new generation when v is a new value.
func (p *pub[T]) begin(s uint64) {
	if p.seq != s+1 {
		p.b.gen++
		p.seq, p.gen, p.marked, p.offered, p.handed = s+1, p.b.gen, false, false, false
	}
}

// accept makes v the value of sequence s: the full ring readers' verdicts
// first, so that a reader never sees v in a queue its behaviour refused it
// to, then the store and head, then the channel watchers.
func (p *pub[T]) accept(v T, s uint64) {
	b := p.b
	if p.accepted == 0 {
		p.first = s
	}
	if len(b.full) > 0 {
		p.applyAll(b.full, v, s)
	}
	if b.ringOn {
		b.ring.Load().Put(s, v)
	}
	b.head.Store(s + 1)
	p.heardInHand(s)
	if b.tookBlocked() {
		p.rewake = true
	}
	if len(b.chans) > 0 {
		p.chanDeliver(v, s)
	}
	hook(hookAccepted)
}

package fanout

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/fanout-go/fanout/internal/ring"
)

// This file is the publish path. A publish call goes through these phases,
// each a function below:
//
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
	if b.tryOne(v) {
		return nil
	}
	vs := [1]T{v}
	_, _, err := b.publishSlow(context.Background(), vs[:], pubAction)
	return err
}

// tryOne is the fast path for one value, inline: it accepts v if head is
// below b.fast: nobody holds the turn or waits for room, no watcher has a
// channel or is full, and the ring readers have room (see fastBound). It wakes the parked readers after
// unlocking. (Through publish, with its slice of one, the same took a third
// longer with one watcher: 38 against 29 ns per value.)
func (b *Broadcaster[T]) tryOne(v T) bool {
	if b.err != nil {
		return false
	}
	b.mu.Lock()
	h := b.head.Load()
	if h >= b.fast {
		b.mu.Unlock() // nothing changed: fast stays
		return false
	}
	if b.ringOn {
		b.ring.Load().Put(h, v)
	}
	b.head.Store(h + 1)
	b.mu.Unlock() // fast is unchanged: nothing it depends on changed
	if b.nparked.Load() > 0 {
		b.wakeParked()
	}
	return true
}

// ActionContext is [Broadcaster.Action] bounded by ctx: if ctx is done before
// v is accepted (already done when called included), it returns ctx.Err()
// and no watcher with room has received v. A nil ctx, or one that can never
// end (such as context.Background()), makes it the same as Action.
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
// and no watcher with room has received the value that was waiting. A nil
// ctx means context.Background().
func (b *Broadcaster[T]) ActionBatchContext(ctx context.Context, vs []T) (int, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	mode := pubStrict
	if ctx.Done() == nil {
		mode = pubAction
	}
	return b.publish(ctx, vs, mode)
}

// publish is every publish method: it accepts the values of vs in order,
// waiting as mode says, and returns how many it accepted.
func (b *Broadcaster[T]) publish(ctx context.Context, vs []T, mode pubMode) (int, error) {
	_, n, err := b.publishAt(ctx, vs, mode)
	return n, err
}

// publishAt is publish that also returns the sequence number of the first
// value accepted (the n accepted took first, first+1, ...).
func (b *Broadcaster[T]) publishAt(ctx context.Context, vs []T, mode pubMode) (first uint64, n int, err error) {
	if b.err != nil {
		return 0, 0, b.err
	}
	if len(vs) == 0 {
		return 0, 0, nil
	}
	// The fast path, inline: nobody holds the turn or waits for room, and
	// the ring readers have room for all of vs. Building the call's state
	// below cost about a third of Action's time with one watcher.
	b.mu.Lock()
	if h := b.head.Load(); h+uint64(len(vs)) <= b.fast {
		b.store(vs)   // fast > 0: nobody waits for room
		b.mu.Unlock() // fast is unchanged: nothing it depends on changed
		if b.nparked.Load() > 0 {
			b.wakeParked()
		}
		return h, len(vs), nil
	}
	b.mu.Unlock()
	return b.publishSlow(ctx, vs, mode)
}

// publishSlow is publishAt when the fast path cannot take every value.
func (b *Broadcaster[T]) publishSlow(ctx context.Context, vs []T, mode pubMode) (uint64, int, error) {
	if b.err != nil {
		return 0, 0, b.err
	}
	p := pub[T]{b: b, ctx: ctx, mode: mode}
	if err := p.enter(); err != nil {
		return 0, 0, err
	}
	n, err := p.run(vs)
	p.leave(n)
	return p.first, n, err
}

// pub is one publish call.
type pub[T any] struct {
	b     *Broadcaster[T]
	ctx   context.Context
	mode  pubMode
	turn  bool          // holds the publish turn
	next  chan struct{} // the publisher to hand the turn to, once unlocked
	start time.Time     // when the call first had to wait, for timeouts

	accepted  int    // values of this call accepted so far
	first     uint64 // the sequence number of the first of them
	announced int    // of those, how many the parked readers were woken for
	rewake    bool   // publishers waiting for room must look again (see tookBlocked)

	// The value in hand: its sequence number plus one, and the generation
	// that tags the decisions taken for it.
	seq, gen uint64
	marked   bool // some watcher's handed or skipGen refers to gen
	offered  bool // the channel watchers with room have the value
	deadline time.Time

	log dropLog
}

// enter locks the broadcaster, after the publisher holding the turn, if any,
// has released it. ActionOrDrop refuses instead, as it does while a
// publisher waits for room: it never overtakes one.
func (p *pub[T]) enter() error {
	b := p.b
	b.mu.Lock()
	var err error
	switch {
	case b.stopped:
		err = ErrStopped
	case p.mode == pubTry && b.roomWait.Load() > 0:
		b.refused++
		err = errRefused
	default:
		err = p.yieldTurn()
	}
	if err != nil {
		b.unlock()
		if p.next != nil {
			p.next <- struct{}{}
		}
	}
	return err
}

// yieldTurn waits for the publish turn if another publisher holds it (or
// refuses, for ActionOrDrop). It holds b.mu on entry and return.
func (p *pub[T]) yieldTurn() error {
	b := p.b
	switch {
	case !b.turn || p.turn:
		return nil
	case p.mode == pubTry:
		b.refused++
		return errRefused
	}
	ch := b.spareChan()
	b.turnQ = append(b.turnQ, ch)
	b.unlock()
	p.waitStart()
	var err error
	select {
	case <-ch:
	case <-p.ctx.Done():
		err = p.ctx.Err()
	case <-b.done:
		err = ErrStopped
	}
	b.mu.Lock()
	if err == nil {
		p.turn = true
		b.putChan(ch)
		return nil
	}
	if i := slices.Index(b.turnQ, ch); i >= 0 {
		b.turnQ = slices.Delete(b.turnQ, i, i+1)
	} else { // handed to us meanwhile: pass it on (leave wakes the next)
		<-ch
		p.turn = true
		p.releaseTurn()
	}
	b.putChan(ch)
	return err
}

func (p *pub[T]) takeTurn() {
	if !p.turn {
		p.b.turn, p.turn = true, true
	}
}

// releaseTurn passes the turn to the first queued publisher (woken by leave,
// once unlocked), or frees it. Caller holds b.mu.
func (p *pub[T]) releaseTurn() {
	b := p.b
	p.turn = false
	if len(b.turnQ) == 0 {
		b.turn = false
		return
	}
	// Shifted, not resliced, so that the queue keeps its storage: it is
	// as long as the publishers waiting for the turn, a few.
	p.next = b.turnQ[0]
	n := copy(b.turnQ, b.turnQ[1:])
	b.turnQ[n] = nil
	b.turnQ = b.turnQ[:n]
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
	if b.ringOn {
		rg := b.ring.Load()
		for i, v := range vs {
			rg.Put(h+uint64(i), v)
		}
	}
	b.head.Store(h + uint64(len(vs)))
	return b.tookBlocked()
}

// tookBlocked clears blockedAt once the value publishers waited for is
// accepted, and reports whether publishers wait for room. A publisher that
// waits for room for a sequence another publisher has now taken is woken by
// no reader: the readers count themselves out only for the sequence in
// blockedAt, and may already have made room, then parked. So the publisher
// that took it wakes them after unlocking (an Action waiting so under
// concurrent publishers and parked readers waited forever). Caller holds
// b.mu.
func (b *Broadcaster[T]) tookBlocked() bool {
	if b.blockedAt.Load() == 0 {
		return false
	}
	b.blockedAt.Store(0)
	return b.roomWait.Load() > 0
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
	if s >= b.limit { // a WaitIfChannelFull reader is full: no need to ask anyone
		return false, p.waitFull(s)
	}
	if p.undecidedRing(s) {
		return false, p.decide()
	}
	if p.ringBlocked(s) {
		return false, p.waitRoom(s)
	}
	if len(b.chans) > 0 {
		p.chanPass(v)
		if p.undecidedChans() {
			return false, p.decide()
		}
		if p.chanBlocked() {
			return false, p.sendBlocked(v)
		}
	}
	p.accept(v, s)
	return true, nil
}

// begin starts a new generation when v is a new value.
func (p *pub[T]) begin(s uint64) {
	if p.seq != s+1 {
		p.b.gen++
		p.seq, p.gen, p.marked, p.offered = s+1, p.b.gen, false, false
	}
}

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
		case w.kind == kindWait:
			nfull++
		default:
			w.inFull = true
			b.full = append(b.full, w)
			continue
		}
		if f < limit {
			limit, b.blocker = f, w
		}
	}
	b.limit, b.nfull = limit, nfull
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
		if f := w.fullAt.Load(); f > s {
			w.inFull = false
			if f < b.limit {
				b.limit, b.blocker = f, w
			}
			continue
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

// decision returns what a full watcher's behaviour says about the value in
// hand: the built-ins' fixed answers, a user's from the last decide.
func (p *pub[T]) decision(w *Watcher[T]) Decision {
	switch w.kind {
	case kindWait:
		return Decision{Verdict: VerdictWait}
	case kindDropNew:
		return Decision{Verdict: VerdictDropNew}
	case kindDropOldest:
		return Decision{Verdict: VerdictDropOldest}
	case kindEvict:
		return Decision{Verdict: VerdictEvict}
	case kindTimeout:
		return w.behavior.OnFull(FullState{})
	}
	return w.ps.pre
}

// blocks reports whether decision d makes the publisher wait for w. A
// user's behaviour not yet asked about the value in hand does not block.
func (p *pub[T]) blocks(w *Watcher[T], d Decision) bool {
	if w.kind == kindCustom && w.ps.preGen != p.gen {
		return false
	}
	return d.Verdict == VerdictWait && d.Timeout >= 0 && (w.ps == nil || w.ps.skipGen != p.gen)
}

// undecidedRing lists the full ring readers with a user's behaviour not yet
// asked about the value in hand.
func (p *pub[T]) undecidedRing(s uint64) bool {
	b := p.b
	und := b.undecided[:0]
	for _, w := range b.full {
		if w.kind == kindCustom && w.ps.preGen != p.gen && w.fullAt.Load() <= s {
			und = append(und, undecided[T]{w: w, st: w.fullState(s)})
		}
	}
	b.undecided = und
	return len(und) > 0
}

// decide asks the listed behaviours for their decisions. It holds the turn
// but no lock meanwhile, so OnFull may call the broadcaster (see
// [FullChannelBehavior]); a panic in it is recovered as the decision to miss
// the value.
func (p *pub[T]) decide() error {
	b := p.b
	p.takeTurn()
	p.markHanded()
	und := b.undecided
	b.unlock()
	p.announce()
	for i := range und {
		und[i].d, und[i].err = und[i].w.decide(und[i].st)
	}
	b.mu.Lock()
	for i := range und {
		ps := und[i].w.ps
		ps.pre, ps.preErr, ps.preGen = und[i].d, und[i].err, p.gen
		if und[i].err != nil {
			b.panics.Add(1)
		}
		und[i] = undecided[T]{}
	}
	b.undecided = und[:0]
	return nil
}

// ringBlocked reports whether a full ring reader whose decision is to wait
// makes the value wait. It sets p.deadline to the earliest end of a bounded
// wait.
func (p *pub[T]) ringBlocked(s uint64) bool {
	b := p.b
	blocked := false
	p.deadline = time.Time{}
	for _, w := range b.full {
		if d := p.decision(w); w.fullAt.Load() <= s && p.blocks(w, d) {
			blocked = true
			if d.Timeout > 0 {
				p.waitStart()
				if t := p.start.Add(d.Timeout); p.deadline.IsZero() || t.Before(p.deadline) {
					p.deadline = t
				}
			}
		}
	}
	return blocked
}

func (p *pub[T]) waitStart() {
	if p.start.IsZero() {
		p.start = time.Now()
	}
}

// waitFull waits, with no lock held, until the WaitIfChannelFull readers
// that are full at s have all made room, or the call ends. It is woken once
// for all of them, not once per reader: refreshLimit counted them (b.nfull)
// after blockedAt was set, and each counts itself out when it makes room,
// the last one waking the publishers. A reader that leaves otherwise
// (stopped, moved to a channel) wakes them all, and they count again.
func (p *pub[T]) waitFull(s uint64) error {
	b := p.b
	if p.mode == pubTry {
		b.refused++
		return errRefused
	}
	if p.accepted > 0 {
		p.takeTurn()
	}
	p.waitStart()
	b.roomWait.Add(1)
	defer b.roomWait.Add(-1)
	wake := b.waitForRoom()
	defer b.doneWaiting(wake)
	if b.nblocked.Add(int64(b.nfull)) <= 0 {
		return nil // they made room meanwhile
	}
	b.unlock()
	p.announce()
	err := p.sleep(wake)
	b.mu.Lock()
	return err
}

// sleep waits, with no lock held, until wake is signalled or the call's ctx
// ends. Shutdown signals every room waiter's wake (see Shutdown), and the
// caller then finds the broadcaster stopped, so a call whose ctx can never
// end waits with a plain receive: a three-way select there cost one
// publisher and one reader a tenth of their deliveries per second (33.0
// against 36.8 M, medians of 9 alternating runs of the two builds).
func (p *pub[T]) sleep(wake chan struct{}) error {
	done := p.ctx.Done()
	if done == nil {
		<-wake
		return nil
	}
	select {
	case <-wake:
		return nil
	case <-done:
		return p.ctx.Err()
	case <-p.b.done:
		return ErrStopped
	}
}

// waitRoom waits, with no lock held, until a ring reader makes room, a
// bounded wait expires (that reader then misses the value), or the call
// ends. ActionOrDrop refuses instead. A batch that has values accepted
// holds the turn while it waits, so that nothing lands between them; a
// single value does not: publishers waiting for room are all woken when a
// reader makes some, and go on in the order the lock takes them.
func (p *pub[T]) waitRoom(s uint64) error {
	b := p.b
	if p.mode == pubTry {
		b.refused++
		return errRefused
	}
	if p.accepted > 0 {
		p.takeTurn()
	}
	p.waitStart()
	// Count ourselves, register, then look again: a reader that makes room
	// after our look sees roomWait and wakes the registered waiters.
	b.roomWait.Add(1)
	defer b.roomWait.Add(-1)
	wake := b.waitForRoom()
	defer b.doneWaiting(wake)
	if !p.stillBlocked(s) {
		return nil
	}
	var timeout <-chan time.Time
	if !p.deadline.IsZero() {
		left := time.Until(p.deadline)
		if left <= 0 {
			p.expire(s)
			return nil
		}
		t := p.timer(left)
		defer p.putTimer(t)
		timeout = t.C
	}
	b.unlock()
	p.announce()
	var err error
	select {
	case <-wake:
	case <-timeout:
	case <-p.ctx.Done():
		err = p.ctx.Err()
	case <-b.done:
		err = ErrStopped
	}
	b.mu.Lock()
	if err == nil && !p.deadline.IsZero() && !time.Now().Before(p.deadline) {
		p.expire(s)
	}
	return err
}

// stillBlocked looks again, with roomWait counted, at the full readers
// that decided to wait for the value of s.
func (p *pub[T]) stillBlocked(s uint64) bool {
	b := p.b
	for _, w := range b.full {
		if d := p.decision(w); w.fullAt.Load() <= s && p.blocks(w, d) {
			return true
		}
	}
	return false
}

// timer returns a timer set to d, to be given back with putTimer. Timers
// are kept for reuse by the broadcaster, so that a bounded wait does not
// allocate (a new timer per wait cost up to 1.7 allocations per published
// value at N=1000, benchmark harness, wait-timeout).
func (p *pub[T]) timer(d time.Duration) *time.Timer {
	b := p.b
	b.roomMu.Lock()
	defer b.roomMu.Unlock()
	if n := len(b.spareTimers); n > 0 {
		t := b.spareTimers[n-1]
		b.spareTimers = b.spareTimers[:n-1]
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// putTimer stops t and keeps it for reuse; since Go 1.23 a stopped timer's
// channel is empty after Reset.
func (p *pub[T]) putTimer(t *time.Timer) {
	t.Stop()
	b := p.b
	b.roomMu.Lock()
	b.spareTimers = append(b.spareTimers, t)
	b.roomMu.Unlock()
}

// expire makes the full ring readers whose bounded wait has run out miss
// the value in hand.
func (p *pub[T]) expire(s uint64) {
	now := time.Now()
	for _, w := range p.b.full {
		if d := p.decision(w); w.fullAt.Load() <= s && p.blocks(w, d) && d.Timeout > 0 && !now.Before(p.start.Add(d.Timeout)) {
			w.ps.skipGen = p.gen
		}
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
		p.applyFull(s)
	}
	if b.ringOn {
		b.ring.Load().Put(s, v)
	}
	b.head.Store(s + 1)
	if b.tookBlocked() {
		p.rewake = true
	}
	if len(b.chans) > 0 {
		p.chanDeliver(v, s)
	}
}

// applyFull applies their verdicts to the full ring readers.
func (p *pub[T]) applyFull(s uint64) {
	b := p.b
	var buf [4]*Watcher[T]
	evict := buf[:0]
	for _, w := range b.full {
		if p.missRing(w, s) {
			evict = append(evict, w)
		}
	}
	for _, w := range evict {
		b.closeLocked(w, ErrEvicted, &p.log)
	}
}

// missRing applies the verdict of a full ring reader to the value of s. It
// reports whether the reader is to be evicted.
func (p *pub[T]) missRing(w *Watcher[T], s uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.o+w.c > s { // it made room meanwhile: it takes the value
		return false
	}
	var err error
	r := DropFull
	switch d := p.decision(w); d.Verdict {
	case VerdictEvict:
		w.count(DropEvicted, 1, &p.log, nil)
		w.missed(s)
		return true
	case VerdictDropOldest:
		if w.dropOldest(s) {
			w.count(DropOldest, 1, &p.log, nil)
			w.publishMarks()
			return false
		}
	case VerdictWait: // only a bounded wait that expired, or a negative one
		r = DropTimeout
	case verdictPanic:
		r, err = DropPanic, w.ps.preErr
	}
	w.skip(s)
	w.count(r, 1, &p.log, err)
	w.missed(s)
	w.publishMarks()
	return false
}

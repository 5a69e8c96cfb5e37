package fanout

import (
	"slices"
	"time"
)

// signalRoom wakes every publisher waiting for a ring reader to make room.
func (b *Broadcaster[T]) signalRoom() {
	b.roomMu.Lock()
	for i, ch := range b.roomWaiters {
		select {
		case ch <- struct{}{}:
		default:
		}
		b.roomWaiters[i] = nil
	}
	b.roomWaiters = b.roomWaiters[:0]
	b.roomMu.Unlock()
}

// waitForRoom registers a room waiter's channel. Caller holds b.mu and has
// counted itself in roomWait.
func (b *Broadcaster[T]) waitForRoom() chan struct{} {
	ch := b.takeChan()
	b.roomMu.Lock()
	b.roomWaiters = append(b.roomWaiters, ch)
	b.roomMu.Unlock()
	return ch
}

// doneWaiting unregisters a room waiter's channel, if no reader took it
// meanwhile, and puts it back empty. Caller holds b.mu.
func (b *Broadcaster[T]) doneWaiting(ch chan struct{}) {
	b.roomMu.Lock()
	if i := slices.Index(b.roomWaiters, ch); i >= 0 {
		b.roomWaiters = slices.Delete(b.roomWaiters, i, i+1)
	}
	select { // readers send under roomMu: none can come after this
	case <-ch:
	default:
	}
	b.roomMu.Unlock()
	b.putChan(ch)
}

func (p *pub[T]) waitStart() {
	if p.start.IsZero() {
		p.start = time.Now()
	}
}

// unboundedWaitStart notes when the call first had to wait for something
// with no time limit of its own (room of a WaitIfChannelFull reader, the
// turn), in case a bounded wait follows. With no watcher that bounds its
// waits there is none to measure for: time.Now was 4% of a lossless
// publisher's time with one reader (CPU profile, one value in a hundred
// waits). A bounded watcher that registers while the call waits has its
// bound measured from the call's next wait. Caller holds b.mu.
func (p *pub[T]) unboundedWaitStart() {
	if p.b.nbounded > 0 {
		p.waitStart()
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
	if err := p.mayWaitForRoom(); err != nil {
		return err
	}
	p.unboundedWaitStart()
	hook(hookRoomCounting)
	b.roomWait.Add(1)
	defer b.roomWait.Add(-1)
	wake := b.waitForRoom()
	if b.nblocked.Add(int64(b.nfull)) <= 0 {
		b.doneWaiting(wake)
		return nil // they made room meanwhile
	}
	rep := p.reporter(b.fullWaiters(s))
	defer rep.stop()
	p.listWait(waitsFull, s)
	b.unlock()
	p.announce()
	hook(hookRoomSleep)
	err := p.sleep(wake, &rep)
	hook(hookRoomWoken)
	b.mu.Lock()
	p.unlistWait()
	if err == nil {
		b.putChan(wake) // a reader took it off the list and signalled it
	} else {
		b.doneWaiting(wake)
	}
	return err
}

// mayWaitForRoom refuses for ActionOrDrop (counted), and otherwise has a
// batch with values accepted take the turn, so that nothing lands between
// them while it waits. Caller holds b.mu.
func (p *pub[T]) mayWaitForRoom() error {
	if p.mode == pubTry {
		p.b.refused++
		return errRefused
	}
	if p.accepted > 0 {
		p.takeTurn()
	}
	return nil
}

// fullWaiters returns the WaitIfChannelFull readers full at s, for a wait
// report, or nil when the broadcaster makes none. Caller holds b.mu.
func (b *Broadcaster[T]) fullWaiters(s uint64) []*Watcher[T] {
	if b.cfg.waitReport == nil {
		return nil
	}
	return b.waitFullFor(s)
}

// sleep waits, with no lock held, until wake is signalled or the call's ctx
// ends. Shutdown signals every room waiter's wake (see Shutdown), and the
// caller then finds the broadcaster stopped, so a call whose ctx can never
// end waits with a plain receive: a three-way select there cost one
// publisher and one reader a tenth of their deliveries per second (33.0
// against 36.8 M, medians of 9 alternating runs of the two builds).
func (p *pub[T]) sleep(wake chan struct{}, rep *waitReporter[T]) error {
	done := p.ctx.Done()
	if done == nil && rep.t == nil {
		<-wake
		return nil
	}
	for {
		select {
		case <-wake:
			return nil
		case <-done:
			return p.ctx.Err()
		case <-p.b.done:
			return ErrStopped
		case <-rep.c():
			p.report(rep)
		}
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
	if err := p.mayWaitForRoom(); err != nil {
		return err
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
		t := b.takeTimer()
		t.Reset(left)
		defer b.putTimer(t) // b.mu is held again at return
		timeout = t.C
	}
	rep := p.reporter(p.blockedWatchers())
	defer rep.stop()
	p.listWait(waitsRoom, s)
	b.unlock()
	p.announce()
	hook(hookRoomSleep)
	err := p.sleepFor(wake, timeout, &rep)
	hook(hookRoomWoken)
	b.mu.Lock()
	p.unlistWait()
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

// madeRoom reports whether a read that moved fullAt from before on should
// wake the waiting publishers: for a WaitIfChannelFull reader, when it was
// the last of the full ones to make room for the value they wait for (see
// waitFull); for a reader decided per value, whenever a publisher waits.
func (w *Watcher[T]) madeRoom(before uint64) bool {
	b := w.b
	switch {
	case w.kind == kindWait:
		bs := b.blockedAt.Load()
		last := bs != 0 && before < bs && w.o+w.c >= bs && b.nblocked.Add(-1) <= 0
		// A filtered reader may be waited for either way (see
		// refreshLimit): listed in b.full, it wakes the publishers
		// whenever they wait, as the readers decided per value do.
		return last || w.keeps && w.x.perValue.Load() && b.roomWait.Load() > 0
	case w.lazy:
		return false
	}
	return b.roomWait.Load() > 0
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

// sleepFor is sleep with a bounded wait's timeout (nil for none); it
// returns nil when the timeout fires, the caller then seeing that it
// expired.
func (p *pub[T]) sleepFor(wake chan struct{}, timeout <-chan time.Time, rep *waitReporter[T]) error {
	for {
		select {
		case <-wake:
			return nil
		case <-timeout:
			return nil
		case <-p.ctx.Done():
			return p.ctx.Err()
		case <-p.b.done:
			return ErrStopped
		case <-rep.c():
			p.report(rep)
		}
	}
}

// blockedWatchers returns the watchers listed in b.blocked, for a wait
// report, or nil when the broadcaster makes none. Caller holds b.mu.
func (p *pub[T]) blockedWatchers() []*Watcher[T] {
	if p.b.cfg.waitReport == nil {
		return nil
	}
	ws := make([]*Watcher[T], len(p.b.blocked))
	for i := range p.b.blocked {
		ws[i] = p.b.blocked[i].w
	}
	return ws
}

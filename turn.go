package fanout

import "slices"

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
	ch := b.takeChan()
	b.turnQ = append(b.turnQ, ch)
	p.unboundedWaitStart()
	b.unlock()
	var err error
	select {
	case <-ch:
		hook(hookTurnHanded)
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

package fanout

import "time"

type blockedSend[T any] struct {
	w       *Watcher[T]
	timeout time.Duration
}

type undecided[T any] struct {
	w   *Watcher[T]
	st  FullState
	d   Decision
	err error
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

// undecidedChans lists the full channel watchers with a user's behaviour
// not yet asked about the value in hand.
func (p *pub[T]) undecidedChans() bool {
	b := p.b
	und := b.undecided[:0]
	for _, w := range b.pending {
		if w.kind == kindCustom && w.ps.preGen != p.gen && w.ps.skipGen != p.gen {
			und = append(und, undecided[T]{w: w, st: w.fullState(p.seq - 1)})
		}
	}
	b.undecided = und
	return len(und) > 0
}

// chanBlocked lists in b.blocked the full channel watchers whose decision is
// to wait, and reports whether there are any.
func (p *pub[T]) chanBlocked() bool {
	b := p.b
	blk := b.blocked[:0]
	for _, w := range b.pending {
		if d := p.decision(w); p.blocks(w, d) && (cap(w.cs.ch) > 0 || p.mode != pubTry) {
			blk = append(blk, blockedSend[T]{w: w, timeout: d.Timeout})
		}
	}
	b.blocked = blk
	return len(blk) > 0
}

// missChan applies the verdict of a full channel watcher to the value v of
// s. It reports whether the watcher is to be evicted.
func (p *pub[T]) missChan(w *Watcher[T], v T, s uint64) bool {
	ps := w.ps
	if ps.skipGen == p.gen {
		w.count(DropTimeout, 1, &p.log, nil)
		w.missed(s)
		return false
	}
	ch := w.cs.ch
	select {
	case ch <- v: // the consumer made room meanwhile
		w.cs.in++
		return false
	default:
	}
	var err error
	r := DropFull
	switch d := p.decision(w); d.Verdict {
	case VerdictDropOldest:
		if cap(ch) > 0 {
			select {
			case <-ch:
				w.cs.in-- // put in, never received
				w.count(DropOldest, 1, &p.log, nil)
			default: // the consumer made room meanwhile
			}
			select {
			case ch <- v:
				w.cs.in++
				return false
			default:
			}
		}
	case VerdictEvict:
		w.count(DropEvicted, 1, &p.log, nil)
		w.missed(s)
		return true
	case VerdictWait:
		if d.Timeout < 0 {
			r = DropTimeout
		} // else a hand-off not ready for ActionOrDrop
	case verdictPanic:
		r, err = DropPanic, ps.preErr
	}
	w.count(r, 1, &p.log, err)
	w.missed(s)
	return false
}

// decide consults the watcher's behaviour about the value of sequence
// number seq. Caller is the publisher, holding the publish turn but no lock.
func (w *Watcher[T]) decide(st FullState) (d Decision, err error) {
	defer func() {
		if p := recover(); p != nil {
			d, err = Decision{Verdict: verdictPanic}, panicError(p)
		}
	}()
	return w.behavior.OnFull(st), nil
}

// fullState describes the watcher to its behaviour. Caller holds b.mu.
func (w *Watcher[T]) fullState(seq uint64) FullState {
	st := FullState{WatcherID: w.id, QueueLength: w.q, Dropped: w.totalDrops()}
	if ps := w.ps; ps != nil && ps.missEnd == seq && seq != 0 {
		st.ConsecutiveDrops = ps.consec
	}
	return st
}

// missed records that the watcher missed the value of seq, for
// ConsecutiveDrops. Caller holds b.mu.
func (w *Watcher[T]) missed(seq uint64) {
	if ps := w.ps; ps != nil {
		if ps.missEnd != seq || seq == 0 {
			ps.consec = 0
		}
		ps.consec++
		ps.missEnd = seq + 1
	}
}

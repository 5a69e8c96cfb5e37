package fanout

import (
	"errors"
	"time"
)

// This file is the publish path's channel phase: watchers that have their
// own channel (ResultChan was called, or the queue length is 0) get one
// channel operation per value, under the broadcaster's lock, in the order of
// the values.

// chanPass is the first look at the channel watchers for the value in hand.
// Action hands v to every channel watcher with room at once, so that their
// consumers keep working while the publisher waits for the full ones, as
// with a loop of channel sends (holding v back from them made Action 1.2x
// slower at 100 watchers and 1.4x at 1000, lossless, queue 100). A strict or
// try publish hands v to no watcher with room before it is accepted: it
// only lists the full watchers that may wait (a strict one hands v to a
// ready hand-off consumer, and later to the full ones that wait, by
// sendBlocked). Either way b.pending lists the full ones.
func (p *pub[T]) chanPass(v T) {
	if p.mode == pubAction {
		p.offerAll(v)
		return
	}
	p.checkWaiters(v)
}

// offerAll hands v to every channel watcher with room that does not have it
// yet, and lists the others in b.pending.
func (p *pub[T]) offerAll(v T) {
	b := p.b
	pend := b.pending[:0]
	for i := range b.chans {
		cs := &b.chans[i]
		if p.marked && cs.w.ps.handed == p.gen || cs.filter && p.rejects(cs.w) {
			continue
		}
		if !p.marked || cs.w.ps.skipGen != p.gen {
			select {
			case cs.ch <- v:
				cs.sent++
				p.handed = true
				if cs.filter {
					cs.w.cs.sent(p.seq - 1)
				}
				continue
			default:
			}
		}
		pend = append(pend, cs.w)
	}
	p.offered = true
	b.pending = pend
}

// checkWaiters lists in b.pending the full channel watchers that may wait.
// A strict publish hands v to a hand-off watcher whose consumer is ready
// right now; ActionOrDrop leaves that to the delivery.
func (p *pub[T]) checkWaiters(v T) {
	b := p.b
	pend := b.pending[:0]
	for _, w := range b.waitChans {
		if p.marked && (w.ps.handed == p.gen || w.ps.skipGen == p.gen) || p.rejects(w) {
			continue
		}
		ch := w.cs.ch
		if c := cap(ch); c > 0 && len(ch) < c || c == 0 && p.mode == pubTry {
			continue
		}
		if cap(ch) == 0 && p.tryHandOff(w, v) {
			continue
		}
		pend = append(pend, w)
	}
	b.pending = pend
}

// tryHandOff hands v to a hand-off watcher's consumer if one is waiting.
func (p *pub[T]) tryHandOff(w *Watcher[T], v T) bool {
	select {
	case w.cs.ch <- v:
		w.ps.handed, p.marked, p.handed = p.gen, true, true
		w.cs.in++
		w.cs.sent(p.seq - 1)
		return true
	default:
		return false
	}
}

// markHanded records, before the lock is released, which channel watchers
// Action's pass already gave the value to: all but the pending ones. It
// uses up the pass: called again with no pass since (a later round that
// asks filters or waits before its own pass), it would mark as handed a
// watcher registered meanwhile, which never had the value, and unmark one
// a blocked send has given it to since, which would get it twice.
func (p *pub[T]) markHanded() {
	if p.mode != pubAction || !p.offered {
		return
	}
	b := p.b
	for _, cs := range b.chans {
		cs.w.ps.handed = p.gen
	}
	for _, w := range b.pending {
		w.ps.handed = 0
	}
	p.marked, p.offered = true, false
}

// sendBlocked hands v to the full channel watchers that wait, before v is
// accepted (ActionOrDrop refuses instead). It runs without b.mu, holding the
// turn, so the value order on each channel is kept while Watch, Stop and
// readers go on. A watcher whose bounded wait expires is marked to miss v;
// one that is stopped or evicted meanwhile left before v was accepted. It
// returns ErrStopped or ctx.Err() if the wait is cut short; then v is not
// accepted.
func (p *pub[T]) sendBlocked(v T) error {
	b := p.b
	if p.mode == pubTry {
		b.refused++
		return errRefused
	}
	p.takeTurn()
	p.markHanded()
	p.waitStart()
	list := b.blocked
	var t *time.Timer // one for the call, reset per send; pools are under b.mu
	if !p.deadline.IsZero() {
		t = b.takeTimer()
	}
	rep := p.reporter(p.blockedWatchers())
	defer rep.stop()
	p.listWait(waitsSend, p.seq-1)
	b.unlock()
	p.announce()
	var err error
	sent := 0
	for sent < len(list) && err == nil {
		if err = p.sendOne(v, &list[sent], t, &rep); err == errReportDue {
			p.report(&rep)
			err = nil
			continue
		}
		sent++
	}
	hook(hookSendsEnded)
	b.mu.Lock()
	p.unlistWait()
	if t != nil {
		b.putTimer(t)
	}
	for i := range list[:sent] {
		bs := &list[i]
		switch bs.outcome {
		case sendDone:
			p.handed = true
			bs.w.ps.handed = p.gen
			bs.w.cs.in++
			bs.w.cs.inBlocked.Add(^uint64(0))
			bs.w.cs.sent(p.seq - 1)
		case sendExpired:
			bs.w.ps.skipGen = p.gen
		}
	}
	clear(list)
	b.blocked = list[:0]
	p.marked = true
	return err
}

// sendOutcome is what became of a blocked send.
type sendOutcome uint8

const (
	sendNotTried sendOutcome = iota // the wait was cut short before it
	sendDone                        // the value is in the channel
	sendExpired                     // the bounded wait ran out: the watcher misses the value
	sendLeft                        // stopped or evicted meanwhile: it left before the value was accepted
)

// sendOne waits to hand v to one full channel watcher, at most its timeout
// from when the call first had to wait, timed by t. It records the outcome
// in bs.
func (p *pub[T]) sendOne(v T, bs *blockedSend[T], t *time.Timer, rep *waitReporter[T]) error {
	b := p.b
	cs := bs.w.cs
	cs.sendMu.Lock()
	defer cs.sendMu.Unlock()
	bs.outcome = sendLeft
	if cs.chClosed {
		if b.isDone() {
			return ErrStopped
		}
		return nil
	}
	var timeout <-chan time.Time
	if d := bs.d.Timeout; d > 0 {
		left := d - time.Since(p.start)
		if left <= 0 {
			bs.outcome = sendExpired
			return nil
		}
		t.Reset(left)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case cs.ch <- v:
		bs.outcome = sendDone
		cs.inBlocked.Add(1) // counted at once: Stats runs meanwhile
	case <-cs.stopCh:
		if b.isDone() { // Shutdown closes every watcher too
			return ErrStopped
		}
	case <-b.done:
		return ErrStopped
	case <-p.ctx.Done():
		return p.ctx.Err()
	case <-timeout:
		bs.outcome = sendExpired
	case <-rep.c():
		return errReportDue // reported by the caller, without sendMu
	}
	return nil
}

// errReportDue ends a blocked send whose wait report is due: the report
// takes the watchers' locks, which come before sendMu.
var errReportDue = errors.New("fanout: wait report due")

// chanDeliver hands the accepted v to the channel watchers: a strict or try
// publish makes its pass now, then each full one gets its verdict.
func (p *pub[T]) chanDeliver(v T, s uint64) {
	b := p.b
	if !p.offered {
		pend := b.pending[:0]
		for i := range b.chans {
			cs := &b.chans[i]
			if cs.filter && p.rejects(cs.w) {
				continue
			}
			if p.marked && (cs.w.ps.handed == p.gen || cs.w.ps.skipGen == p.gen) {
				if cs.w.ps.skipGen == p.gen {
					pend = append(pend, cs.w)
				}
				continue
			}
			select {
			case cs.ch <- v:
				cs.sent++
				if cs.filter {
					cs.w.cs.sent(s)
				}
				continue
			default:
			}
			pend = append(pend, cs.w)
		}
		b.pending = pend
	}
	p.applyAll(b.pending, v, s)
	clear(b.pending)
	b.pending = b.pending[:0]
	for _, w := range b.filterChans {
		p.countFiltered(w, s)
	}
}

// keepResult is what a watcher's filter said about a value.
type keepResult uint8

const (
	kept           keepResult = iota // the watcher takes the value
	filteredOut                      // the watcher misses it, not as a drop
	filterPanicked                   // the filter panicked: a drop (DropPanic)
)

// rejects reports whether the filter of w rejected the value in hand (or
// panicked on it). Caller holds b.mu.
func (p *pub[T]) rejects(w *Watcher[T]) bool {
	return w.x != nil && w.x.keep != nil && w.ps.keepGen == p.gen && w.ps.keepOut != kept
}

// countFiltered counts the accepted value of s for the channel watcher w if
// its filter rejected it: filtered, or dropped if the filter panicked.
func (p *pub[T]) countFiltered(w *Watcher[T], s uint64) {
	switch {
	case !p.rejects(w):
	case w.ps.keepOut == filteredOut:
		w.x.filtered.Add(1)
		w.notReceived(s)
	default:
		w.count(DropPanic, 1, &p.log, w.ps.keepErr)
		w.missed(s)
	}
}

// seqRing remembers the sequence numbers of the last values sent into the
// channel of a lossless watcher with a filter, so that Taken can tell the
// oldest one not yet received: with a filter, the channel's values are not
// the last sequences accepted. It holds the channel's capacity plus two
// (a value sent by a blocked send is recorded once b.mu is taken again,
// and one may be handed over before it is accepted). Guarded by b.mu.
type seqRing struct {
	seqs []uint64
	n    uint64 // values recorded in all
}

func newSeqRing(capacity int) *seqRing { return &seqRing{seqs: make([]uint64, capacity+2)} }

func (r *seqRing) push(seq uint64) {
	r.seqs[r.n%uint64(len(r.seqs))] = seq
	r.n++
}

// unreceived returns the sequence of the oldest of the last k values
// recorded, or 0 (at most any sequence) if it is no longer known.
func (r *seqRing) unreceived(k uint64) uint64 {
	if k > r.n || k > uint64(len(r.seqs)) {
		return 0
	}
	return r.seqs[(r.n-k)%uint64(len(r.seqs))]
}

// sent records that the value of s went into the channel. Caller holds
// b.mu.
func (cs *chanState[T]) sent(s uint64) {
	if cs.seqs != nil {
		cs.seqs.push(s)
	}
}

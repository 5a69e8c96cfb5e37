package fanout

import (
	"time"

	"github.com/fanout-go/fanout/internal/guard"
)

// This file decides what happens to the value in hand at each full watcher,
// and applies it, whatever the watcher's read path: the full ring readers
// decided per value (b.full) and the channel watchers the channel pass found
// without room (b.pending) go through the same functions:
//
//	undecided  lists the full watchers whose user's behaviour must be asked
//	decide     asks them, with no lock held, holding the publish turn
//	blocked    lists the full watchers whose decision makes the value wait
//	apply      applies each full watcher's verdict once the value is accepted
//
// Only the way a publisher waits depends on the read path: for a ring
// reader, until it makes room (waitRoom, room.go); for a channel watcher, by
// a blocked send of the value into its channel (sendBlocked, chans.go). See
// DESIGN.md.

// blockedSend is a full watcher whose decision makes the value in hand wait,
// with the outcome of the wait for a channel watcher (see sendBlocked).
type blockedSend[T any] struct {
	w       *Watcher[T]
	d       Decision
	outcome sendOutcome
}

type undecided[T any] struct {
	w      *Watcher[T]
	filter bool // ask its filter (WithFilter), not its behaviour
	st     FullState
	d      Decision
	keep   keepResult
	err    error
}

// decision returns what a full watcher's behaviour says about the value in
// hand: the built-ins' fixed answers, a user's from the last decide.
func (p *pub[T]) decision(w *Watcher[T]) Decision {
	switch w.kind {
	case kindWait:
		return Decision{Verdict: VerdictWait}
	case kindDropNew:
		return Decision{Verdict: VerdictDropFull}
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
	if w.kind == kindCustom && w.ps.preGen != p.gen || p.leftOut(w) {
		return false
	}
	return d.Verdict == VerdictWait && d.Timeout >= 0 && (w.ps == nil || w.ps.skipGen != p.gen)
}

// leftOut reports whether w is a full filtered reader whose filter
// rejected the value in hand (or panicked on it): it takes no room.
func (p *pub[T]) leftOut(w *Watcher[T]) bool {
	return w.filteredFull(p.gen) && w.ps.keepOut != kept
}

// fullFor reports whether w, listed as full, is still full for the value of
// s: a ring reader may have made room since; a channel watcher listed by the
// channel pass is full for that pass. Caller holds b.mu.
func (w *Watcher[T]) fullFor(s uint64) bool {
	return w.mode == modeChan || w.fullAt.Load() <= s
}

// undecided lists in b.undecided the full watchers of list with a user's
// behaviour not yet asked about the value of s, and reports whether there
// are any.
func (p *pub[T]) undecided(list []*Watcher[T], s uint64) bool {
	b := p.b
	und := b.undecided[:0]
	for _, w := range list {
		switch {
		case !w.fullFor(s):
		case w.mode == modeRing && w.filtering() && w.ps.keepGen != p.gen:
			// Asked once it holds kept values only; until then, it is
			// waited for as it is read (see needsSift).
			if !w.hasRaw(s) {
				und = append(und, undecided[T]{w: w, filter: true})
			}
		case w.kind == kindCustom && w.ps.preGen != p.gen && !p.leftOut(w):
			und = append(und, undecided[T]{w: w, st: w.fullState(s)})
		}
	}
	b.undecided = und
	return len(und) > 0
}

// decide asks the behaviours and filters listed in b.undecided about v.
// It holds the turn but no lock meanwhile, so that they may call the
// broadcaster (see [FullChannelBehavior] and [WithFilter]); a panic in
// either is recovered as the decision to miss the value.
func (p *pub[T]) decide(v T) error {
	b := p.b
	p.takeTurn()
	p.markHanded()
	und := b.undecided
	b.unlock()
	p.announce()
	ask(und, v)
	b.mu.Lock()
	for i := range und {
		p.record(&und[i])
		und[i] = undecided[T]{}
	}
	b.undecided = und[:0]
	return nil
}

// ask asks the filters and behaviours of und about v, with no lock held.
// Filters run under one recover for all of them rather than one each (a
// deferred call per filter was a tenth of a publish with 100 filtered
// channel watchers); a panic costs the value for that watcher only, and
// the others are asked on. A behaviour contains its own panics (decide).
func ask[T any](und []undecided[T], v T) {
	i := 0
	for i < len(und) {
		err := guard.Call(func() {
			for ; i < len(und); i++ {
				u := &und[i]
				if !u.filter {
					u.d, u.err = u.w.decide(u.st)
					continue
				}
				u.keep = filteredOut
				if u.w.x.keep(v) {
					u.keep = kept
				}
			}
		})
		if err != nil {
			und[i].keep, und[i].err = filterPanicked, err
			i++
		}
	}
}

// record keeps what decide learnt in the watcher's pubState, tagged with
// the value's generation. Caller holds b.mu.
func (p *pub[T]) record(u *undecided[T]) {
	ps := u.w.ps
	if u.filter {
		ps.keepGen, ps.keepOut, ps.keepErr = p.gen, u.keep, u.err
	} else {
		ps.pre, ps.preErr, ps.preGen = u.d, u.err, p.gen
	}
	if u.err != nil {
		p.b.countPanic()
	}
}

// unfiltered lists in b.undecided the channel watchers with a filter not
// yet asked about the value in hand: the channel pass must not hand a
// value to one that rejects it.
//
// Once it has listed them, the decide that follows asks them all: it holds
// the turn, so no other value is published meanwhile, and a filter
// channel watcher that registers meanwhile resets b.chansAsked (addChan).
// So unfiltered marks the generation asked, and the next pass for the same
// value returns at once.
func (p *pub[T]) unfiltered() bool {
	b := p.b
	if b.chansAsked == p.gen {
		return false
	}
	b.chansAsked = p.gen
	und := b.undecided[:0]
	for _, w := range b.filterChans {
		if w.ps.keepGen != p.gen {
			und = append(und, undecided[T]{w: w, filter: true})
		}
	}
	b.undecided = und
	return len(und) > 0
}

// filter asks the watcher's filter about v, containing a panic: for a
// replay (filterStart); publishers ask many at once (ask).
func (w *Watcher[T]) filter(v T) (keepResult, error) {
	keep := false
	if err := guard.Call(func() { keep = w.x.keep(v) }); err != nil {
		return filterPanicked, err
	}
	if !keep {
		return filteredOut, nil
	}
	return kept, nil
}

// blocked lists in b.blocked the full watchers of list whose decision is to
// wait for the value of s, and reports whether there are any. It sets
// p.deadline to the earliest end of their bounded waits. A hand-off watcher
// does not make ActionOrDrop wait: its consumer is ready or it misses the
// value (see apply).
func (p *pub[T]) blocked(list []*Watcher[T], s uint64) bool {
	b := p.b
	blk := b.blocked[:0]
	p.deadline = time.Time{}
	for _, w := range list {
		d := p.decision(w)
		if !w.fullFor(s) || !p.blocks(w, d) || p.mode == pubTry && w.mode == modeChan && cap(w.cs.ch) == 0 {
			continue
		}
		blk = append(blk, blockedSend[T]{w: w, d: d})
		if d.Timeout > 0 {
			p.waitStart()
			if t := p.start.Add(d.Timeout); p.deadline.IsZero() || t.Before(p.deadline) {
				p.deadline = t
			}
		}
	}
	b.blocked = blk
	return len(blk) > 0
}

// applyAll applies their verdicts for the accepted value v of s to the full
// watchers of list, then takes those evicted off the broadcaster's lists
// (list may be one of them: it is not changed while it is walked).
func (p *pub[T]) applyAll(list []*Watcher[T], v T, s uint64) {
	var buf [4]*Watcher[T]
	evict := buf[:0]
	for _, w := range list {
		if p.apply(w, v, s) {
			evict = append(evict, w)
		}
	}
	if len(evict) > 0 {
		hook(hookEvicted)
	}
	for _, w := range evict {
		p.b.unlist(w, ErrEvicted)
	}
	if len(evict) > 0 && p.b.watching() == 0 {
		p.b.unwatchedFrom = s + 1 // they missed s: it was not unwatched
	}
}

// apply applies the verdict of the full watcher w to the accepted value v
// of s, and reports whether it evicted w. A watcher that made room
// meanwhile takes the value, whatever its verdict. An evicted watcher is
// closed in the same hold of w.mu that found it full, so that no reader
// drains it in between and then finds it open (DESIGN.md, I12); a consumer
// of ResultChan, which takes no lock, still may, until the channel closes a
// few steps later (documented under EvictIfChannelFull).
func (p *pub[T]) apply(w *Watcher[T], v T, s uint64) (evicted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.filteredFull(p.gen) {
		if p.applyFiltered(w, v, s) {
			return false
		}
	} else if w.admit(v, s) {
		return false
	}
	var err error
	r := DropFull
	switch d := p.decision(w); d.Verdict {
	case VerdictEvict:
		w.count(DropEvicted, 1, &p.log, nil)
		w.missed(s)
		return p.b.closeQueue(w, ErrEvicted, &p.log)
	case VerdictDropOldest:
		discarded, stored := w.replaceOldest(v, s)
		if stored && w.filteredFull(p.gen) {
			w.storeKept(v, s) // in priv, as kept, not in the window
		}
		if discarded {
			w.count(DropOldest, 1, &p.log, nil)
		}
		if stored {
			return false
		}
	case VerdictWait:
		// A bounded wait that ran out, or a negative one; else a
		// hand-off whose consumer was not ready for ActionOrDrop.
		if d.Timeout < 0 || w.ps != nil && w.ps.skipGen == p.gen {
			r = DropTimeout
		}
	case verdictPanic:
		r, err = DropPanic, w.ps.preErr
	}
	w.reject(s)
	w.count(r, 1, &p.log, err)
	w.missed(s)
	return false
}

// admit gives the value v of s to w if it has room for it now. Caller holds
// b.mu and w.mu.
func (w *Watcher[T]) admit(v T, s uint64) bool {
	if w.mode == modeRing {
		return w.o+w.c > s // the reader made room: the window takes s
	}
	select {
	case w.cs.ch <- v:
		w.cs.in++
		return true
	default:
		return false
	}
}

// replaceOldest discards the oldest queued value of w to make room for the
// value v of s. It reports whether a value was discarded, and whether v
// was queued. Caller holds b.mu and w.mu.
func (w *Watcher[T]) replaceOldest(v T, s uint64) (discarded, stored bool) {
	if w.mode == modeRing {
		if w.dropOldest(s) {
			w.publishMarks()
			return true, true
		}
		return false, false
	}
	if cap(w.cs.ch) == 0 {
		return false, false
	}
	// Send first: the consumer may have made room since admit looked, and
	// then nothing need be discarded.
	if w.trySend(v, s) {
		return false, true
	}
	select {
	case <-w.cs.ch:
		w.cs.in-- // put in, never received
		discarded = true
	default: // the consumer made room meanwhile
	}
	return discarded, w.trySend(v, s)
}

// trySend puts the value v of s in a channel watcher's channel if it has
// room. Caller holds b.mu.
func (w *Watcher[T]) trySend(v T, s uint64) bool {
	select {
	case w.cs.ch <- v:
		w.cs.in++
		w.cs.sent(s)
		return true
	default:
		return false
	}
}

// reject makes w miss the value of s. A channel watcher misses it by not
// being sent it; a ring reader's window moves past it. Caller holds b.mu
// and w.mu.
func (w *Watcher[T]) reject(s uint64) {
	if w.mode == modeRing {
		w.skip(s)
		w.publishMarks()
	}
}

// decide consults the watcher's behaviour about the value of sequence
// number seq. Caller is the publisher, holding the publish turn but no lock.
func (w *Watcher[T]) decide(st FullState) (d Decision, err error) {
	defer func() {
		if p := recover(); p != nil {
			d, err = Decision{Verdict: verdictPanic}, guard.PanicError(p)
		}
	}()
	d = w.behavior.OnFull(st)
	if d.Verdict > VerdictEvict {
		d.Verdict = VerdictDropFull // any other value; verdictPanic is ours
	}
	return d, nil
}

// fullState describes the watcher to its behaviour. Caller holds b.mu.
func (w *Watcher[T]) fullState(seq uint64) FullState {
	st := FullState{WatcherID: w.id, WatcherName: w.nameOf(), QueueLength: w.q, Dropped: w.totalDrops()}
	if ps := w.ps; ps != nil && ps.missEnd == seq && seq != 0 {
		st.ConsecutiveDrops = ps.consec
	}
	return st
}

// notReceived records that the filter of w left out the value of seq, which
// it did not receive: a run of missed values goes on across it. Caller
// holds b.mu.
func (w *Watcher[T]) notReceived(seq uint64) {
	if ps := w.ps; ps != nil && ps.missEnd == seq && seq != 0 {
		ps.missEnd = seq + 1
	}
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

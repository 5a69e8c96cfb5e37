package fanout

import (
	"slices"
	"time"
)

// This file lists the publish calls waiting now for full watchers, for
// [Broadcaster.Snapshot]: who blocks the publisher, and since when. A call
// lists itself in b.waits (under b.mu) as it goes to sleep in waitFull,
// waitRoom or sendBlocked, and unlists itself when it has the lock again;
// nothing else on the publish path changes, and a call that does not wait
// does nothing here. Which watchers a listed call waits for is worked out
// by the snapshot, under b.mu, from the state the call waits on.

// waitHow is what a listed call waits for.
type waitHow uint8

const (
	// waitsFull: the WaitIfChannelFull ring readers full at seq (waitFull).
	waitsFull waitHow = iota
	// waitsRoom: the full ring readers decided per value whose decision
	// for the call's value is to wait (waitRoom).
	waitsRoom
	// waitsSend: the full channel watchers of b.blocked, which the call
	// sends to holding the turn (sendBlocked).
	waitsSend
)

// waitEntry is a publish call waiting now, listed in b.waits. Guarded by
// b.mu.
type waitEntry struct {
	gen uint64 // the call's generation: unique among the waiting calls
	seq uint64 // the sequence number of the value it waits to publish
	how waitHow
	// since is when the call first had to wait (pub.start) if timed; else
	// when a snapshot first saw the wait, zero until one does: a call
	// times its waits only when the broadcaster needs it to (WithWaitReport,
	// a bounded wait), to keep time.Now off the lossless wait.
	since time.Time
	timed bool
}

// listWait lists the call as waiting for the value of s. Caller holds b.mu
// and calls unlistWait once it holds it again after the wait.
func (p *pub[T]) listWait(how waitHow, s uint64) {
	e := waitEntry{gen: p.gen, seq: s, how: how, since: p.start, timed: !p.start.IsZero()}
	if !e.timed && p.seenGen == p.gen {
		e.since = p.seen // a snapshot saw this value's wait before
	}
	p.b.waits = append(p.b.waits, e)
}

// unlistWait takes the call off b.waits, keeping when a snapshot first saw
// it for the call's next wait for the same value (the same generation: a
// new value starts a new one, see pub.begin). Caller holds b.mu.
func (p *pub[T]) unlistWait() {
	b := p.b
	i := slices.IndexFunc(b.waits, func(e waitEntry) bool { return e.gen == p.gen })
	if i < 0 {
		return
	}
	if e := b.waits[i]; !e.timed && !e.since.IsZero() {
		p.seen, p.seenGen = e.since, p.gen
	}
	b.waits = slices.Delete(b.waits, i, i+1)
}

// waitFullFor returns the WaitIfChannelFull readers full at s: those a
// publisher of the value of s waits for in waitFull. Caller holds b.mu.
func (b *Broadcaster[T]) waitFullFor(s uint64) []*Watcher[T] {
	var ws []*Watcher[T]
	for _, w := range b.limiters {
		if w.kind == kindWait && !w.inFull && w.fullAt.Load() <= s {
			ws = append(ws, w)
		}
	}
	return ws
}

// blocker is a watcher a listed call waits for, as a snapshot sees it.
type blocker[T any] struct {
	w     *Watcher[T]
	seq   uint64
	since time.Time
	timed bool
}

// blockersLocked returns, for each listed call, the watchers it waits for
// now, and stamps the calls no snapshot had seen with now. Caller holds
// b.mu. The calls waiting in waitFull for one sequence wait for the same
// watchers, worked out once: with many publishers waiting, the lock is
// held for O(watchers) per sequence waited for, not per call.
func (b *Broadcaster[T]) blockersLocked(now time.Time) []blocker[T] {
	var out []blocker[T]
	full := map[uint64][]*Watcher[T]{}
	for i := range b.waits {
		e := &b.waits[i]
		if e.since.IsZero() {
			e.since = now
		}
		ws, ok := full[e.seq]
		if e.how != waitsFull {
			ws = b.waitedFor(e)
		} else if !ok {
			ws = b.waitFullFor(e.seq)
			full[e.seq] = ws
		}
		for _, w := range ws {
			out = append(out, blocker[T]{w: w, seq: e.seq, since: e.since, timed: e.timed})
		}
	}
	return out
}

// waitedFor returns the watchers the listed call e waits for. Caller holds
// b.mu.
func (b *Broadcaster[T]) waitedFor(e *waitEntry) []*Watcher[T] {
	switch e.how {
	case waitsFull:
		return b.waitFullFor(e.seq)
	case waitsRoom:
		p := pub[T]{b: b, gen: e.gen} // decisions are tagged with the call's generation
		var ws []*Watcher[T]
		for _, w := range b.full {
			if d := p.decision(w); w.fullAt.Load() <= e.seq && p.blocks(w, d) {
				ws = append(ws, w)
			}
		}
		return ws
	}
	// waitsSend: the sender holds the turn, so b.blocked is its list until
	// it unlists itself; the outcomes are its own (written without b.mu),
	// so a channel still full is what tells who it waits for.
	var ws []*Watcher[T]
	for i := range b.blocked {
		if w := b.blocked[i].w; w.err == nil && len(w.cs.ch) == cap(w.cs.ch) {
			ws = append(ws, w)
		}
	}
	return ws
}

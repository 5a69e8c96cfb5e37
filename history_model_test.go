package fanout_test

import (
	"fmt"
	"slices"
)

// This file is the sequential specification that the recorded histories of
// history_test.go are checked against with porcupine: the documented
// semantics of a Broadcaster (doc.go, "Ordering guarantees", "Waiting",
// "Stopping", "Taken values"), written as a pure step function over a small
// state. See history_test.go for how the histories are made, and for what
// is checked and what is not.
//
// The state is the delivery order: every value that took a place in the
// broadcaster's total order (accepted), plus the values of failed publishes
// (phantoms), which only channel watchers may have been handed. For each
// watcher: where it registered, how far it has read (a cursor into the
// order), where it stopped receiving, its read path and close reason. The
// linearization points:
//
//   - A published value takes its place when it is accepted; each value of
//     a batch is an operation of its own, with the batch's call and return,
//     and must directly follow the batch's previous value (contiguity).
//     Accepting it needs room in every open WaitIfChannelFull watcher and
//     evicts every open EvictIfChannelFull watcher that is full (queue
//     lengths are exact). ActionSeq's sequence number is its position.
//     An evicted watcher is closed at once for its pull reader; a channel
//     cannot be closed only if it is full, so the consumer of an evicted
//     channel watcher may take its last values and find it empty and open
//     (a read that times out) until the evicting publish call returns
//     (documented with EvictIfChannelFull): a read that began before that
//     return (the operations carry those times) may time out. And it is
//     given its verdict only after pull readers can read the value, so a
//     channel watcher full at the value's linearization may instead take
//     it, one over its queue length, if its consumer makes room with a
//     read that began before the publish returned, before the next value
//     is accepted (a reprieve: the one nondeterministic step; porcupine
//     follows both outcomes). Likewise a
//     channel watcher gets an accepted value in its channel only just after
//     pull readers can read it, within the publish call: a read of the
//     channel that began before the call returned may find it empty.
//   - A failed publish (an error, or ActionOrDrop's false) accepts nothing.
//   - Watch registers at the end of the order (minus its replay).
//   - A read takes the next values of the watcher: for a lossless watcher
//     exactly the next accepted ones, for a lossy one any later ones, in
//     order, never twice; a read that times out saw nothing to read; one
//     that returns the close reason found the watcher closed and drained.
//   - Stop and Shutdown close watchers at the end of the order; after
//     Shutdown every publish and Watch fails with ErrStopped. Shutdown
//     closes the watchers one by one, so until it returns (a mark op at its
//     return time) a read may still find a watcher it closed open.
//   - Taken and Stats read the state: Taken never decreases nor passes a
//     value a WaitIfChannelFull watcher that has not left has yet to read.
//
// Two documented exceptions make a value reach a channel watcher before it
// is accepted ("Waiting" in doc.go): Action hands a value to the channel
// watchers with room before it waits for a full one, and a strict publish
// (a context that can end) hands it to a full waiting channel watcher that
// made room while it waits for another. The model lets a channel watcher
// read such a value early (it becomes the pending value: the publisher holds
// the publish turn, so nothing else is accepted before it), and keeps a
// value whose publish then failed as a phantom: a channel watcher may read
// it, in its place, and lossless watchers may skip it. A failed value that
// cannot have been handed out goes to a set instead (its place in the order
// would only multiply the states porcupine explores). A hand-off watcher
// (queue length 0) may also miss ActionOrDrop's values, as documented.
//
// Every value is unique, so each read names the publish it came from, and
// the model needs no search of its own: every step but the reprieve is
// deterministic, and porcupine's search is over the orders of the
// operations and the reprieves' outcomes.

// pubMode is how a publish call may hand a value out before accepting it.
type pubMode uint8

const (
	modeAction pubMode = iota // Action, ActionBatch, a context that never ends: to channel watchers with room
	modeStrict                // a context that can end: only to full waiting channel watchers
	modeTry                   // ActionOrDrop: to nobody
)

func (m pubMode) String() string { return [...]string{"action", "strict", "try"}[m] }

// wKind is a watcher's full-queue behaviour, as the model sees it.
type wKind uint8

const (
	wkWait       wKind = iota // WaitIfChannelFull: lossless
	wkEvict                   // EvictIfChannelFull: lossless until evicted
	wkDropNew                 // DropIfChannelFull
	wkDropOldest              // DropOldestIfChannelFull
	wkTimeout                 // WaitTimeoutIfChannelFull
)

func (k wKind) String() string {
	return [...]string{"wait", "evict", "drop-new", "drop-oldest", "timeout"}[k]
}

// lossless reports whether the watcher receives every value accepted for
// it, in order, until it closes.
func (k wKind) lossless() bool { return k == wkWait || k == wkEvict }

// valInfo is what the model knows of a published value before the history
// runs: the publish mode and the batch's previous value (0 for the first).
type valInfo struct {
	mode pubMode
	prev uint64
	ret  int64 // the return time of its publish call, once known (0: not known)
}

// watchInfo is a watcher's configuration. replay is what it replays (at
// most what was accepted: known only at registration, so the model
// computes lead itself); q is its queue length before the replay grows it.
type watchInfo struct {
	kind    wKind
	q       int
	replay  int
	handler bool
}

// hOp is an operation kind.
type hOp uint8

const (
	opPublish      hOp = iota // one value of a publish call
	opWatch                   // Watch
	opResultChan              // ResultChan: the watcher reads a channel from then on
	opRead                    // Recv, Next or a channel receive
	opStop                    // Watcher.Stop
	opShutdown                // Shutdown
	opShutdownDone            // a mark at Shutdown's return: it has closed every watcher
	opWStats                  // Watcher.Stats, once the watcher is closed and drained
	opStats                   // Broadcaster.Stats
	opTaken                   // Broadcaster.Taken
)

// errCode is an operation's error, as the model compares it.
type errCode uint8

const (
	errNone errCode = iota
	errStopped
	errWatcherStopped
	errEvicted
	errCtx     // the call's context ended
	errRefused // ActionOrDrop returned false
)

func (e errCode) String() string {
	return [...]string{"ok", "ErrStopped", "ErrWatcherStopped", "ErrEvicted", "ctx", "refused"}[e]
}

type hInput struct {
	Op hOp
	W  int    // the watcher, for watcher operations
	V  uint64 // the value, for opPublish
	// T is the return time of a publish call, for opPublish, and the
	// call time of a read: an evicted channel watcher may look open to a
	// read that began before the evicting publish returned.
	T int64
}

type hOutput struct {
	Err errCode
	// Seq is the sequence number ActionSeq or ActionBatchSeq reported for
	// an accepted value; -1 when the call does not report one.
	Seq int64
	// Offered: the value of a failed publish may have been handed to
	// channel watchers (the first value not accepted, of a call whose
	// context was not already done).
	Offered bool
	Vals    []uint64 // opRead: the values read
	// N is opTaken's result; opStats' Accepted.
	N uint64
	// opStats' Refused and Watchers; opWStats' counters.
	Refused, Watchers                   uint64
	Delivered, Dropped, Evicted, Queued uint64
}

const (
	phantomBit = uint64(1) << 63 // a value of a failed publish, that may have been handed out
	valueMask  = phantomBit - 1
)

// wState is one watcher's state; the zero value is a watcher not yet
// registered.
type wState struct {
	on       bool
	chanMode bool
	start    int // the first entry it may receive (its registration minus its replay)
	regSeq   int // accepted values at registration
	cursor   int // the entry after the last one it read
	end      int // the entry from which it receives nothing; -1 while open
	acctEnd  int // end, plus the value that evicted it
	closedBy errCode
	// closing is, for a channel watcher evicted, the return time of the
	// evicting publish call: a read that began before it may find the
	// channel open (and empty); 0 otherwise.
	closing int64
	// overflow is, for a channel watcher that took a value it was full for
	// (see reprieve), the return time of that value's publish call: its
	// consumer must have made room by then, with a read that began before
	// it, and before the next value is accepted; 0 otherwise.
	overflow int64
	pendRead bool // it read the pending value
	late     bool // it read a value accepted after it closed (handed to its channel before)
	nread    int  // values read
	nreadIn  int  // accepted values read within [start, acctEnd)
	capacity int  // its queue length, as the replay grew it; 1 for a hand-off
}

func (w *wState) open() bool { return w.on && w.end < 0 }

// reprieve undoes the eviction of a channel watcher by the value just
// accepted, whose publish returns at ret: the watcher takes the value
// instead, one over its queue length. A publisher finds a channel watcher
// full before it accepts the value, and gives the verdict only after pull
// readers can read the value (chanDeliver, in the same hold of the lock):
// a watcher whose consumer made room meanwhile takes the value whatever
// its verdict (apply, admit). The consumer's read that made room began
// before the call returned, and came before the next value's acceptance.
func (w *wState) reprieve(ret int64) {
	w.end, w.acctEnd, w.closedBy, w.closing, w.overflow = -1, -1, errNone, 0, ret
}

// hState is the model's state. Steps copy it; they never modify it.
type hState struct {
	entries []uint64 // the delivery order: values, phantoms with phantomBit
	// gone are the failed values never handed out, sorted: kept out of
	// entries, where their place would only multiply the states.
	gone     []uint64
	accepted int
	lastAcc  uint64 // the last value accepted
	pending  uint64 // a value read before it was accepted, 0 if none
	refused  uint64
	taken    uint64
	shutdown bool
	// settled: Shutdown has returned. Until then a reader may still find
	// a watcher open that Shutdown closes (it closes them one by one).
	settled bool
	ws      []wState
	// reprievable lists the channel watchers the last accepted value
	// evicted, for steps, which offers each one's reprieve; not state.
	reprievable []int
}

func (s *hState) clone() *hState {
	c := *s
	c.entries = slices.Clip(s.entries) // appends copy
	c.gone = slices.Clip(s.gone)
	c.ws = slices.Clone(s.ws)
	return &c
}

// historyModel is the specification for a history whose values and
// watchers are described by vals and watchers.
type historyModel struct {
	vals     map[uint64]valInfo
	watchers []watchInfo
}

func (m *historyModel) init() *hState { return &hState{ws: make([]wState, len(m.watchers))} }

// skippable reports whether a lossless watcher may never receive the entry
// e: a phantom, or a value of ActionOrDrop that a hand-off watcher's
// consumer was not ready for (documented as DropFull).
func (m *historyModel) skippable(wi watchInfo, e uint64) bool {
	if e&phantomBit != 0 {
		return true
	}
	return wi.q == 0 && m.vals[e&valueMask].mode == modeTry
}

// queued returns how many accepted values watcher i has yet to read that it
// cannot miss (for a lossy watcher: that it may still read).
func (m *historyModel) queued(s *hState, i int) int {
	w, wi := &s.ws[i], m.watchers[i]
	limit := len(s.entries)
	if w.end >= 0 {
		limit = w.end
	}
	n := 0
	for _, e := range s.entries[min(w.cursor, limit):limit] {
		if e&phantomBit == 0 && !(wi.kind.lossless() && m.skippable(wi, e)) {
			n++
		}
	}
	return n
}

// undelivered reports whether the next value channel watcher i has queued
// may not be in its channel yet for a read that began at t: a publisher
// sends into the channels just after the value is accepted, within its
// call (accept in publish.go), so until that call returns a pull watcher
// may read the value while the channel is still empty.
func (m *historyModel) undelivered(s *hState, i int, t int64) bool {
	w, wi := &s.ws[i], m.watchers[i]
	if !w.chanMode {
		return false
	}
	limit := len(s.entries)
	if w.end >= 0 {
		limit = w.end
	}
	for _, e := range s.entries[min(w.cursor, limit):limit] {
		if e&phantomBit == 0 && !(wi.kind.lossless() && m.skippable(wi, e)) {
			return m.vals[e&valueMask].ret > t
		}
	}
	return false
}

// step applies the operation to s and returns "" if the specification
// allows it in state s, else why not.
func (m *historyModel) step(s *hState, in hInput, out hOutput) string {
	switch in.Op {
	case opPublish:
		if out.Err == errNone {
			return m.accept(s, in, out)
		}
		return m.fail(s, in.V, out)
	case opWatch:
		return m.watch(s, in.W, out)
	case opResultChan:
		s.ws[in.W].chanMode = true
		return ""
	case opRead:
		return m.read(s, in, out)
	case opStop:
		if w := &s.ws[in.W]; w.open() && !s.shutdown {
			w.end, w.acctEnd, w.closedBy = len(s.entries), len(s.entries), errWatcherStopped
		}
		return ""
	case opShutdown:
		s.shutdown = true
		for i := range s.ws {
			if w := &s.ws[i]; w.open() {
				w.end, w.acctEnd, w.closedBy = len(s.entries), len(s.entries), errStopped
			}
		}
		return ""
	case opShutdownDone:
		if !s.shutdown {
			return "Shutdown returned before it was called"
		}
		s.settled = true
		return ""
	case opWStats:
		return m.watcherStats(s, in.W, out)
	case opStats:
		open := 0
		for i := range s.ws {
			if s.ws[i].open() {
				open++
			}
		}
		if out.N != uint64(s.accepted) || out.Refused != s.refused || out.Watchers != uint64(open) {
			return fmt.Sprintf("Stats: accepted %d, refused %d, %d watchers open", s.accepted, s.refused, open)
		}
		return ""
	case opTaken:
		return m.takenStep(s, out.N)
	}
	return "unknown operation"
}

// accept is the linearization of an accepted value.
func (m *historyModel) accept(s *hState, in hInput, out hOutput) string {
	v := in.V
	vi := m.vals[v]
	switch {
	case s.shutdown:
		return "accepted after Shutdown"
	case s.pending != 0 && s.pending != v:
		return "accepted while another value was handed out"
	case vi.prev != 0 && s.lastAcc != vi.prev:
		return "not right after the previous value of its batch"
	case out.Seq >= 0 && out.Seq != int64(s.accepted):
		return fmt.Sprintf("sequence number %d, not %d", out.Seq, s.accepted)
	}
	for i := range s.ws {
		if s.ws[i].overflow != 0 {
			return fmt.Sprintf("accepted before w%d made room for the value it took while full", i)
		}
	}
	idx := len(s.entries)
	for i := range s.ws {
		w, wi := &s.ws[i], m.watchers[i]
		if !w.open() || w.pendRead {
			continue
		}
		switch wi.kind {
		case wkWait:
			if wi.q == 0 && vi.mode == modeTry {
				continue // a hand-off watcher misses what it is not ready for
			}
			if m.queued(s, i) >= w.capacity {
				return fmt.Sprintf("accepted while w%d was full", i)
			}
		case wkEvict:
			if m.queued(s, i) >= w.capacity {
				w.end, w.acctEnd, w.closedBy = idx, idx+1, errEvicted
				if w.chanMode {
					w.closing = in.T
					s.reprievable = append(s.reprievable, i)
				}
			}
		}
	}
	s.entries = append(s.entries, v)
	s.accepted++
	s.lastAcc = v
	if s.pending == v {
		s.resolvePending(idx, true)
	}
	return ""
}

// resolvePending moves the watchers that read the pending value past its
// entry idx.
func (s *hState) resolvePending(idx int, accepted bool) {
	for i := range s.ws {
		if w := &s.ws[i]; w.pendRead {
			w.pendRead = false
			w.cursor = idx + 1
			if accepted && (w.acctEnd < 0 || idx < w.acctEnd) {
				w.nreadIn++
			}
		}
	}
	s.pending = 0
}

// fail is the linearization of a value that was not accepted.
func (m *historyModel) fail(s *hState, v uint64, out hOutput) string {
	vi := m.vals[v]
	switch {
	case out.Err == errStopped && !s.shutdown:
		return "ErrStopped before Shutdown"
	case out.Err == errCtx && vi.mode != modeStrict,
		out.Err == errRefused && vi.mode != modeTry,
		out.Err != errStopped && out.Err != errCtx && out.Err != errRefused:
		return fmt.Sprintf("%v from a %v publish", out.Err, vi.mode)
	}
	if out.Err == errRefused {
		s.refused++
	}
	if vi.mode == modeTry {
		if s.pending == v {
			return "ActionOrDrop's value was handed out"
		}
		return ""
	}
	if !out.Offered {
		if s.pending == v {
			return "a value never handed out was read"
		}
		i, _ := slices.BinarySearch(s.gone, v)
		s.gone = slices.Insert(s.gone, i, v)
		return ""
	}
	// A phantom: a channel watcher may have been handed it. Its entry
	// also tells a later read that the call is over.
	idx := len(s.entries)
	s.entries = append(s.entries, v|phantomBit)
	if s.pending == v {
		s.resolvePending(idx, false)
	}
	return ""
}

func (m *historyModel) watch(s *hState, i int, out hOutput) string {
	switch {
	case out.Err == errStopped && !s.shutdown:
		return "ErrStopped before Shutdown"
	case out.Err == errStopped:
		return ""
	case out.Err != errNone:
		return fmt.Sprintf("Watch returned %v", out.Err)
	case s.shutdown:
		return "registered after Shutdown"
	}
	wi := m.watchers[i]
	start, lead := len(s.entries), 0
	for start > 0 && lead < wi.replay {
		start--
		if s.entries[start]&phantomBit == 0 {
			lead++
		}
	}
	c := wi.q
	if lead > 0 {
		c = max(c, lead+1)
	}
	s.ws[i] = wState{on: true, chanMode: c == 0, start: start, regSeq: s.accepted,
		cursor: start, end: -1, acctEnd: -1, capacity: max(c, 1)}
	return ""
}

func (m *historyModel) read(s *hState, in hInput, out hOutput) string {
	i := in.W
	w, wi := &s.ws[i], m.watchers[i]
	switch {
	case !w.on:
		return "read before registration"
	case len(out.Vals) > 0 && out.Err != errNone:
		return "values and an error"
	case out.Err == errCtx: // it found nothing to read
		if !w.open() && (w.closedBy != errStopped || s.settled) && in.T >= w.closing {
			return "timed out although closed"
		}
		if wi.kind.lossless() && m.queued(s, i) > 0 && !m.undelivered(s, i, in.T) {
			return fmt.Sprintf("timed out with %d values queued", m.queued(s, i))
		}
		return ""
	case len(out.Vals) == 0: // the close reason, once drained
		if w.open() || out.Err != w.closedBy {
			return fmt.Sprintf("%v, but the watcher is %s", out.Err, w.status())
		}
		if wi.kind.lossless() && m.queued(s, i) > 0 {
			return fmt.Sprintf("%v with %d values queued", out.Err, m.queued(s, i))
		}
		return ""
	}
	if w.overflow != 0 {
		if in.T >= w.overflow {
			return "room made after the publish that found it full returned"
		}
		w.overflow = 0
	}
	for _, v := range out.Vals {
		if w.pendRead {
			return "a value after one not yet accepted"
		}
		idx := slices.IndexFunc(s.entries, func(e uint64) bool { return e&valueMask == v })
		if idx < 0 {
			if why := m.early(s, i, v); why != "" {
				return fmt.Sprintf("%s before it was accepted: %s", describeValue(v), why)
			}
			s.pending, w.pendRead = v, true
			w.nread++
			continue
		}
		e := s.entries[idx]
		switch {
		case idx < w.start:
			return fmt.Sprintf("%s, accepted before registration", describeValue(v))
		case idx < w.cursor:
			return fmt.Sprintf("%s again or out of order", describeValue(v))
		case e&phantomBit != 0 && (!w.chanMode || !handedEarly(wi, m.vals[v].mode)):
			return fmt.Sprintf("%s, never accepted", describeValue(v))
		case e&phantomBit == 0 && w.end >= 0 && idx >= w.end && !m.lateOK(s, i, v, idx):
			return fmt.Sprintf("%s, accepted after it closed", describeValue(v))
		}
		if w.end >= 0 && idx >= w.end {
			w.late = true
		}
		if wi.kind.lossless() {
			for _, skipped := range s.entries[w.cursor:idx] {
				if !m.skippable(wi, skipped) {
					return fmt.Sprintf("%s, skipping %s", describeValue(v), describeValue(skipped&valueMask))
				}
			}
		}
		w.cursor = idx + 1
		w.nread++
		if e&phantomBit == 0 && (w.acctEnd < 0 || idx < w.acctEnd) {
			w.nreadIn++ // a late value (lateOK) is read, not accepted for it
		}
	}
	return ""
}

// early returns "" if watcher i may read v before v's publish is
// linearized: v must be a value the publisher hands out before accepting,
// to a watcher of this kind on a channel, next in the order, and not held
// up by an earlier value of its batch or by another pending value.
func (m *historyModel) early(s *hState, i int, v uint64) string {
	vi, ok := m.vals[v]
	wi := m.watchers[i]
	switch {
	case !ok:
		return "never published"
	case slices.Contains(s.gone, v):
		return "its publish failed before handing it out"
	case !s.ws[i].chanMode:
		return "the watcher is not on a channel"
	case !handedEarly(wi, vi.mode):
		return fmt.Sprintf("a %v publish does not hand it to a %v watcher", vi.mode, wi.kind)
	case s.pending != 0 && s.pending != v:
		return describeValue(s.pending) + " is handed out"
	case vi.prev != 0 && s.lastAcc != vi.prev:
		return "the previous value of its batch is not accepted"
	case wi.kind.lossless() && m.queued(s, i) > 0:
		return "earlier values are queued"
	}
	return ""
}

// lateOK reports whether watcher i, closed, may read v, accepted at entry
// idx after it closed: a publisher may hand a value to a channel watcher
// before accepting it (Action to those with room, a strict publish to a
// full one that waits), and a channel cannot take it back when the watcher
// is stopped meanwhile (documented under Watcher.Stop). It is then the
// first value accepted after the close, the publisher holding the turn,
// and the last one the watcher reads. (The model does not see times: it
// cannot tell that the publish began before the close, which it must have.)
func (m *historyModel) lateOK(s *hState, i int, v uint64, idx int) bool {
	w, wi := &s.ws[i], m.watchers[i]
	if !w.chanMode || w.late || !handedEarly(wi, m.vals[v].mode) {
		return false
	}
	for _, e := range s.entries[w.end:idx] {
		if e&phantomBit == 0 {
			return false
		}
	}
	return true
}

// handedEarly reports whether a publish of mode may hand a value to a
// channel watcher of this kind before accepting it.
func handedEarly(wi watchInfo, mode pubMode) bool {
	switch mode {
	case modeAction:
		return true
	case modeStrict: // only to a full one that waits
		return wi.kind == wkWait || wi.kind == wkTimeout
	}
	return false
}

// watcherStats checks a drained watcher's counters: what it read, and
// that every value accepted for it was read or counted as a drop.
func (m *historyModel) watcherStats(s *hState, i int, out hOutput) string {
	w, wi := &s.ws[i], m.watchers[i]
	switch {
	case !w.on || w.open():
		return "Stats of a watcher that is " + w.status()
	case out.Queued != 0:
		return "values queued after the close reason"
	case out.Delivered != uint64(w.nread):
		return fmt.Sprintf("%d values read", w.nread)
	}
	in := 0
	for _, e := range s.entries[w.start:min(w.acctEnd, len(s.entries))] {
		if e&phantomBit == 0 {
			in++
		}
	}
	switch {
	case uint64(w.nreadIn)+out.Dropped != uint64(in):
		return fmt.Sprintf("%d values accepted for it, %d of them read", in, w.nreadIn)
	case wi.kind == wkWait && wi.q > 0 && out.Dropped != 0:
		return "a lossless watcher dropped values"
	case (out.Evicted == 1) != (w.closedBy == errEvicted) || out.Evicted > 1:
		return "eviction counted wrong"
	case wi.kind == wkEvict && out.Dropped != out.Evicted:
		return "an EvictIfChannelFull watcher dropped values"
	}
	return ""
}

// takenStep checks Taken: it never decreases, and every lossless watcher
// that has not left has read every value below it that was accepted after
// it registered.
func (m *historyModel) takenStep(s *hState, t uint64) string {
	switch {
	case t < s.taken:
		return fmt.Sprintf("Taken decreased from %d", s.taken)
	case t > uint64(s.accepted):
		return fmt.Sprintf("only %d accepted", s.accepted)
	}
	for i := range s.ws {
		w, wi := &s.ws[i], m.watchers[i]
		if !w.on || wi.kind != wkWait || !(w.open() || w.closedBy == errStopped) {
			continue
		}
		limit := len(s.entries)
		if w.end >= 0 {
			limit = w.end
		}
		seq := 0 // accepted values before entry j
		floor := uint64(s.accepted)
		for j, e := range s.entries[:limit] {
			if j >= w.cursor && !m.skippable(wi, e) {
				floor = uint64(seq)
				break
			}
			if e&phantomBit == 0 {
				seq++
			}
		}
		if t > max(uint64(w.regSeq), floor) {
			return fmt.Sprintf("w%d has taken only %d", i, max(uint64(w.regSeq), floor))
		}
	}
	s.taken = t
	return ""
}

func (w *wState) status() string {
	switch {
	case !w.on:
		return "not registered"
	case w.open():
		return "open"
	}
	return fmt.Sprintf("closed (%v)", w.closedBy)
}

func (s *hState) equal(o *hState) bool {
	return s.accepted == o.accepted && s.lastAcc == o.lastAcc && s.pending == o.pending &&
		s.refused == o.refused && s.taken == o.taken && s.shutdown == o.shutdown && s.settled == o.settled &&
		slices.Equal(s.entries, o.entries) && slices.Equal(s.gone, o.gone) && slices.Equal(s.ws, o.ws)
}

func (s *hState) hash() uint64 {
	h := uint64(14695981039346656037)
	mix := func(x uint64) { h = (h ^ x) * 1099511628211 }
	for _, e := range s.entries {
		mix(e)
	}
	for _, e := range s.gone {
		mix(e)
	}
	mix(s.pending)
	mix(s.taken)
	mix(s.refused)
	for _, w := range s.ws {
		mix(uint64(w.cursor)<<32 | uint64(uint32(w.end)))
		mix(uint64(w.closedBy)<<8 | uint64(w.nread))
		mix(uint64(w.overflow))
	}
	return h
}

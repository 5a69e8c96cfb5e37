package harness

import "sync"

// SystemLimit is the ceiling reference: [limitRing], a minimal lossless
// broadcast ring written plainly in the harness.
const SystemLimit = "limit"

// Limit is the ceiling reference of the throughput tables: a [limitRing]
// of [DefaultQueue] values, read like fanout wait pull (a batch buffer of
// the queue's length), with the same parking discipline: one producer
// waits while the slowest reader is a full ring behind; a reader with
// nothing to read parks on a channel of its own, woken by the next
// publish. It does what fanout's lossless pull path does and nothing more
// (no strategies, no late registration, no counters), so fanout wait pull
// over limit says what fanout's generality costs.
var Limit = System{Name: SystemLimit, Strategy: StrategyWait, API: APIPull, Queue: DefaultQueue}

// limitRing is a lossless broadcast ring for a fixed set of readers, all
// registered before the first publish. One mutex guards everything.
//
// A publisher writes at head and wakes the readers parked since the last
// publish. It waits while the ring is full, that is while the slowest
// reader is len(buf) values behind: it then recomputes tail, the slowest
// position, and atTail, the readers at it, and parks on room until the
// last of those readers has moved on. A reader copies up to len(dst)
// values from its position, or parks on its own channel when it has
// nothing left.
type limitRing struct {
	mu       sync.Mutex
	buf      []*Event
	head     uint64 // values published
	pos      []uint64
	wake     []chan struct{}
	sleepers []int  // readers parked since the last publish
	tail     uint64 // the slowest reader's position when last computed
	atTail   int    // readers still at tail
	waiting  bool   // a publisher is parked on room
	room     chan struct{}
	closed   bool
}

func newLimitRing(size, readers int) *limitRing {
	r := &limitRing{buf: make([]*Event, size), pos: make([]uint64, readers),
		wake: make([]chan struct{}, readers), room: make(chan struct{}, 1), atTail: readers}
	for i := range r.wake {
		r.wake[i] = make(chan struct{}, 1)
	}
	return r
}

// publish appends v, waiting while the ring is full, and wakes the
// parked readers.
func (r *limitRing) publish(v *Event) {
	r.mu.Lock()
	for r.head-r.tail >= uint64(len(r.buf)) {
		r.tail, r.atTail = r.slowest()
		if r.head-r.tail < uint64(len(r.buf)) {
			break
		}
		r.waiting = true
		r.mu.Unlock()
		<-r.room
		r.mu.Lock()
	}
	r.buf[r.head%uint64(len(r.buf))] = v
	r.head++
	r.wakeSleepers()
	r.mu.Unlock()
}

// slowest returns the least reader position and the readers at it.
func (r *limitRing) slowest() (uint64, int) {
	least, at := r.pos[0], 0
	for _, p := range r.pos {
		switch {
		case p < least:
			least, at = p, 1
		case p == least:
			at++
		}
	}
	return least, at
}

func (r *limitRing) wakeSleepers() {
	for _, i := range r.sleepers {
		r.wake[i] <- struct{}{} // capacity 1, and a reader is listed once per park
	}
	r.sleepers = r.sleepers[:0]
}

// close ends the ring: readers get what is left, then 0 and false.
func (r *limitRing) close() {
	r.mu.Lock()
	r.closed = true
	r.wakeSleepers()
	r.mu.Unlock()
}

// recv copies up to len(dst) values for reader i into dst, parking while
// there are none; it returns 0 and false once the ring is closed and i has
// read everything.
func (r *limitRing) recv(i int, dst []*Event) (int, bool) {
	r.mu.Lock()
	for r.pos[i] == r.head {
		if r.closed {
			r.mu.Unlock()
			return 0, false
		}
		r.sleepers = append(r.sleepers, i)
		r.mu.Unlock()
		<-r.wake[i]
		r.mu.Lock()
	}
	p := r.pos[i]
	n := int(min(r.head-p, uint64(len(dst))))
	for k := range n {
		dst[k] = r.buf[(p+uint64(k))%uint64(len(r.buf))]
	}
	r.pos[i] = p + uint64(n)
	if p == r.tail {
		r.atTail--
		if r.atTail == 0 && r.waiting {
			r.waiting = false
			r.room <- struct{}{}
		}
	}
	r.mu.Unlock()
	return n, true
}

type limitInstance struct {
	r *limitRing
	e *Event
}

func (l limitInstance) publishN(n int) {
	for range n {
		l.r.publish(l.e)
	}
}
func (l limitInstance) publish(e *Event)   { l.r.publish(e) }
func (l limitInstance) close()             { l.r.close() }
func (l limitInstance) libDropped() uint64 { return 0 }

func (c *consumers) startLimit(s System, n int) {
	r := newLimitRing(s.Queue, n)
	c.r.inst = limitInstance{r: r, e: c.payload}
	for i := range n {
		c.consumeBatches(i, func(dst []*Event) (int, bool) { return r.recv(i, dst) }, make([]*Event, s.Queue))
	}
}

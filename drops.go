package fanout

import (
	"runtime"

	"github.com/fanout-go/fanout/internal/guard"
)

// dropNote is a settled drop (n values alike) to report to a drop handler.
type dropNote struct {
	f func(Drop)
	d Drop
	n uint64
}

// dropLog collects the drops settled while a lock is held, to report them
// once every lock is released: a handler may then call back into the
// broadcaster.
type dropLog struct {
	notes [4]dropNote
	k     int
	more  []dropNote
	// lapped reports that the ring lapped a reader that lost values: a
	// lossy reader falling behind. The publisher then yields its processor
	// once, after unlocking (see report).
	lapped bool
}

func (l *dropLog) add(f func(Drop), d Drop, n uint64) {
	if l.k > 0 && len(l.more) == 0 && d.Err == nil {
		if last := &l.notes[l.k-1]; last.d.WatcherID == d.WatcherID && last.d.Reason == d.Reason && last.d.Err == nil {
			last.n += n
			return
		}
	}
	if l.k < len(l.notes) {
		l.notes[l.k] = dropNote{f, d, n}
		l.k++
		return
	}
	l.more = append(l.more, dropNote{f, d, n})
}

// report calls the handlers, one call per value, containing panics.
func (l *dropLog) report(c panicCounter) {
	if l.lapped {
		// At most once per lap of the ring: a stalled reader costs a
		// publisher one yield per ring length of values, and a slow one
		// gets a turn to read before it loses more.
		runtime.Gosched()
	}
	for i := range l.k {
		l.notes[i].call(c)
	}
	for i := range l.more {
		l.more[i].call(c)
	}
	*l = dropLog{}
}

type panicCounter interface{ countPanic() }

func (n *dropNote) call(c panicCounter) {
	for range n.n {
		if guard.Call(func() { n.f(n.d) }) != nil {
			c.countPanic()
		}
	}
}

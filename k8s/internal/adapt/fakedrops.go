package adapt

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// FakeDrops holds, per fake recorder, the events it discarded because its
// channel was full, and whether its last wait for room ran out. They live
// here rather than in fields of the recorder, whose fields must stay
// client-go's so that a literal written for client-go's fake
// (FakeRecorder{ch, true}) compiles, and a copy of it passes vet's
// copylocks check. An entry goes when its recorder is garbage collected.
// The zero value is ready; it is safe for concurrent use.
type FakeDrops[T any] struct {
	m sync.Map // weak.Pointer[T] → *fakeState
}

type fakeState struct {
	drops   atomic.Uint64
	stalled atomic.Bool // the last wait for room ran out, and nothing was sent since
}

// state returns p's entry, made if needed.
func (d *FakeDrops[T]) state(p *T) *fakeState {
	k := weak.Make(p)
	c, ok := d.m.Load(k)
	if !ok {
		var loaded bool
		if c, loaded = d.m.LoadOrStore(k, new(fakeState)); !loaded {
			runtime.AddCleanup(p, func(k weak.Pointer[T]) { d.m.Delete(k) }, k)
		}
	}
	return c.(*fakeState)
}

// Add counts one event discarded by p.
func (d *FakeDrops[T]) Add(p *T) { d.state(p).drops.Add(1) }

// Get returns the number of events p discarded.
func (d *FakeDrops[T]) Get(p *T) uint64 {
	if c, ok := d.m.Load(weak.Make(p)); ok {
		return c.(*fakeState).drops.Load()
	}
	return 0
}

// Send puts msg on ch for p: at once when ch has room or a reader waits;
// otherwise it waits up to wait for one (client-go's fake waits for ever),
// so that a reader running behind the recorder, as with client-go, gets
// every event. Once a wait has run out (no reader: a test that records more
// than it reads), the next sends do not wait, until one succeeds again. A
// message not sent is discarded and counted.
func (d *FakeDrops[T]) Send(p *T, ch chan<- string, msg string, wait time.Duration) {
	select {
	case ch <- msg:
		if c, ok := d.m.Load(weak.Make(p)); ok {
			c.(*fakeState).stalled.Store(false)
		}
		return
	default:
	}
	st := d.state(p)
	if wait > 0 && !st.stalled.Load() {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case ch <- msg:
			return
		case <-t.C:
			st.stalled.Store(true)
		}
	}
	st.drops.Add(1)
}

// len returns the number of recorders with an entry, for tests.
func (d *FakeDrops[T]) len() int {
	n := 0
	d.m.Range(func(any, any) bool { n++; return true })
	return n
}

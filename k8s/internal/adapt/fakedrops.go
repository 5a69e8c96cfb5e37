package adapt

import (
	"runtime"
	"sync"
	"sync/atomic"
	"weak"
)

// FakeDrops counts, per fake recorder, the events it discarded because its
// channel was full. The count lives here rather than in a field of the
// recorder, whose fields must stay client-go's so that a literal written
// for client-go's fake (FakeRecorder{ch, true}) compiles, and a copy of it
// passes vet's copylocks check. An entry goes when its recorder is garbage
// collected. The zero value is ready; it is safe for concurrent use.
type FakeDrops[T any] struct {
	m sync.Map // weak.Pointer[T] → *atomic.Uint64
}

// Add counts one event discarded by p.
func (d *FakeDrops[T]) Add(p *T) {
	k := weak.Make(p)
	c, ok := d.m.Load(k)
	if !ok {
		var loaded bool
		if c, loaded = d.m.LoadOrStore(k, new(atomic.Uint64)); !loaded {
			runtime.AddCleanup(p, func(k weak.Pointer[T]) { d.m.Delete(k) }, k)
		}
	}
	c.(*atomic.Uint64).Add(1)
}

// Get returns the number of events p discarded.
func (d *FakeDrops[T]) Get(p *T) uint64 {
	if c, ok := d.m.Load(weak.Make(p)); ok {
		return c.(*atomic.Uint64).Load()
	}
	return 0
}

// len returns the number of recorders with an entry, for tests.
func (d *FakeDrops[T]) len() int {
	n := 0
	d.m.Range(func(any, any) bool { n++; return true })
	return n
}

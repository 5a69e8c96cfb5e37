package adapt

import (
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// fake stands for a fake recorder: a struct with a pointer, as the fakes
// are (a pointer-free one could share a tiny allocation with others).
type fake struct{ Events chan string }

func TestFakeDropsCountsPerRecorder(t *testing.T) {
	var d FakeDrops[fake]
	a, b := &fake{}, &fake{}
	assert.Zero(t, d.Get(a))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { d.Add(a) })
	}
	wg.Wait()
	d.Add(b)
	assert.Equal(t, uint64(8), d.Get(a))
	assert.Equal(t, uint64(1), d.Get(b))
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
}

// A recorder's entry goes with the recorder: fakes made by many tests do
// not accumulate.
func TestFakeDropsForgetsACollectedRecorder(t *testing.T) {
	var d FakeDrops[fake]
	func() {
		p := &fake{}
		d.Add(p)
		assert.Equal(t, 1, d.len())
	}()
	for i := 0; i < 100 && d.len() > 0; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	assert.Zero(t, d.len())
}

// A send with no room waits for a reader up to its bound, once: after a
// wait ran out the next sends discard at once, until one is taken again.
func TestFakeDropsSendWaitsOnceForAReaderThatIsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var d FakeDrops[fake]
		p := new(fake)
		ch := make(chan string, 1)
		start := time.Now()
		d.Send(p, ch, "a", time.Second) // room
		d.Send(p, ch, "b", time.Second) // full: waits, then discards
		if got := time.Since(start); got != time.Second {
			t.Errorf("the first send into a full channel waited %v, want 1s", got)
		}
		d.Send(p, ch, "c", time.Second)
		if got := time.Since(start); got != time.Second {
			t.Errorf("a send after a wait ran out waited too: %v in all", got)
		}
		if got := d.Get(p); got != 2 {
			t.Errorf("%d discarded, want 2", got)
		}
		<-ch
		d.Send(p, ch, "d", time.Second) // taken: the reader is back
		go func() { time.Sleep(500 * time.Millisecond); <-ch }()
		d.Send(p, ch, "e", time.Second) // full again: waits for the reader
		if got := d.Get(p); got != 2 {
			t.Errorf("%d discarded, want still 2: the reader took room within the wait", got)
		}
	})
}

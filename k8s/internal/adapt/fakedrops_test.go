package adapt

import (
	"runtime"
	"sync"
	"testing"

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

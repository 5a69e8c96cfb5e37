package fanoutnats

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// A durable consumer reports from two goroutines (its own and its
// acknowledger's); the reporter runs one OnError call at a time, so that a
// callback needs no lock of its own.
func TestReporterRunsOneCallAtATime(t *testing.T) {
	var in, most atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r := &reporter{onError: func(error) {
		n := in.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		once.Do(func() { close(entered); <-release })
		in.Add(-1)
	}}
	var wg sync.WaitGroup
	wg.Go(func() { r.report(&Error{Op: "decode", Err: errors.New("first")}) })
	<-entered // the first call is in the callback
	wg.Go(func() { r.report(&Error{Op: "ack", Err: errors.New("second")}) })
	for range 1000 { // give the second call every chance to enter
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d OnError calls ran at once", most.Load())
	}
}

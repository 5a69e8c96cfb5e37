package harness

import (
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// Every reader of the limit ring gets every value once, in publish order,
// whatever its speed: a reader taking one value at a time makes the
// publisher wait for it many times over the ring's length, while the others
// take whole batches.
func TestLimitRingDeliversEveryValueOnceInOrder(t *testing.T) {
	const readers, values = 4, 50 * DefaultQueue
	sent := make([]*Event, values)
	for i := range sent {
		sent[i] = &Event{Stamp: int64(i)}
	}
	r := newLimitRing(DefaultQueue, readers)
	got := make([][]*Event, readers)
	var wg sync.WaitGroup
	for i := range readers {
		buf := make([]*Event, DefaultQueue)
		if i == 0 {
			buf = buf[:1]
		}
		wg.Go(func() {
			for {
				n, more := r.recv(i, buf)
				got[i] = append(got[i], buf[:n]...)
				if !more {
					return
				}
			}
		})
	}
	for _, e := range sent {
		r.publish(e)
	}
	r.close()
	wg.Wait()
	for i, vs := range got {
		if len(vs) != values {
			t.Fatalf("reader %d: %d values, want %d", i, len(vs), values)
		}
		for k, e := range vs {
			if e != sent[k] {
				t.Fatalf("reader %d: value %d is %d", i, k, e.Stamp)
			}
		}
	}
}

// A measurement of the limit system delivers everything to every watcher
// and leaves no goroutine behind once it is torn down.
func TestLimitMeasurementLeavesNoGoroutine(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, n := range []int{1, 7} {
		smp, err := measure(variant{sys: Limit}, n, 1, 10*DefaultQueue+3)
		if err != nil {
			t.Fatal(err)
		}
		if smp.delivered != smp.expected || smp.expected != int64(n)*(10*DefaultQueue+3) || !smp.settled {
			t.Errorf("N=%d: delivered %d of %d, settled %v", n, smp.delivered, smp.expected, smp.settled)
		}
	}
}

// A reader that finds the ring closed and drained returns at once, and so
// does every later call.
func TestLimitRingClosedAndDrainedEndsTheReader(t *testing.T) {
	r := newLimitRing(4, 1)
	r.publish(&Event{})
	r.close()
	buf := make([]*Event, 4)
	if n, more := r.recv(0, buf); n != 1 || !more {
		t.Errorf("first recv: %d, %v; want 1, true", n, more)
	}
	for range 2 {
		if n, more := r.recv(0, buf); n != 0 || more {
			t.Errorf("recv after the end: %d, %v; want 0, false", n, more)
		}
	}
}

package fanout_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/fanout-go/fanout"
)

// The harness's working-reader workload (bench/internal/harness/working.go)
// in the package, for profiles and before/after runs: one producer, N
// lossless pull readers at the default queue length, each checking that
// its values arrive in order, as every system's reader does there.

// stampedEvent is a value that knows its place in the sequence.
type stampedEvent struct{ stamp int64 }

// stampedMask is one less than the values of stampedPool: more than a
// queue holds, so that a value is not published again while a reader may
// still look at its last use.
const stampedMask = 1<<16 - 1

var stampedPool = func() []*stampedEvent {
	pool := make([]*stampedEvent, stampedMask+1)
	for i := range pool {
		pool[i] = &stampedEvent{stamp: int64(i)}
	}
	return pool
}()

// BenchmarkWorkingReaders runs the workload at the default queue length and
// at 100, the default until v0.1.0, interleaved by -count.
func BenchmarkWorkingReaders(b *testing.B) {
	for _, q := range []int{fanout.DefaultQueueLength, benchQueue} {
		for _, n := range benchWatchers {
			b.Run(fmt.Sprintf("queue=%d/watchers=%d", q, n), func(b *testing.B) { benchWorking(b, q, n) })
		}
	}
}

func benchWorking(b *testing.B, queue, watchers int) {
	bc := fanout.New[*stampedEvent](fanout.WithQueueLength(queue))
	var wg sync.WaitGroup
	received := make([]int, watchers)
	broken := make([]int, watchers)
	for i := range watchers {
		w, err := bc.Watch()
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { received[i], broken[i] = readInOrder(w, queue) })
	}
	b.ReportAllocs()
	b.ResetTimer()
	k := 0
	for b.Loop() {
		if err := bc.Action(stampedPool[k&stampedMask]); err != nil {
			b.Fatal(err)
		}
		k++
	}
	bc.Shutdown()
	wg.Wait()
	b.StopTimer()
	reportDeliveries(b, received, watchers)
	for i, n := range broken {
		if n > 0 {
			b.Fatalf("reader %d found %d values out of order", i, n)
		}
	}
}

// readInOrder reads w until it closes, a queue's length at a time,
// checking each value's stamp.
func readInOrder(w *fanout.Watcher[*stampedEvent], queue int) (received, broken int) {
	buf := make([]*stampedEvent, queue)
	var want int64
	for {
		n, err := w.Recv(context.Background(), buf)
		for _, v := range buf[:n] {
			if v.stamp != want {
				broken++
			}
			want = (v.stamp + 1) & stampedMask
		}
		received += n
		if err != nil {
			return received, broken
		}
	}
}

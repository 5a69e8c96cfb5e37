package fanout_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

// An unread watcher holds exactly its queue length of values.
func TestQueueLengthIsExact(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name+"/drop-new", func(t *testing.T) {
			b := fanouttest.New[int](t, fanout.WithQueueLength(5), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
			w := fanouttest.Watch(t, b)
			r.prepare(w)
			publish(t, b, seq(1, 10)...)
			assert.Equal(t, 5, w.Stats().Queued)
			assert.Equal(t, seq(1, 5), r.drain(w))
			assert.Equal(t, uint64(5), w.Stats().DroppedFull)
		})
		t.Run(r.name+"/wait", func(t *testing.T) {
			b := fanouttest.New[int](t, fanout.WithQueueLength(5))
			w := fanouttest.Watch(t, b)
			r.prepare(w)
			for i := 1; i <= 5; i++ {
				ok, err := b.ActionOrDrop(i)
				require.NoError(t, err)
				require.True(t, ok, "value %d fits", i)
			}
			ok, err := b.ActionOrDrop(6)
			require.NoError(t, err)
			assert.False(t, ok, "the sixth value must not fit")
			assert.Equal(t, seq(1, 5), r.drain(w))
			ok, _ = b.ActionOrDrop(7)
			assert.True(t, ok)
			assert.Equal(t, []int{7}, r.drain(w))
		})
	}
}

func TestHandOff(t *testing.T) {
	t.Run("drop without a ready consumer", func(t *testing.T) {
		b := fanouttest.New[int](t, fanout.WithQueueLength(0), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
		w := fanouttest.Watch(t, b)
		publish(t, b, 1)
		assert.Equal(t, uint64(1), w.Stats().DroppedFull)
		assert.Empty(t, fanouttest.Drain(w))
	})
	for _, r := range readers {
		t.Run("wait/"+r.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := fanout.New[int](fanout.WithQueueLength(0))
				defer b.Shutdown()
				w, err := b.Watch()
				require.NoError(t, err)
				r.prepare(w)
				var returned atomic.Bool
				go func() {
					assert.NoError(t, b.Action(42))
					returned.Store(true)
				}()
				synctest.Wait()
				assert.False(t, returned.Load(), "a hand-off waits for the consumer")
				v, err := w.Next(context.Background())
				require.NoError(t, err)
				assert.Equal(t, 42, v)
				synctest.Wait()
				assert.True(t, returned.Load())
			})
		})
	}
}

func TestAllIterator(t *testing.T) {
	b := fanouttest.New[int](t)
	w := fanouttest.Watch(t, b)
	publish(t, b, 1, 2, 3)
	b.Shutdown()
	var got []int
	for v := range w.All(context.Background()) {
		got = append(got, v)
	}
	assert.Equal(t, []int{1, 2, 3}, got)
	assert.ErrorIs(t, w.Err(), fanout.ErrStopped)
}

// Recv with an empty buffer never waits; once the watcher is closed and
// drained it returns the reason, so a read loop ends instead of spinning.
func TestRecvWithEmptyBufferReportsCloseReason(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := fanouttest.New[int](t)
			w := fanouttest.Watch(t, b)
			r.prepare(w)
			n, err := w.Recv(context.Background(), nil)
			assert.Zero(t, n)
			assert.NoError(t, err, "open: nothing to report")
			publish(t, b, 1)
			w.Stop()
			n, err = w.Recv(context.Background(), nil)
			assert.Zero(t, n)
			assert.NoError(t, err, "a value is still queued")
			assert.Equal(t, []int{1}, r.drain(w))
			n, err = w.Recv(context.Background(), nil)
			assert.Zero(t, n)
			assert.ErrorIs(t, err, fanout.ErrWatcherStopped)
		})
	}
}

func TestResultChanAfterPullReads(t *testing.T) {
	b := fanouttest.New[int](t)
	w := fanouttest.Watch(t, b)
	publish(t, b, 1, 2, 3)
	v, err := w.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, v)
	ch := w.ResultChan() // moves the rest off the shared ring
	assert.Equal(t, ch, w.ResultChan(), "later calls return the same channel")
	publish(t, b, 4)
	got, _ := fanouttest.DrainChan(ch)
	assert.Equal(t, []int{2, 3, 4}, got)
}

func TestConcurrentPullReadersShareOneWatcher(t *testing.T) {
	b := fanouttest.New[int](t, fanout.WithQueueLength(8))
	w := fanouttest.Watch(t, b)
	const n = 5000
	var mu sync.Mutex
	seen := make(map[int]int)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for {
				v, err := w.Next(context.Background())
				if err != nil {
					return
				}
				mu.Lock()
				seen[v]++
				mu.Unlock()
			}
		})
	}
	publish(t, b, seq(1, n)...)
	b.Shutdown()
	wg.Wait()
	require.Len(t, seen, n)
	for v, c := range seen {
		require.Equal(t, 1, c, "value %d", v)
	}
}

// Every method of a watcher is safe for concurrent use: two goroutines
// parked on one shared-ring watcher are both woken by later values.
func TestConcurrentPullReadersAreNotStranded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int]()
		defer b.Shutdown()
		w, err := b.Watch()
		require.NoError(t, err)
		out := make(chan int, 2)
		for range 2 {
			go func() {
				v, err := w.Next(context.Background())
				assert.NoError(t, err)
				out <- v
			}()
		}
		synctest.Wait()
		publish(t, b, 1)
		synctest.Wait()
		require.Equal(t, 1, <-out)
		publish(t, b, 2)
		synctest.Wait()
		select {
		case v := <-out:
			assert.Equal(t, 2, v)
		default:
			t.Fatalf("second reader still parked with %d value(s) queued", w.Stats().Queued)
		}
	})
}

// Stop is idempotent, keeps what was queued readable, then closes with
// ErrWatcherStopped.
func TestStop(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name+"/queued values stay readable", func(t *testing.T) {
			b := fanouttest.New[int](t)
			w := fanouttest.Watch(t, b)
			r.prepare(w)
			publish(t, b, 1, 2)
			w.Stop()
			w.Stop() // idempotent
			publish(t, b, 3)
			got, err := fanouttest.CollectAll(t, w)
			assert.ErrorIs(t, err, fanout.ErrWatcherStopped)
			assert.Equal(t, []int{1, 2}, got)
			_, open := <-w.ResultChan()
			assert.False(t, open)
			assert.Equal(t, 0, b.Stats().Watchers)
		})
		t.Run(r.name+"/frees a waiting producer", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := fanout.New[int](fanout.WithQueueLength(1))
				defer b.Shutdown()
				w, err := b.Watch()
				require.NoError(t, err)
				r.prepare(w)
				publish(t, b, 1)
				done := make(chan error)
				go func() { done <- b.Action(2) }()
				synctest.Wait()
				go w.Stop() // from another goroutine, consumer never read
				assert.NoError(t, <-done)
			})
		})
		t.Run(r.name+"/unblocks a parked reader", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := fanout.New[int]()
				defer b.Shutdown()
				w, err := b.Watch()
				require.NoError(t, err)
				r.prepare(w)
				errc := make(chan error)
				go func() {
					_, err := w.Next(context.Background())
					errc <- err
				}()
				synctest.Wait()
				w.Stop()
				assert.ErrorIs(t, <-errc, fanout.ErrWatcherStopped)
			})
		})
	}
}

// Like k8s's TestBroadcasterWatcherStopDeadlock: a producer blocked on one
// watcher must not prevent another watcher from stopping.
func TestStopOtherWatcherWhileProducerBlocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(0))
		defer b.Shutdown()
		blocker, err := b.Watch()
		require.NoError(t, err)
		other, err := b.Watch()
		require.NoError(t, err)
		go func() { _ = b.Action(1) }()
		synctest.Wait()
		other.Stop()
		_, open := <-other.ResultChan()
		assert.False(t, open)
		blocker.Stop()
	})
}

// WatcherStats.Delivered counts the values the consumer has taken, on both
// read paths and across the switch from one to the other.
func TestWatcherStatsCountDelivered(t *testing.T) {
	b := fanouttest.New[int](t, fanout.WithQueueLength(10))
	w := fanouttest.Watch(t, b)
	publish(t, b, 1, 2, 3)
	assert.Equal(t, []int{1, 2}, fanouttest.Collect(t, w, 2))
	s := w.Stats()
	assert.Equal(t, uint64(2), s.Delivered)
	assert.Equal(t, 1, s.Queued)
	ch := w.ResultChan()
	publish(t, b, 4)
	assert.Equal(t, uint64(2), w.Stats().Delivered, "queued in the channel, not yet received")
	assert.Equal(t, 3, <-ch)
	assert.Equal(t, uint64(3), w.Stats().Delivered)
	assert.Equal(t, 4, <-ch)
	s = w.Stats()
	assert.Equal(t, uint64(4), s.Delivered)
	assert.Zero(t, s.Queued)
}

// An idle watcher on the pull path costs a few hundred bytes, not a queue
// buffer (k8s: about 3.8 KB at queue length 100).
func TestIdleWatcherMemory(t *testing.T) {
	const n = 10000
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b := fanout.New[*int]()
	ws := make([]*fanout.Watcher[*int], 0, n)
	for range n {
		w, err := b.Watch()
		require.NoError(t, err)
		ws = append(ws, w)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perWatcher := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d bytes per idle watcher", perWatcher)
	assert.LessOrEqual(t, perWatcher, int64(512))
	runtime.KeepAlive(ws)
	b.Shutdown()
}

// The documented exception to "a stopped watcher receives nothing accepted
// after Stop": Action hands its value to channel watchers with room before
// it waits for a full one, and a channel cannot take it back.
func TestStoppedChannelWatcherKeepsTheValueActionWaitedWith(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(1))
		defer b.Shutdown()
		full, err := b.Watch()
		require.NoError(t, err)
		full.ResultChan()
		publish(t, b, 1)
		roomy, err := b.Watch()
		require.NoError(t, err)
		roomy.ResultChan()
		done := make(chan error)
		go func() { done <- b.Action(2) }()
		synctest.Wait() // Action waits for full, having handed 2 to roomy
		roomy.Stop()
		accepted := b.Stats().Accepted
		assert.Equal(t, 1, <-full.ResultChan())
		require.NoError(t, <-done)
		assert.Equal(t, accepted+1, b.Stats().Accepted, "2 was accepted after Stop returned")
		got, closed := fanouttest.DrainChan(roomy.ResultChan())
		assert.Equal(t, []int{2}, got)
		assert.True(t, closed)

		// A pull watcher never receives a value accepted after its Stop.
		pull, err := b.Watch()
		require.NoError(t, err)
		go func() { done <- b.Action(3) }()
		synctest.Wait() // full holds 2: Action waits
		pull.Stop()
		assert.Equal(t, 2, <-full.ResultChan())
		require.NoError(t, <-done)
		got, err = fanouttest.CollectAll(t, pull)
		assert.Empty(t, got)
		assert.ErrorIs(t, err, fanout.ErrWatcherStopped)
	})
}

func TestWatcherNameIsInItsStatsDropsAndFullState(t *testing.T) {
	var drops []fanout.Drop
	var states []fanout.FullState
	b := fanouttest.New[int](t, fanout.WithQueueLength(1))
	w := fanouttest.Watch(t, b, fanout.WithName("audit"), fanout.WithDropHandler(func(d fanout.Drop) { drops = append(drops, d) }),
		fanout.WithFullChannelBehavior(waitFunc(func(st fanout.FullState) fanout.Decision {
			states = append(states, st)
			return fanout.Decision{Verdict: fanout.VerdictDropFull}
		})))
	publish(t, b, 1, 2)
	assert.Equal(t, "audit", w.Name())
	s := w.Stats()
	assert.Equal(t, "audit", s.Name)
	assert.Equal(t, w.ID(), s.ID)
	require.Len(t, drops, 1)
	assert.Equal(t, "audit", drops[0].WatcherName)
	require.Len(t, states, 1)
	assert.Equal(t, "audit", states[0].WatcherName)
	assert.Empty(t, fanouttest.Watch(t, b).Name(), "unnamed by default")
}

// An idle watcher's memory is a README target (≤ 300 B per watcher with
// 100,000 of them): the struct must stay in the 256-byte size class, the
// fields of features only some watchers use living behind Watcher.x.
func TestWatcherStaysInThe256ByteSizeClass(t *testing.T) {
	if size := unsafe.Sizeof(fanout.Watcher[*int]{}); size > 256 {
		t.Fatalf("Watcher is %d bytes, more than the 256-byte size class", size)
	}
}

// A channel watcher's Delivered, exported as a counter, never goes down,
// and counts a value its consumer took from a send that still waits for
// another watcher. The send was counted only once the publisher had sent
// to every full watcher: meanwhile Delivered was one low, 1 then 0.
func TestChannelWatcherDeliveredCountsSendsOfAWaitingPublisher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(1))
		defer b.Shutdown()
		var ws []*fanout.Watcher[int]
		var chs []<-chan int
		for range 3 {
			w, err := b.Watch()
			require.NoError(t, err)
			ws, chs = append(ws, w), append(chs, w.ResultChan())
		}
		require.NoError(t, b.Action(0)) // every channel full
		go func() { _ = b.Action(1) }()
		synctest.Wait()
		assert.Equal(t, 0, <-chs[1])
		assert.EqualValues(t, 1, ws[1].Stats().Delivered)
		assert.Equal(t, 0, <-chs[0]) // the publisher sends to 0 and 1, then waits for 2
		synctest.Wait()
		assert.EqualValues(t, 1, ws[1].Stats().Delivered, "1 queued, 1 taken")
		assert.Equal(t, 1, <-chs[1])
		assert.EqualValues(t, 2, ws[1].Stats().Delivered, "both taken, the publisher still waiting for 2")
		<-chs[2]
	})
}

// A range over All with a nil context ends at once, takes nothing, and Err
// names the mistake from then on, so that the loop does not look like a
// closed, empty watcher.
func TestAllWithANilContextEndsAtOnceAndErrNamesIt(t *testing.T) {
	var nilCtx context.Context // a variable: staticcheck's SA1012 flags a literal nil
	b := fanouttest.New[int](t)
	w := fanouttest.Watch(t, b)
	publish(t, b, 1, 2)
	it := w.All(nilCtx)
	require.NoError(t, w.Err(), "making the iterator is not yet the mistake")

	var got []int
	for v := range it {
		got = append(got, v)
	}
	assert.Empty(t, got)
	assert.ErrorContains(t, w.Err(), "nil context")
	assert.Zero(t, w.Stats().Delivered, "nothing taken")
	assert.Equal(t, []int{1, 2}, fanouttest.Collect(t, w, 2), "both still queued")

	w.Stop()
	assert.ErrorContains(t, w.Err(), "nil context", "the mistake stays reported after the close")
}

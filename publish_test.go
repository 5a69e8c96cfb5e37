package fanout_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

// A stopped watcher must not stay reachable from the broadcaster, also when
// only Action publishes (an earlier version kept stopped watchers on a list
// that only strict publishes pruned).
func TestStoppedWatchersAreNotRetained(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(b *fanout.Broadcaster[int], i int) *fanout.Watcher[int]
	}{
		{"hand-off", func(b *fanout.Broadcaster[int], i int) *fanout.Watcher[int] {
			w, err := b.Watch(fanout.WithQueueLength(0))
			require.NoError(t, err)
			return w
		}},
		{"filled channel", func(b *fanout.Broadcaster[int], i int) *fanout.Watcher[int] {
			w, err := b.Watch(fanout.WithQueueLength(1))
			require.NoError(t, err)
			ch := w.ResultChan()
			require.NoError(t, b.Action(i)) // fills it
			<-ch
			return w
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fanout.New[int]()
			defer b.Shutdown()
			const n = 100
			ptrs := make([]weak.Pointer[fanout.Watcher[int]], n)
			for i := range n {
				w := tc.make(b, i)
				w.Stop()
				ptrs[i] = weak.Make(w)
			}
			require.NoError(t, b.Action(-1)) // Action only: no strict publish
			assert.Zero(t, b.Stats().Watchers)
			runtime.GC()
			runtime.GC()
			alive := 0
			for _, p := range ptrs {
				if p.Value() != nil {
					alive++
				}
			}
			assert.Zero(t, alive, "stopped watchers still reachable from the broadcaster")
		})
	}
}

// "A bounded wait is measured from when the publish call first had to wait":
// a wait for a shared-ring reader's room is such a first wait, as a wait for
// a full channel watcher is (with a ResultChan watcher instead of the pull
// one, Action returns after 1s).
func TestBoundedWaitCountsRingWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(1))
		defer b.Shutdown()
		ringW, err := b.Watch() // pull, WaitIfChannelFull: shared ring
		require.NoError(t, err)
		bounded, err := b.Watch(fanout.WithFullChannelBehavior(fanout.WaitTimeoutIfChannelFull(100 * time.Millisecond)))
		require.NoError(t, err)
		publish(t, b, 1) // both full
		start := time.Now()
		took := make(chan time.Duration, 1)
		go func() {
			assert.NoError(t, b.Action(2))
			took <- time.Since(start)
		}()
		time.Sleep(time.Second)
		v, err := ringW.Next(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, v)
		assert.Equal(t, time.Second, <-took, "the 100ms bound started when Action first waited")
		assert.Equal(t, uint64(1), bounded.Stats().DroppedTimeout)
	})
}

// Optimistic Action, strict ActionOrDrop and strict ActionContext from
// concurrent goroutines, with slow consumers of channel watchers (built-in and
// custom waiting behaviour), a hand-off, a shared-ring reader and one
// converted by ResultChan mid-stream. Lossless watchers never drop (a full
// waiting watcher that a strict publish overlooked would make ActionOrDrop
// drop with DropFull), refused values reach nobody, nothing is delivered
// twice, and every watcher sees the accepted values in one order.
func TestStressMixedPublishers(t *testing.T) {
	b := fanout.New[int](fanout.WithQueueLength(2))
	type rw struct {
		w        *fanout.Watcher[int]
		lossless bool
		got      []int
	}
	var ws []*rw
	add := func(lossless bool, opts ...fanout.Option) *rw {
		w, err := b.Watch(opts...)
		require.NoError(t, err)
		r := &rw{w: w, lossless: lossless}
		ws = append(ws, r)
		return r
	}
	chanW := add(true)
	customW := add(true, fanout.WithFullChannelBehavior(waitFunc(func(fanout.FullState) fanout.Decision {
		return fanout.Decision{Verdict: fanout.VerdictWait} // waits, through the custom-behaviour path
	})))
	handoff := add(false, fanout.WithQueueLength(0))
	shared := add(true, fanout.WithQueueLength(3))
	convert := add(true, fanout.WithQueueLength(2))

	var cwg sync.WaitGroup
	// slow is a deliberate perturbation, not a wait: consumers that now and
	// then pause for a few microseconds let queues fill, so that publishers
	// wait, refuse and time out in ever different interleavings. No
	// assertion depends on how long a pause is.
	slow := func() {
		if rand.IntN(4) == 0 {
			time.Sleep(time.Duration(rand.IntN(20)) * time.Microsecond)
		}
	}
	rangeChan := func(r *rw, ch <-chan int) {
		for v := range ch {
			r.got = append(r.got, v)
			slow()
		}
	}
	cwg.Add(5)
	go func() { defer cwg.Done(); rangeChan(chanW, chanW.w.ResultChan()) }()
	go func() { defer cwg.Done(); rangeChan(customW, customW.w.ResultChan()) }()
	go func() { defer cwg.Done(); rangeChan(handoff, handoff.w.ResultChan()) }()
	go func() {
		defer cwg.Done()
		buf := make([]int, 2)
		for {
			n, err := shared.w.Recv(context.Background(), buf)
			if err != nil {
				return
			}
			shared.got = append(shared.got, buf[:n]...)
			slow()
		}
	}()
	go func() {
		defer cwg.Done()
		for range 50 {
			v, err := convert.w.Next(context.Background())
			if err != nil {
				return
			}
			convert.got = append(convert.got, v)
			slow()
		}
		rangeChan(convert, convert.w.ResultChan())
	}()

	const per = 2000
	var ok [3][per]bool
	var pwg sync.WaitGroup
	pwg.Add(3)
	go func() {
		defer pwg.Done()
		for i := range per {
			ok[0][i] = assert.NoError(t, b.Action(i))
		}
	}()
	go func() {
		defer pwg.Done()
		for i := range per {
			acc, err := b.ActionOrDrop(1e6 + i)
			ok[1][i] = assert.NoError(t, err) && acc
		}
	}()
	go func() {
		defer pwg.Done()
		for i := range per {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(50))*time.Microsecond)
			err := b.ActionContext(ctx, 2e6+i)
			cancel()
			ok[2][i] = err == nil
		}
	}()
	pwg.Wait()
	b.Shutdown()
	cwg.Wait()

	accepted := map[int]bool{}
	refused := 0
	for p := range 3 {
		for i := range per {
			if ok[p][i] {
				accepted[p*1e6+i] = true
			} else if p == 1 {
				refused++
			}
		}
	}
	s := b.Stats()
	assert.Equal(t, uint64(len(accepted)), s.Accepted)
	assert.Equal(t, uint64(refused), s.Refused)
	assert.Equal(t, handoff.w.Stats().Dropped, s.Dropped, "only the hand-off may miss values")

	var ref []int
	for _, r := range ws {
		seen := map[int]bool{}
		var filtered []int
		for _, v := range r.got {
			require.False(t, seen[v], "watcher %d got %d twice", r.w.ID(), v)
			seen[v] = true
			if v >= 1e6 && v < 2e6 {
				require.True(t, accepted[v], "refused value %d reached watcher %d", v, r.w.ID())
			}
			if accepted[v] {
				filtered = append(filtered, v)
			}
		}
		if !r.lossless {
			continue
		}
		assert.Zero(t, r.w.Stats().Dropped, "watcher %d", r.w.ID())
		if ref == nil {
			ref = filtered
			require.Len(t, ref, len(accepted))
			last := [3]int{-1, 1e6 - 1, 2e6 - 1}
			for _, v := range ref {
				require.Greater(t, v, last[v/1e6], "a publisher's values out of order")
				last[v/1e6] = v
			}
		} else {
			require.Equal(t, ref, filtered, "watcher %d", r.w.ID())
		}
	}
}

// ActionBatch accepts its values contiguously: with four producers
// publishing batches at once, every watcher sees each batch as one run, in
// order, and every watcher sees the same order.
func TestActionBatchIsContiguousAmongConcurrentProducers(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			const producers, batches, size = 4, 200, 16
			b := fanout.New[int](fanout.WithQueueLength(64))
			var ws []*fanout.Watcher[int]
			for range 3 {
				w, err := b.Watch()
				require.NoError(t, err)
				r.prepare(w)
				ws = append(ws, w)
			}
			got := make([][]int, len(ws))
			var readers sync.WaitGroup
			for i, w := range ws {
				readers.Go(func() { got[i], _ = collectAll(w) })
			}
			var pg sync.WaitGroup
			for p := range producers {
				pg.Go(func() {
					vs := make([]int, size)
					for k := range batches {
						for j := range vs {
							vs[j] = (p*batches+k)*size + j
						}
						n, err := b.ActionBatch(vs)
						assert.NoError(t, err)
						assert.Equal(t, size, n)
					}
				})
			}
			pg.Wait()
			b.Shutdown()
			readers.Wait()
			for i := range got {
				require.Len(t, got[i], producers*batches*size)
				assert.Equal(t, got[0], got[i], "one total order")
				for j := 0; j < len(got[i]); j += size {
					assert.Equal(t, 0, got[i][j]%size, "a batch starts at a batch boundary")
					for k := 1; k < size; k++ {
						require.Equal(t, got[i][j]+k, got[i][j+k], "batch interleaved at %d", j+k)
					}
				}
			}
		})
	}
}

// collectAll reads w until it closes, through the channel once ResultChan
// was called, else through Recv.
func collectAll(w *fanout.Watcher[int]) ([]int, error) {
	var out []int
	buf := make([]int, 64)
	for {
		n, err := w.Recv(context.Background(), buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out, err
		}
	}
}

// Each watcher's behaviour applies to each value of a batch, as for single
// publishes.
func TestActionBatchAppliesBehaviorPerValue(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := fanout.New[int](fanout.WithQueueLength(3))
			defer b.Shutdown()
			drop, err := b.Watch(fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
			require.NoError(t, err)
			oldest, err := b.Watch(fanout.WithFullChannelBehavior(fanout.DropOldestIfChannelFull))
			require.NoError(t, err)
			evict, err := b.Watch(fanout.WithFullChannelBehavior(fanout.EvictIfChannelFull))
			require.NoError(t, err)
			for _, w := range []*fanout.Watcher[int]{drop, oldest, evict} {
				r.prepare(w)
			}
			n, err := b.ActionBatch([]int{1, 2, 3, 4, 5})
			require.NoError(t, err)
			assert.Equal(t, 5, n)
			b.Shutdown()
			assert.Equal(t, []int{1, 2, 3}, r.drain(drop))
			assert.Equal(t, uint64(2), drop.Stats().DroppedFull)
			assert.Equal(t, []int{3, 4, 5}, r.drain(oldest))
			assert.Equal(t, uint64(2), oldest.Stats().DroppedOldest)
			assert.Equal(t, []int{1, 2, 3}, r.drain(evict))
			assert.ErrorIs(t, evict.Err(), fanout.ErrEvicted)
		})
	}
}

// A batch that meets a full lossless watcher waits for room in the middle,
// keeps its place (no other publisher gets in between) and, when its context
// ends, reports how many of its values were accepted.
func TestActionBatchContextReportsAcceptedCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(2))
		defer b.Shutdown()
		w, err := b.Watch()
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		other := make(chan error, 1)
		go func() {
			synctest.Wait() // the batch is waiting
			other <- b.Action(100)
		}()
		n, err := b.ActionBatchContext(ctx, []int{1, 2, 3, 4})
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 2, n, "two values fit, then the batch waited")
		assert.Equal(t, []int{1, 2}, fanouttest.Collect(t, w, 2))
		require.NoError(t, <-other)
		assert.Equal(t, []int{100}, fanouttest.Drain(w), "the other publisher went after the batch")
	})
}

// A batch that has values accepted and then waits for room wakes the ring
// readers that parked before those values, whatever makes it wait: the
// reader that must make room may be one of them, and would otherwise wait
// for a wake-up that only the end of the batch gave.
func TestActionBatchWaitingForRoomWakesParkedReaders(t *testing.T) {
	for name, beh := range map[string]fanout.FullChannelBehavior{
		"wait":         fanout.WaitIfChannelFull,
		"wait-timeout": fanout.WaitTimeoutIfChannelFull(time.Hour),
		"custom wait": waitFunc(func(fanout.FullState) fanout.Decision {
			return fanout.Decision{Verdict: fanout.VerdictWait}
		}),
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := fanout.New[int](fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(beh))
				defer b.Shutdown()
				w, err := b.Watch()
				require.NoError(t, err)
				got := make(chan int, 10)
				go func() {
					one := make([]int, 1)
					for {
						if _, err := w.Recv(context.Background(), one); err != nil {
							close(got)
							return
						}
						got <- one[0]
					}
				}()
				synctest.Wait() // the reader is parked on its empty queue
				done := make(chan error, 1)
				go func() {
					_, err := b.ActionBatch([]int{1, 2, 3})
					done <- err
				}()
				synctest.Wait()
				select {
				case err := <-done:
					require.NoError(t, err)
				default:
					t.Fatalf("the batch is still waiting; the reader took %d values", len(got))
				}
				b.Shutdown()
				var vals []int
				for v := range got {
					vals = append(vals, v)
				}
				assert.Equal(t, []int{1, 2, 3}, vals)
			})
		})
	}
}

// An empty batch accepts nothing and returns at once.
func TestActionBatchEmpty(t *testing.T) {
	b := fanouttest.New[int](t)
	n, err := b.ActionBatch(nil)
	assert.Zero(t, n)
	assert.NoError(t, err)
	assert.Zero(t, b.Stats().Accepted)
}

// After Shutdown every publish method returns ErrStopped, an empty batch
// too, so that a producer that publishes what it has learns it must stop.
func TestActionBatchEmptyAfterShutdownIsErrStopped(t *testing.T) {
	b := fanout.New[int]()
	b.Shutdown()
	n, err := b.ActionBatch(nil)
	assert.Zero(t, n)
	assert.ErrorIs(t, err, fanout.ErrStopped)
	n, err = b.ActionBatchContext(context.Background(), []int{})
	assert.Zero(t, n)
	assert.ErrorIs(t, err, fanout.ErrStopped)
	_, n, err = b.ActionBatchSeq(context.Background(), nil)
	assert.Zero(t, n)
	assert.ErrorIs(t, err, fanout.ErrStopped)
}

// Concurrent producers keep every guarantee: each watcher gets every value
// (lossless), in one total order, and each producer's values in its order.
func TestConcurrentProducersKeepOneTotalOrder(t *testing.T) {
	const producers, each = 4, 3000
	b := fanout.New[int](fanout.WithQueueLength(8))
	var ws []*fanout.Watcher[int]
	for i := range 4 {
		w, err := b.Watch()
		require.NoError(t, err)
		if i%2 == 1 {
			w.ResultChan()
		}
		ws = append(ws, w)
	}
	got := make([][]int, len(ws))
	var rg sync.WaitGroup
	for i, w := range ws {
		rg.Go(func() { got[i], _ = collectAll(w) })
	}
	var pg sync.WaitGroup
	for p := range producers {
		pg.Go(func() {
			for i := range each {
				var err error
				switch i % 3 {
				case 0:
					err = b.Action(p*each + i)
				case 1:
					err = b.ActionContext(context.Background(), p*each+i)
				default:
					for {
						ok, e := b.ActionOrDrop(p*each + i)
						if ok || e != nil {
							err = e
							break
						}
						runtime.Gosched()
					}
				}
				assert.NoError(t, err)
			}
		})
	}
	pg.Wait()
	b.Shutdown()
	rg.Wait()
	for i := range got {
		require.Len(t, got[i], producers*each)
		assert.Equal(t, got[0], got[i])
		last := make([]int, producers)
		for p := range last {
			last[p] = -1
		}
		for _, v := range got[i] {
			p := v / each
			require.Greater(t, v, last[p], "producer %d's values out of order", p)
			last[p] = v
		}
	}
}

package fanout_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

// readers are the two ways of consuming a watcher: the k8s-compatible
// channel and the pull API. Most semantics must hold for both.
var readers = []struct {
	name string
	// prepare is called right after Watch; collect reads n values.
	prepare func(w *fanout.Watcher[int])
	drain   func(w *fanout.Watcher[int]) []int
}{
	{
		name:    "chan",
		prepare: func(w *fanout.Watcher[int]) { w.ResultChan() },
		drain: func(w *fanout.Watcher[int]) []int {
			v, _ := fanouttest.DrainChan(w.ResultChan())
			return v
		},
	},
	{
		name:    "pull",
		prepare: func(*fanout.Watcher[int]) {},
		drain:   fanouttest.Drain[int],
	},
}

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func publish(t *testing.T, b *fanout.Broadcaster[int], vals ...int) {
	t.Helper()
	for _, v := range vals {
		require.NoError(t, b.Action(v))
	}
}

func TestErrStoppedText(t *testing.T) {
	assert.Equal(t, "broadcaster already stopped", fanout.ErrStopped.Error())
}

// One total order, and a watcher sees exactly the values accepted after it
// registered.
func TestRegistrationIsOrderedWithValues(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := fanouttest.New[int](t)
			publish(t, b, 1, 2)
			w1 := fanouttest.Watch(t, b)
			r.prepare(w1)
			publish(t, b, 3)
			w2 := fanouttest.Watch(t, b)
			r.prepare(w2)
			publish(t, b, 4, 5)
			assert.Equal(t, []int{3, 4, 5}, r.drain(w1))
			assert.Equal(t, []int{4, 5}, r.drain(w2))
		})
	}
}

func TestEveryWatcherGetsEveryValueInOrder(t *testing.T) {
	b := fanouttest.New[int](t, fanout.WithQueueLength(1000))
	var ws []*fanout.Watcher[int]
	for i := range 10 {
		w := fanouttest.Watch(t, b)
		readers[i%2].prepare(w)
		ws = append(ws, w)
	}
	publish(t, b, seq(1, 500)...)
	for i, w := range ws {
		assert.Equal(t, seq(1, 500), readers[i%2].drain(w), "watcher %d", i)
	}
}

// A prefix comes first, then the live values, with no gap and no duplicate.
func TestWatchWithPrefix(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := fanouttest.New[int](t, fanout.WithQueueLength(2))
			publish(t, b, 1)
			w, err := b.WatchWithPrefix([]int{-3, -2, -1})
			require.NoError(t, err)
			r.prepare(w)
			publish(t, b, 2)
			assert.Equal(t, []int{-3, -2, -1, 2}, r.drain(w))
			// k8s: the capacity is max(queue length, len(prefix)+1).
			assert.Equal(t, 4, w.Stats().QueueLength)
		})
	}
}

func TestWatchWithPrefixUnderConcurrentProducer(t *testing.T) {
	b := fanouttest.New[int](t, fanout.WithQueueLength(10000))
	var next atomic.Int64 // last value accepted
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			require.NoError(t, b.Action(i))
			next.Store(int64(i))
			if i == 9000 {
				<-stop
				return
			}
		}
	}()
	// The prefix is "whatever the producer has published so far", as a
	// list-then-watch caller would build it; the live part must continue it
	// with no gap and no duplicate. Registration is ordered with values, so we
	// read the snapshot in the same critical section as the registration by
	// registering first and then checking the first live value.
	w, err := b.WatchWithPrefix([]int{0})
	require.NoError(t, err)
	close(stop)
	<-done
	got := fanouttest.Drain(w)
	require.NotEmpty(t, got)
	assert.Equal(t, 0, got[0])
	live := got[1:]
	if len(live) > 0 {
		assert.Equal(t, seq(live[0], int(next.Load())), live, "live values must be contiguous")
	}
}

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

// Each full-queue behaviour keeps, drops and counts per watcher, and never
// affects the other watchers.
func TestFullChannelBehaviors(t *testing.T) {
	tests := []struct {
		name     string
		behavior fanout.FullChannelBehavior
		want     []int
		stats    fanout.WatcherStats
		err      error
	}{
		{"drop-new", fanout.DropIfChannelFull, []int{1, 2, 3}, fanout.WatcherStats{Delivered: 3, Dropped: 3, DroppedFull: 3}, nil},
		{"drop-oldest", fanout.DropOldestIfChannelFull, []int{4, 5, 6}, fanout.WatcherStats{Delivered: 3, Dropped: 3, DroppedOldest: 3}, nil},
		{"evict", fanout.EvictIfChannelFull, []int{1, 2, 3}, fanout.WatcherStats{Delivered: 3, Dropped: 1, DroppedEvicted: 1}, fanout.ErrEvicted},
		{"wait-timeout", fanout.WaitTimeoutIfChannelFull(time.Second), []int{1, 2, 3}, fanout.WatcherStats{Delivered: 3, Dropped: 3, DroppedTimeout: 3}, nil},
		{"wait-timeout-zero", fanout.WaitTimeoutIfChannelFull(0), []int{1, 2, 3}, fanout.WatcherStats{Delivered: 3, Dropped: 3, DroppedFull: 3}, nil},
	}
	for _, tc := range tests {
		for _, r := range readers {
			t.Run(tc.name+"/"+r.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b := fanout.New[int](fanout.WithQueueLength(3))
					defer b.Shutdown()
					slow, err := b.Watch(fanout.WithFullChannelBehavior(tc.behavior))
					require.NoError(t, err)
					r.prepare(slow)
					fast, err := b.Watch()
					require.NoError(t, err)
					start := time.Now()
					for i := 1; i <= 6; i++ {
						require.NoError(t, b.Action(i))
						v, err := fast.Next(context.Background())
						require.NoError(t, err)
						require.Equal(t, i, v, "other watchers are unaffected")
					}
					if _, ok := tc.behavior.(interface{ String() string }); ok && tc.name == "wait-timeout" {
						assert.Equal(t, 3*time.Second, time.Since(start), "each of the 3 values waited the full timeout")
					}
					b.Shutdown()
					got := r.drain(slow)
					assert.Equal(t, tc.want, got)
					s := slow.Stats()
					s.Queued, s.QueueLength = 0, 0
					assert.Equal(t, tc.stats, s)
					if tc.err != nil {
						assert.ErrorIs(t, slow.Err(), tc.err)
					}
				})
			})
		}
	}
}

func TestWaitIfChannelFullBlocksProducerUntilRoom(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := fanout.New[int](fanout.WithQueueLength(2))
				defer b.Shutdown()
				w, err := b.Watch()
				require.NoError(t, err)
				r.prepare(w)
				var published atomic.Int32
				go func() {
					for i := 1; i <= 4; i++ {
						assert.NoError(t, b.Action(i))
						published.Add(1)
					}
				}()
				synctest.Wait()
				assert.Equal(t, int32(2), published.Load(), "producer waits for the full watcher")
				// Watch, Stats and ActionOrDrop do not wait for it.
				other, err := b.Watch()
				require.NoError(t, err)
				ok, err := b.ActionOrDrop(99)
				require.NoError(t, err)
				assert.False(t, ok)
				assert.Equal(t, uint64(1), b.Stats().Refused)

				var got []int
				for len(got) < 4 {
					v, err := w.Next(context.Background())
					require.NoError(t, err)
					got = append(got, v)
				}
				synctest.Wait()
				assert.Equal(t, seq(1, 4), got)
				assert.Equal(t, int32(4), published.Load())
				// Value 3 was not yet accepted while its publisher waited.
				assert.Equal(t, []int{3, 4}, fanouttest.Drain(other), "registered while value 3 waited")
			})
		})
	}
}

// evictAfter is a user-defined strategy: drop new values, but evict the
// watcher after k consecutive drops.
type evictAfter struct{ k uint64 }

func (e evictAfter) OnFull(s fanout.FullState) fanout.Decision {
	if s.ConsecutiveDrops+1 >= e.k {
		return fanout.Decision{Verdict: fanout.VerdictEvict}
	}
	return fanout.Decision{Verdict: fanout.VerdictDropNew}
}

func TestCustomBehavior(t *testing.T) {
	b := fanouttest.New[int](t, fanout.WithQueueLength(2))
	w := fanouttest.Watch(t, b, fanout.WithFullChannelBehavior(evictAfter{k: 3}))
	publish(t, b, 1, 2, 3, 4) // 3 and 4 dropped
	v, err := w.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, v)
	publish(t, b, 5) // room again: consecutive count resets
	publish(t, b, 6, 7, 8)
	got, err := fanouttest.CollectAll(t, w)
	assert.ErrorIs(t, err, fanout.ErrEvicted)
	assert.Equal(t, []int{2, 5}, got)
	s := w.Stats()
	assert.Equal(t, uint64(4), s.DroppedFull, "3, 4, 6 and 7")
	assert.Equal(t, uint64(1), s.DroppedEvicted, "8")
}

func TestCustomBehaviorCanWaitWithTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		wait := waitFunc(func(fanout.FullState) fanout.Decision {
			return fanout.Decision{Verdict: fanout.VerdictWait, Timeout: time.Minute}
		})
		b := fanout.New[int](fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(wait))
		defer b.Shutdown()
		w, err := b.Watch()
		require.NoError(t, err)
		start := time.Now()
		publish(t, b, 1, 2)
		assert.Equal(t, time.Minute, time.Since(start))
		assert.Equal(t, uint64(1), w.Stats().DroppedTimeout)
	})
}

type waitFunc func(fanout.FullState) fanout.Decision

func (f waitFunc) OnFull(s fanout.FullState) fanout.Decision { return f(s) }

func TestDropHandler(t *testing.T) {
	var mu sync.Mutex
	var drops []fanout.Drop
	b := fanouttest.New[int](t, fanout.WithQueueLength(1), fanout.WithDropHandler(func(d fanout.Drop) {
		mu.Lock()
		defer mu.Unlock()
		drops = append(drops, d)
	}))
	a := fanouttest.Watch(t, b, fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
	o := fanouttest.Watch(t, b, fanout.WithFullChannelBehavior(fanout.DropOldestIfChannelFull))
	publish(t, b, 1, 2)
	mu.Lock()
	defer mu.Unlock()
	assert.ElementsMatch(t, []fanout.Drop{
		{WatcherID: a.ID(), Reason: fanout.DropFull},
		{WatcherID: o.ID(), Reason: fanout.DropOldest},
	}, drops)
	assert.Equal(t, uint64(2), b.Stats().Dropped)
}

// ActionOrDrop never waits: a full waiting watcher makes it refuse, and a
// refused value reaches nobody.
func TestActionOrDropNeverBlocksAndIsAllOrNothing(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := fanouttest.New[int](t, fanout.WithQueueLength(1))
			full := fanouttest.Watch(t, b)
			r.prepare(full)
			other := fanouttest.Watch(t, b)
			r.prepare(other)
			lossy := fanouttest.Watch(t, b, fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
			ok, err := b.ActionOrDrop(1)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, []int{1}, r.drain(other))
			ok, err = b.ActionOrDrop(2)
			require.NoError(t, err)
			assert.False(t, ok)
			assert.Empty(t, r.drain(other), "a refused value reaches no watcher")
			assert.Equal(t, uint64(0), lossy.Stats().Dropped, "nor counts as a drop")
			assert.Equal(t, []int{1}, r.drain(full))
		})
	}
}

func TestActionContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(1))
		defer b.Shutdown()
		full, err := b.Watch()
		require.NoError(t, err)
		other, err := b.Watch()
		require.NoError(t, err)
		publish(t, b, 1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = b.ActionContext(ctx, 2)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, []int{1}, fanouttest.Drain(other), "value 2 was not accepted")
		assert.Equal(t, []int{1}, fanouttest.Drain(full))
		require.NoError(t, b.ActionContext(context.Background(), 3))
		assert.Equal(t, []int{3}, fanouttest.Drain(full))
		assert.Equal(t, []int{3}, fanouttest.Drain(other))

		cctx, ccancel := context.WithCancel(context.Background())
		ccancel()
		publish(t, b, 4)
		assert.ErrorIs(t, b.ActionContext(cctx, 5), context.Canceled)
	})
}

// On the channel path too, a publish whose context ends while it waits for a
// full watcher reaches nobody, not even watchers with room, and the
// broadcaster goes on with one consistent order.
func TestActionContextChannelWatchersAllOrNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(1))
		defer b.Shutdown()
		full, err := b.Watch()
		require.NoError(t, err)
		full.ResultChan()
		roomy, err := b.Watch(fanout.WithQueueLength(10))
		require.NoError(t, err)
		roomy.ResultChan()
		publish(t, b, 1)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.ErrorIs(t, b.ActionContext(ctx, 2), context.DeadlineExceeded)
		assert.Equal(t, []int{1}, fanouttest.Drain(full))
		publish(t, b, 3)
		assert.Equal(t, []int{3}, fanouttest.Drain(full))
		assert.Equal(t, []int{1, 3}, fanouttest.Drain(roomy))
		assert.Equal(t, uint64(2), b.Stats().Accepted)
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

// Shutdown is idempotent, keeps every accepted value readable, closes every
// watcher with ErrStopped and makes every later call return it.
func TestShutdown(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name+"/keeps accepted values readable", func(t *testing.T) {
			b := fanout.New[int]()
			w, err := b.Watch()
			require.NoError(t, err)
			r.prepare(w)
			publish(t, b, 1, 2, 3)
			b.Shutdown()
			b.Shutdown()
			got, err := fanouttest.CollectAll(t, w)
			assert.ErrorIs(t, err, fanout.ErrStopped)
			assert.Equal(t, []int{1, 2, 3}, got)
		})
		t.Run(r.name+"/does not wait for an unread consumer", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := fanout.New[int](fanout.WithQueueLength(1))
				w, err := b.Watch()
				require.NoError(t, err)
				r.prepare(w)
				publish(t, b, 1)
				errc := make(chan error, 2)
				go func() { errc <- b.Action(2) }()
				go func() { errc <- b.Action(3) }() // waits behind the first
				synctest.Wait()
				b.Shutdown()
				assert.ErrorIs(t, <-errc, fanout.ErrStopped)
				assert.ErrorIs(t, <-errc, fanout.ErrStopped)
				assert.Equal(t, []int{1}, r.drain(w))
				_, err = w.Next(context.Background())
				assert.ErrorIs(t, err, fanout.ErrStopped)
			})
		})
	}
	t.Run("after shutdown", func(t *testing.T) {
		b := fanout.New[int]()
		w, err := b.Watch()
		require.NoError(t, err)
		b.Shutdown()
		assert.ErrorIs(t, b.Action(1), fanout.ErrStopped)
		assert.ErrorIs(t, b.ActionContext(context.Background(), 1), fanout.ErrStopped)
		ok, err := b.ActionOrDrop(1)
		assert.False(t, ok)
		assert.ErrorIs(t, err, fanout.ErrStopped)
		_, err = b.Watch()
		assert.ErrorIs(t, err, fanout.ErrStopped)
		_, err = b.WatchWithPrefix([]int{1})
		assert.ErrorIs(t, err, fanout.ErrStopped)
		w.Stop()
		assert.ErrorIs(t, w.Err(), fanout.ErrStopped, "Stop after Shutdown is a no-op")
		_, open := <-w.ResultChan()
		assert.False(t, open)
	})
	t.Run("concurrent with everything", func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(1))
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				for j := 0; j < 200; j++ {
					switch (i + j) % 4 {
					case 0:
						_ = b.Action(j)
					case 1:
						_, _ = b.ActionOrDrop(j)
					case 2:
						if w, err := b.Watch(); err == nil {
							w.Stop()
						}
					case 3:
						if j == 100 {
							b.Shutdown()
						}
					}
				}
			})
		}
		wg.Wait()
		b.Shutdown()
		assert.ErrorIs(t, b.Action(0), fanout.ErrStopped)
	})
}

// No value is special (k8s crashes on an event whose type is its internal
// marker).
func TestNoValueIsSpecial(t *testing.T) {
	type event struct {
		Type   string
		Object any
	}
	b := fanouttest.New[event](t)
	w := fanouttest.Watch(t, b)
	c := fanouttest.Watch(t, b)
	c.ResultChan()
	vals := []event{{}, {Type: "internal-do-function"}, {Type: "internal-do-function", Object: func() {}}, {Object: (*int)(nil)}}
	for _, v := range vals {
		require.NoError(t, b.Action(v))
	}
	got := fanouttest.Collect(t, w, len(vals))
	gotc := fanouttest.Collect(t, c, len(vals))
	for i := range vals {
		assert.Equal(t, vals[i].Type, got[i].Type)
		assert.Equal(t, vals[i].Type, gotc[i].Type)
	}
}

func TestBadInput(t *testing.T) {
	b := fanouttest.New[int](t)
	_, err := b.Watch(fanout.WithQueueLength(-1))
	assert.ErrorContains(t, err, "invalid queue length -1")
	w, err := b.Watch(fanout.WithQueueLength(3), nil, fanout.WithFullChannelBehavior(nil))
	require.NoError(t, err, "a nil option and a nil behaviour mean the default")
	_, err = b.WatchWithPrefix(nil, fanout.WithQueueLength(-5))
	assert.Error(t, err)
	n, err := w.Recv(context.Background(), nil)
	assert.Equal(t, 0, n)
	assert.NoError(t, err)
	//lint:ignore SA1012 a nil context is documented to mean no deadline
	require.NoError(t, b.ActionContext(nil, 7)) //nolint:staticcheck
	//lint:ignore SA1012 a nil context is documented to mean no deadline
	v, err := w.Next(nil) //nolint:staticcheck
	require.NoError(t, err)
	assert.Equal(t, 7, v)
}

// The broadcaster owns no goroutine, so an idle one costs no CPU and nothing
// can leak.
func TestNoGoroutines(t *testing.T) {
	require.NoError(t, goleak.Find(), "goroutines of earlier tests have exited")
	before := runtime.NumGoroutine()
	b := fanout.New[int]()
	var ws []*fanout.Watcher[int]
	for i := range 100 {
		w, err := b.Watch()
		require.NoError(t, err)
		if i%2 == 0 {
			w.ResultChan()
		}
		ws = append(ws, w)
	}
	publish(t, b, 1, 2, 3)
	assert.Equal(t, before, runtime.NumGoroutine())
	ws[0].Stop()
	b.Shutdown()
	assert.Equal(t, before, runtime.NumGoroutine())
}

// No heap allocation per published value for pointer-sized T.
func TestNoAllocationPerValue(t *testing.T) {
	for _, mode := range []string{"ring", "chan", "drop"} {
		t.Run(mode, func(t *testing.T) {
			opts := []fanout.Option{fanout.WithQueueLength(64)}
			if mode == "drop" {
				opts = append(opts, fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
			}
			b := fanouttest.New[*int](t, opts...)
			var ws []*fanout.Watcher[*int]
			for range 4 {
				w := fanouttest.Watch(t, b)
				if mode == "chan" {
					w.ResultChan()
				}
				ws = append(ws, w)
			}
			v := new(int)
			buf := make([]*int, 64)
			allocs := testing.AllocsPerRun(1000, func() {
				_ = b.Action(v)
				for _, w := range ws {
					_, _ = w.Recv(context.Background(), buf)
				}
			})
			assert.Zero(t, allocs)
		})
	}
}

// A bounded wait that expires allocates nothing either: the broadcaster
// reuses one timer.
func TestNoAllocationPerBoundedWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[*int](fanout.WithQueueLength(1),
			fanout.WithFullChannelBehavior(fanout.WaitTimeoutIfChannelFull(time.Millisecond)))
		defer b.Shutdown()
		ws := make([]*fanout.Watcher[*int], 3)
		for i := range ws {
			ws[i], _ = b.Watch() // never read: every publish after the first waits 1 ms per watcher, then drops
		}
		v := new(int)
		require.NoError(t, b.Action(v))
		start := time.Now()
		allocs := testing.AllocsPerRun(100, func() { _ = b.Action(v) })
		assert.Zero(t, allocs)
		assert.Equal(t, 101*time.Millisecond, time.Since(start), "one bounded wait per publish, shared by the watchers")
		assert.Equal(t, uint64(303), ws[0].Stats().DroppedTimeout+ws[1].Stats().DroppedTimeout+ws[2].Stats().DroppedTimeout)
	})
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

func TestErrorsAreDistinct(t *testing.T) {
	errs := []error{fanout.ErrStopped, fanout.ErrWatcherStopped, fanout.ErrEvicted}
	for i := range errs {
		for j := range errs {
			assert.Equal(t, i == j, errors.Is(errs[i], errs[j]))
		}
	}
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

// Shutdown while a publisher waits on full channel watchers: the publish
// reports ErrStopped and the value is not accepted; every value accepted
// before stays readable. Action hands the value to watchers with room before
// it waits (so their consumers keep working), so they keep it; a publish with
// a context that can end holds it back from everyone until it is accepted.
func TestShutdownWhileWaitingOnFullChannels(t *testing.T) {
	tests := []struct {
		name      string
		publish   func(b *fanout.Broadcaster[int], v int) error
		roomyGets []int
	}{
		{"Action", func(b *fanout.Broadcaster[int], v int) error { return b.Action(v) }, []int{1, 2}},
		{"ActionContext", func(b *fanout.Broadcaster[int], v int) error {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			return b.ActionContext(ctx, v)
		}, []int{1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for range 10 {
				synctest.Test(t, func(t *testing.T) {
					b := fanout.New[int](fanout.WithQueueLength(1))
					var full []*fanout.Watcher[int]
					for range 3 {
						w, err := b.Watch()
						require.NoError(t, err)
						w.ResultChan()
						full = append(full, w)
					}
					roomy, err := b.Watch(fanout.WithQueueLength(10))
					require.NoError(t, err)
					roomy.ResultChan()
					publish(t, b, 1)
					errc := make(chan error)
					go func() { errc <- tc.publish(b, 2) }()
					synctest.Wait()
					assert.Equal(t, uint64(1), b.Stats().Accepted, "2 is not accepted while its publisher waits")
					b.Shutdown()
					assert.ErrorIs(t, <-errc, fanout.ErrStopped)
					assert.Equal(t, uint64(1), b.Stats().Accepted)
					for i, w := range full {
						got, closed := fanouttest.DrainChan(w.ResultChan())
						assert.True(t, closed)
						assert.Equal(t, []int{1}, got, "watcher %d", i)
						assert.Zero(t, w.Stats().Dropped, "nothing accepted was missed")
					}
					got, _ := fanouttest.DrainChan(roomy.ResultChan())
					assert.Equal(t, tc.roomyGets, got)
				})
			}
		})
	}
}

// Stop of the watcher a publisher waits for releases the publisher; the
// watcher left before the value was accepted, so it neither gets nor misses
// it, and the value is accepted for everyone else.
func TestStopReleasesPublisherBeforeAcceptance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(1))
		defer b.Shutdown()
		w, err := b.Watch()
		require.NoError(t, err)
		w.ResultChan()
		other, err := b.Watch(fanout.WithQueueLength(10))
		require.NoError(t, err)
		publish(t, b, 1)
		errc := make(chan error, 1)
		go func() { errc <- b.Action(2) }()
		synctest.Wait()
		w.Stop()
		require.NoError(t, <-errc)
		got, closed := fanouttest.DrainChan(w.ResultChan())
		assert.True(t, closed)
		assert.Equal(t, []int{1}, got)
		assert.Zero(t, w.Stats().Dropped)
		assert.Equal(t, uint64(2), b.Stats().Accepted)
		assert.Equal(t, []int{1, 2}, fanouttest.Drain(other))
	})
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

// ActionOrDrop never overtakes a publisher waiting for room.
func TestActionOrDropDoesNotOvertakeWaitingAction(t *testing.T) {
	// One P: the publisher woken by Next does not run before ActionOrDrop.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(1))
		defer b.Shutdown()
		w, err := b.Watch()
		require.NoError(t, err)
		publish(t, b, 1)
		errc := make(chan error, 1)
		go func() { errc <- b.Action(2) }()
		synctest.Wait() // Action(2) waits for room on the shared ring
		v, err := w.Next(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, v)
		ok, err := b.ActionOrDrop(99) // the waiting publisher has not run yet
		require.NoError(t, err)
		assert.False(t, ok, "a publisher is already waiting")
		v, err = w.Next(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 2, v, "the waiting Action's value comes first")
		require.NoError(t, <-errc)
	})
}

// WaitTimeoutIfChannelFull(d) bounds the publisher's whole wait by d, not d
// per full watcher.
func TestWaitTimeoutBoundsThePublisher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(fanout.WaitTimeoutIfChannelFull(time.Second)))
		defer b.Shutdown()
		var ws []*fanout.Watcher[int]
		for range 3 {
			w, err := b.Watch()
			require.NoError(t, err)
			ws = append(ws, w)
		}
		publish(t, b, 1)
		start := time.Now()
		require.NoError(t, b.Action(2))
		assert.Equal(t, time.Second, time.Since(start))
		for _, w := range ws {
			assert.Equal(t, uint64(1), w.Stats().DroppedTimeout)
			assert.Equal(t, []int{1}, fanouttest.Drain(w))
		}
	})
}

// A bounded wait counts from when the publish call first waits, also when it
// first waits for another publisher: a publisher queued behind a waiting one
// must not wait d for its turn and then d more.
func TestWaitTimeoutBoundsQueuedPublisher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(fanout.WaitTimeoutIfChannelFull(time.Second)))
		defer b.Shutdown()
		w, err := b.Watch()
		require.NoError(t, err)
		publish(t, b, 1)
		done := make(chan time.Duration, 2)
		for _, v := range []int{2, 3} {
			go func() {
				start := time.Now()
				assert.NoError(t, b.Action(v))
				done <- time.Since(start)
			}()
		}
		d1, d2 := <-done, <-done
		assert.LessOrEqual(t, d1, time.Second)
		assert.LessOrEqual(t, d2, time.Second, "second publisher waited %v", d2)
		assert.Equal(t, uint64(2), w.Stats().DroppedTimeout)
	})
}

// While a publisher waits for a full channel: watchers registered (shared,
// channel, prefix, hand-off), converted by ResultChan or stopped meanwhile,
// and lossy decisions taken before the wait and applied at acceptance.
func TestChurnWhilePublisherWaits(t *testing.T) {
	for range 10 {
		synctest.Test(t, func(t *testing.T) {
			b := fanout.New[int](fanout.WithQueueLength(1))
			defer b.Shutdown()
			full, _ := b.Watch()
			fullCh := full.ResultChan()
			lossyOld, _ := b.Watch(fanout.WithFullChannelBehavior(fanout.DropOldestIfChannelFull))
			lossyOld.ResultChan()
			evict, _ := b.Watch(fanout.WithFullChannelBehavior(fanout.EvictIfChannelFull))
			evict.ResultChan()
			stopMe, _ := b.Watch(fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
			stopMe.ResultChan()
			shared, _ := b.Watch(fanout.WithQueueLength(4))
			publish(t, b, 1)
			errc := make(chan error, 1)
			go func() { errc <- b.Action(2) }()
			synctest.Wait()
			// during the round
			newShared, _ := b.Watch()
			newChan, _ := b.Watch(fanout.WithQueueLength(3))
			newChan.ResultChan()
			prefix, _ := b.WatchWithPrefix([]int{-1, -2})
			shared.ResultChan() // convert
			stopMe.Stop()
			handoff, _ := b.Watch(fanout.WithQueueLength(0), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
			hand2, _ := b.Watch(fanout.WithQueueLength(0))
			got2 := make(chan int, 1)
			go func() { v, _ := hand2.Next(context.Background()); got2 <- v }()
			synctest.Wait()
			assert.Equal(t, 1, <-fullCh)
			require.NoError(t, <-errc)
			synctest.Wait()
			assert.Equal(t, 2, <-got2)
			assert.Equal(t, []int{2}, fanouttest.Drain(full))
			assert.Equal(t, []int{2}, fanouttest.Drain(lossyOld))
			assert.Equal(t, uint64(1), lossyOld.Stats().DroppedOldest)
			v, err := fanouttest.CollectAll(t, evict)
			assert.Equal(t, []int{1}, v)
			assert.ErrorIs(t, err, fanout.ErrEvicted)
			assert.Equal(t, uint64(1), evict.Stats().DroppedEvicted)
			assert.Equal(t, []int{1}, fanouttest.Drain(stopMe))
			assert.Zero(t, stopMe.Stats().Dropped)
			assert.Equal(t, []int{1, 2}, fanouttest.Drain(shared))
			assert.Equal(t, []int{2}, fanouttest.Drain(newShared))
			assert.Equal(t, []int{2}, fanouttest.Drain(newChan))
			assert.Equal(t, []int{-1, -2, 2}, fanouttest.Drain(prefix))
			assert.Equal(t, uint64(1), handoff.Stats().DroppedFull)
			s := b.Stats()
			assert.Equal(t, uint64(2), s.Accepted)
			assert.Equal(t, uint64(3), s.Dropped)
		})
	}
}

// FullState.ConsecutiveDrops counts the values missed since the watcher last
// received one: a delivery ends the run, a refused ActionOrDrop does not
// count, and another watcher's state does not either.
func TestConsecutiveDrops(t *testing.T) {
	var seen []uint64
	rec := waitFunc(func(s fanout.FullState) fanout.Decision {
		seen = append(seen, s.ConsecutiveDrops)
		return fanout.Decision{Verdict: fanout.VerdictDropNew}
	})
	b := fanouttest.New[int](t, fanout.WithQueueLength(1))
	w := fanouttest.Watch(t, b, fanout.WithFullChannelBehavior(rec))
	blocker := fanouttest.Watch(t, b, fanout.WithQueueLength(4))
	publish(t, b, 1, 2, 3) // 1 queued; 2 and 3 missed
	assert.Equal(t, []int{1}, fanouttest.Drain(w))
	assert.Equal(t, []int{1, 2, 3}, fanouttest.Drain(blocker))
	publish(t, b, 4)       // delivered: the run ends
	publish(t, b, 5, 6, 7) // missed; blocker now holds 4..7 and is full
	ok, err := b.ActionOrDrop(8)
	require.NoError(t, err)
	assert.False(t, ok, "refused: reaches nobody")
	assert.Equal(t, []int{4, 5, 6, 7}, fanouttest.Drain(blocker))
	publish(t, b, 9) // missed: the refused value did not break the run
	assert.Equal(t, []uint64{0, 1, 0, 1, 2, 3}, seen)
	assert.Equal(t, uint64(6), w.Stats().DroppedFull)
}

// ActionContext with a context already done reports it and accepts
// nothing: its value reaches no watcher.
func TestActionContextAlreadyDoneIsNotAccepted(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := fanouttest.New[int](t)
			w := fanouttest.Watch(t, b)
			r.prepare(w)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			assert.ErrorIs(t, b.ActionContext(ctx, 1), context.Canceled)
			n, err := b.ActionBatchContext(ctx, []int{2, 3})
			assert.Zero(t, n)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Zero(t, b.Stats().Accepted)
			b.Shutdown()
			assert.Empty(t, r.drain(w))
		})
	}
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

// Shutdown ending an Action that waits on a full channel watcher, while
// ActionOrDrop runs concurrently, races on nothing (run under -race).
func TestShutdownEndingAWaitingActionRacesNothing(t *testing.T) {
	for range 50 {
		b := fanout.New[int](fanout.WithQueueLength(1))
		w, err := b.Watch()
		require.NoError(t, err)
		w.ResultChan()
		require.NoError(t, b.Action(1))
		var wg sync.WaitGroup
		wg.Go(func() { assert.ErrorIs(t, b.Action(2), fanout.ErrStopped) })
		wg.Go(func() {
			for {
				if _, err := b.ActionOrDrop(3); err != nil {
					return
				}
				runtime.Gosched()
			}
		})
		runtime.Gosched()
		b.Shutdown()
		wg.Wait()
	}
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

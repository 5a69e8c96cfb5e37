package fanout_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

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

// No value is accepted once Shutdown has returned: a publisher handed the
// publish turn just before Shutdown, which takes the lock first, returns
// ErrStopped instead of accepting its value (an earlier version accepted
// it after Shutdown, where no watcher received it and Action returned nil).
func TestNoValueIsAcceptedAfterShutdownReturns(t *testing.T) {
	for i := range 2000 {
		b := fanout.New[int](fanout.WithQueueLength(1))
		w, err := b.Watch()
		require.NoError(t, err)
		var wg sync.WaitGroup
		for p := range 4 {
			wg.Go(func() {
				for j := 0; ; j++ {
					var err error
					if p%2 == 0 {
						_, err = b.ActionBatch([]int{j, j, j})
					} else {
						err = b.Action(j)
					}
					if err != nil {
						return
					}
				}
			})
		}
		one := make([]int, 1)
		for range 20 {
			_, err := w.Recv(context.Background(), one)
			require.NoError(t, err)
		}
		b.Shutdown()
		atShutdown := b.Stats().Accepted
		go func() { // drain, so that nothing waits on the reader
			for {
				if _, err := w.Recv(context.Background(), one); err != nil {
					return
				}
			}
		}()
		wg.Wait()
		require.Equal(t, atShutdown, b.Stats().Accepted, "iteration %d: a value was accepted after Shutdown returned", i)
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

// A watcher registered while Action waits for a full channel watcher gets
// the value, once, whatever it is (a channel, a filter, a behaviour of the
// user's, a hand-off), and the full one gets it once. A filtered channel
// watcher's registration made the publisher ask filters again, and it then
// marked the new watcher as already having the value and the full one as
// not: the full one got it twice and the new one never.
func TestWatcherRegisteredWhileActionWaitsGetsTheValueOnce(t *testing.T) {
	keepAll := fanout.WithFilter(func(int) bool { return true })
	for name, opts := range map[string][]fanout.Option{
		"chan":          nil,
		"filter":        {keepAll},
		"filter, q0":    {keepAll, fanout.WithQueueLength(0)},
		"custom":        {fanout.WithFullChannelBehavior(verdictBehavior(fanout.VerdictDropFull))},
		"custom filter": {keepAll, fanout.WithFullChannelBehavior(verdictBehavior(fanout.VerdictDropFull))},
	} {
		for _, pull := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, pull %v", name, pull), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b := fanout.New[int]()
					full, err := b.Watch(fanout.WithQueueLength(1))
					require.NoError(t, err)
					ch := full.ResultChan()
					require.NoError(t, b.Action(0)) // full is full
					done := make(chan error)
					go func() { done <- b.Action(1) }()
					synctest.Wait() // Action(1) waits for full
					late, err := b.Watch(opts...)
					require.NoError(t, err)
					var lateCh <-chan int
					if !pull {
						lateCh = late.ResultChan()
					}
					var got []int
					go func() {
						for v := range ch {
							got = append(got, v)
						}
					}()
					var lateGot []int
					if pull {
						v, err := late.Next(t.Context())
						require.NoError(t, err)
						lateGot = append(lateGot, v)
					} else {
						lateGot = append(lateGot, <-lateCh)
					}
					require.NoError(t, <-done)
					b.Shutdown()
					synctest.Wait()
					assert.Equal(t, []int{0, 1}, got)
					assert.Equal(t, []int{1}, lateGot)
					assert.EqualValues(t, 2, full.Stats().Delivered)
				})
			})
		}
	}
}

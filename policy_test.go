package fanout_test

import (
	"context"
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
					s.ID, s.Queued, s.QueueLength = 0, 0, 0
					assert.Equal(t, tc.stats, s)
					if tc.err != nil {
						assert.ErrorIs(t, slow.Err(), tc.err)
					}
				})
			})
		}
	}
}

// evictAfter is a user-defined strategy: drop new values, but evict the
// watcher after k consecutive drops.
type evictAfter struct{ k uint64 }

func (e evictAfter) OnFull(s fanout.FullState) fanout.Decision {
	if s.ConsecutiveDrops+1 >= e.k {
		return fanout.Decision{Verdict: fanout.VerdictEvict}
	}
	return fanout.Decision{Verdict: fanout.VerdictDropFull}
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

// FullState.ConsecutiveDrops counts the values missed since the watcher last
// received one: a delivery ends the run, a refused ActionOrDrop does not
// count, and another watcher's state does not either.
func TestConsecutiveDrops(t *testing.T) {
	var seen []uint64
	rec := waitFunc(func(s fanout.FullState) fanout.Decision {
		seen = append(seen, s.ConsecutiveDrops)
		return fanout.Decision{Verdict: fanout.VerdictDropFull}
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

// A value the watcher's filter leaves out is not one it received: a run of
// missed values goes on across it, in either read mode, published one at a
// time or as one batch, and a filter that panics adds a miss to the run (it
// is a drop).
func TestConsecutiveDropsGoOnAcrossValuesTheFilterLeavesOut(t *testing.T) {
	for _, useChan := range []bool{false, true} {
		for _, batch := range []bool{false, true} {
			name := map[bool]string{false: "Recv", true: "ResultChan"}[useChan] + map[bool]string{false: "/one by one", true: "/batch"}[batch]
			t.Run(name, func(t *testing.T) {
				var seen []uint64
				rec := waitFunc(func(s fanout.FullState) fanout.Decision {
					seen = append(seen, s.ConsecutiveDrops)
					return fanout.Decision{Verdict: fanout.VerdictDropFull}
				})
				evenOr7 := func(v int) bool {
					if v == 7 {
						panic("seven")
					}
					return v%2 == 0
				}
				b := fanouttest.New[int](t, fanout.WithQueueLength(1))
				w := fanouttest.Watch(t, b, fanout.WithFullChannelBehavior(rec), fanout.WithFilter(evenOr7))
				if useChan {
					w.ResultChan()
				}
				vs := []int{2, 3, 4, 5, 6, 7, 8, 9, 10} // 2 queued, then nobody reads
				if batch {
					n, err := b.ActionBatch(vs)
					require.NoError(t, err)
					require.Equal(t, len(vs), n)
				} else {
					publish(t, b, vs...)
				}
				assert.Equal(t, []int{2}, fanouttest.Drain(w))
				assert.Equal(t, []uint64{0, 1, 3, 4}, seen, "4, 6, 7 (the panic), 8 and 10 missed in one run")
				st := w.Stats()
				assert.EqualValues(t, 4, st.DroppedFull, "%+v", st)
				assert.EqualValues(t, 1, st.DroppedPanic, "%+v", st)
			})
		}
	}
}

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

// within runs f and fails the test if it does not return within the hang
// guard: a wedged broadcaster fails the test instead of hanging it.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(fanouttest.HangGuard):
		t.Fatalf("%s did not return: the broadcaster is wedged", what)
	}
}

// panicBehavior panics in OnFull.
type panicBehavior struct{}

func (panicBehavior) OnFull(fanout.FullState) fanout.Decision { panic("behaviour bug") }

// A panic in a user's OnFull is recovered: the publish succeeds, the watcher
// misses that value (counted, and reported with the panic), and every method
// of the broadcaster keeps working.
func TestPanickingBehaviorDoesNotWedgeBroadcaster(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			var drops []fanout.Drop
			b := fanout.New[int](fanout.WithQueueLength(1), fanout.WithDropHandler(func(d fanout.Drop) { drops = append(drops, d) }))
			w, err := b.Watch(fanout.WithFullChannelBehavior(panicBehavior{}))
			require.NoError(t, err)
			r.prepare(w)
			other, err := b.Watch(fanout.WithQueueLength(4))
			require.NoError(t, err)
			within(t, "Action after a panicking OnFull", func() {
				func() {
					defer func() { _ = recover() }() // as net/http would
					require.NoError(t, b.Action(1))
					require.NoError(t, b.Action(2)) // meets the full queue
				}()
				assert.Equal(t, uint64(1), b.Stats().Dropped)
				_, err := b.Watch()
				assert.NoError(t, err)
				assert.NoError(t, b.Action(3))
				b.Shutdown()
			})
			assert.Equal(t, []int{1}, r.drain(w))
			assert.Equal(t, []int{1, 2, 3}, fanouttest.Drain(other))
			require.Len(t, drops, 2, "the missed values 2 and 3 are reported")
			assert.Equal(t, fanout.DropPanic, drops[0].Reason)
			assert.ErrorContains(t, drops[0].Err, "behaviour bug")
			s := b.Stats()
			assert.Equal(t, uint64(2), s.Panics)
			assert.Equal(t, uint64(2), w.Stats().DroppedPanic)
		})
	}
}

// A panic in a drop handler is recovered and counted; the broadcaster goes
// on, and the drop itself stays counted.
func TestPanickingDropHandlerDoesNotWedgeBroadcaster(t *testing.T) {
	for _, beh := range []fanout.FullChannelBehavior{fanout.DropIfChannelFull, fanout.DropOldestIfChannelFull, fanout.EvictIfChannelFull} {
		for _, r := range readers {
			t.Run(beh.(interface{ String() string }).String()+"/"+r.name, func(t *testing.T) {
				b := fanout.New[int](fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(beh),
					fanout.WithDropHandler(func(fanout.Drop) { panic("handler bug") }))
				w, err := b.Watch()
				require.NoError(t, err)
				r.prepare(w)
				within(t, "the broadcaster after a panicking drop handler", func() {
					func() {
						defer func() { _ = recover() }()
						require.NoError(t, b.Action(1))
						require.NoError(t, b.Action(2))
					}()
					_, err := b.Watch()
					assert.NoError(t, err)
					assert.NoError(t, b.Action(3))
					s := b.Stats()
					assert.NotZero(t, s.Dropped)
					assert.Equal(t, s.Dropped, s.Panics, "each drop's handler call panicked")
					b.Shutdown()
				})
			})
		}
	}
}

// A recorder's plain watcher with a panicking behaviour must not leave the
// recorder's lock held either: Record and a bounded Shutdown keep working.
func TestPanickingBehaviorDoesNotWedgeRecorder(t *testing.T) {
	rec, err := fanout.NewRecorder[int]()
	require.NoError(t, err)
	_, err = rec.Watch(fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(panicBehavior{}))
	require.NoError(t, err)
	within(t, "the recorder after a panicking OnFull", func() {
		func() {
			defer func() { _ = recover() }()
			assert.NoError(t, rec.Record(1))
			assert.NoError(t, rec.Record(2))
		}()
		assert.NoError(t, rec.Record(3))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.NoError(t, rec.Shutdown(ctx))
	})
}

// OnFull runs with no lock held, so it may call the broadcaster and its
// watchers; ActionOrDrop from it is refused (the publish it is part of holds
// the turn) instead of deadlocking.
func TestBehaviorMayCallBroadcaster(t *testing.T) {
	var b *fanout.Broadcaster[int]
	var inner struct {
		stats   fanout.Stats
		watchOK bool
		tryOK   bool
		tryErr  error
	}
	calls := 0
	beh := waitFunc(func(s fanout.FullState) fanout.Decision {
		calls++
		inner.stats = b.Stats()
		w, err := b.Watch()
		inner.watchOK = err == nil
		if w != nil {
			w.Stop()
		}
		inner.tryOK, inner.tryErr = b.ActionOrDrop(100)
		return fanout.Decision{Verdict: fanout.VerdictDropFull}
	})
	b = fanout.New[int](fanout.WithQueueLength(1))
	defer b.Shutdown()
	w, err := b.Watch(fanout.WithFullChannelBehavior(beh))
	require.NoError(t, err)
	within(t, "Action whose OnFull calls the broadcaster", func() {
		publish(t, b, 1, 2)
	})
	assert.Equal(t, 1, calls)
	assert.Equal(t, uint64(1), inner.stats.Accepted)
	assert.True(t, inner.watchOK)
	assert.False(t, inner.tryOK, "ActionOrDrop from OnFull is refused")
	assert.NoError(t, inner.tryErr)
	assert.Equal(t, []int{1}, fanouttest.Drain(w))
}

// A drop handler runs with no lock held, so it may call the broadcaster,
// publish included.
func TestDropHandlerMayCallBroadcaster(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			var b *fanout.Broadcaster[int]
			var seen []fanout.Stats
			var republished atomic.Int32
			b = fanout.New[int](fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull),
				fanout.WithDropHandler(func(d fanout.Drop) {
					seen = append(seen, b.Stats())
					if republished.Add(1) == 1 {
						assert.NoError(t, b.Action(-1))
					}
				}))
			defer b.Shutdown()
			w, err := b.Watch()
			require.NoError(t, err)
			r.prepare(w)
			within(t, "Action whose drop handler calls the broadcaster", func() {
				publish(t, b, 1, 2)
			})
			require.Len(t, seen, 2, "2 and then -1 were dropped")
			assert.Equal(t, uint64(2), seen[0].Accepted)
			assert.Equal(t, []int{1}, r.drain(w))
		})
	}
}

// A negative Decision.Timeout means "do not wait", as it does for
// WaitTimeoutIfChannelFull: the watcher misses the value at once.
func TestNegativeDecisionTimeoutDoesNotWait(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				beh := waitFunc(func(fanout.FullState) fanout.Decision {
					return fanout.Decision{Verdict: fanout.VerdictWait, Timeout: -time.Nanosecond}
				})
				b := fanout.New[int](fanout.WithQueueLength(1))
				defer b.Shutdown()
				w, err := b.Watch(fanout.WithFullChannelBehavior(beh))
				require.NoError(t, err)
				r.prepare(w)
				var returned atomic.Bool
				go func() {
					publish(t, b, 1, 2)
					returned.Store(true)
				}()
				synctest.Wait()
				require.True(t, returned.Load(), "the publisher waited for a negative timeout")
				assert.Equal(t, uint64(1), w.Stats().DroppedTimeout)
				b.Shutdown()
				assert.Equal(t, []int{1}, r.drain(w))
			})
		})
	}
}

func TestDropPanicReasonHasAName(t *testing.T) {
	assert.Equal(t, "panic", fanout.DropPanic.String())
}

// A behaviour returning a verdict that is none of the defined ones makes
// the watcher miss the value, counted as full, as documented under
// Verdict, for both read paths, whatever the value: the largest one
// included, which is not a panic (DropPanic) whatever the engine uses
// inside.
func TestUndefinedVerdictIsTakenAsDropFull(t *testing.T) {
	for _, v := range []fanout.Verdict{4, 42, 254, 255} {
		for _, ch := range []bool{false, true} {
			b := fanout.New[int](fanout.WithQueueLength(1))
			w, err := b.Watch(fanout.WithFullChannelBehavior(verdictBehavior(v)))
			require.NoError(t, err)
			if ch {
				w.ResultChan()
			}
			for v := range 3 {
				require.NoError(t, b.Action(v))
			}
			st := w.Stats()
			assert.EqualValues(t, 2, st.DroppedFull, "verdict %d, chan %v", v, ch)
			assert.Zero(t, st.DroppedPanic, "verdict %d, chan %v", v, ch)
			assert.Equal(t, 1, st.Queued, "verdict %d, chan %v: the first value stays queued", v, ch)
			assert.Zero(t, b.Stats().Panics, "verdict %d, chan %v", v, ch)
			b.Shutdown()
		}
	}
}

// A hand-off watcher (queue length 0) has no queued value to discard:
// DropOldestIfChannelFull misses the new value when no consumer is ready,
// as DropIfChannelFull does, counted as DropFull.
func TestDropOldestOnAHandOffWatcherMissesTheNewValueAsDropFull(t *testing.T) {
	b := fanout.New[int](fanout.WithQueueLength(0))
	defer b.Shutdown()
	w, err := b.Watch(fanout.WithFullChannelBehavior(fanout.DropOldestIfChannelFull))
	require.NoError(t, err)
	require.NoError(t, b.Action(1))
	require.NoError(t, b.Action(2))
	st := w.Stats()
	assert.EqualValues(t, 2, st.DroppedFull, "%+v", st)
	assert.Zero(t, st.DroppedOldest, "%+v", st)
}

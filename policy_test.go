package fanout_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

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
		return fanout.Decision{Verdict: fanout.VerdictDropNew}
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

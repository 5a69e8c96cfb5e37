package fanout_test

import (
	"context"
	"errors"
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

// Flush returns only once every value recorded before it is written.
func TestFlushWaitsForWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[ev](t)
		sink := &fanouttest.Sink[ev]{Block: make(chan struct{})}
		startSink(t, r, sink, nil)
		for i := range 3 {
			require.NoError(t, r.Record(ev{Msg: fmt.Sprint(i)}))
		}
		var flushed atomic.Bool
		go func() {
			_ = r.Flush(context.Background())
			flushed.Store(true)
		}()
		for i := range 3 {
			synctest.Wait()
			assert.False(t, flushed.Load(), "Flush returned with %d of 3 written", i)
			sink.Block <- struct{}{}
		}
		synctest.Wait()
		assert.True(t, flushed.Load())
		assert.Len(t, sink.Written(), 3)
	})
}

// Values recorded after Flush began are not waited for.
func TestFlushDoesNotWaitForLaterValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[ev](t)
		sink := &fanouttest.Sink[ev]{Block: make(chan struct{})}
		startSink(t, r, sink, nil)
		require.NoError(t, r.Record(ev{Msg: "before"}))
		done := make(chan error)
		go func() { done <- r.Flush(context.Background()) }()
		synctest.Wait()
		require.NoError(t, r.Record(ev{Msg: "after"}))
		sink.Block <- struct{}{}
		require.NoError(t, <-done)
		assert.Len(t, sink.Written(), 1)
		sink.Block <- struct{}{}
	})
}

// Flush gives up with the context's error when its context ends first.
func TestFlushReturnsWhenItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[ev](t)
		sink := &fanouttest.Sink[ev]{Block: make(chan struct{})}
		startSink(t, r, sink, nil)
		require.NoError(t, r.Record(ev{Msg: "stuck"}))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		start := time.Now()
		assert.ErrorIs(t, r.Flush(ctx), context.DeadlineExceeded)
		assert.Equal(t, time.Minute, time.Since(start))
		close(sink.Block)
	})
}

// Dropped values count as done: Flush does not wait for values that missed
// a full queue, nor for refused ones.
func TestFlushDoesNotWaitForDroppedValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[ev](t, fanout.WithQueueLength(1))
		sink := &fanouttest.Sink[ev]{Block: make(chan struct{})}
		startSink(t, r, sink, nil)
		w, err := r.Watch(fanout.WithFullChannelBehavior(fanout.WaitIfChannelFull), fanout.WithQueueLength(1))
		require.NoError(t, err)

		require.NoError(t, r.Record(ev{Msg: "0"})) // in flight at the sink; w full
		synctest.Wait()
		assert.ErrorIs(t, r.Record(ev{Msg: "refused"}), fanout.ErrRefused)
		_, err = w.Next(t.Context())
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "1"})) // queued at the sink
		_, err = w.Next(t.Context())
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "2"})) // sink queue full: dropped
		_, err = w.Next(t.Context())
		require.NoError(t, err)

		done := make(chan error)
		go func() { done <- r.Flush(context.Background()) }()
		sink.Block <- struct{}{}
		sink.Block <- struct{}{}
		require.NoError(t, <-done)
		st := r.Stats()
		assert.Equal(t, uint64(3), st.Recorded, "the refused value is not recorded")
		assert.Equal(t, uint64(1), st.Refused)
		assert.Equal(t, uint64(1), st.DroppedFull)
		assert.Equal(t, uint64(2), st.Written)
		assert.Equal(t, uint64(2), st.Dropped)
		w.Stop()
	})
}

func TestFlushWithoutRunnersReturnsAtOnce(t *testing.T) {
	r := newRecorder[ev](t)
	require.NoError(t, r.Record(ev{}))
	assert.NoError(t, r.Flush(context.Background()))
}

// Flush called from inside a handler waits for its own runner, which cannot
// finish the value in hand until the handler returns: it returns only when
// its context ends, as Flush's documentation warns. Another runner's values
// are flushed meanwhile.
func TestFlushFromInsideAHandlerWaitsForItsOwnRunner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[item](t)
		res := make(chan error, 1)
		var waited time.Duration
		var other atomic.Int32
		startHandler(t, r, func(item) { other.Add(1) })
		startHandler(t, r, func(v item) {
			if v.N != 1 {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			err := r.Flush(ctx)
			waited = time.Since(start)
			res <- err
		})
		require.NoError(t, r.Record(item{N: 1}))
		if err := <-res; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Flush from a handler = %v, want DeadlineExceeded (it waits for itself)", err)
		}
		if waited != time.Minute {
			t.Errorf("waited %v, want the whole ctx (1m)", waited)
		}
		if other.Load() != 1 {
			t.Errorf("the other runner handled %d values, want 1", other.Load())
		}
	})
}

// Flush waiting for a runner that is stopped meanwhile returns once the
// runner has given the queued values their one attempt and exited; the
// other runner goes on and is flushed too.
func TestFlushReturnsWhenItsRunnerIsStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[item](t, fanout.WithRetry(fanout.RetryPolicy{MaxTries: 3, Sleep: time.Hour}))
		sink := &fanouttest.Sink[item]{
			Block: make(chan struct{}), // holds value 0 until closed
			Fail: func(_ string, v item, _ int) error {
				if v.N == 0 {
					return errors.New("failed once")
				}
				return nil
			},
		}
		run := startSink(t, r, sink, nil)
		var handled atomic.Int32
		startHandler(t, r, func(item) { handled.Add(1) })
		for i := range 3 {
			require.NoError(t, r.Record(item{N: i}))
		}
		done := make(chan error, 1)
		go func() { done <- r.Flush(context.Background()) }()
		synctest.Wait()
		run.Stop()
		go run.Stop()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Flush returned while a write was in flight")
		default:
		}
		close(sink.Block)
		require.NoError(t, <-done)
		<-run.Done()
		st := run.Stats()
		if written := len(sink.Written()); st.Written != 2 || st.DroppedShutdown != 1 || written != 2 {
			t.Errorf("stats %+v, %d written: want the failed value dropped at once (no retry after Stop), the 2 queued written", st, written)
		}
		require.NoError(t, r.Record(item{N: 9}))
		require.NoError(t, r.Flush(context.Background()))
		if handled.Load() != 4 {
			t.Errorf("other runner handled %d, want 4", handled.Load())
		}
	})
}

// Flush returns when a runner it waits for is stopped and exits while
// hundreds of Flush calls wait for it or are about to move on to it from
// another runner, with a value recorded after the Stop that the stopped
// runner never receives. A Flush that missed its wake-up would block for
// good; in the synctest bubble its 3 s deadline then passes at once and
// the test fails instead of hanging.
func TestFlushReturnsWhenItsRunnerExitsConcurrently(t *testing.T) {
	for i := range 150 {
		synctest.Test(t, func(t *testing.T) {
			r, err := fanout.NewRecorder[item]()
			require.NoError(t, err)
			// Runner A blocks on value 2, runner B (registered after A, so each
			// Flush waits for A first) on value 0.
			enteredA, releaseA := make(chan struct{}), make(chan struct{})
			enteredB, releaseB := make(chan struct{}), make(chan struct{})
			startHandler(t, r, func(v item) {
				if v.N == 2 {
					close(enteredA)
					<-releaseA
				}
			})
			runB := startHandler(t, r, func(v item) {
				if v.N == 0 {
					close(enteredB)
					<-releaseB
				}
			})
			require.NoError(t, r.Record(item{N: 0}))
			<-enteredB
			runB.Stop()
			// Recorded after B's Stop, before it exits: never delivered to B.
			require.NoError(t, r.Record(item{N: 1}))

			var wg sync.WaitGroup
			var stuck atomic.Int32
			flush := func() {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				if r.Flush(ctx) != nil {
					stuck.Add(1)
				}
			}
			// Flush calls that wait for B.
			for range 300 {
				wg.Go(flush)
			}
			synctest.Wait() // all 300 wait for B
			// Flush calls that snapshot both runners now, wait for A, and
			// move on to B while B is exiting.
			require.NoError(t, r.Record(item{N: 2}))
			<-enteredA
			for range 200 {
				wg.Go(flush)
			}
			synctest.Wait() // all 200 wait for A
			close(releaseB)
			close(releaseA)
			<-runB.Done()
			wg.Wait()
			require.NoError(t, r.Shutdown(context.Background()))
			if n := stuck.Load(); n > 0 {
				t.Errorf("round %d: %d Flush calls waited until their 3 s deadline although the runner they waited for had exited", i, n)
			}
		})
		if t.Failed() {
			return
		}
	}
}

// A Flush that gives up when its context ends leaves nothing behind: 100,000
// calls with a cancelled context while a sink is stuck retain no memory.
func TestFlushThatGivesUpRetainsNothing(t *testing.T) {
	r := newRecorder[item](t)
	entered, release := make(chan struct{}), make(chan struct{})
	startHandler(t, r, func(item) {
		close(entered)
		<-release
	})
	defer close(release)
	require.NoError(t, r.Record(item{}))
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for range 100_000 {
		if err := r.Flush(ctx); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	if grown := int64(heap()) - int64(before); grown > 1<<20 {
		t.Errorf("heap grew by %.1f MB after 100,000 Flush calls that all returned context.Canceled", float64(grown)/(1<<20))
	}
}

// Many goroutines record while others flush: every recorded value is
// written or counted as dropped, and each Flush sees its values handled.
func TestConcurrentFlushesSeeEveryEarlierValueHandled(t *testing.T) {
	r := newRecorder[ev](t, fanout.WithQueueLength(8))
	sink := &fanouttest.Sink[ev]{}
	run := startSink(t, r, sink, nil)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 2000 {
				assert.NoError(t, r.Record(ev{Msg: "m"}))
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 50 {
				before := r.Stats()
				assert.NoError(t, r.Flush(context.Background()))
				after := run.Stats()
				assert.GreaterOrEqual(t, after.Written+after.Dropped, before.Recorded-before.Refused,
					"everything recorded before Flush is written or dropped")
			}
		})
	}
	wg.Wait()
	require.NoError(t, r.Flush(context.Background()))
	st := run.Stats()
	assert.Equal(t, uint64(8000), st.Written+st.DroppedFull)
	assert.Equal(t, int(st.Written), len(sink.Written()))
}

// A Flush that starts as the runner handles its value is woken all the
// same: the runner adds to its count before it looks for waiting Flush
// calls, and a Flush counts itself waiting before it looks at the count
// again.
func TestFlushStartingAsItsValueIsHandledReturns(t *testing.T) {
	r := newRecorder[ev](t)
	startSink(t, r, &fanouttest.Sink[ev]{}, nil)
	for i := range 100000 {
		require.NoError(t, r.Record(ev{Msg: "m"}))
		runtime.Gosched() // let the runner take it: the Flush meets it mid-way
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := r.Flush(ctx)
		cancel()
		require.NoError(t, err, "Flush %d was not woken", i)
	}
}

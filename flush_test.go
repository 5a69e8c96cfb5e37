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

func TestFlushWaitsForWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t)
		sink := &fanouttest.Sink[ev]{Block: make(chan struct{})}
		_, err := r.StartSink(sink, nil)
		require.NoError(t, err)
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
		assert.Equal(t, 3, len(sink.Written()))
	})
}

// Values recorded after Flush began are not waited for.
func TestFlushDoesNotWaitForLaterValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t)
		sink := &fanouttest.Sink[ev]{Block: make(chan struct{})}
		_, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "before"}))
		done := make(chan error)
		go func() { done <- r.Flush(context.Background()) }()
		synctest.Wait()
		require.NoError(t, r.Record(ev{Msg: "after"}))
		sink.Block <- struct{}{}
		require.NoError(t, <-done)
		assert.Equal(t, 1, len(sink.Written()))
		sink.Block <- struct{}{}
	})
}

func TestFlushReturnsWhenItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t)
		sink := &fanouttest.Sink[ev]{Block: make(chan struct{})}
		_, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "stuck"}))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		assert.ErrorIs(t, r.Flush(ctx), context.DeadlineExceeded)
		close(sink.Block)
	})
}

// Dropped values count as done: Flush does not wait for values that missed
// a full queue, nor for refused ones.
func TestFlushDoesNotWaitForDroppedValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t, fanout.WithQueueLength(1))
		sink := &fanouttest.Sink[ev]{Block: make(chan struct{})}
		_, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		w, err := r.Watch(fanout.WithFullChannelBehavior(fanout.WaitIfChannelFull), fanout.WithQueueLength(1))
		require.NoError(t, err)

		require.NoError(t, r.Record(ev{Msg: "0"})) // in flight at the sink; w full
		synctest.Wait()
		assert.ErrorIs(t, r.Record(ev{Msg: "refused"}), fanout.ErrDropped)
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
		assert.Equal(t, uint64(1), st.Refused)
		assert.Equal(t, uint64(1), st.DroppedFull)
		assert.Equal(t, uint64(2), st.Written)
		assert.Equal(t, uint64(2), st.Dropped)
		w.Stop()
	})
}

func TestFlushWithoutRunnersReturnsAtOnce(t *testing.T) {
	r := newRecorder(t)
	require.NoError(t, r.Record(ev{}))
	assert.NoError(t, r.Flush(context.Background()))
}

// Flush called from inside a handler waits for its own runner, which cannot
// finish the value in hand until the handler returns: it returns only when
// its ctx ends (with context.Background() it never returns). Flush from a
// handler for another runner's values works. Not documented; see the report.
func TestFlushFromInsideAHandlerWaitsForItsOwnRunner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRev(t)
		res := make(chan error, 1)
		var waited time.Duration
		var other atomic.Int32
		_ = must[*fanout.Runner[item]](t)(r.StartHandler(func(item) { other.Add(1) }))
		_ = must[*fanout.Runner[item]](t)(r.StartHandler(func(v item) {
			if v.N != 1 {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			err := r.Flush(ctx)
			waited = time.Since(start)
			res <- err
		}))
		_ = r.Record(item{N: 1})
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
		r := newRev(t, fanout.WithRetry(fanout.RetryPolicy{MaxTries: 3, Sleep: time.Hour}))
		block := make(chan struct{})
		var written atomic.Int32
		run := must[*fanout.Runner[item]](t)(r.StartSink(funcSink{func(_ context.Context, _ string, v item) (item, error) {
			if v.N == 0 {
				<-block
				return item{}, errors.New("failed once")
			}
			written.Add(1)
			return v, nil
		}}, nil))
		var handled atomic.Int32
		_ = must[*fanout.Runner[item]](t)(r.StartHandler(func(item) { handled.Add(1) }))
		for i := range 3 {
			_ = r.Record(item{N: i})
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
		close(block)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		<-run.Done()
		st := run.Stats()
		if st.Written != 2 || st.DroppedShutdown != 1 || written.Load() != 2 {
			t.Errorf("stats %+v: want the failed value dropped at once (no retry after Stop), the 2 queued written", st)
		}
		_ = r.Record(item{N: 9})
		if err := r.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if handled.Load() != 4 {
			t.Errorf("other runner handled %d, want 4", handled.Load())
		}
	})
}

// TestFlushReturnsWhenItsRunnerExitsConcurrently: Flush must return once
// a runner it waits for has exited ("A runner that has exited counts as
// done").
//
// Before the fix: it can wait forever. Runner.exit (recorder.go:506-512) closes the
// registered waiters under run.mu, releases run.mu and only then closes
// run.done. waitHandled (recorder.go:533-547) checks run.done under run.mu
// and, seeing it still open, registers a waiter. A Flush that took its
// snapshot while the runner was still listed and reaches waitHandled in that
// gap registers a waiter nobody will ever close. The target is out of reach
// whenever values were recorded between Runner.Stop and the runner's exit:
// Record counts them in run.enqueued (recorder.go:174-176, the runner is
// still in r.runners) although its stopped watcher never delivers them.
//
// The fix: close(run.done) before run.mu.Unlock() in exit (or set an "exited"
// flag under run.mu that waitHandled checks).
func TestFlushReturnsWhenItsRunnerExitsConcurrently(t *testing.T) {
	const iterations = 150
	for i := range iterations {
		r, err := fanout.NewRecorder[item]()
		if err != nil {
			t.Fatal(err)
		}
		// Runner A blocks on value 2, runner B (registered after A, so each
		// Flush waits for A first) on value 0.
		enteredA, releaseA := make(chan struct{}), make(chan struct{})
		enteredB, releaseB := make(chan struct{}), make(chan struct{})
		_ = must[*fanout.Runner[item]](t)(r.StartHandler(func(v item) {
			if v.N == 2 {
				close(enteredA)
				<-releaseA
			}
		}))
		runB := must[*fanout.Runner[item]](t)(r.StartHandler(func(v item) {
			if v.N == 0 {
				close(enteredB)
				<-releaseB
			}
		}))
		_ = r.Record(item{N: 0})
		<-enteredB
		runB.Stop()
		// Recorded after B's Stop, before it exits: counted in B's enqueued
		// count, never delivered, so only B's exit ends a Flush waiting for B.
		_ = r.Record(item{N: 1})

		var wg sync.WaitGroup
		var stuck atomic.Int32
		flush := func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if r.Flush(ctx) != nil {
				stuck.Add(1)
			}
		}
		// Waiters on B: B's exit holds B's lock a while to close them.
		for range 300 {
			wg.Go(flush)
		}
		time.Sleep(3 * time.Millisecond)
		// Flush calls that snapshot both runners now, wait for A, and move
		// on to B while B is exiting.
		_ = r.Record(item{N: 2})
		<-enteredA
		for range 200 {
			wg.Go(flush)
		}
		time.Sleep(2 * time.Millisecond)
		close(releaseB)
		close(releaseA)
		<-runB.Done()
		wg.Wait()
		_ = r.Shutdown(context.Background())
		if n := stuck.Load(); n > 0 {
			t.Errorf("iteration %d: %d Flush calls waited until their 3 s deadline although the runner they waited for had exited", i, n)
			return
		}
	}
}

// TestFlushThatGivesUpRetainsNothing: a Flush that returns ctx.Err()
// has given up and should leave nothing behind.
//
// Before the fix: waitHandled appends a flushWaiter (and a channel) to run.waiters
// (recorder.go:545-553) and does not remove it when ctx ends; it stays until
// the runner reaches the target or exits, and every markHandled scans it
// under run.mu. A health check calling Flush with a timeout while a sink is
// stuck (or a caller polling with an expired ctx) grows the list without
// bound: here 100,000 calls with a cancelled ctx retain megabytes.
//
// The fix: on ctx end, remove the waiter under run.mu (or share one channel per
// target).
func TestFlushThatGivesUpRetainsNothing(t *testing.T) {
	r := newRev(t)
	entered, release := make(chan struct{}), make(chan struct{})
	_ = must[*fanout.Runner[item]](t)(r.StartHandler(func(item) {
		close(entered)
		<-release
	}))
	defer close(release)
	_ = r.Record(item{})
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
// written or counted as dropped, and each Flush sees its values written.
func TestConcurrentFlushesSeeEveryEarlierValueHandled(t *testing.T) {
	r := newRecorder(t, fanout.WithQueueLength(8))
	sink := &fanouttest.Sink[ev]{}
	run, err := r.StartSink(sink, nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 2000 {
				require.NoError(t, r.Record(ev{Msg: "m"}))
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 50 {
				before := r.Stats()
				require.NoError(t, r.Flush(context.Background()))
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

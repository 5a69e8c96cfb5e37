package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
)

// batchSink records each Write's batch and answers with write.
type batchSink struct {
	mu      sync.Mutex
	batches [][]int
	at      []time.Time
	write   func(batch []int, call int) (int, error)
}

func (s *batchSink) Write(_ context.Context, batch []int) (int, error) {
	s.mu.Lock()
	s.batches = append(s.batches, append([]int(nil), batch...))
	s.at = append(s.at, time.Now())
	call := len(s.batches)
	s.mu.Unlock()
	if s.write == nil {
		return len(batch), nil
	}
	return s.write(batch, call)
}

func (s *batchSink) calls() ([][]int, []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.batches, s.at
}

// startBatch starts a batch runner on a new broadcaster's watcher and
// returns the broadcaster and the runner.
func startBatch(t *testing.T, ctx context.Context, sink fanout.BatchSink[int], cfg fanout.BatchConfig[int]) (*fanout.Broadcaster[int], *fanout.Runner[int]) {
	t.Helper()
	b := fanout.New[int]()
	w, err := b.Watch(fanout.WithQueueLength(16))
	require.NoError(t, err)
	run, err := fanout.StartBatchSink(ctx, w, sink, cfg)
	require.NoError(t, err)
	return b, run
}

// A batch runner passes up to Batch queued values to one Write, retries
// what a short write left, and hands every batch to Finished once done.
func TestBatchSinkWritesBatchesAndRetriesTheRestOfAShortWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &batchSink{write: func(batch []int, call int) (int, error) {
			if call == 1 {
				return 2, errors.New("partial")
			}
			return len(batch), nil
		}}
		var finished []int
		b, run := startBatch(t, t.Context(), sink, fanout.BatchConfig[int]{Batch: 4,
			Retry:    &fanout.RetryPolicy{MaxTries: 3, Sleep: time.Second},
			Finished: func(received []int) { finished = append(finished, received...) }})
		_, err := b.ActionBatch([]int{1, 2, 3, 4, 5})
		require.NoError(t, err)
		b.Shutdown()
		<-run.Done()
		batches, _ := sink.calls()
		assert.Equal(t, [][]int{{1, 2, 3, 4}, {3, 4}, {5}}, batches)
		assert.Equal(t, []int{1, 2, 3, 4, 5}, finished)
		st := run.Stats()
		assert.Equal(t, [3]uint64{5, 1, 0}, [3]uint64{st.Written, st.Retries, st.Dropped}, "written, retries, dropped")
	})
}

// A rejected value (an error the policy does not retry) or a panic drops
// one value, the first pending, under DropRejected or DropPanic, and the
// rest is written.
func TestBatchSinkDropsARejectedOrPanickingValueAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		permanent := errors.New("permanent")
		sink := &batchSink{write: func(batch []int, _ int) (int, error) {
			for i, v := range batch {
				switch v {
				case 2:
					return i, permanent
				case 4:
					if i > 0 {
						return i, nil // a short write: retried from 4
					}
					panic("bug")
				}
			}
			return len(batch), nil
		}}
		var drops []fanout.Drop
		b, run := startBatch(t, t.Context(), sink, fanout.BatchConfig[int]{Batch: 8,
			Retry:  &fanout.RetryPolicy{MaxTries: 3, Sleep: time.Second, Retryable: func(err error) bool { return !errors.Is(err, permanent) }},
			OnDrop: func(d fanout.Drop, values []int) { drops = append(drops, d) }})
		_, err := b.ActionBatch([]int{1, 2, 3, 4, 5})
		require.NoError(t, err)
		b.Shutdown()
		<-run.Done()
		st := run.Stats()
		assert.Equal(t, uint64(3), st.Written)
		assert.Equal(t, uint64(1), st.DroppedRejected)
		assert.Equal(t, uint64(1), st.DroppedPanic)
		assert.Equal(t, uint64(1), st.Retries, "the short write")
		require.Len(t, drops, 2)
		assert.Equal(t, fanout.DropRejected, drops[0].Reason)
		assert.ErrorIs(t, drops[0].Err, permanent)
		assert.Equal(t, fanout.DropPanic, drops[1].Reason)
	})
}

// Select leaves values out of the write; they count as handled, not
// written or dropped.
func TestBatchSinkWritesOnlyWhatSelectKeeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &batchSink{}
		b, run := startBatch(t, t.Context(), sink, fanout.BatchConfig[int]{Batch: 8,
			Select: func(received, out []int) []int {
				for _, v := range received {
					if v%2 == 0 {
						out = append(out, v)
					}
				}
				return out
			}})
		_, err := b.ActionBatch([]int{1, 2, 3, 4})
		require.NoError(t, err)
		b.Shutdown()
		<-run.Done()
		batches, _ := sink.calls()
		assert.Equal(t, [][]int{{2, 4}}, batches)
		st := run.Stats()
		assert.Equal(t, uint64(4), st.Received)
		assert.Equal(t, uint64(2), st.Written)
	})
}

// With MaxSleep the pause doubles after each failure up to MaxSleep; the
// tries used up drop the batch as DropRetries.
func TestBatchSinkBacksOffExponentiallyUpToMaxSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &batchSink{write: func([]int, int) (int, error) { return 0, errors.New("down") }}
		b, run := startBatch(t, t.Context(), sink, fanout.BatchConfig[int]{
			Retry: &fanout.RetryPolicy{MaxTries: 6, Sleep: time.Second, MaxSleep: 5 * time.Second}})
		require.NoError(t, b.Action(1))
		b.Shutdown()
		<-run.Done()
		_, at := sink.calls()
		require.Len(t, at, 6)
		var pauses []time.Duration
		for i := 1; i < len(at); i++ {
			pauses = append(pauses, at[i].Sub(at[i-1]))
		}
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}, pauses)
		assert.Equal(t, uint64(1), run.Stats().DroppedRetries)
	})
}

// When the runner's context ends, its pause is cut short and the pending
// values and those still queued are dropped as DropShutdown, without
// Finished: a checkpoint does not cover them.
func TestBatchSinkDropsWhatIsLeftAsShutdownWhenItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		sink := &batchSink{write: func([]int, int) (int, error) { return 0, errors.New("down") }}
		var finished int
		b, run := startBatch(t, ctx, sink, fanout.BatchConfig[int]{Batch: 2,
			Retry:    &fanout.RetryPolicy{MaxTries: 100, Sleep: time.Hour},
			Finished: func(received []int) { finished += len(received) }})
		_, err := b.ActionBatch([]int{1, 2, 3, 4, 5})
		require.NoError(t, err)
		synctest.Wait()
		cancel()
		<-run.Done()
		st := run.Stats()
		assert.Equal(t, uint64(5), st.DroppedShutdown)
		assert.Zero(t, finished, "no batch is finished: a checkpoint must not pass what a restart writes")
		b.Shutdown()
	})
}

// Bad configuration is an error at start, and nothing runs. A Batch above
// MaxQueueLength is refused as a queue length would be: the runner
// allocated its buffer of Batch values on its own goroutine, and
// math.MaxInt crashed the process (makeslice: len out of range).
func TestStartBatchSinkRejectsBadConfiguration(t *testing.T) {
	b := fanout.New[int]()
	defer b.Shutdown()
	w, err := b.Watch()
	require.NoError(t, err)
	defer w.Stop()
	for _, n := range []int{-1, fanout.MaxQueueLength + 1, math.MaxInt} {
		run, err := fanout.StartBatchSink(t.Context(), w, &batchSink{}, fanout.BatchConfig[int]{Batch: n})
		assert.Error(t, err, "Batch %d", n)
		assert.Nil(t, run)
	}
	_, err = fanout.StartBatchSink(t.Context(), w, &batchSink{}, fanout.BatchConfig[int]{Retry: &fanout.RetryPolicy{}})
	assert.Error(t, err)
	_, err = fanout.StartBatchSink[int](t.Context(), nil, &batchSink{}, fanout.BatchConfig[int]{})
	assert.Error(t, err)
	run, err := fanout.StartBatchSink(t.Context(), w, &batchSink{}, fanout.BatchConfig[int]{Batch: fanout.MaxQueueLength})
	require.NoError(t, err, "MaxQueueLength itself is a valid Batch")
	run.Stop()
	<-run.Done()
}

// A Write that stores every value and still returns an error counts as a
// failure, and nothing more: no retry, no drop, no pause. It crashed the
// runner (a rejected error) or paused it for a retry of nothing.
func TestBatchSinkWriteStoringAllWithAnErrorIsAFailureOnly(t *testing.T) {
	for _, retryable := range []bool{false, true} {
		t.Run(fmt.Sprint("retryable ", retryable), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := &batchSink{write: func(batch []int, _ int) (int, error) { return len(batch), errors.New("late ack") }}
				var finished []int
				b, run := startBatch(t, t.Context(), sink, fanout.BatchConfig[int]{Batch: 8,
					Retry:    &fanout.RetryPolicy{MaxTries: 3, Sleep: time.Hour, Retryable: func(error) bool { return retryable }},
					Finished: func(received []int) { finished = append(finished, received...) }})
				_, err := b.ActionBatch([]int{1, 2, 3})
				require.NoError(t, err)
				start := time.Now()
				synctest.Wait()
				b.Shutdown()
				<-run.Done()
				assert.Equal(t, start, time.Now(), "no retry pause")
				st := run.Stats()
				assert.EqualValues(t, 3, st.Written)
				assert.EqualValues(t, 1, st.Failures)
				assert.Zero(t, st.Retries)
				assert.Zero(t, st.Dropped)
				assert.Equal(t, []int{1, 2, 3}, finished)
			})
		})
	}
}

// A panic in Select drops the batch (DropPanic, reported) and one in
// Finished loses nothing; both are counted in the broadcaster's Panics,
// and the runner goes on. Either killed the process.
func TestBatchSinkContainsPanicsInSelectAndFinished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &batchSink{}
		var drops []fanout.Drop
		b, run := startBatch(t, t.Context(), sink, fanout.BatchConfig[int]{
			Select: func(received, out []int) []int {
				if received[0] == 1 {
					panic("select bug")
				}
				return append(out, received...)
			},
			Finished: func(received []int) {
				if received[0] == 2 {
					panic("finished bug")
				}
			},
			OnDrop: func(d fanout.Drop, _ []int) { drops = append(drops, d) }})
		for v := range 3 {
			require.NoError(t, b.Action(v+1))
			synctest.Wait()
		}
		b.Shutdown()
		<-run.Done()
		batches, _ := sink.calls()
		assert.Equal(t, [][]int{{2}, {3}}, batches)
		st := run.Stats()
		assert.EqualValues(t, 1, st.DroppedPanic)
		assert.EqualValues(t, 2, st.Written)
		require.Len(t, drops, 1)
		assert.ErrorContains(t, drops[0].Err, "select bug")
		assert.EqualValues(t, 2, b.Stats().Panics)
	})
}

// A nil context is an error, and nothing starts; it panicked.
func TestStartBatchSinkRejectsANilContext(t *testing.T) {
	b := fanout.New[int]()
	defer b.Shutdown()
	w, err := b.Watch()
	require.NoError(t, err)
	var ctx context.Context // a caller's nil
	run, err := fanout.StartBatchSink(ctx, w, &batchSink{}, fanout.BatchConfig[int]{})
	assert.ErrorContains(t, err, "nil context")
	assert.Nil(t, run)
}

package fanouttest_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

// The fake sink records what a recorder's sink runner writes, counts retries
// per value, stores what Store returns and lets the test hold writes.
func TestSinkRecordsRunnerWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		flaky := errors.New("flaky")
		sink := &fanouttest.Sink[string]{
			Key: func(v string) string { return v },
			Fail: func(_ string, v string, attempt int) error {
				if v == "b" && attempt == 1 {
					return flaky
				}
				return nil
			},
			Store: func(op, v string) string { return op + ":" + v },
		}
		rec, err := fanout.NewRecorder[string](fanout.WithRetry(fanout.RetryPolicy{MaxTries: 2}))
		require.NoError(t, err)
		defer func() { assert.NoError(t, rec.Shutdown(context.Background())) }()
		_, err = rec.StartSink(sink, nil)
		require.NoError(t, err)
		require.NoError(t, rec.Record("a"))
		require.NoError(t, rec.Record("b"))
		require.NoError(t, rec.Flush(context.Background()))
		calls := sink.Calls()
		require.Len(t, calls, 3)
		assert.Equal(t, "create", calls[0].Op)
		assert.ErrorIs(t, calls[1].Err, flaky)
		assert.Equal(t, []string{"a", "b"}, sink.Written())
	})
}

// A blocked write ends when the test releases it, or fails with the
// context's error when the context ends first.
func TestSinkBlockHoldsWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &fanouttest.Sink[int]{Block: make(chan struct{})}
		done := make(chan error, 1)
		go func() {
			_, err := sink.Create(context.Background(), 1)
			done <- err
		}()
		synctest.Wait()
		assert.Empty(t, sink.Calls(), "still held")
		sink.Block <- struct{}{}
		require.NoError(t, <-done)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := sink.Update(ctx, 2)
		assert.ErrorIs(t, err, context.Canceled)
		assert.Len(t, sink.Calls(), 2)
	})
}

func TestSinkPanicsWhenTold(t *testing.T) {
	sink := &fanouttest.Sink[int]{Panic: func(v int) bool { return v < 0 }}
	assert.Panics(t, func() { _, _ = sink.Create(context.Background(), -1) })
	v, err := sink.Create(context.Background(), 1)
	assert.NoError(t, err)
	assert.Equal(t, 1, v)
}

package guard_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/fanout-go/fanout/internal/guard"
)

func TestCallReturnsThePanicAsAnError(t *testing.T) {
	assert.NoError(t, guard.Call(func() {}))
	err := guard.Call(func() { panic("boom") })
	assert.EqualError(t, err, "fanout: panic: boom")
	cause := errors.New("cause")
	err = guard.Call(func() { panic(cause) })
	assert.ErrorIs(t, err, cause, "a panic with an error keeps it in the chain")
}

func TestSleepWaitsUnlessTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		assert.True(t, guard.Sleep(context.Background(), time.Second))
		assert.Equal(t, time.Second, time.Since(start))

		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start = time.Now()
		assert.False(t, guard.Sleep(ctx, time.Hour))
		assert.Equal(t, 100*time.Millisecond, time.Since(start))

		assert.True(t, guard.Sleep(context.Background(), 0))
		assert.False(t, guard.Sleep(ctx, 0), "an ended context is reported even without a wait")
	})
}

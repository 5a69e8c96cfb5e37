package fanout

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A fast path at the limit raises it itself once every lossless reader has
// made room (raiseFast), as the slow path's refresh would, and leaves it
// alone while one is still full, or while something else keeps publishers
// off the fast path.
func TestRaiseFastRaisesTheLimitOnlyWhenEveryReaderHasRoom(t *testing.T) {
	b := New[int](WithQueueLength(4))
	defer b.Shutdown()
	w1, err := b.Watch()
	require.NoError(t, err)
	w2, err := b.Watch()
	require.NoError(t, err)
	for i := range 4 {
		require.NoError(t, b.Action(i))
	}
	raise := func() (bool, uint64) {
		h, ok := b.head.tryHold()
		require.True(t, ok)
		defer b.head.release(h)
		return b.raiseFast(h), b.fast
	}
	buf := make([]int, 4)
	_, err = w1.Recv(context.Background(), buf)
	require.NoError(t, err)
	ok, fast := raise()
	assert.False(t, ok, "raised with w2 still full")
	assert.LessOrEqual(t, fast, uint64(4))

	_, err = w2.Recv(context.Background(), buf)
	require.NoError(t, err)
	ok, fast = raise()
	assert.True(t, ok, "not raised with both readers emptied")
	assert.Equal(t, uint64(8), fast, "the readers hold 4 values each from sequence 4 on")
	b.mu.Lock()
	assert.Equal(t, b.fastBound(), b.fast, "I1: fast is what fastBound says")
	b.turn = true // a publisher holds the turn
	b.unlock()
	ok, fast = raise()
	assert.False(t, ok, "raised while a publisher holds the turn")
	assert.Zero(t, fast)
	b.mu.Lock()
	b.turn = false
	b.unlock()
}

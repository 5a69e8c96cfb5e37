package fanout_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

// A watcher asking for the last k values gets them first, then the live
// values, with no gap and no duplicate, on every read path and whatever its
// behaviour.
func TestReplayThenLiveValues(t *testing.T) {
	for _, beh := range []fanout.FullChannelBehavior{fanout.WaitIfChannelFull, fanout.DropIfChannelFull, fanout.DropOldestIfChannelFull} {
		for _, r := range readers {
			t.Run(beh.(interface{ String() string }).String()+"/"+r.name, func(t *testing.T) {
				b := fanout.New[int](fanout.WithHistory(5), fanout.WithFullChannelBehavior(beh))
				defer b.Shutdown()
				publish(t, b, seq(1, 8)...)
				w, err := b.Watch(fanout.WithReplay(3))
				require.NoError(t, err)
				r.prepare(w)
				publish(t, b, 9, 10)
				b.Shutdown()
				assert.Equal(t, []int{6, 7, 8, 9, 10}, r.drain(w))
			})
		}
	}
}

// Fewer values than asked for have been accepted: the watcher gets them all.
func TestReplayShorterThanAsked(t *testing.T) {
	b := fanouttest.New[int](t, fanout.WithHistory(10))
	publish(t, b, 1, 2)
	w := fanouttest.Watch(t, b, fanout.WithReplay(10))
	assert.Equal(t, []int{1, 2}, fanouttest.Drain(w))
}

// Replayed values count against the queue as a prefix does: the queue
// grows to hold them and one live value more.
func TestReplayGrowsTheQueueLikeAPrefix(t *testing.T) {
	b := fanouttest.New[int](t, fanout.WithHistory(8), fanout.WithQueueLength(2))
	publish(t, b, seq(1, 8)...)
	w := fanouttest.Watch(t, b, fanout.WithReplay(5))
	assert.Equal(t, 6, w.Stats().QueueLength)
	ok, err := b.ActionOrDrop(9)
	require.NoError(t, err)
	assert.True(t, ok, "one live value fits")
	ok, err = b.ActionOrDrop(10)
	require.NoError(t, err)
	assert.False(t, ok, "then the lossless watcher is full")
	assert.Equal(t, []int{4, 5, 6, 7, 8, 9}, fanouttest.Drain(w))
}

// With a prefix too, the order is: the prefix, the replayed values, then the
// live ones.
func TestReplayAfterPrefix(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := fanouttest.New[int](t, fanout.WithHistory(4))
			publish(t, b, 1, 2, 3)
			w, err := b.WatchWithPrefix([]int{-2, -1}, fanout.WithReplay(2))
			require.NoError(t, err)
			r.prepare(w)
			publish(t, b, 4)
			b.Shutdown()
			assert.Equal(t, []int{-2, -1, 2, 3, 4}, r.drain(w))
		})
	}
}

// Replay keeps the total order under a concurrent producer: what a new
// watcher replays and what it then receives live are one contiguous run of
// the values accepted.
func TestReplayUnderConcurrentProducer(t *testing.T) {
	const n = 20000
	b := fanout.New[int](fanout.WithHistory(64), fanout.WithQueueLength(256))
	all, err := b.Watch(fanout.WithQueueLength(n + 1))
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			assert.NoError(t, b.Action(i))
		}
	})
	var late []*fanout.Watcher[int]
	for range 50 {
		w, err := b.Watch(fanout.WithReplay(64), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull), fanout.WithQueueLength(n+100))
		require.NoError(t, err)
		late = append(late, w)
	}
	wg.Wait()
	b.Shutdown()
	got, _ := fanouttest.CollectAll(t, all)
	require.Len(t, got, n)
	for _, w := range late {
		vals, _ := fanouttest.CollectAll(t, w)
		if len(vals) == 0 {
			continue
		}
		for i := 1; i < len(vals); i++ {
			require.Equal(t, vals[i-1]+1, vals[i], "gap or duplicate between replayed and live values")
		}
		assert.Equal(t, n-1, vals[len(vals)-1])
	}
}

// A replay longer than the history, and a history given to Watch, are
// errors; a negative history given to New is reported by every call.
func TestReplayAndHistoryErrors(t *testing.T) {
	b := fanouttest.New[int](t, fanout.WithHistory(2))
	_, err := b.Watch(fanout.WithReplay(3))
	assert.ErrorContains(t, err, "invalid replay 3")
	_, err = b.Watch(fanout.WithHistory(5))
	assert.ErrorContains(t, err, "WithHistory applies to New")
	bad := fanouttest.New[int](t, fanout.WithHistory(-1))
	assert.ErrorContains(t, bad.Action(1), "invalid history -1")
}

// Without a history nothing is kept: a replay asks for values that are not
// there, which is an error, and a plain watcher starts empty.
func TestNoHistoryByDefault(t *testing.T) {
	b := fanouttest.New[int](t)
	publish(t, b, 1, 2)
	_, err := b.Watch(fanout.WithReplay(1))
	assert.Error(t, err)
	w := fanouttest.Watch(t, b)
	assert.Empty(t, fanouttest.Drain(w))
}

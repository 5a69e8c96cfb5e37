package fanout_test

import (
	"context"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
)

// A watcher of several topics read through its channel, in a select,
// receives each topic's values in that topic's order, and its channel
// closes after the last one once the family shuts down.
func TestTopicsWatcherResultChanDeliversEachTopicInOrderThenCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp := fanout.NewTopics[string, int](fanout.WithQueueLength(2))
		g, err := tp.WatchTopics([]string{"a", "b"})
		require.NoError(t, err)
		ch := g.ResultChan()
		assert.Equal(t, ch, g.ResultChan(), "one channel")
		select {
		case m := <-ch:
			t.Fatalf("received %v before any publish", m)
		case <-time.After(time.Second):
		}
		got := map[string][]int{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for m := range ch {
				got[m.Topic] = append(got[m.Topic], m.Value)
			}
		}()
		for i := range 10 {
			require.NoError(t, tp.Publish("a", i))
			require.NoError(t, tp.Publish("b", 100+i))
		}
		tp.Shutdown()
		<-done
		assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, got["a"])
		assert.Equal(t, []int{100, 101, 102, 103, 104, 105, 106, 107, 108, 109}, got["b"])
		assert.ErrorIs(t, g.Err(), fanout.ErrStopped)
		st := g.Stats()
		assert.Equal(t, uint64(10), st["a"].Delivered)
		assert.Zero(t, st["a"].Queued)
	})
}

// The channel holds as many values as one topic's queue, and its goroutine
// one more; the values it took count as delivered. Stop ends that
// goroutine: the channel closes after what it holds, and the rest, the
// value the goroutine held first, is read with Recv, in order.
func TestTopicsWatcherStopLeavesWhatTheChannelDidNotTakeToRecv(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp := fanout.NewTopics[string, int](fanout.WithQueueLength(2))
		defer tp.Shutdown()
		g, err := tp.WatchTopics([]string{"a"})
		require.NoError(t, err)
		ch := g.ResultChan()
		for v := range 4 {
			require.NoError(t, tp.Publish("a", v))
		}
		synctest.Wait()
		assert.Len(t, ch, 2)
		st := g.Stats()["a"]
		assert.Equal(t, [2]uint64{3, 1}, [2]uint64{st.Delivered, uint64(st.Queued)}, "2 in the channel, 1 held: 3 delivered, 1 queued")
		g.Stop()
		synctest.Wait()
		st = g.Stats()["a"]
		assert.Equal(t, [2]uint64{2, 2}, [2]uint64{st.Delivered, uint64(st.Queued)}, "the held value is queued again")
		assert.NoError(t, g.Err(), "2 values to read")
		var fromChan []int
		for m := range ch {
			fromChan = append(fromChan, m.Value)
		}
		assert.Equal(t, []int{0, 1}, fromChan)
		var rest []int
		for m := range g.All(context.Background()) {
			rest = append(rest, m.Value)
		}
		assert.Equal(t, []int{2, 3}, rest)
		assert.ErrorIs(t, g.Err(), fanout.ErrWatcherStopped)
	})
}

// A read right after Stop, before the channel's goroutine has run again,
// still finds the value that goroutine held: Recv waits for it to have
// left it, so that All neither ends early nor reports the watcher drained
// while a value is on its way back. (Without that wait, the loop below
// missed the value in about 80 of 100 rounds.)
func TestTopicsWatcherReadRightAfterStopFindsTheValueTheChannelHeld(t *testing.T) {
	for range 100 {
		tp := fanout.NewTopics[string, int](fanout.WithQueueLength(1))
		g, err := tp.WatchTopics([]string{"a"})
		require.NoError(t, err)
		ch := g.ResultChan()
		require.NoError(t, tp.Publish("a", 1)) // into the channel
		require.NoError(t, tp.Publish("a", 2)) // held by its goroutine, which waits for room
		for g.Stats()["a"].Delivered != 2 {
			runtime.Gosched()
		}
		g.Stop()
		var rest []int
		for m := range g.All(context.Background()) {
			rest = append(rest, m.Value)
		}
		require.Equal(t, []int{2}, rest)
		require.ErrorIs(t, g.Err(), fanout.ErrWatcherStopped)
		require.Equal(t, 1, (<-ch).Value)
		tp.Shutdown()
	}
}

// ResultChan after Stop returns a channel that closes at once; the values
// stay readable with Recv.
func TestTopicsWatcherResultChanAfterStopIsClosed(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	defer tp.Shutdown()
	g, err := tp.WatchTopics([]string{"a"})
	require.NoError(t, err)
	require.NoError(t, tp.Publish("a", 1))
	g.Stop()
	_, open := <-g.ResultChan()
	assert.False(t, open)
	m, err := g.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, m.Value)
}

// An evicted watcher's channel yields the values queued before the
// eviction, then closes, and Err says it was evicted.
func TestTopicsWatcherResultChanOfAnEvictedWatcherClosesAfterItsValues(t *testing.T) {
	tp := fanout.NewTopics[string, int](fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(fanout.EvictIfChannelFull))
	defer tp.Shutdown()
	g, err := tp.WatchTopics([]string{"a", "b"})
	require.NoError(t, err)
	require.NoError(t, tp.Publish("a", 1))
	require.NoError(t, tp.Publish("a", 2)) // evicts g's watcher of a
	require.NoError(t, tp.Publish("a", 3))
	var got []int
	for m := range g.ResultChan() {
		got = append(got, m.Value)
	}
	assert.Equal(t, []int{1}, got)
	assert.ErrorIs(t, g.Err(), fanout.ErrEvicted)
}

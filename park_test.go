package fanout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A reader yields before it parks when its broadcaster has many readers,
// or when it reads a topic whose family has many readers in other topics;
// the readers of one broadcaster with a few readers, alone or in a family
// with a few more, park at once.
func TestReadersYieldBeforeParkingWhenOtherTopicsHaveManyReaders(t *testing.T) {
	few := New[int]()
	defer few.Shutdown()
	w := watchB(t, few, 10)
	assert.False(t, w.yieldsBeforePark(), "a broadcaster of 10 readers")

	tp := NewTopics[string, int]()
	defer tp.Shutdown()
	a := watchN(t, tp, "a", 10)
	assert.False(t, a.yieldsBeforePark(), "a topic of 10 readers, alone")
	watchN(t, tp, "b", familyYieldReaders-1)
	assert.False(t, a.yieldsBeforePark(), "one reader short elsewhere")
	last := watchN(t, tp, "c", 1)
	assert.True(t, a.yieldsBeforePark(), "familyYieldReaders readers in other topics")
	last.Stop()
	assert.False(t, a.yieldsBeforePark(), "the count follows a watcher that stops")
}

// A reader that drops yields before it parks from lossyYieldReaders
// readers of its broadcaster, with a drop handler and a filter too; a
// reader that waits only from parkYieldReaders, whatever the strategies
// of the others.
func TestDroppingReadersYieldBeforeParkingFromAFewDozenReaders(t *testing.T) {
	for name, beh := range map[string]FullChannelBehavior{"drop": DropIfChannelFull, "drop oldest": DropOldestIfChannelFull} {
		t.Run(name, func(t *testing.T) {
			b := New[int](WithFullChannelBehavior(beh))
			defer b.Shutdown()
			lossy := watchB(t, b, lossyYieldReaders-3)
			lossless, err := b.Watch(WithFullChannelBehavior(WaitIfChannelFull))
			require.NoError(t, err)
			handled, err := b.Watch(WithDropHandler(func(Drop) {}), WithFilter(func(int) bool { return true }))
			require.NoError(t, err)
			assert.False(t, lossy.yieldsBeforePark(), "one reader short")
			last := watchB(t, b, 1)
			assert.True(t, lossy.yieldsBeforePark(), "lossyYieldReaders readers")
			assert.True(t, handled.yieldsBeforePark(), "one with a drop handler and a filter")
			assert.False(t, lossless.yieldsBeforePark(), "a reader that waits, among them")
			last.Stop()
			assert.False(t, lossy.yieldsBeforePark(), "the count follows a watcher that stops")
		})
	}
}

// The family's count of ring readers is the sum of its topics' as watchers
// of one topic and of every topic come and go, topics retire and the
// family shuts down.
func TestTopicsCountTheReadersOfEveryTopic(t *testing.T) {
	tp := NewTopics[int, int]()
	sum := func() int32 {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		var n int32
		for _, b := range tp.topicsLocked() {
			n += b.nreaders.Load()
		}
		return n
	}
	ws := []*Watcher[int]{watchN(t, tp, 1, 3), watchN(t, tp, 2, 2)}
	assert.EqualValues(t, 5, tp.readers.Load())
	all, err := tp.WatchAll()
	require.NoError(t, err)
	require.NoError(t, tp.Publish(3, 1)) // creates topic 3 for WatchAll
	assert.EqualValues(t, 8, tp.readers.Load(), "WatchAll reads topics 1, 2 and 3")
	assert.Equal(t, sum(), tp.readers.Load())
	all.Stop() // topic 3 retires
	ws[1].Stop()
	assert.EqualValues(t, 4, tp.readers.Load())
	assert.Equal(t, sum(), tp.readers.Load())
	tp.Shutdown()
	assert.Zero(t, tp.readers.Load(), "Shutdown counts every reader out")
	ws[0].Stop()
	assert.Zero(t, tp.readers.Load())
}

// watchN registers n watchers of topic and returns the last.
func watchN[K comparable](t *testing.T, tp *Topics[K, int], topic K, n int) *Watcher[int] {
	t.Helper()
	var w *Watcher[int]
	for range n {
		var err error
		w, err = tp.Watch(topic)
		require.NoError(t, err)
	}
	return w
}

// watchB registers n watchers of b and returns the last.
func watchB(t *testing.T, b *Broadcaster[int], n int) *Watcher[int] {
	t.Helper()
	var w *Watcher[int]
	for range n {
		var err error
		w, err = b.Watch()
		require.NoError(t, err)
	}
	return w
}

package fanout

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A publisher holding a topic's broadcaster (a TopicPublisher, or one that
// looked it up just before) can publish after the topic's last watcher left
// and before the topic retires: nobody hears those values, and the family
// counts them unheard, as if the topic had already gone. The test holds the
// retirement that Stop starts, to publish in that window every time.
func TestTopicsCountUnheardWhatTheirLastWatcherLeftBehind(t *testing.T) {
	tp := NewTopics[string, int]()
	defer tp.Shutdown()
	w, err := tp.Watch("a")
	require.NoError(t, err)
	p := tp.Publisher("a")
	require.NoError(t, p.Publish(1)) // heard
	retire := w.x.onStop
	w.x.onStop = nil
	w.Stop() // gone, the topic not yet retired
	require.NoError(t, p.Publish(2))
	n, err := p.PublishBatch([]int{3, 4})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	retire()
	s := tp.Stats()
	assert.EqualValues(t, 0, s.Topics, "%+v", s)
	assert.EqualValues(t, 3, s.Unheard, "%+v", s)
	assert.EqualValues(t, 4, s.Published, "%+v", s)
}

// A watcher that a value evicts missed it (a drop it counts), so that value
// is not unheard; the ones after it, until the topic retires, are.
func TestTopicsCountTheValueThatEvictsTheLastWatcherAsItsDrop(t *testing.T) {
	tp := NewTopics[string, int]()
	defer tp.Shutdown()
	w, err := tp.Watch("a", WithQueueLength(1), WithFullChannelBehavior(EvictIfChannelFull))
	require.NoError(t, err)
	require.NoError(t, tp.Publish("a", 1))
	n, err := tp.PublishBatch("a", []int{2, 3}) // 2 evicts w; 3 reaches nobody
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.NoError(t, tp.Publish("a", 4)) // the topic retired: unheard
	assert.EqualValues(t, 1, w.Stats().DroppedEvicted)
	s := tp.Stats()
	assert.EqualValues(t, 0, s.Topics, "%+v", s)
	assert.EqualValues(t, 2, s.Unheard, "%+v", s)
	assert.EqualValues(t, 4, s.Published, "%+v", s)
}

// A publisher gives its value to the channel watchers with room before it
// waits for a full one. If every watcher leaves while it waits, it then
// accepts the value with nobody registered, but the watcher it gave the
// value to holds it and reads it: the value was heard, not unheard.
func TestTopicsCountAValueGivenBeforeItsPublisherWaitedAsHeard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp := NewTopics[string, int](WithQueueLength(1))
		defer tp.Shutdown()
		a, err := tp.Watch("a")
		require.NoError(t, err)
		full, err := tp.Watch("a")
		require.NoError(t, err)
		ca, _ := a.ResultChan(), full.ResultChan()
		require.NoError(t, tp.Publish("a", 1))
		require.Equal(t, 1, <-ca) // a has room again; full does not
		retireA, retireFull := a.x.onStop, full.x.onStop
		a.x.onStop, full.x.onStop = nil, nil
		done := make(chan error)
		go func() { done <- tp.Publish("a", 2) }()
		synctest.Wait() // a has 2; the publisher waits for full
		require.Len(t, ca, 1)
		a.Stop()
		full.Stop()
		require.NoError(t, <-done)
		retireA()
		retireFull()
		v, ok := <-ca
		require.True(t, ok)
		assert.Equal(t, 2, v, "a heard 2")
		s := tp.Stats()
		assert.EqualValues(t, 0, s.Topics, "%+v", s)
		assert.EqualValues(t, 0, s.Unheard, "%+v", s)
		assert.EqualValues(t, 2, s.Published, "%+v", s)
	})
}

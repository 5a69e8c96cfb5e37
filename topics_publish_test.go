package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

// A TopicPublisher creates nothing, and follows its topic as it goes away
// and comes back: each time to the watchers the topic has then.
func TestTopicPublisherCreatesNothingAndFollowsItsTopicAcrossRetirement(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	defer tp.Shutdown()
	p := tp.Publisher("a")
	assert.Equal(t, "a", p.Topic())
	require.NoError(t, p.Publish(1))
	assert.Equal(t, fanout.TopicsStats{Published: 1, Unheard: 1}, tp.Stats(), "no topic: unheard")
	w1, err := tp.Watch("a")
	require.NoError(t, err)
	require.NoError(t, p.Publish(2))
	w1.Stop() // retires a
	require.NoError(t, p.Publish(3))
	w2, err := tp.Watch("a") // a new broadcaster
	require.NoError(t, err)
	require.NoError(t, p.Publish(4))
	n, err := p.PublishBatch([]int{5, 6})
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	ok, err := p.PublishOrDrop(7)
	require.NoError(t, err)
	assert.True(t, ok)
	require.NoError(t, p.PublishContext(context.Background(), 8))
	assert.Equal(t, []int{2}, fanouttest.Drain(w1))
	assert.Equal(t, []int{4, 5, 6, 7, 8}, fanouttest.Collect(t, w2, 5))
	assert.Equal(t, fanout.TopicsStats{Topics: 1, Published: 8, Unheard: 2, Retired: 1}, tp.Stats())
}

func TestTopicPublisherAfterShutdownAndWithBadInput(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	p := tp.Publisher("a")
	_, err := tp.Watch("a")
	require.NoError(t, err)
	require.NoError(t, p.Publish(1))
	tp.Shutdown()
	assert.ErrorIs(t, p.Publish(2), fanout.ErrStopped)
	ok, err := p.PublishOrDrop(3)
	assert.False(t, ok)
	assert.ErrorIs(t, err, fanout.ErrStopped)
	var nilCtx context.Context
	assert.ErrorContains(t, p.PublishContext(nilCtx, 4), "nil context")
	bad := fanout.NewTopics[string, int](fanout.WithQueueLength(-1))
	assert.ErrorContains(t, bad.Publisher("a").Publish(1), "invalid queue length")
}

// Publishers never hold the family's lock, while watchers come and go,
// topics retire and come back, and watchers of every topic create topics
// as they are published to: every watcher still receives a contiguous run
// of its topic's values, in order (nothing lost after it registered,
// nothing from a retired topic's broadcaster after a new one took over),
// and every value published counts once.
func TestTopicsChurnKeepsEachWatchersRunContiguousAndCountsEachValueOnce(t *testing.T) {
	const topics, each = 4, 3000
	tp := fanout.NewTopics[int, int](fanout.WithQueueLength(4))
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() { churnWatchers(t, tp, c) })
	}
	var pg sync.WaitGroup
	for topic := range topics {
		pg.Go(func() {
			p := tp.Publisher(topic)
			for v := range each {
				var err error
				if topic%2 == 0 {
					err = tp.Publish(topic, v)
				} else {
					err = p.Publish(v)
				}
				if !assert.NoError(t, err) {
					return
				}
			}
		})
	}
	pg.Wait()
	tp.Shutdown()
	wg.Wait()
	assert.Equal(t, uint64(topics*each), tp.Stats().Published)
}

// churnWatchers watches topics, each watcher for a few values, until the
// family shuts down: a watcher of one topic, of two, or of every topic.
func churnWatchers(t *testing.T, tp *fanout.Topics[int, int], c int) {
	for i := 0; ; i++ {
		var err error
		switch (c + i) % 5 {
		case 0, 1, 2:
			err = churnOne(t, tp, (c+i)%4, 1+i%40)
		case 3:
			err = churnGroup(t, tp, false, []int{i % 4, (i + 1) % 4}, 1+i%40)
		default:
			err = churnGroup(t, tp, true, nil, 1+i%20)
		}
		if errors.Is(err, fanout.ErrStopped) {
			return
		}
		if !assert.NoError(t, err) {
			return
		}
	}
}

func churnOne(t *testing.T, tp *fanout.Topics[int, int], topic, n int) error {
	w, err := tp.Watch(topic)
	if err != nil {
		return err
	}
	defer w.Stop()
	var got []int
	buf := make([]int, 8)
	for len(got) < n && err == nil {
		var k int
		k, err = w.Recv(context.Background(), buf[:min(len(buf), n-len(got))])
		got = append(got, buf[:k]...)
	}
	assertContiguous(t, fmt.Sprint("topic ", topic), got)
	return err
}

func churnGroup(t *testing.T, tp *fanout.Topics[int, int], all bool, topics []int, n int) error {
	var g *fanout.TopicsWatcher[int, int]
	var err error
	if all {
		g, err = tp.WatchAll()
	} else {
		g, err = tp.WatchTopics(topics)
	}
	if err != nil {
		return err
	}
	defer g.Stop()
	got := map[int][]int{}
	buf := make([]fanout.Message[int, int], 8)
	for i := 0; i < n && err == nil; {
		var k int
		k, err = g.Recv(context.Background(), buf)
		for _, m := range buf[:k] {
			got[m.Topic] = append(got[m.Topic], m.Value)
		}
		i += k
	}
	for topic, vs := range got {
		assertContiguous(t, fmt.Sprintf("group (all %v) topic %d", all, topic), vs)
	}
	return err
}

func assertContiguous(t *testing.T, what string, vs []int) {
	t.Helper()
	for i := 1; i < len(vs); i++ {
		if vs[i] != vs[i-1]+1 {
			t.Errorf("%s: received %d after %d", what, vs[i], vs[i-1])
			return
		}
	}
}

// PublishMessages publishes each topic's values in their order, as one
// batch of that topic; a topic nobody watches counts its values unheard.
func TestPublishMessagesKeepsEachTopicsOrder(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	a, err := tp.Watch("a")
	require.NoError(t, err)
	g, err := tp.WatchTopics([]string{"a", "b"})
	require.NoError(t, err)
	n, err := tp.PublishMessages([]fanout.Message[string, int]{{"b", 10}, {"a", 1}, {"c", 20}, {"a", 2}, {"b", 11}, {"a", 3}})
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	n, err = tp.PublishMessages(nil)
	require.NoError(t, err)
	assert.Zero(t, n)
	tp.Shutdown()
	assert.Equal(t, []int{1, 2, 3}, fanouttest.Drain(a))
	got := map[string][]int{}
	for m := range g.All(context.Background()) {
		got[m.Topic] = append(got[m.Topic], m.Value)
	}
	assert.Equal(t, map[string][]int{"a": {1, 2, 3}, "b": {10, 11}}, got)
	assert.Equal(t, fanout.TopicsStats{Topics: 2, Published: 6, Unheard: 1}, tp.Stats())
	n, err = tp.PublishMessages([]fanout.Message[string, int]{{"a", 4}})
	assert.ErrorIs(t, err, fanout.ErrStopped)
	assert.Zero(t, n)
}

// Each topic's values of one PublishMessages are contiguous in that topic,
// whatever other publishers do meanwhile.
func TestPublishMessagesKeepsEachTopicsValuesTogether(t *testing.T) {
	const batches, per = 300, 4
	tp := fanout.NewTopics[string, int](fanout.WithQueueLength(4))
	topics := []string{"a", "b"}
	got := make([][]int, len(topics))
	var rg sync.WaitGroup
	for i, topic := range topics {
		w, err := tp.Watch(topic)
		require.NoError(t, err)
		rg.Go(func() { got[i], _ = collectAll(w) })
	}
	var pg sync.WaitGroup
	for p := range 3 {
		pg.Go(func() {
			for i := range batches {
				var ms []fanout.Message[string, int]
				for j := range per { // a and b interleaved; each value says its batch
					ms = append(ms, fanout.Message[string, int]{Topic: topics[j%2], Value: p*batches + i})
				}
				n, err := tp.PublishMessages(ms)
				assert.NoError(t, err)
				assert.Equal(t, per, n)
			}
		})
	}
	pg.Wait()
	tp.Shutdown()
	rg.Wait()
	for k, vs := range got {
		require.Len(t, vs, 3*batches*per/2, topics[k])
		for i := 0; i < len(vs); i += per / 2 {
			assert.Equal(t, vs[i], vs[i+1], "%s: a batch's values are split at %d", topics[k], i)
		}
	}
}

// A PublishMessages cut short by Shutdown returns how many values were
// accepted: every value of the topics before, the first of the one cut.
func TestPublishMessagesStoppedReturnsWhatWasAccepted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp := fanout.NewTopics[string, int](fanout.WithQueueLength(1))
		a, err := tp.Watch("a")
		require.NoError(t, err)
		b, err := tp.Watch("b")
		require.NoError(t, err)
		type result struct {
			n   int
			err error
		}
		done := make(chan result, 1)
		go func() {
			n, err := tp.PublishMessages([]fanout.Message[string, int]{{"a", 1}, {"b", 2}, {"b", 3}, {"c", 4}})
			done <- result{n, err}
		}()
		synctest.Wait() // b's watcher is full: 3 waits
		tp.Shutdown()
		r := <-done
		assert.Equal(t, 2, r.n)
		assert.ErrorIs(t, r.err, fanout.ErrStopped)
		assert.Equal(t, []int{1}, fanouttest.Drain(a))
		assert.Equal(t, []int{2}, fanouttest.Drain(b))
		assert.Equal(t, uint64(2), tp.Stats().Published)
	})
}

// PublishContext with a ctx already done publishes nothing and returns
// ctx.Err(), whether the topic has watchers or not, as ActionContext does
// on a broadcaster with or without watchers; after Shutdown it returns
// ErrStopped. The same for a TopicPublisher.
func TestTopicsPublishContextWithADoneContextPublishesNothing(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tp := fanout.NewTopics[string, int]()
	w, err := tp.Watch("watched")
	require.NoError(t, err)
	for _, topic := range []string{"watched", "nobody"} {
		assert.ErrorIs(t, tp.PublishContext(done, topic, 1), context.Canceled, topic)
		assert.ErrorIs(t, tp.Publisher(topic).PublishContext(done, 1), context.Canceled, topic)
	}
	s := tp.Stats()
	assert.Zero(t, s.Published)
	assert.Zero(t, s.Unheard)
	assert.Zero(t, w.Stats().Queued)
	tp.Shutdown()
	assert.ErrorIs(t, tp.PublishContext(done, "watched", 1), fanout.ErrStopped)
	assert.ErrorIs(t, tp.Publisher("nobody").PublishContext(done, 1), fanout.ErrStopped)
}

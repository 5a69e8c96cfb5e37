package fanout_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

func TestTopicsDeliverEachValueToItsTopicsWatchersOnly(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	a, err := tp.Watch("a")
	require.NoError(t, err)
	b, err := tp.Watch("b")
	require.NoError(t, err)
	require.NoError(t, tp.Publish("a", 1))
	require.NoError(t, tp.Publish("b", 2))
	require.NoError(t, tp.Publish("a", 3))
	tp.Shutdown()
	assert.Equal(t, []int{1, 3}, fanouttest.Drain(a))
	assert.Equal(t, []int{2}, fanouttest.Drain(b))
	assert.ErrorIs(t, tp.Publish("a", 4), fanout.ErrStopped)
	_, err = tp.Watch("a")
	assert.ErrorIs(t, err, fanout.ErrStopped)
}

func TestTopicWithoutWatchersCostsNothingAndGoesAway(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	defer tp.Shutdown()
	require.NoError(t, tp.Publish("nobody", 1))
	s := tp.Stats()
	assert.Equal(t, 0, s.Topics, "publishing creates no topic")
	assert.Equal(t, uint64(1), s.Unheard)
	w, err := tp.Watch("a")
	require.NoError(t, err)
	assert.Equal(t, 1, tp.Stats().Topics)
	w.Stop()
	s = tp.Stats()
	assert.Equal(t, 0, s.Topics, "the last watcher's Stop retires the topic")
	assert.Equal(t, uint64(1), s.Retired)
	w2, err := tp.Watch("a")
	require.NoError(t, err)
	require.NoError(t, tp.Publish("a", 2))
	assert.Equal(t, []int{2}, fanouttest.Collect(t, w2, 1), "a new topic of the same name works")
}

func TestTopicsKeepAHistoryPerTopic(t *testing.T) {
	tp := fanout.NewTopics[string, int](fanout.WithHistory(2))
	defer tp.Shutdown()
	for _, v := range []int{1, 2, 3} {
		require.NoError(t, tp.Publish("a", v))
	}
	require.NoError(t, tp.Publish("b", 10))
	w, err := tp.Watch("a", fanout.WithReplay(2))
	require.NoError(t, err)
	assert.Equal(t, []int{2, 3}, fanouttest.Collect(t, w, 2))
	st, ok := tp.Topic("a")
	require.True(t, ok)
	assert.Equal(t, uint64(3), st.Accepted)
}

// A watcher of several topics receives exactly their values, each topic's
// in the order its own watchers see.
func TestWatchTopicsReceivesEachTopicInItsOrder(t *testing.T) {
	const each = 2000
	tp := fanout.NewTopics[int, int](fanout.WithQueueLength(8))
	solo := make([]*fanout.Watcher[int], 3)
	for i := range solo {
		var err error
		solo[i], err = tp.Watch(i)
		require.NoError(t, err)
	}
	g, err := tp.WatchTopics([]int{0, 2})
	require.NoError(t, err)
	got := map[int][]int{}
	var rg sync.WaitGroup
	rg.Go(func() {
		for m := range g.All(context.Background()) {
			got[m.Topic] = append(got[m.Topic], m.Value)
		}
	})
	soloGot := make([][]int, 3)
	for i, w := range solo {
		rg.Go(func() { soloGot[i], _ = collectAll(w) })
	}
	var pg sync.WaitGroup
	for p := range 4 {
		pg.Go(func() {
			for i := range each {
				assert.NoError(t, tp.Publish((p+i)%3, p*each+i))
			}
		})
	}
	pg.Wait()
	tp.Shutdown()
	rg.Wait()
	assert.ErrorIs(t, g.Err(), fanout.ErrStopped)
	assert.Equal(t, soloGot[0], got[0])
	assert.Equal(t, soloGot[2], got[2])
	assert.Empty(t, got[1])
}

func TestWatchAllIncludesTopicsThatAppearLater(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	_, err := tp.Watch("old")
	require.NoError(t, err)
	all, err := tp.WatchAll()
	require.NoError(t, err)
	require.NoError(t, tp.Publish("old", 1))
	require.NoError(t, tp.Publish("new", 2)) // no watcher of its own: made for all
	tp.Shutdown()
	var got []fanout.Message[string, int]
	for m := range all.All(context.Background()) {
		got = append(got, m)
	}
	assert.ElementsMatch(t, []fanout.Message[string, int]{{Topic: "old", Value: 1}, {Topic: "new", Value: 2}}, got)
	assert.Equal(t, uint64(0), tp.Stats().Unheard)
}

// A reader of several topics parks once and is woken by any of them, a
// topic that WatchAll takes on while it is parked included.
func TestTopicsWatcherWakesForAnyOfItsTopics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp := fanout.NewTopics[string, int]()
		defer tp.Shutdown()
		g, err := tp.WatchTopics([]string{"a", "b"})
		require.NoError(t, err)
		all, err := tp.WatchAll()
		require.NoError(t, err)
		for _, topic := range []string{"b", "a"} {
			got := make(chan fanout.Message[string, int], 1)
			go func() { m, _ := g.Next(context.Background()); got <- m }()
			synctest.Wait() // parked
			require.NoError(t, tp.Publish(topic, 7))
			assert.Equal(t, fanout.Message[string, int]{Topic: topic, Value: 7}, <-got)
		}
		_, _ = all.Next(context.Background())
		_, _ = all.Next(context.Background())
		got := make(chan fanout.Message[string, int], 1)
		go func() { m, _ := all.Next(context.Background()); got <- m }()
		synctest.Wait()
		require.NoError(t, tp.Publish("later", 9))
		assert.Equal(t, fanout.Message[string, int]{Topic: "later", Value: 9}, <-got)
	})
}

// A lossless watcher of several topics makes their publishers wait, as a
// watcher of one does.
func TestTopicsWatcherIsLosslessByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp := fanout.NewTopics[string, int](fanout.WithQueueLength(1))
		defer tp.Shutdown()
		g, err := tp.WatchTopics([]string{"a"})
		require.NoError(t, err)
		require.NoError(t, tp.Publish("a", 1))
		done := make(chan error, 1)
		go func() { done <- tp.Publish("a", 2) }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("the publisher did not wait for the full watcher")
		default:
		}
		ok, err := tp.PublishOrDrop("a", 3)
		assert.False(t, ok)
		assert.NoError(t, err)
		m, err := g.Next(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 1, m.Value)
		require.NoError(t, <-done)
		m, err = g.Next(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 2, m.Value)
	})
}

// One of its topics' watchers evicted evicts the whole watcher: no topic
// goes silently missing.
func TestTopicsWatcherIsEvictedWhole(t *testing.T) {
	tp := fanout.NewTopics[string, int](fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(fanout.EvictIfChannelFull))
	defer tp.Shutdown()
	g, err := tp.WatchTopics([]string{"a", "b"})
	require.NoError(t, err)
	require.NoError(t, tp.Publish("a", 1))
	require.NoError(t, tp.Publish("a", 2)) // evicts a's watcher
	var got []int
	for m := range g.All(context.Background()) {
		got = append(got, m.Value)
	}
	assert.Equal(t, []int{1}, got)
	assert.ErrorIs(t, g.Err(), fanout.ErrEvicted)
	assert.Equal(t, 0, tp.Stats().Topics, "both topics retired")
}

func TestTopicsBadInput(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	defer tp.Shutdown()
	_, err := tp.WatchTopics([]string{"a"}, fanout.WithQueueLength(0))
	assert.ErrorContains(t, err, "queue")
	_, err = tp.WatchAll(fanout.WithFilter(func(int) bool { return true }))
	assert.ErrorContains(t, err, "filter")
	_, err = tp.WatchAll(fanout.WithHistory(1)) // refused now, not by the topic a publish creates for it
	assert.ErrorContains(t, err, "applies to New")
	assert.NoError(t, tp.Publish("x", 1))
	bad := fanout.NewTopics[string, int](fanout.WithQueueLength(-1))
	assert.ErrorContains(t, bad.Publish("a", 1), "invalid queue length")
	var nilCtx context.Context
	assert.ErrorContains(t, tp.PublishContext(nilCtx, "a", 1), "nil context")
	g, err := tp.WatchTopics(nil)
	require.NoError(t, err)
	g.Stop()
	_, err = g.Next(context.Background())
	assert.ErrorIs(t, err, fanout.ErrWatcherStopped, "a watcher of no topic, stopped")
}

func TestTopicsStatsCountEachValueOfABatchAndNoRefusedValue(t *testing.T) {
	tp := fanout.NewTopics[string, int](fanout.WithQueueLength(1))
	defer tp.Shutdown()
	n, err := tp.PublishBatch("nobody", []int{1, 2, 3})
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	_, err = tp.Watch("a") // waits when full
	require.NoError(t, err)
	n, err = tp.PublishBatch("a", []int{4})
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	ok, err := tp.PublishOrDrop("a", 5)
	require.NoError(t, err)
	assert.False(t, ok, "a's watcher is full")
	s := tp.Stats()
	assert.Equal(t, uint64(4), s.Published, "three unheard and one accepted; the refused one is not published")
	assert.Equal(t, uint64(3), s.Unheard)
}

func TestTopicsAcceptNothingAfterShutdown(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	tp.Shutdown()
	n, err := tp.PublishBatch("a", []int{1, 2})
	assert.ErrorIs(t, err, fanout.ErrStopped)
	assert.Equal(t, 0, n)
	ok, err := tp.PublishOrDrop("a", 3)
	assert.ErrorIs(t, err, fanout.ErrStopped)
	assert.False(t, ok)
	assert.Equal(t, uint64(0), tp.Stats().Published)
}

func TestTopicRetiresWhenAPublishEvictsItsLastWatcher(t *testing.T) {
	tp := fanout.NewTopics[string, int](fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(fanout.EvictIfChannelFull))
	defer tp.Shutdown()
	w, err := tp.Watch("a")
	require.NoError(t, err)
	require.NoError(t, tp.Publish("a", 1))
	require.NoError(t, tp.Publish("a", 2)) // evicts w
	_, exists := tp.Topic("a")
	assert.False(t, exists, "a topic with no watcher does not exist")
	assert.Equal(t, fanout.TopicsStats{Published: 2, Retired: 1}, tp.Stats())
	assert.Equal(t, []int{1}, fanouttest.Drain(w))
	assert.ErrorIs(t, w.Err(), fanout.ErrEvicted)
}

func TestTopicsStayAsTheyWereAfterShutdown(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	g, err := tp.WatchTopics([]string{"a", "b"})
	require.NoError(t, err)
	tp.Shutdown()
	g.Stop()
	assert.Equal(t, fanout.TopicsStats{Topics: 2}, tp.Stats(), "Stop after Shutdown retires nothing")
	_, err = g.Next(context.Background())
	assert.ErrorIs(t, err, fanout.ErrStopped, "it was open when the family shut down")
}

func TestWatchAllOfNoTopicClosesWithWhatStoppedItFirst(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	stopped, err := tp.WatchAll()
	require.NoError(t, err)
	open, err := tp.WatchAll()
	require.NoError(t, err)
	stopped.Stop()
	tp.Shutdown()
	open.Stop()
	_, err = stopped.Next(context.Background())
	assert.ErrorIs(t, err, fanout.ErrWatcherStopped)
	_, err = open.Next(context.Background())
	assert.ErrorIs(t, err, fanout.ErrStopped)
}

func TestEvictedWatchAllNoLongerCreatesTopics(t *testing.T) {
	tp := fanout.NewTopics[string, int](fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(fanout.EvictIfChannelFull))
	defer tp.Shutdown()
	g, err := tp.WatchAll()
	require.NoError(t, err)
	require.NoError(t, tp.Publish("a", 1))
	require.NoError(t, tp.Publish("a", 2)) // evicts g's watcher of a
	for range g.All(context.Background()) {
	}
	require.ErrorIs(t, g.Err(), fanout.ErrEvicted)
	require.NoError(t, tp.Publish("b", 3))
	s := tp.Stats()
	assert.Equal(t, 0, s.Topics)
	assert.Equal(t, uint64(1), s.Unheard, "nobody watches b: no topic is created for it")
}

// The same before the evicted WatchAll's reader has looked (the reader of
// an evicted watcher is often one that does not): a publish to a topic
// nobody watches is unheard, and no topic is made and retired for it.
func TestEvictedWatchAllUnreadCreatesNoTopics(t *testing.T) {
	tp := fanout.NewTopics[string, int](fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(fanout.EvictIfChannelFull))
	defer tp.Shutdown()
	g, err := tp.WatchAll()
	require.NoError(t, err)
	defer g.Stop()
	for v := range 3 {
		require.NoError(t, tp.Publish("a", v)) // evicts g's watcher of a
	}
	before := tp.Stats()
	for v := range 100 {
		require.NoError(t, tp.Publish("nobody", v))
	}
	after := tp.Stats()
	assert.EqualValues(t, 100, after.Unheard-before.Unheard)
	assert.Equal(t, before.Retired, after.Retired, "no topic retired: none was made")
	assert.Zero(t, after.Topics)
}

// A WatchAll whose watcher of a topic was evicted takes no topic created
// after that, even before its reader has seen the eviction: the topic
// retired with the evicted watcher, and its next value, accepted after the
// eviction, re-created it and reached the evicted group, after a gap.
func TestEvictedWatchAllGetsNoValueAcceptedAfterItsEviction(t *testing.T) {
	tp := fanout.NewTopics[string, int](fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(fanout.EvictIfChannelFull))
	defer tp.Shutdown()
	g, err := tp.WatchAll()
	require.NoError(t, err)
	require.NoError(t, tp.Publish("a", 1))
	require.NoError(t, tp.Publish("a", 2)) // evicts g's watcher of a, which retires a
	require.NoError(t, tp.Publish("a", 3)) // re-creates a
	require.NoError(t, tp.Publish("b", 4))
	var got []int
	for m := range g.All(context.Background()) {
		got = append(got, m.Value)
	}
	assert.Equal(t, []int{1}, got)
	assert.ErrorIs(t, g.Err(), fanout.ErrEvicted)
}

// Err says why a TopicsWatcher closed only once it is drained, as its doc
// says: after Stop, nil while values stay to be read.
func TestTopicsWatcherErrOnlyOnceDrained(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	defer tp.Shutdown()
	g, err := tp.WatchTopics([]string{"a", "b"})
	require.NoError(t, err)
	require.NoError(t, tp.Publish("a", 1))
	require.NoError(t, tp.Publish("b", 2))
	g.Stop()
	assert.NoError(t, g.Err(), "2 values queued")
	n := 0
	for range g.All(context.Background()) {
		n++
	}
	assert.Equal(t, 2, n)
	assert.ErrorIs(t, g.Err(), fanout.ErrWatcherStopped)
}

// As Watcher.Recv: a read loop with an empty buffer must learn that the
// watcher closed, or it spins for ever.
func TestTopicsWatcherRecvWithAnEmptyBufferReturnsTheCloseReason(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	defer tp.Shutdown()
	g, err := tp.WatchTopics([]string{"a", "b"})
	require.NoError(t, err)
	require.NoError(t, tp.Publish("a", 1))
	g.Stop()
	n, err := g.Recv(context.Background(), nil)
	assert.Equal(t, 0, n)
	assert.NoError(t, err, "not drained yet")
	m, err := g.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, fanout.Message[string, int]{Topic: "a", Value: 1}, m)
	n, err = g.Recv(context.Background(), nil)
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, fanout.ErrWatcherStopped)

	all, err := tp.WatchAll() // no topic yet
	require.NoError(t, err)
	n, err = all.Recv(context.Background(), nil)
	assert.Equal(t, 0, n)
	assert.NoError(t, err)
	tp.Shutdown()
	n, err = all.Recv(context.Background(), nil)
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, fanout.ErrStopped)
}

// Like every watch method, WatchTopics returns ErrStopped after Shutdown,
// even for no topic at all.
func TestWatchTopicsOfNoTopicAfterShutdownIsErrStopped(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	tp.Shutdown()
	g, err := tp.WatchTopics(nil)
	assert.Nil(t, g)
	assert.ErrorIs(t, err, fanout.ErrStopped)
}

// A topic listed twice must not deliver each of its values twice (and
// Stats, keyed by topic, could not tell the two watchers apart).
func TestWatchTopicsListingATopicTwiceReceivesEachValueOnce(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	defer tp.Shutdown()
	g, err := tp.WatchTopics([]string{"a", "b", "a"})
	require.NoError(t, err)
	require.NoError(t, tp.Publish("a", 1))
	require.NoError(t, tp.Publish("b", 2))
	require.NoError(t, tp.Publish("a", 3))
	g.Stop()
	var got []fanout.Message[string, int]
	for m := range g.All(context.Background()) {
		got = append(got, m)
	}
	assert.ElementsMatch(t, []fanout.Message[string, int]{{"a", 1}, {"b", 2}, {"a", 3}}, got)
	st := g.Stats()
	assert.Equal(t, uint64(2), st["a"].Delivered)
	assert.Equal(t, uint64(1), st["b"].Delivered)
	assert.Equal(t, 0, tp.Stats().Topics, "both topics retired with their only watcher")
}

// A range over a TopicsWatcher's All with a nil context ends at once, takes
// nothing, and Err names the mistake, as with a Watcher.
func TestTopicsAllWithANilContextEndsAtOnceAndErrNamesIt(t *testing.T) {
	var nilCtx context.Context
	tp := fanout.NewTopics[string, int]()
	defer tp.Shutdown()
	g, err := tp.WatchTopics([]string{"a"})
	require.NoError(t, err)
	require.NoError(t, tp.Publish("a", 1))
	n := 0
	for range g.All(nilCtx) {
		n++
	}
	assert.Zero(t, n)
	assert.ErrorContains(t, g.Err(), "nil context")
	m, err := g.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, fanout.Message[string, int]{Topic: "a", Value: 1}, m, "still queued")
}

// A reader parked on a watcher that has no topic yet (WatchAll before any
// topic, WatchTopics of none) learns of Shutdown: no broadcaster of its own
// wakes it.
func TestTopicsWatcherOfNoTopicParkedInRecvWakesOnShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp := fanout.NewTopics[string, int]()
		all, err := tp.WatchAll()
		require.NoError(t, err)
		none, err := tp.WatchTopics(nil)
		require.NoError(t, err)
		errs := make(chan error, 2)
		for _, g := range []*fanout.TopicsWatcher[string, int]{all, none} {
			go func() { _, err := g.Next(context.Background()); errs <- err }()
		}
		synctest.Wait() // both parked
		tp.Shutdown()
		assert.ErrorIs(t, <-errs, fanout.ErrStopped)
		assert.ErrorIs(t, <-errs, fanout.ErrStopped)
	})
}

// Watch and WatchTopics register a watcher of a topic that publishers are
// publishing to: they finish setting it up before any publisher can see
// it, so the race detector (make test runs it) finds nothing, with
// watchers whose publishers look at them in two ways: hand-off channel
// watchers (the channel pass) and full ones with a behaviour of the
// user's (its FullState names the watcher).
func TestTopicsWatchIsSafeBesidePublishers(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	defer tp.Shutdown()
	first, err := tp.Watch("a", fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
	require.NoError(t, err) // the topic exists as the publisher starts
	defer first.Stop()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				_, _ = tp.PublishOrDrop("a", 1)
			}
		}
	}()
	publishedPast := func(n uint64) {
		for tp.Stats().Published < n {
			runtime.Gosched()
		}
	}
	for i := range 20 {
		publishedPast(uint64(100 * i))
		w, err := tp.Watch("a", fanout.WithQueueLength(0))
		require.NoError(t, err)
		g, err := tp.WatchTopics([]string{"a"}, fanout.WithQueueLength(1), fanout.WithFullChannelBehavior(verdictBehavior(fanout.VerdictDropFull)))
		require.NoError(t, err)
		publishedPast(uint64(100*i + 50)) // the publisher has looked at both
		w.Stop()
		g.Stop()
	}
	close(stop)
	<-done
	assert.Zero(t, first.Stats().DroppedPanic)
}

// A Watch that its options make fail leaves the family as it was: it
// neither makes the topic nor counts a retirement.
func TestTopicsWatchWithAnInvalidOptionMakesNoTopic(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	defer tp.Shutdown()
	for _, opt := range []fanout.Option{fanout.WithQueueLength(-1), fanout.WithFilter(func(string) bool { return true })} {
		_, err := tp.Watch("x", opt)
		require.Error(t, err)
	}
	s := tp.Stats()
	assert.Zero(t, s.Topics)
	assert.Zero(t, s.Retired)
}

// Watchers of one topic come and go, one at a time, while two publishers
// publish to it through their TopicPublishers: every value published is
// received by the watcher registered when it was accepted, dropped by it,
// or unheard (the topic had no watcher), whatever the watcher's strategy
// and read path.
func TestTopicsAccountForEveryValueWhileWatchersComeAndGo(t *testing.T) {
	for _, c := range []struct {
		name string
		q    int
		beh  fanout.FullChannelBehavior
	}{
		{"deep", 1 << 16, fanout.DropIfChannelFull},
		{"drop", 4, fanout.DropIfChannelFull},
		{"evict", 4, fanout.EvictIfChannelFull},
		{"drop-oldest", 4, fanout.DropOldestIfChannelFull},
		{"hand-off", 0, fanout.DropIfChannelFull},
	} {
		for _, useChan := range []bool{false, true} {
			t.Run(c.name+map[bool]string{false: "/Recv", true: "/ResultChan"}[useChan], func(t *testing.T) {
				tp := fanout.NewTopics[string, int](fanout.WithQueueLength(c.q), fanout.WithFullChannelBehavior(c.beh))
				defer tp.Shutdown()
				var publishers sync.WaitGroup
				for range 2 {
					publishers.Go(func() { publishToA(t, tp.Publisher("a"), 20000) })
				}
				var published atomic.Bool
				go func() {
					publishers.Wait()
					published.Store(true)
				}()
				var received, dropped uint64
				for !published.Load() {
					n, d := watchAWhile(t, tp, useChan)
					received, dropped = received+n, dropped+d
				}
				s := tp.Stats()
				assert.Zero(t, s.Topics, "%+v", s)
				assert.Equal(t, s.Published, received+dropped+s.Unheard, "%+v, received %d, dropped %d", s, received, dropped)
			})
		}
	}
}

// publishToA publishes n times through p, every seventh time a batch of two.
func publishToA(t *testing.T, p *fanout.TopicPublisher[string, int], n int) {
	for i := range n {
		var err error
		if i%7 == 0 {
			_, err = p.PublishBatch([]int{i, i})
		} else {
			err = p.Publish(i)
		}
		if err != nil {
			t.Error(err)
			return
		}
	}
}

// watchAWhile registers a watcher of topic "a", lets the publishers run a
// little, stops it and reads what it holds: it returns how many values it
// received and dropped.
func watchAWhile(t *testing.T, tp *fanout.Topics[string, int], useChan bool) (received, dropped uint64) {
	w, err := tp.Watch("a")
	require.NoError(t, err)
	var ch <-chan int
	if useChan {
		ch = w.ResultChan()
	}
	for range 3 {
		runtime.Gosched()
	}
	w.Stop()
	if useChan {
		for range ch {
			received++
		}
	} else {
		received = uint64(len(fanouttest.Drain(w)))
	}
	return received, w.Stats().Dropped
}

package fanout_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
)

// named is a user's behaviour with a String; unnamed has none; panicky's
// String panics.
type (
	named    struct{}
	unnamed  struct{}
	panicky  struct{}
	waitUser struct{}
)

func (named) OnFull(fanout.FullState) fanout.Decision {
	return fanout.Decision{Verdict: fanout.VerdictDropFull}
}
func (named) String() string { return "named" }
func (unnamed) OnFull(fanout.FullState) fanout.Decision {
	return fanout.Decision{Verdict: fanout.VerdictDropFull}
}
func (panicky) OnFull(fanout.FullState) fanout.Decision {
	return fanout.Decision{Verdict: fanout.VerdictDropFull}
}
func (panicky) String() string { panic("no name") }
func (waitUser) OnFull(fanout.FullState) fanout.Decision {
	return fanout.Decision{Verdict: fanout.VerdictWait}
}

func TestSnapshotListsEveryWatcherWithItsBehaviorReadPathAndCounters(t *testing.T) {
	b := fanout.New[int](fanout.WithQueueLength(2))
	defer b.Shutdown()
	behaviors := []fanout.FullChannelBehavior{fanout.WaitIfChannelFull, fanout.DropIfChannelFull,
		fanout.DropOldestIfChannelFull, fanout.EvictIfChannelFull, fanout.WaitTimeoutIfChannelFull(time.Second),
		named{}, unnamed{}, panicky{}}
	want := []string{"WaitIfChannelFull", "DropIfChannelFull", "DropOldestIfChannelFull", "EvictIfChannelFull",
		"WaitTimeoutIfChannelFull(1s)", "named", "fanout_test.unnamed", "fanout_test.panicky"}
	var ws []*fanout.Watcher[int]
	for i, bh := range behaviors {
		w, err := b.Watch(fanout.WithFullChannelBehavior(bh), fanout.WithName(want[i]))
		require.NoError(t, err)
		ws = append(ws, w)
	}
	ws[1].ResultChan() // a channel watcher: listed after the ring readers
	require.NoError(t, b.Action(1))
	_, err := ws[0].Next(context.Background())
	require.NoError(t, err)

	s := b.Snapshot()
	assert.Equal(t, b.Stats(), s.Stats)
	require.Len(t, s.Watchers, len(ws))
	order := append(slices.Clone(ws[:1]), ws[2:]...)
	order = append(order, ws[1])
	for i, w := range order {
		got := s.Watchers[i]
		assert.Equal(t, w.Stats(), got.WatcherStats, w.Name())
		assert.Equal(t, w == ws[1], got.Channel, w.Name())
		k := slices.Index(ws, w)
		assert.Equal(t, want[k], got.Behavior)
	}
	assert.Equal(t, uint64(1), s.Watchers[0].Delivered)
	assert.Empty(t, s.Waiting)
	assert.Equal(t, 0, s.TurnQueue)
}

func TestSnapshotCountsTheReadersParkedOnAWatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int]()
		defer b.Shutdown()
		w, err := b.Watch()
		require.NoError(t, err)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { _, _ = w.Next(context.Background()) })
		}
		synctest.Wait()
		assert.Equal(t, 2, b.Snapshot().Watchers[0].Readers)
		publish(t, b, 1, 2)
		wg.Wait()
		assert.Equal(t, 0, b.Snapshot().Watchers[0].Readers)
	})
}

// stalled returns a broadcaster with a watcher of queue length 2 that
// nobody reads, full, and a publisher waiting for it with the value 3
// (sequence 2); done is closed when that publish returns.
func stalled(t *testing.T, w *fanout.Watcher[int], b *fanout.Broadcaster[int]) (done chan error) {
	t.Helper()
	publish(t, b, 1, 2)
	done = make(chan error, 1)
	go func() { done <- b.Action(3) }()
	synctest.Wait()
	return done
}

func TestSnapshotShowsWhoBlocksAWaitingPublisherAndSinceWhen(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := fanout.New[int](fanout.WithQueueLength(2))
				defer b.Shutdown()
				fast, err := b.Watch(fanout.WithName("fast"), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
				require.NoError(t, err)
				slow, err := b.Watch(fanout.WithName("slow"))
				require.NoError(t, err)
				r.prepare(slow)
				done := stalled(t, slow, b)
				time.Sleep(3 * time.Second) // before anyone looks: not counted
				s := b.Snapshot()
				require.Len(t, s.Waiting, 1)
				want := fanout.Wait{WaitReport: fanout.WaitReport{WatcherID: slow.ID(), WatcherName: "slow",
					QueueLength: 2, Queued: 2}, Seq: 2, Timed: r.name == "chan"}
				if want.Timed {
					want.Waited = 3 * time.Second // a blocked channel send times its wait
				}
				assert.Equal(t, want, s.Waiting[0])

				time.Sleep(5 * time.Second)
				s = b.Snapshot()
				require.Len(t, s.Waiting, 1)
				assert.Equal(t, want.Waited+5*time.Second, s.Waiting[0].Waited, "counted from the first look, or the call's wait")
				assert.Equal(t, uint64(2), s.Stats.Accepted, "the value waits before it is accepted")

				if r.name == "chan" {
					<-slow.ResultChan()
				} else {
					_, err = slow.Next(context.Background())
					require.NoError(t, err)
				}
				require.NoError(t, <-done)
				assert.Empty(t, b.Snapshot().Waiting, "no wait once it made room")
				assert.Len(t, b.Snapshot().Watchers, 2, "a watcher that does not wait is listed, not waited for")
				fast.Stop()
			})
		})
	}
}

func TestSnapshotTimesTheWaitFromTheCallWithWaitReports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reports []fanout.WaitReport
		var mu sync.Mutex
		b := fanout.New[int](fanout.WithQueueLength(2), fanout.WithWaitReport(time.Second, func(r fanout.WaitReport) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, r)
		}))
		defer b.Shutdown()
		slow, err := b.Watch(fanout.WithName("slow"))
		require.NoError(t, err)
		done := stalled(t, slow, b)
		time.Sleep(4 * time.Second)
		s := b.Snapshot()
		require.Len(t, s.Waiting, 1)
		assert.True(t, s.Waiting[0].Timed)
		assert.Equal(t, 4*time.Second, s.Waiting[0].Waited)
		mu.Lock()
		require.Len(t, reports, 1)
		assert.Equal(t, reports[0].WatcherID, s.Waiting[0].WatcherID, "the snapshot names the watcher the report named")
		mu.Unlock()
		_, err = slow.Next(context.Background())
		require.NoError(t, err)
		require.NoError(t, <-done)
		assert.Empty(t, b.Snapshot().Waiting)
	})
}

func TestSnapshotShowsAWaitForABoundedOrUserBehavior(t *testing.T) {
	for _, tc := range []struct {
		name     string
		behavior fanout.FullChannelBehavior
		timed    bool
	}{
		{"timeout", fanout.WaitTimeoutIfChannelFull(time.Minute), true},
		{"user", waitUser{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := fanout.New[int](fanout.WithQueueLength(2))
				defer b.Shutdown()
				slow, err := b.Watch(fanout.WithFullChannelBehavior(tc.behavior), fanout.WithName(tc.name))
				require.NoError(t, err)
				done := stalled(t, slow, b)
				time.Sleep(10 * time.Second)
				s := b.Snapshot()
				require.Len(t, s.Waiting, 1)
				assert.Equal(t, slow.ID(), s.Waiting[0].WatcherID)
				assert.Equal(t, tc.timed, s.Waiting[0].Timed)
				assert.Equal(t, 10*time.Second, s.Waiting[0].Waited)
				slow.Stop() // releases the publisher: the watcher left before the value
				require.NoError(t, <-done)
				assert.Empty(t, b.Snapshot().Waiting)
			})
		})
	}
}

func TestSnapshotKeepsWhenItFirstSawAWaitAcrossTheCallsWakeUps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(2))
		defer b.Shutdown()
		a, err := b.Watch(fanout.WithName("a"))
		require.NoError(t, err)
		c, err := b.Watch(fanout.WithName("c"))
		require.NoError(t, err)
		done := stalled(t, a, b)
		s := b.Snapshot()
		require.Len(t, s.Waiting, 2, "one call, two watchers it waits for")
		assert.Equal(t, []uint64{a.ID(), c.ID()}, []uint64{s.Waiting[0].WatcherID, s.Waiting[1].WatcherID})
		time.Sleep(2 * time.Second)
		a.Stop() // wakes the publisher, which waits again for c
		synctest.Wait()
		time.Sleep(time.Second)
		s = b.Snapshot()
		require.Len(t, s.Waiting, 1)
		assert.Equal(t, c.ID(), s.Waiting[0].WatcherID)
		assert.Equal(t, 3*time.Second, s.Waiting[0].Waited, "counted from the first look, not from the wake-up")
		c.Stop()
		require.NoError(t, <-done)
	})
}

func TestSnapshotListsEveryPublisherWaitingForTheSameValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(2))
		defer b.Shutdown()
		slow, err := b.Watch(fanout.WithName("slow"))
		require.NoError(t, err)
		done := stalled(t, slow, b)
		second := make(chan error, 1)
		go func() { second <- b.Action(4) }()
		synctest.Wait()
		s := b.Snapshot()
		assert.Equal(t, 2, s.Publishers)
		require.Len(t, s.Waiting, 2, "one Wait per call")
		for _, w := range s.Waiting {
			assert.Equal(t, slow.ID(), w.WatcherID)
			assert.Equal(t, uint64(2), w.Seq, "both wait to publish the value of sequence 2")
		}
		slow.Stop()
		require.NoError(t, <-done)
		require.NoError(t, <-second)
	})
}

func TestSnapshotCountsThePublishersQueuedForTheTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(2))
		defer b.Shutdown()
		slow, err := b.Watch(fanout.WithName("slow"))
		require.NoError(t, err)
		slow.ResultChan() // a blocked channel send holds the turn
		done := stalled(t, slow, b)
		queued := make(chan error, 1)
		go func() { queued <- b.Action(4) }()
		synctest.Wait()
		s := b.Snapshot()
		assert.Equal(t, 1, s.TurnQueue)
		require.Len(t, s.Waiting, 1)
		assert.Equal(t, slow.ID(), s.Waiting[0].WatcherID)
		slow.Stop()
		require.NoError(t, <-done)
		require.NoError(t, <-queued)
	})
}

func TestTopicsSnapshotHasEachTopicsWatchers(t *testing.T) {
	tp := fanout.NewTopics[string, int]()
	defer tp.Shutdown()
	a, err := tp.Watch("a", fanout.WithName("on a"))
	require.NoError(t, err)
	all, err := tp.WatchTopics([]string{"a", "b"}, fanout.WithName("on both"))
	require.NoError(t, err)
	require.NoError(t, tp.Publish("a", 1))
	require.NoError(t, tp.Publish("c", 1)) // nobody listens: no topic
	s := tp.Snapshot()
	assert.Equal(t, tp.Stats(), s.Stats)
	require.Len(t, s.Topics, 2)
	var names []string
	for _, w := range s.Topics["a"].Watchers {
		names = append(names, w.Name)
	}
	assert.ElementsMatch(t, []string{"on a", "on both"}, names)
	assert.Equal(t, uint64(1), s.Topics["a"].Stats.Accepted)
	assert.Len(t, s.Topics["b"].Watchers, 1)
	_, _ = a, all
}

func TestRecorderSnapshotPutsEachRunnerBesideItsWatcher(t *testing.T) {
	r, err := fanout.NewRecorder[int]()
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Shutdown(context.Background())) }()
	var mu sync.Mutex
	var got []int
	run, err := r.StartHandler(func(v int) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, v)
	})
	require.NoError(t, err)
	require.NoError(t, r.Record(7))
	require.NoError(t, r.Flush(context.Background()))
	s := r.Snapshot()
	assert.Equal(t, r.Stats(), s.Stats)
	require.Len(t, s.Runners, 1)
	assert.Equal(t, run.Snapshot(), s.Runners[0])
	assert.Equal(t, "handler", s.Runners[0].Name)
	assert.Equal(t, uint64(1), s.Runners[0].Stats.Written)
	require.Len(t, s.Broadcaster.Watchers, 1)
	assert.Equal(t, s.Runners[0].WatcherID, s.Broadcaster.Watchers[0].ID)
}

func TestBatchRunnerSnapshotNamesItsWatcher(t *testing.T) {
	b := fanout.New[int]()
	defer b.Shutdown()
	w, err := b.Watch()
	require.NoError(t, err)
	run, err := fanout.StartBatchSink(context.Background(), w, batchFunc(func([]int) error { return errors.New("down") }),
		fanout.BatchConfig[int]{Name: "archive", Retry: &fanout.RetryPolicy{MaxTries: 1}})
	require.NoError(t, err)
	require.NoError(t, b.Action(1))
	b.Shutdown()
	<-run.Done()
	s := run.Snapshot()
	assert.Equal(t, fanout.RunnerSnapshot{WatcherID: w.ID(), Name: "archive", Stats: run.Stats()}, s)
	assert.Equal(t, uint64(1), s.Stats.DroppedRetries)
}

// batchFunc is a BatchSink of one function.
type batchFunc func([]int) error

func (f batchFunc) Write(_ context.Context, vs []int) (int, error) {
	if err := f(vs); err != nil {
		return 0, err
	}
	return len(vs), nil
}

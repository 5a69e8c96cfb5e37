package fanout_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

func even(v int) bool { return v%2 == 0 }

func TestFilterDeliversOnlyTheValuesItKeeps(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := fanout.New[int](fanout.WithQueueLength(100))
			w, err := b.Watch(fanout.WithFilter(even))
			require.NoError(t, err)
			all, err := b.Watch()
			require.NoError(t, err)
			r.prepare(w)
			publish(t, b, seq(1, 10)...)
			b.Shutdown()
			assert.Equal(t, []int{2, 4, 6, 8, 10}, r.drain(w))
			assert.Equal(t, seq(1, 10), fanouttest.Drain(all), "other watchers are unaffected")
			s := w.Stats()
			assert.Equal(t, uint64(5), s.Filtered)
			assert.Equal(t, uint64(5), s.Delivered)
			assert.Zero(t, s.Dropped, "a filtered value is not a drop")
		})
	}
}

// A lossless watcher whose queue is full does not make the publisher wait
// for a value its filter rejects, only for one it keeps.
func TestFilterDoesNotMakeAPublisherWaitForARejectedValue(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := fanout.New[int](fanout.WithQueueLength(1))
				defer b.Shutdown()
				w, err := b.Watch(fanout.WithFilter(even))
				require.NoError(t, err)
				r.prepare(w)
				publish(t, b, 2)       // the queue is full
				publish(t, b, 1, 3, 5) // rejected: no wait
				done := make(chan error, 1)
				go func() { done <- b.Action(4) }()
				synctest.Wait()
				select {
				case <-done:
					t.Fatal("a value the filter keeps did not wait for the full queue")
				default:
				}
				v, err := w.Next(context.Background())
				require.NoError(t, err)
				assert.Equal(t, 2, v)
				require.NoError(t, <-done)
				v, err = w.Next(context.Background())
				require.NoError(t, err)
				assert.Equal(t, 4, v)
				assert.Equal(t, uint64(3), w.Stats().Filtered)
			})
		})
	}
}

// A lossy watcher with a filter counts as dropped only the values it would
// have kept.
func TestFilterDropsOnlyKeptValuesWhenFull(t *testing.T) {
	for _, beh := range []fanout.FullChannelBehavior{fanout.DropIfChannelFull, fanout.DropOldestIfChannelFull} {
		for _, r := range readers {
			t.Run(r.name, func(t *testing.T) {
				b := fanout.New[int](fanout.WithQueueLength(2), fanout.WithFullChannelBehavior(beh))
				w, err := b.Watch(fanout.WithFilter(even))
				require.NoError(t, err)
				r.prepare(w)
				publish(t, b, seq(1, 10)...) // keeps 2, 4, 6, 8, 10 in a queue of 2
				b.Shutdown()
				got := r.drain(w)
				s := w.Stats()
				assert.Len(t, got, 2)
				assert.Equal(t, uint64(3), s.Dropped, "%v: three kept values did not fit", beh)
				assert.Equal(t, uint64(5), s.Filtered)
			})
		}
	}
}

func TestFilterThatPanicsDropsThatValueOnly(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := fanout.New[int]()
			w, err := b.Watch(fanout.WithFilter(func(v int) bool {
				if v == 3 {
					panic("three")
				}
				return true
			}))
			require.NoError(t, err)
			r.prepare(w)
			publish(t, b, 1, 2, 3, 4)
			b.Shutdown()
			assert.Equal(t, []int{1, 2, 4}, r.drain(w))
			assert.Equal(t, uint64(1), w.Stats().DroppedPanic)
			assert.Equal(t, uint64(1), b.Stats().Panics)
		})
	}
}

func TestFilterOfAnotherTypeIsAnError(t *testing.T) {
	b := fanouttest.New[int](t)
	_, err := b.Watch(fanout.WithFilter(func(string) bool { return true }))
	assert.ErrorContains(t, err, "WithFilter")
	bad := fanout.New[int](fanout.WithFilter(func(string) bool { return true }))
	assert.ErrorContains(t, bad.Action(1), "WithFilter", "passed to New, every call reports it")
	_, err = b.Watch(fanout.WithFilter[int](nil))
	assert.NoError(t, err, "a nil filter is no filter")
}

// Moving a filtered watcher's queue into a channel filters what it moves.
func TestFilterAppliesToValuesQueuedBeforeResultChan(t *testing.T) {
	b := fanouttest.New[int](t)
	w := fanouttest.Watch(t, b, fanout.WithFilter(even))
	publish(t, b, seq(1, 6)...)
	ch := w.ResultChan()
	publish(t, b, 7, 8)
	got, _ := fanouttest.DrainChan(ch)
	assert.Equal(t, []int{2, 4, 6, 8}, got)
}

// With a filter, Taken follows what a lossless watcher took, across the
// values the filter rejected: those are taken at once.
func TestTakenPassesFilteredValues(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := fanouttest.New[int](t, fanout.WithQueueLength(4))
			w := fanouttest.Watch(t, b, fanout.WithFilter(even))
			r.prepare(w)
			publish(t, b, 1, 2, 3, 4, 5) // sequences 0 to 4; kept: 2 (1) and 4 (3)
			assert.Equal(t, uint64(1), b.Taken(), "1 was rejected; 2 is queued")
			take(t, w, r.name == "chan", 1) // 2
			assert.Equal(t, uint64(3), b.Taken(), "4 is queued")
			take(t, w, r.name == "chan", 1) // 4
			assert.Equal(t, uint64(5), b.Taken(), "nothing kept is left")
			publish(t, b, 7)
			assert.Equal(t, uint64(6), b.Taken())
		})
	}
}

// WithCommit and a filter: a commit covers the rejected values before it.
func TestCommitWithAFilterPassesRejectedValues(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := fanouttest.New[int](t)
			w := fanouttest.Watch(t, b, fanout.WithFilter(even), fanout.WithCommit())
			r.prepare(w)
			publish(t, b, 1, 3, 2, 5, 4)
			take(t, w, r.name == "chan", 1) // 2
			assert.Equal(t, uint64(0), b.Taken())
			w.Commit()
			assert.Equal(t, uint64(4), b.Taken(), "1, 3 and 5 were rejected, 2 committed; 4 is queued")
		})
	}
}

func TestFilterAppliesToThePrefixAndTheReplay(t *testing.T) {
	b := fanouttest.New[int](t, fanout.WithHistory(10))
	publish(t, b, seq(1, 6)...)
	w, err := b.WatchWithPrefix([]int{10, 11, 12}, fanout.WithReplay(4), fanout.WithFilter(even))
	require.NoError(t, err)
	publish(t, b, 7, 8)
	b.Shutdown()
	assert.Equal(t, []int{10, 12, 4, 6, 8}, fanouttest.Drain(w))
	assert.Equal(t, uint64(1+2+1), w.Stats().Filtered, "11; 3 and 5; 7")
}

// A filter runs with no lock held: it may call the broadcaster.
func TestFilterMayCallTheBroadcaster(t *testing.T) {
	b := fanouttest.New[int](t)
	var seen []uint64
	w := fanouttest.Watch(t, b, fanout.WithFilter(func(v int) bool {
		seen = append(seen, b.Stats().Accepted)
		return v > 1
	}))
	publish(t, b, 1, 2)
	assert.Equal(t, []uint64{0, 1}, seen)
	assert.Equal(t, []int{2}, fanouttest.Collect(t, w, 1))
}

// Concurrent publishers and filtered watchers: each watcher receives, in
// the broadcaster's order, exactly the values its filter keeps.
func TestFilteredWatchersKeepTheOrderUnderConcurrency(t *testing.T) {
	const producers, each = 4, 2000
	b := fanout.New[int](fanout.WithQueueLength(8))
	all, err := b.Watch()
	require.NoError(t, err)
	var filtered []*fanout.Watcher[int]
	for m := range 3 {
		w, err := b.Watch(fanout.WithFilter(func(v int) bool { return v%3 == m }))
		require.NoError(t, err)
		if m == 1 {
			w.ResultChan()
		}
		filtered = append(filtered, w)
	}
	got := make([][]int, len(filtered)+1)
	var rg sync.WaitGroup
	for i, w := range append([]*fanout.Watcher[int]{all}, filtered...) {
		rg.Go(func() { got[i], _ = collectAll(w) })
	}
	var pg sync.WaitGroup
	for p := range producers {
		pg.Go(func() {
			for i := range each {
				assert.NoError(t, b.Action(p*each+i))
			}
		})
	}
	pg.Wait()
	b.Shutdown()
	rg.Wait()
	require.Len(t, got[0], producers*each)
	for m := range 3 {
		var want []int
		for _, v := range got[0] {
			if v%3 == m {
				want = append(want, v)
			}
		}
		assert.Equal(t, want, got[m+1], "watcher of %d mod 3", m)
		assert.Equal(t, uint64(producers*each-len(want)), filtered[m].Stats().Filtered)
	}
}

package fanout_test

import (
	"context"
	"fmt"
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

// panicsOnThree is a filter that keeps every value but 3, on which it
// panics.
func panicsOnThree(v int) bool {
	if v == 3 {
		panic("three")
	}
	return true
}

func TestFilterThatPanicsDropsThatValueOnly(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := fanout.New[int]()
			w, err := b.Watch(fanout.WithFilter(panicsOnThree))
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

// A filter that panics while a closed watcher's queue is drained (by Recv,
// or by the first ResultChan, after Stop or Shutdown) costs that value, and
// the broadcaster's Dropped counts it as the watcher's does: Dropped counts
// the drops of watchers that are no longer registered too.
func TestFilterThatPanicsAfterTheCloseCountsInTheBroadcastersDropped(t *testing.T) {
	for _, close := range []string{"Stop", "Shutdown"} {
		for _, r := range []string{"chan", "pull", "ResultChan after the close"} {
			t.Run(close+"/"+r, func(t *testing.T) {
				b := fanout.New[int]()
				w, err := b.Watch(fanout.WithFilter(panicsOnThree))
				require.NoError(t, err)
				if r == "chan" {
					w.ResultChan()
				}
				publish(t, b, 1, 2, 3, 4)
				if close == "Stop" {
					w.Stop()
				} else {
					b.Shutdown()
				}
				var got []int
				if r == "pull" {
					got = fanouttest.Drain(w)
				} else {
					got, _ = fanouttest.DrainChan(w.ResultChan())
				}
				assert.Equal(t, []int{1, 2, 4}, got)
				assert.Equal(t, uint64(1), w.Stats().DroppedPanic)
				assert.Equal(t, uint64(1), b.Stats().Dropped, "the broadcaster's total")
				assert.Equal(t, uint64(1), b.Stats().Panics)
				b.Shutdown()
			})
		}
	}
}

// Panics among kept and rejected values: each value is counted once, as
// delivered, filtered or dropped, whatever the order of the three.
func TestFilterThatPanicsOftenCountsEveryValueOnce(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := fanout.New[int]()
			w, err := b.Watch(fanout.WithFilter(func(v int) bool {
				if v%5 == 0 {
					panic(v)
				}
				return v%2 == 0
			}))
			require.NoError(t, err)
			r.prepare(w)
			publish(t, b, seq(1, 20)...)
			b.Shutdown()
			assert.Equal(t, []int{2, 4, 6, 8, 12, 14, 16, 18}, r.drain(w))
			st := w.Stats()
			assert.Equal(t, uint64(4), st.DroppedPanic, "5, 10, 15 and 20")
			assert.Equal(t, uint64(8), st.Filtered, "the odd values but 5 and 15")
			assert.Equal(t, uint64(8), st.Delivered)
			assert.Equal(t, uint64(4), b.Stats().Panics, "the broadcaster counts each, several in one read")
		})
	}
}

// A publisher that sifts a full filtered queue nobody reads asks the filter
// itself: a panic there costs that value only, and the values after it are
// asked once each.
func TestFilterThatPanicsWhileAPublisherSiftsCostsThatValueOnly(t *testing.T) {
	b := fanout.New[int](fanout.WithQueueLength(4))
	w, err := b.Watch(fanout.WithFilter(func(v int) bool {
		if v == 3 {
			panic(v)
		}
		return v%2 == 0
	}))
	require.NoError(t, err)
	publish(t, b, seq(1, 7)...) // 5 and 7 find the queue full: it is sifted
	b.Shutdown()
	assert.Equal(t, []int{2, 4, 6}, fanouttest.Drain(w))
	st := w.Stats()
	assert.Equal(t, uint64(1), st.DroppedPanic)
	assert.Equal(t, uint64(3), st.Filtered, "1, 5 and 7")
	assert.Equal(t, uint64(3), st.Delivered)
}

// ResultChan called while a publisher sifts the watcher's full queue, by
// the filter that sift asks (on its own watcher) or by another goroutine,
// returns at once: the sift moves the watcher to that channel as it ends,
// and the channel gets every kept value in order, what the sift kept
// included, and what comes after; stopped before the sift ends, the
// channel gets what was kept before the Stop, then closes.
func TestResultChanDuringASiftReturnsAtOnceAndGetsEveryKeptValue(t *testing.T) {
	for _, caller := range []string{"the filter", "another goroutine", "another goroutine, then Stop"} {
		t.Run(caller, func(t *testing.T) {
			b := fanout.New[int](fanout.WithQueueLength(2))
			var w *fanout.Watcher[int]
			var asked atomic.Int32
			sifting, release := make(chan struct{}), make(chan struct{})
			w, err := b.Watch(fanout.WithFilter(func(v int) bool {
				if asked.Add(1) == 1 { // the first value asked: the sift's
					if caller == "the filter" {
						w.ResultChan()
					} else {
						close(sifting)
						<-release
					}
				}
				return v != 2
			}))
			require.NoError(t, err)
			publish(t, b, 1, 2) // the queue is full of values the filter has not seen
			done := make(chan error, 1)
			go func() { done <- b.Action(3) }() // sifts: the filter keeps 1, rejects 2
			var ch <-chan int
			want := []int{1, 3, 4}
			if caller != "the filter" {
				<-sifting
				ch = w.ResultChan() // does not wait for the sift
				if caller == "another goroutine, then Stop" {
					w.Stop()
					want = []int{1} // 3 is accepted after the Stop
				}
				close(release)
			}
			require.NoError(t, <-done)
			publish(t, b, 4)
			b.Shutdown()
			got, _ := fanouttest.DrainChan(w.ResultChan())
			assert.Equal(t, want, got)
			if ch != nil {
				assert.Equal(t, w.ResultChan(), ch, "the channel returned during the sift")
			}
			assert.Equal(t, uint64(1), w.Stats().Filtered)
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
// values the filter rejected: those are taken once the filter has seen
// them. A channel watcher's filter sees each value as it is published; a
// pull reader's when the reader reaches it, or when a publisher sifts its
// full queue.
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
			publish(t, b, 7)
			if r.name == "chan" {
				assert.Equal(t, uint64(6), b.Taken(), "5 and 7 were rejected as published")
				return
			}
			assert.Equal(t, uint64(4), b.Taken(), "the reader has not reached 5 and 7")
			passRejected(t, w)
			assert.Equal(t, uint64(6), b.Taken(), "a read passed 5 and 7")
		})
	}
}

// passRejected reads w, which holds only values its filter rejects, with
// a context that has ended: the read passes them and returns nothing.
func passRejected(t *testing.T, w *fanout.Watcher[int]) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n, err := w.Recv(ctx, make([]int, 4))
	assert.Zero(t, n)
	assert.ErrorIs(t, err, context.Canceled)
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
			if r.name == "chan" {
				assert.Equal(t, uint64(4), b.Taken(), "1, 3 and 5 were rejected, 2 committed; 4 is queued")
				return
			}
			assert.Equal(t, uint64(3), b.Taken(), "1 and 3 were rejected, 2 committed; the reader has not reached 5")
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

// A filter runs with no lock held, whether the reader, a publisher sifting
// a full queue, or the channel pass asks it: it may call the broadcaster.
func TestFilterMayCallTheBroadcaster(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := fanouttest.New[int](t, fanout.WithQueueLength(2))
			var seen atomic.Int64
			w := fanouttest.Watch(t, b, fanout.WithFilter(func(v int) bool {
				_ = b.Stats()
				seen.Add(1)
				return v%3 == 0
			}))
			r.prepare(w)
			publish(t, b, seq(1, 7)...) // a full queue is sifted: 1, 2 rejected
			b.Shutdown()
			assert.Equal(t, []int{3, 6}, r.drain(w))
			assert.Equal(t, int64(7), seen.Load(), "asked once about each value")
		})
	}
}

// A publisher that sifts a full filtered reader nobody reads puts the kept
// values aside (priv); the reader takes those first, in order, however
// many there are, and then the values still on the ring.
func TestFilteredReaderReadsItsSiftedValuesBeforeTheRing(t *testing.T) {
	b := fanouttest.New[int](t, fanout.WithQueueLength(100))
	w := fanouttest.Watch(t, b, fanout.WithFilter(even))
	publish(t, b, seq(1, 150)...) // 101 finds 1..100 unread: sifted, 50 kept aside
	var got []int
	buf := make([]int, 256)
	for len(got) < 75 {
		n, err := w.Recv(context.Background(), buf)
		require.NoError(t, err)
		got = append(got, buf[:n]...)
	}
	want := []int{}
	for v := 2; v <= 150; v += 2 {
		want = append(want, v)
	}
	assert.Equal(t, want, got)
	assert.Equal(t, uint64(75), w.Stats().Filtered)
}

// A publisher asks the filters of many channel watchers about a value
// together: one that panics costs that watcher the value and no other, and
// every filter is asked once about each value.
func TestFilterThatPanicsAmongChannelWatchersCostsOnlyItsOwnValue(t *testing.T) {
	b := fanouttest.New[int](t)
	var asked [4]atomic.Int64
	ws := make([]*fanout.Watcher[int], len(asked))
	for i := range ws {
		ws[i] = fanouttest.Watch(t, b, fanout.WithFilter(func(v int) bool {
			asked[i].Add(1)
			if i == 1 && v == 2 {
				panic("two")
			}
			return v%2 == 0 || i == 3
		}))
		ws[i].ResultChan()
	}
	publish(t, b, seq(1, 5)...)
	b.Shutdown()
	for i, w := range ws {
		want := []int{2, 4}
		switch i {
		case 1:
			want = []int{4}
		case 3:
			want = seq(1, 5)
		}
		assert.Equal(t, want, readers[0].drain(w), "watcher %d", i)
		assert.Equal(t, int64(5), asked[i].Load(), "watcher %d asked once about each value", i)
	}
	assert.Equal(t, uint64(1), ws[1].Stats().DroppedPanic)
	assert.Equal(t, uint64(1), b.Stats().Panics)
}

// A filtered channel watcher that registers while a publisher asks the
// filters about a value (here, from inside one) is asked about each value
// it may receive, that one included: it never receives a value its filter
// rejects.
func TestFilteredChannelWatcherRegisteredDuringTheAskIsAskedToo(t *testing.T) {
	b := fanouttest.New[int](t)
	var late *fanout.Watcher[int]
	var lateAsked atomic.Int64
	first := fanouttest.Watch(t, b, fanout.WithFilter(func(v int) bool {
		if late == nil {
			late = fanouttest.Watch(t, b, fanout.WithFilter(func(v int) bool {
				lateAsked.Add(1)
				return v%2 == 0
			}))
			late.ResultChan()
		}
		return true
	}))
	first.ResultChan()
	publish(t, b, seq(1, 5)...)
	b.Shutdown()
	assert.Equal(t, seq(1, 5), readers[0].drain(first))
	got := readers[0].drain(late)
	for _, v := range got {
		assert.Zero(t, v%2, "the late watcher received %d, which its filter rejects", v)
	}
	assert.Equal(t, []int{2, 4}, got)
	assert.Contains(t, []int64{4, 5}, lateAsked.Load(), "asked once about each value from 1 or 2 on")
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

// Filtered watchers of each behaviour, read slowly or not at all for a
// while, so that publishers sift their queues and readers filter at the
// same time: each receives, in order, only values its filter keeps (every
// one of them if it is lossless), and every value accepted is accounted
// for once: delivered, filtered or dropped.
func TestFilteredReadersAccountForEveryValueUnderConcurrency(t *testing.T) {
	const producers, each = 3, 3000
	behs := []fanout.FullChannelBehavior{fanout.WaitIfChannelFull, fanout.DropIfChannelFull, fanout.DropOldestIfChannelFull}
	b := fanout.New[int](fanout.WithQueueLength(4))
	all, err := b.Watch(fanout.WithQueueLength(producers * each))
	require.NoError(t, err)
	var ws []*fanout.Watcher[int]
	for i, beh := range behs {
		w, err := b.Watch(fanout.WithFullChannelBehavior(beh), fanout.WithFilter(func(v int) bool { return v%4 != i }))
		require.NoError(t, err)
		ws = append(ws, w)
	}
	got := make([][]int, len(ws))
	var rg sync.WaitGroup
	for i, w := range ws {
		rg.Go(func() { got[i] = readUnevenly(w, i) })
	}
	var pg sync.WaitGroup
	for p := range producers {
		pg.Go(func() {
			for k := range each {
				assert.NoError(t, b.Action(p*each+k))
			}
		})
	}
	pg.Wait()
	b.Shutdown()
	rg.Wait()
	order := fanouttest.Drain(all)
	require.Len(t, order, producers*each)
	for i, w := range ws {
		var kept []int
		for _, v := range order {
			if v%4 != i {
				kept = append(kept, v)
			}
		}
		s := w.Stats()
		assert.Equal(t, uint64(len(order)), s.Delivered+s.Filtered+s.Dropped, "watcher %d: %+v", i, s)
		assert.Equal(t, uint64(len(order)-len(kept)), s.Filtered, "watcher %d", i)
		if behs[i] == fanout.WaitIfChannelFull {
			assert.Equal(t, kept, got[i], "the lossless watcher misses nothing")
			continue
		}
		assert.True(t, isSubsequence(got[i], kept), "watcher %d received values out of order or not kept", i)
	}
}

// readUnevenly reads w until it closes, in small batches, pausing now and
// then as a busy consumer would.
func readUnevenly(w *fanout.Watcher[int], seed int) []int {
	var got []int
	buf := make([]int, 3)
	for round := seed; ; round++ {
		n, err := w.Recv(context.Background(), buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return got
		}
		if round%7 == 0 {
			for range 50 {
				runtime.Gosched()
			}
		}
	}
}

func isSubsequence(sub, of []int) bool {
	i := 0
	for _, v := range of {
		if i < len(sub) && sub[i] == v {
			i++
		}
	}
	return i == len(sub)
}

// A filter's panic on a value of a watcher's prefix, or of its replay, is
// a drop like any other: counted and reported to the drop handler, once
// per value, whatever the watcher's read path (a ring reader, a channel, a
// hand-off). The prefix's were counted and reported to nobody.
func TestFilterPanicOnThePrefixOrReplayIsReportedToTheDropHandler(t *testing.T) {
	for _, how := range []string{"prefix", "replay"} {
		for _, q := range []int{0, 4} {
			t.Run(fmt.Sprintf("%s, queue %d", how, q), func(t *testing.T) {
				b := fanout.New[int](fanout.WithHistory(4))
				defer b.Shutdown()
				for v := 1; v <= 4; v++ {
					require.NoError(t, b.Action(v))
				}
				var mu sync.Mutex
				var drops []fanout.Drop
				opts := []fanout.Option{
					fanout.WithQueueLength(q),
					fanout.WithFilter(func(v int) bool {
						if v == 3 {
							panic("three")
						}
						return true
					}),
					fanout.WithDropHandler(func(d fanout.Drop) { mu.Lock(); drops = append(drops, d); mu.Unlock() }),
				}
				var w *fanout.Watcher[int]
				var err error
				if how == "prefix" {
					w, err = b.WatchWithPrefix([]int{1, 2, 3}, opts...)
				} else {
					w, err = b.Watch(append(opts, fanout.WithReplay(4))...)
				}
				require.NoError(t, err)
				w.Stop()
				for range w.All(t.Context()) {
				}
				assert.EqualValues(t, 1, w.Stats().DroppedPanic)
				mu.Lock()
				defer mu.Unlock()
				require.Len(t, drops, 1)
				assert.Equal(t, fanout.DropPanic, drops[0].Reason)
				assert.ErrorContains(t, drops[0].Err, "three")
			})
		}
	}
}

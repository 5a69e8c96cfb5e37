//go:build fanoutcheck

package fanout

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests of this file force, one by one, the interleavings of DESIGN.md:
// the wake-up obligations of its section 6 and four of the bugs of its
// section 10 (the fifth's test is in waiting_test.go). They run inside a
// testing/synctest bubble and, where an interleaving needs it, pause a
// goroutine at a hook point (hooks.go) and drive another through, so that
// a missing wake-up shows at once as a goroutine that synctest.Wait finds
// still blocked, never as a time-out. They need the fanoutcheck build tag:
//
//	go test -race -tags fanoutcheck -run TestProtocol .

// pauseAt makes the first goroutine that reaches p stop there until resume
// is called; reached is closed when it gets there.
func pauseAt(t *testing.T, p hookPoint) (reached <-chan struct{}, resume func()) {
	r, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	restore := setHook(p, func() {
		if once.CompareAndSwap(false, true) {
			close(r)
			<-release
		}
	})
	var resumed atomic.Bool
	resume = func() {
		if resumed.CompareAndSwap(false, true) {
			close(release)
		}
	}
	t.Cleanup(func() { resume(); restore() })
	return r, resume
}

// async runs f on a goroutine of the bubble and returns the channel its
// result arrives on.
func async(f func() error) <-chan error {
	c := make(chan error, 1)
	go func() { c <- f() }()
	return c
}

// pending reports whether c has no result yet, once every goroutine of the
// bubble is blocked.
func pending(c <-chan error) bool {
	synctest.Wait()
	select {
	case err := <-c:
		panic("pending: already done: " + errString(err))
	default:
		return true
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// done returns the result of c, which must be there once every goroutine
// of the bubble is blocked.
func done(t *testing.T, c <-chan error, what string) error {
	t.Helper()
	synctest.Wait()
	select {
	case err := <-c:
		return err
	default:
		t.Fatalf("%s is still blocked: nobody woke it", what)
		return nil
	}
}

func next(w *Watcher[int]) (int, error) { return w.Next(context.Background()) }

// W1: a publisher wakes the readers parked before its values.
func TestProtocolPublisherWakesParkedReaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int]()
		defer b.Shutdown()
		w, err := b.Watch()
		require.NoError(t, err)
		got := make(chan int, 1)
		read := async(func() error { v, err := next(w); got <- v; return err })
		require.True(t, pending(read))
		require.NoError(t, b.Action(7))
		require.NoError(t, done(t, read, "the parked reader"))
		assert.Equal(t, 7, <-got)
	})
}

// W1 with many readers: a reader that found nothing yields before it
// lists itself among the parked, and then parks as any reader; the next
// publish wakes it.
func TestProtocolReaderThatYieldedInVainParksAndIsWoken(t *testing.T) {
	forEachYieldingReader(t, func(t *testing.T, b *Broadcaster[int], resume func(), read <-chan error, got <-chan int) {
		resume() // the reader yielded: it would hang at the hook otherwise
		require.True(t, pending(read))
		require.EqualValues(t, 1, b.nparked.Load(), "the reader listed itself after its yields")
		require.NoError(t, b.Action(7))
		require.NoError(t, done(t, read, "the reader parked after its yields"))
		assert.Equal(t, 7, <-got)
	})
}

// W1 with many readers, between the yields and the listing: a value
// published there finds no parked reader to wake, and the reader's last
// look at head, after it lists itself, sees it.
func TestProtocolReaderSeesAValuePublishedBetweenItsYieldsAndItsListing(t *testing.T) {
	forEachYieldingReader(t, func(t *testing.T, b *Broadcaster[int], resume func(), read <-chan error, got <-chan int) {
		require.Zero(t, b.nparked.Load(), "no reader listed: the publisher wakes nobody")
		require.NoError(t, b.Action(7))
		resume()
		require.NoError(t, done(t, read, "the reader that listed itself after the value"))
		assert.Equal(t, 7, <-got)
	})
}

// forEachYieldingReader runs body, in a bubble, for each way of making a
// reader yield, once a read of that reader has reached hookReaderYielded
// and waits there for resume; the read's result arrives on read, its
// value on got.
func forEachYieldingReader(t *testing.T, body func(t *testing.T, b *Broadcaster[int], resume func(), read <-chan error, got <-chan int)) {
	for name, setup := range yieldingReaders {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, w, stop := setup(t)
				defer stop()
				reached, resume := pauseAt(t, hookReaderYielded)
				got := make(chan int, 1)
				read := async(func() error { v, err := next(w); got <- v; return err })
				<-reached
				body(t, b, resume, read, got)
			})
		})
	}
}

// yieldingReaders are the ways of making readers yield before they park:
// each returns a broadcaster, one of its readers, and what shuts it down.
var yieldingReaders = map[string]func(*testing.T) (*Broadcaster[int], *Watcher[int], func()){
	"many readers": func(t *testing.T) (*Broadcaster[int], *Watcher[int], func()) {
		b, w := manyReaders(t)
		return b, w, b.Shutdown
	},
	"a topic with many readers in others": topicAmongMany,
	"a few dozen dropping readers":        droppingReaders,
}

// manyReaders returns a broadcaster with parkYieldReaders ring readers,
// whose readers yield before they park, and the last of them.
func manyReaders(t *testing.T) (*Broadcaster[int], *Watcher[int]) {
	t.Helper()
	b := New[int]()
	var w *Watcher[int]
	for range parkYieldReaders {
		var err error
		w, err = b.Watch()
		require.NoError(t, err)
	}
	require.EqualValues(t, parkYieldReaders, b.nreaders.Load())
	return b, w
}

// droppingReaders returns a broadcaster with lossyYieldReaders ring
// readers that drop, whose readers yield before they park, the last of
// them, and its Shutdown.
func droppingReaders(t *testing.T) (*Broadcaster[int], *Watcher[int], func()) {
	t.Helper()
	b := New[int](WithFullChannelBehavior(DropIfChannelFull))
	w := watchB(t, b, lossyYieldReaders)
	require.Less(t, b.nreaders.Load(), int32(parkYieldReaders), "yields for dropping, not for many")
	return b, w, b.Shutdown
}

// topicAmongMany returns the broadcaster of a topic with one reader, in a
// Topics whose other topic has familyYieldReaders, the reader, and the
// family's Shutdown.
func topicAmongMany(t *testing.T) (*Broadcaster[int], *Watcher[int], func()) {
	t.Helper()
	tp := NewTopics[int, int]()
	for range familyYieldReaders {
		_, err := tp.Watch(2)
		require.NoError(t, err)
	}
	w, err := tp.Watch(1)
	require.NoError(t, err)
	tp.mu.Lock()
	b := tp.topicsLocked()[1]
	tp.mu.Unlock()
	require.EqualValues(t, 1, b.nreaders.Load())
	return b, w, tp.Shutdown
}

// W1, in flight: a reader that parks while a fast path holds head's bit
// may not be seen by that publisher, whose plain store of head is no
// fence; it sleeps with a bound, and wakes when the bound passes with
// nobody else publishing.
func TestProtocolReaderParkedDuringAFastPathWakesWithinTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int]()
		defer b.Shutdown()
		w, err := b.Watch()
		require.NoError(t, err)
		finish := holdFastPath(t, b) // a fast path, between its two steps
		got := make(chan int, 1)
		read := async(func() error { v, err := next(w); got <- v; return err })
		require.True(t, pending(read))
		// The publisher looked at nparked before the reader counted
		// itself: it stores its value and wakes nobody.
		finish(7)
		start := time.Now()
		require.True(t, pending(read))
		time.Sleep(parkInFlight)
		require.NoError(t, done(t, read, "the reader parked during the fast path"))
		assert.Equal(t, 7, <-got)
		assert.Equal(t, parkInFlight, time.Since(start))
	})
}

// W1, in flight: the next publish wakes such a reader, as it wakes any
// parked reader, without waiting for the bound.
func TestProtocolReaderParkedDuringAFastPathIsWokenByTheNextPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int]()
		defer b.Shutdown()
		w, err := b.Watch()
		require.NoError(t, err)
		finish := holdFastPath(t, b)
		var got []int
		read := async(func() error {
			for len(got) < 2 {
				v, err := next(w)
				if err != nil {
					return err
				}
				got = append(got, v)
			}
			return nil
		})
		require.True(t, pending(read))
		finish(7)
		start := time.Now()
		require.NoError(t, b.Action(8))
		require.NoError(t, done(t, read, "the reader parked during the fast path"))
		assert.Equal(t, []int{7, 8}, got)
		assert.Zero(t, time.Since(start), "woken by the bound, not by the publish")
	})
}

// W1, in flight, for a TopicsWatcher: its reader sleeps with the bound
// too, rather than looking again and again while the publisher holds the
// bit (it spun so, for as long as the bit was held).
func TestProtocolTopicsReaderParkedDuringAFastPathSleepsWithTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		topics := NewTopics[string, int]()
		defer topics.Shutdown()
		g, err := topics.WatchTopics([]string{"a"})
		require.NoError(t, err)
		b, err := topics.forPublish("a", false)
		require.NoError(t, err)
		var parks atomic.Int32
		defer setHook(hookReaderParking, func() {
			if parks.Add(1) > 100 {
				panic("the topics reader looks again and again instead of sleeping")
			}
		})()
		finish := holdFastPath(t, b)
		got := make(chan int, 1)
		read := async(func() error { m, err := g.Next(context.Background()); got <- m.Value; return err })
		require.True(t, pending(read))
		finish(7) // having missed the reader
		time.Sleep(parkInFlight)
		require.NoError(t, done(t, read, "the topics reader parked during the fast path"))
		assert.Equal(t, 7, <-got)
	})
}

// holdFastPath takes head's busy bit as a fast-path publisher does, and
// returns the rest of that fast path: store v, release the bit. It wakes
// nobody: the publisher looked at nparked before the reader counted itself.
func holdFastPath(t *testing.T, b *Broadcaster[int]) (finish func(v int)) {
	t.Helper()
	h, ok := b.head.tryHold()
	require.True(t, ok)
	return func(v int) {
		b.ring.Load().Put(h, v)
		b.head.release(h + 1)
	}
}

// W2 (58ede41): a batch that must wait mid-way first wakes the readers
// parked before its first values, or it waits for a reader that sleeps.
func TestProtocolBatchWakesParkedReadersBeforeItWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int](WithQueueLength(1))
		defer b.Shutdown()
		w, err := b.Watch()
		require.NoError(t, err)
		var got []int
		reader := async(func() error {
			for {
				v, err := next(w)
				if err != nil {
					return err
				}
				got = append(got, v)
			}
		})
		require.True(t, pending(reader)) // parked on its empty queue
		batch := async(func() error { _, err := b.ActionBatch([]int{1, 2, 3}); return err })
		require.NoError(t, done(t, batch, "the batch"))
		b.Shutdown()
		require.ErrorIs(t, done(t, reader, "the reader"), ErrStopped)
		assert.Equal(t, []int{1, 2, 3}, got)
	})
}

// W3: the publisher waits until the last of the full lossless readers has
// made room, and that one wakes it.
func TestProtocolLastReaderToMakeRoomWakesThePublisher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int](WithQueueLength(1))
		defer b.Shutdown()
		r1, _ := b.Watch()
		r2, _ := b.Watch()
		require.NoError(t, b.Action(0))
		pub := async(func() error { return b.Action(1) })
		require.True(t, pending(pub))
		_, err := next(r1)
		require.NoError(t, err)
		require.True(t, pending(pub), "one of two full readers made room")
		_, err = next(r2)
		require.NoError(t, err)
		require.NoError(t, done(t, pub, "the publisher"))
	})
}

// W4 (134c319): a publisher that accepts the sequence another waits for
// wakes it. The reader that made room is paused after storing its marks,
// so that the second publisher takes the sequence first; the reader then
// finds no sequence waited for and wakes nobody.
func TestProtocolPublisherThatTakesTheWaitedSequenceWakesTheWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, r, first := publisherWaitingForRoom(t, 1)
		defer b.Shutdown()
		reached, resume := pauseAt(t, hookReaderMarked)
		read := async(func() error { _, err := next(r); return err })
		<-reached // r took 0 and has room, but has not looked at the waiters
		second := async(func() error { return b.Action(2) })
		require.NoError(t, done(t, second, "the second publisher"))
		resume()
		require.NoError(t, done(t, read, "the reader"))
		v, err := next(r)
		require.NoError(t, err)
		assert.Equal(t, 2, v)
		require.NoError(t, done(t, first, "the first publisher"))
		v, err = next(r)
		require.NoError(t, err)
		assert.Equal(t, 1, v)
	})
}

// W5: a reader whose behaviour is decided per value wakes the publisher
// waiting for its room.
func TestProtocolReaderDecidedPerValueWakesThePublisher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int](WithQueueLength(1), WithFullChannelBehavior(WaitTimeoutIfChannelFull(time.Hour)))
		defer b.Shutdown()
		r, _ := b.Watch()
		require.NoError(t, b.Action(0))
		pub := async(func() error { return b.Action(1) })
		require.True(t, pending(pub))
		_, err := next(r)
		require.NoError(t, err)
		require.NoError(t, done(t, pub, "the publisher"))
		assert.Zero(t, r.Stats().Dropped, "woken before its hour was up")
	})
}

// W6: the turn is handed on, in the order the publishers queued for it.
func TestProtocolTurnIsHandedOnInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int](WithQueueLength(1))
		defer b.Shutdown()
		w, _ := b.Watch()
		ch := w.ResultChan()
		require.NoError(t, b.Action(0))
		var pubs []<-chan error
		for v := 1; v <= 3; v++ {
			pubs = append(pubs, async(func() error { return b.Action(v) }))
			require.True(t, pending(pubs[len(pubs)-1])) // the first holds the turn, the others queue
		}
		for v := 0; v <= 3; v++ {
			assert.Equal(t, v, <-ch)
		}
		for i, c := range pubs {
			require.NoError(t, done(t, c, "publisher"), "publisher %d", i+1)
		}
	})
}

// publisherWaitingForRoom returns a broadcaster with queue length n, its
// one reader, full with the values 0 to n-1, and the result channel of an
// Action(n) that waits for that reader's room. Inside a bubble.
func publisherWaitingForRoom(t *testing.T, n int) (*Broadcaster[int], *Watcher[int], <-chan error) {
	t.Helper()
	b := New[int](WithQueueLength(n))
	r, err := b.Watch()
	require.NoError(t, err)
	for v := range n {
		require.NoError(t, b.Action(v))
	}
	first := async(func() error { return b.Action(n) })
	require.True(t, pending(first), "Action(%d) waits for the full reader", n)
	return b, r, first
}

// countAt counts the goroutines that reach p until the test ends.
func countAt(t *testing.T, p hookPoint) *atomic.Int32 {
	var n atomic.Int32
	t.Cleanup(setHook(p, func() { n.Add(1) }))
	return &n
}

// A publisher whose fast path another publisher closed, waiting for room,
// yields publishYields times, trying again after each, then goes on to the
// slow path, where the two wait for room as concurrent publishers do
// (whichever the room lets in first is accepted first).
func TestProtocolPublisherBehindAWaitingPublisherYieldsThenQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, r, first := publisherWaitingForRoom(t, 1)
		defer b.Shutdown()
		yields := countAt(t, hookPublisherYielding)
		second := async(func() error { return b.Action(2) })
		require.True(t, pending(second))
		assert.EqualValues(t, publishYields, yields.Load())
		var got []int
		for range 3 {
			v, err := next(r)
			require.NoError(t, err)
			got = append(got, v)
		}
		assert.Equal(t, 0, got[0])
		assert.ElementsMatch(t, []int{1, 2}, got[1:])
		require.NoError(t, done(t, first, "the first publisher"))
		require.NoError(t, done(t, second, "the second publisher"))
	})
}

// A publisher that yielded to one waiting for room, and finds the fast path
// open when it tries again, takes it: it accepts its value without the slow
// path, after the other's.
func TestProtocolYieldingPublisherTakesTheFastPathOnceTheOtherIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, r, first := publisherWaitingForRoom(t, 2)
		defer b.Shutdown()
		reached, resume := pauseAt(t, hookPublisherYielding)
		second := async(func() error { return b.Action(3) })
		<-reached
		buf := make([]int, 2)
		n, err := r.Recv(context.Background(), buf)
		require.NoError(t, err)
		assert.Equal(t, []int{0, 1}, buf[:n])
		require.NoError(t, done(t, first, "the first publisher"))
		slow := countAt(t, hookAccepted)
		resume()
		require.NoError(t, done(t, second, "the yielding publisher"))
		assert.Zero(t, slow.Load(), "accepted on the slow path")
		n, err = r.Recv(context.Background(), buf)
		require.NoError(t, err)
		assert.Equal(t, []int{2, 3}, buf[:n])
	})
}

// A publisher never yields to what no publisher holds: alone before a full
// reader, or behind a publisher blocked on a channel watcher (the channel
// keeps the fast path closed after the other is done).
func TestProtocolPublisherDoesNotYieldToAFullReaderItDidNotWakeOrAChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		yields := countAt(t, hookPublisherYielding)
		b := New[int](WithQueueLength(1))
		defer b.Shutdown()
		r, _ := b.Watch()
		require.NoError(t, b.Action(0))
		alone := async(func() error { return b.Action(1) })
		require.True(t, pending(alone))
		_, err := next(r)
		require.NoError(t, err)
		require.NoError(t, done(t, alone, "the publisher"))

		c := New[int](WithQueueLength(1))
		defer c.Shutdown()
		w, _ := c.Watch()
		ch := w.ResultChan()
		require.NoError(t, c.Action(0))
		first := async(func() error { return c.Action(1) })
		require.True(t, pending(first))
		second := async(func() error { return c.Action(2) })
		require.True(t, pending(second))
		for want := range 3 {
			assert.Equal(t, want, <-ch)
		}
		require.NoError(t, done(t, first, "the first publisher"))
		require.NoError(t, done(t, second, "the second publisher"))
		assert.Zero(t, yields.Load())
	})
}

// A lone publisher that woke parked readers and finds their room closing
// its fast path yields once, to let them run, then waits for their room as
// any publisher does; with more than roomYieldReaders ring readers it
// waits at once. A yield is no wait: the reader's room still releases it.
func TestProtocolPublisherYieldsOnceToTheReadersItWoke(t *testing.T) {
	for _, n := range []int{1, roomYieldReaders, roomYieldReaders + 1} {
		t.Run(fmt.Sprintf("readers=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				yields := countAt(t, hookPublisherYielding)
				b := New[int](WithQueueLength(1))
				defer b.Shutdown()
				ws := make([]*Watcher[int], n)
				for i := range ws {
					ws[i], _ = b.Watch()
				}
				got := make(chan int, n)
				for _, w := range ws {
					go func() { got <- must(next(w)) }()
				}
				synctest.Wait() // every reader parked
				require.NoError(t, b.Action(0))
				require.EqualValues(t, 1, b.woke.Load(), "waking the parked readers marks them woken")
				for range ws {
					require.Equal(t, 0, <-got)
				}
				require.NoError(t, b.Action(0)) // fills every queue; nobody parked to wake
				pub := async(func() error { return b.Action(1) })
				require.True(t, pending(pub))
				want := int32(0)
				if n <= roomYieldReaders {
					want = roomYields
				}
				assert.Equal(t, want, yields.Load())
				for _, w := range ws {
					assert.Equal(t, 0, must(next(w)))
				}
				require.NoError(t, done(t, pub, "the publisher"))
				assert.Equal(t, want, yields.Load(), "it yields before it waits, not after")
			})
		})
	}
}

// W7: stopping the reader a publisher waits for releases it.
func TestProtocolStopOfTheAwaitedReaderReleasesThePublisher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int](WithQueueLength(1))
		defer b.Shutdown()
		r, _ := b.Watch()
		other, _ := b.Watch(WithQueueLength(10))
		require.NoError(t, b.Action(0))
		pub := async(func() error { return b.Action(1) })
		require.True(t, pending(pub))
		r.Stop()
		require.NoError(t, done(t, pub, "the publisher"))
		assert.Equal(t, []int{0, 1}, []int{must(next(other)), must(next(other))})
	})
}

// onFull is a FullChannelBehavior made of a function.
type onFull func(FullState) Decision

func (f onFull) OnFull(s FullState) Decision { return f(s) }

// W7, eviction: a publisher that evicts the reader other publishers wait
// for wakes them, and they then have nobody to wait for. Three publishers
// wait for a full reader; it makes room for one; the next finds it full
// again and its behaviour evicts it; the third must not sleep on.
func TestProtocolEvictionOfTheAwaitedReaderReleasesThePublishers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int](WithQueueLength(1))
		defer b.Shutdown()
		calls := 0 // OnFull calls of one broadcaster never run concurrently
		r, _ := b.Watch(WithFullChannelBehavior(onFull(func(FullState) Decision {
			calls++
			if calls == 1 {
				return Decision{Verdict: VerdictWait}
			}
			return Decision{Verdict: VerdictEvict}
		})))
		other, _ := b.Watch(WithQueueLength(10))
		require.NoError(t, b.Action(0))
		pubs := []<-chan error{}
		for v := 1; v <= 3; v++ {
			pubs = append(pubs, async(func() error { return b.Action(v) }))
			require.True(t, pending(pubs[len(pubs)-1]), "publisher %d waits for r", v)
		}
		assert.Equal(t, 0, must(next(r))) // room for one of them
		for i, p := range pubs {
			require.NoError(t, done(t, p, fmt.Sprint("publisher ", i+1)))
		}
		got := []int{must(next(other)), must(next(other)), must(next(other)), must(next(other))}
		assert.ElementsMatch(t, []int{0, 1, 2, 3}, got)
		v, err := next(r)
		require.NoError(t, err, "the value that took its room stays readable")
		assert.Contains(t, []int{1, 2, 3}, v)
		_, err = next(r)
		assert.ErrorIs(t, err, ErrEvicted)
		assert.Equal(t, 2, calls)
	})
}

// W7: moving the awaited reader to a channel wakes the publisher, which then
// waits on the channel instead.
func TestProtocolResultChanOfTheAwaitedReaderReleasesThePublisher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int](WithQueueLength(1))
		defer b.Shutdown()
		r, _ := b.Watch()
		require.NoError(t, b.Action(0))
		pub := async(func() error { return b.Action(1) })
		require.True(t, pending(pub))
		ch := r.ResultChan()
		require.True(t, pending(pub), "the channel is as full as the queue was")
		assert.Equal(t, 0, <-ch)
		require.NoError(t, done(t, pub, "the publisher"))
		assert.Equal(t, 1, <-ch)
	})
}

// W8: a wake-up meant for several goroutines parked on one watcher is
// passed on by the one that takes it.
func TestProtocolWakeUpIsPassedOnBetweenReadersOfOneWatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int]()
		defer b.Shutdown()
		w, _ := b.Watch()
		got := make(chan int, 2)
		read := func() error { v, err := next(w); got <- v; return err }
		a, c := async(read), async(read)
		require.True(t, pending(a))
		require.True(t, pending(c))
		_, err := b.ActionBatch([]int{1, 2}) // one wake-up for the watcher
		require.NoError(t, err)
		require.NoError(t, done(t, a, "the first reader"))
		require.NoError(t, done(t, c, "the second reader"))
		assert.ElementsMatch(t, []int{1, 2}, []int{<-got, <-got})
	})
}

// W9: Shutdown ends every wait: room waiters (the plain receive and the
// select), publishers queued for the turn or blocked on a channel, and
// parked readers.
func TestProtocolShutdownEndsEveryWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ring := New[int](WithQueueLength(1))
		r, _ := ring.Watch()
		require.NoError(t, ring.Action(0))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		roomPlain := async(func() error { return ring.Action(1) })
		roomSelect := async(func() error { return ring.ActionContext(ctx, 1) })

		chans := New[int](WithQueueLength(1))
		c, _ := chans.Watch()
		c.ResultChan()
		require.NoError(t, chans.Action(0))
		sender := async(func() error { return chans.Action(1) })
		require.True(t, pending(sender))
		queued := async(func() error { return chans.Action(2) })

		idle := New[int]()
		p, _ := idle.Watch()
		parked := async(func() error { _, err := next(p); return err })

		for _, w := range []<-chan error{roomPlain, roomSelect, sender, queued, parked} {
			require.True(t, pending(w))
		}
		ring.Shutdown()
		chans.Shutdown()
		idle.Shutdown()
		for name, w := range map[string]<-chan error{"room waiter": roomPlain, "room waiter with a context": roomSelect,
			"blocked sender": sender, "turn waiter": queued, "parked reader": parked} {
			assert.ErrorIs(t, done(t, w, name), ErrStopped, name)
		}
		assert.Equal(t, 0, must(next(r)), "accepted values stay readable")
	})
}

// 9d9ff78: a publisher handed the turn just as Shutdown takes the lock must
// not accept its value after Shutdown returned. The publisher queues for
// the turn inside run (after a wait for room), where only the look at
// stopped after yieldTurn catches it.
func TestProtocolPublisherHandedTheTurnAtShutdownAcceptsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int](WithQueueLength(1))
		r, _ := b.Watch()
		c, _ := b.Watch()
		ch := c.ResultChan()
		require.NoError(t, b.Action(0)) // r and c full
		woken, resumeLate := pauseAt(t, hookRoomWoken)
		late := async(func() error { return b.Action(2) })
		require.True(t, pending(late)) // waits for r's room
		require.Equal(t, 0, must(next(r)))
		<-woken // woken, not yet locked again
		holder := async(func() error { return b.Action(1) })
		require.True(t, pending(holder)) // holds the turn, blocked on c
		resumeLate()
		require.True(t, pending(late)) // queued for the turn, in run
		handed, resumeHanded := pauseAt(t, hookTurnHanded)
		assert.Equal(t, 0, <-ch) // the holder's send goes through
		require.NoError(t, done(t, holder, "the turn holder"))
		<-handed
		b.Shutdown()
		accepted := b.Stats().Accepted
		resumeHanded()
		assert.ErrorIs(t, done(t, late, "the late publisher"), ErrStopped)
		assert.Equal(t, accepted, b.Stats().Accepted, "a value was accepted after Shutdown returned")
	})
}

func must(v int, err error) int {
	if err != nil {
		panic(err)
	}
	return v
}

// An EvictIfChannelFull reader is closed by the same hold of its lock that
// found its queue full: a reader that drains it meanwhile must find it
// closed, not open and empty (the value that evicted it found it full).
// The publisher is paused between applying its verdicts and taking the
// evicted reader off its lists.
func TestProtocolEvictedReaderIsClosedWhenFoundFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int](WithQueueLength(1), WithFullChannelBehavior(EvictIfChannelFull))
		defer b.Shutdown()
		r, _ := b.Watch()
		require.NoError(t, b.Action(0)) // r is full
		evicted, resume := pauseAt(t, hookEvicted)
		pub := async(func() error { return b.Action(1) })
		<-evicted
		assert.Equal(t, 0, must(next(r)))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := r.Next(ctx) // nothing left: closed, or open and empty
		assert.ErrorIs(t, err, ErrEvicted, "drained while being evicted, it looked open")
		resume()
		require.NoError(t, done(t, pub, "the publisher"))
		_, err = next(r)
		assert.ErrorIs(t, err, ErrEvicted)
		assert.Equal(t, uint64(1), r.Stats().DroppedEvicted)
	})
}

// A publisher sifts a full filtered reader that nobody reads: while it asks
// the filter, the raw values are off the queue but still counted queued,
// so a reader finds the watcher open and waits; Stop meanwhile keeps the
// kept values readable.
func TestProtocolStopDuringASiftKeepsTheKeptValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int](WithQueueLength(2))
		defer b.Shutdown()
		r, _ := b.Watch(WithFilter(func(v int) bool { return v%2 == 0 }))
		require.NoError(t, b.Action(1))
		require.NoError(t, b.Action(2)) // full of values the filter has not seen
		sifting, resume := pauseAt(t, hookSifting)
		pub := async(func() error { return b.Action(3) })
		<-sifting
		assert.Equal(t, 2, r.Stats().Queued, "values being sifted are queued")
		r.Stop()
		resume()
		require.NoError(t, done(t, pub, "the publisher"))
		assert.Equal(t, 2, must(next(r)))
		_, err := next(r)
		assert.ErrorIs(t, err, ErrWatcherStopped)
		assert.Equal(t, uint64(1), r.Stats().Filtered, "1; 3 came after Stop")
	})
}

// ResultChan during a sift waits for it, so that the channel holds the
// values it kept, in order, before the later ones.
func TestProtocolResultChanDuringASiftWaitsForIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int](WithQueueLength(2))
		defer b.Shutdown()
		r, _ := b.Watch(WithFilter(func(v int) bool { return v%2 == 0 }))
		require.NoError(t, b.Action(1))
		require.NoError(t, b.Action(2))
		sifting, resume := pauseAt(t, hookSifting)
		pub := async(func() error { return b.Action(4) })
		<-sifting
		chc := make(chan (<-chan int), 1)
		go func() { chc <- r.ResultChan() }()
		resume()
		require.NoError(t, done(t, pub, "the publisher"))
		ch := <-chc
		assert.Equal(t, []int{2, 4}, []int{<-ch, <-ch})
		require.NoError(t, b.Action(6))
		assert.Equal(t, 6, <-ch)
	})
}

// A lossy filtered reader is sifted even while it is read: a reader that
// takes every raw value between the publisher's listing it for a sift and
// the sift's taking them leaves it nothing to sift. The publisher must
// then not sift it: a sift holding no value gives it no sign of the sift
// (sifting is 0), so that ResultChan meanwhile moved it to a channel under
// the sift, writing the fields the unlocked sift reads (a data race that
// the race detector found with concurrent ResultChan, Recv and publishes).
func TestProtocolReaderDrainedBeforeItsSiftIsNotSifted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int](WithQueueLength(2), WithFullChannelBehavior(DropIfChannelFull))
		defer b.Shutdown()
		r, _ := b.Watch(WithFilter(func(v int) bool { return v%2 == 0 }))
		require.NoError(t, b.Action(1))
		require.NoError(t, b.Action(3)) // full of values the filter has not seen
		var emptySift atomic.Bool
		defer setHook(hookSifting, func() { // on the publisher's goroutine
			if r.sifting() == 0 {
				emptySift.Store(true)
			}
		})()
		listed, resume := pauseAt(t, hookSiftListed)
		pub := async(func() error { return b.Action(5) })
		<-listed // the publisher holds the broadcaster's lock, not r's
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		n, err := r.Recv(ctx, make([]int, 4)) // takes 1 and 3, rejects both
		assert.Equal(t, 0, n)
		assert.ErrorIs(t, err, context.Canceled)
		resume()
		require.NoError(t, done(t, pub, "the publisher"))
		assert.False(t, emptySift.Load(), "the publisher sifted a reader it had taken no value of")
		ch := r.ResultChan()
		require.NoError(t, b.Action(6))
		assert.Equal(t, 6, <-ch)
		st := r.Stats()
		assert.Equal(t, uint64(3), st.Filtered, "1, 3 and 5")
		assert.Equal(t, uint64(1), st.Delivered)
	})
}

// A filtered read counts itself among the watcher's readers from its first
// hold of the watcher's lock to its last, however it ends: returning kept
// values (the hold that counts them counts it out), finding the watcher
// closed or nothing to read in an empty buffer, parking until its context
// ends. Once it has returned, a publisher that finds the lossless reader
// full of values its filter rejects sifts them rather than wait for a read
// that is over; one that still counted the read would wait for ever.
func TestProtocolFilteredReadCountsItselfOutHoweverItEnds(t *testing.T) {
	ends := map[string]func(t *testing.T, r *Watcher[int], b *Broadcaster[int]){
		"returning a kept value": func(t *testing.T, r *Watcher[int], b *Broadcaster[int]) {
			require.NoError(t, b.Action(2))
			buf := make([]int, 4)
			n, err := r.Recv(context.Background(), buf)
			require.NoError(t, err)
			assert.Equal(t, []int{2}, buf[:n])
		},
		"rejecting a round before keeping one": func(t *testing.T, r *Watcher[int], b *Broadcaster[int]) {
			require.NoError(t, b.Action(1))
			read := async(func() error { return expectNext(r, 2) })
			assert.True(t, pending(read), "1 rejected: the read parks")
			require.NoError(t, b.Action(2))
			require.NoError(t, done(t, read, "the reader"))
		},
		"with an empty buffer": func(t *testing.T, r *Watcher[int], b *Broadcaster[int]) {
			require.NoError(t, b.Action(1))
			n, err := r.Recv(context.Background(), nil)
			assert.Equal(t, 0, n)
			assert.NoError(t, err)
		},
		"parked until its context ends": func(t *testing.T, r *Watcher[int], b *Broadcaster[int]) {
			ctx, cancel := context.WithCancel(context.Background())
			read := async(func() error { _, err := r.Recv(ctx, make([]int, 4)); return err })
			assert.True(t, pending(read), "nothing queued: the read parks")
			cancel()
			assert.ErrorIs(t, done(t, read, "the reader"), context.Canceled)
		},
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := New[int](WithQueueLength(1))
				defer b.Shutdown()
				r, _ := b.Watch(WithFilter(func(v int) bool { return v%2 == 0 }))
				end(t, r, b)
				pub := async(func() error {
					for _, v := range []int{3, 5, 7} { // the queue's length and more
						if err := b.Action(v); err != nil {
							return err
						}
					}
					return nil
				})
				require.NoError(t, done(t, pub, "the publisher of values the filter rejects"))
				require.NoError(t, b.Action(8))
				assert.Equal(t, 8, must(next(r)))
			})
		})
	}
}

// expectNext reads one value of r and says if it is not want.
func expectNext(r *Watcher[int], want int) error {
	v, err := next(r)
	if err == nil && v != want {
		err = fmt.Errorf("read %d, want %d", v, want)
	}
	return err
}

// A publisher waits for a full lossless filtered reader that a goroutine is
// reading, rather than sift it; if that read returns without making room
// (here, a Recv with an empty buffer), the publisher must not sleep for it
// (W10): it sifts the queue and accepts a value the filter rejects. The
// read may leave while the publisher sleeps (leaveRead wakes it), or
// between its counting the full readers and counting itself a room waiter,
// when there is no waiter to wake (the read counts itself out of the
// readers the publisher waits for, and the publisher does not sleep).
func TestProtocolFilteredReadThatLeavesWithoutRoomWakesThePublisher(t *testing.T) {
	for _, pubFirst := range []bool{true, false} {
		name := "before the publisher waits"
		if pubFirst {
			name = "while the publisher sleeps"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := New[int](WithQueueLength(1))
				defer b.Shutdown()
				r, _ := b.Watch(WithFilter(func(v int) bool { return v%2 == 0 }))
				require.NoError(t, b.Action(2)) // full of a value the filter has not seen
				leaving, resumeRead := pauseAt(t, hookReadLeaving)
				read := async(func() error { _, err := r.Recv(context.Background(), nil); return err })
				<-leaving // counted as reading: the publisher counts it full
				resumePub := func() {}
				var pub <-chan error
				if pubFirst {
					pub = async(func() error { return b.Action(3) })
					assert.True(t, pending(pub), "the publisher waits for the reader")
				} else {
					var counting <-chan struct{}
					counting, resumePub = pauseAt(t, hookRoomCounting)
					pub = async(func() error { return b.Action(3) })
					<-counting
				}
				resumeRead()
				require.NoError(t, done(t, read, "the reader"))
				resumePub()
				require.NoError(t, done(t, pub, "the publisher of a value the filter rejects"))
				assert.Equal(t, 2, must(next(r)))
				assert.Equal(t, uint64(1), r.Stats().Filtered)
			})
		})
	}
}

// A filter that ends its goroutine (runtime.Goexit, as t.FailNow does in a
// test) ends the read with it: the read counts itself out as it unwinds,
// so that a publisher then sifts the reader rather than wait for it, and
// the value it was asked about is dropped, counted, not left counted as
// being filtered with Taken below it.
func TestProtocolFilteredReadEndedByGoexitCountsItselfOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int](WithQueueLength(1))
		defer b.Shutdown()
		r, _ := b.Watch(WithFilter(func(v int) bool {
			if v == 1 {
				runtime.Goexit()
			}
			return v%2 == 0
		}))
		require.NoError(t, b.Action(1))
		exited := make(chan struct{})
		go func() {
			defer close(exited)
			_, _ = r.Recv(context.Background(), make([]int, 4))
		}()
		<-exited
		pub := async(func() error {
			for _, v := range []int{3, 5, 7} {
				if err := b.Action(v); err != nil {
					return err
				}
			}
			return nil
		})
		require.NoError(t, done(t, pub, "the publisher of values the filter rejects"))
		st := r.Stats()
		assert.Equal(t, uint64(1), st.DroppedPanic, "1, whose read the filter ended")
		assert.Equal(t, uint64(2), st.Filtered, "3 and 5, sifted")
		assert.Equal(t, 1, st.Queued, "7")
		assert.Equal(t, uint64(3), b.Taken(), "every value but 7, still queued")
	})
}

// The drop handler told of a read its filter ended by Goexit runs once the
// read is counted out: it may end the goroutine too (t.FailNow in a test's
// handler) or publish and wait for room, and the reader, full again of a
// value its filter rejects, is then sifted rather than waited for as if
// the ended read were still reading it.
func TestProtocolDropHandlerOfAReadEndedByGoexitRunsOnceItIsCountedOut(t *testing.T) {
	handlers := map[string]func(b *Broadcaster[int], errs chan<- error){
		"ending its goroutine too": func(*Broadcaster[int], chan<- error) { runtime.Goexit() },
		"publishing":               func(b *Broadcaster[int], errs chan<- error) { errs <- b.Action(5) },
	}
	for name, handle := range handlers {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := New[int](WithQueueLength(1))
				defer b.Shutdown()
				asked, goOn := make(chan struct{}), make(chan struct{})
				errs := make(chan error, 1)
				r, _ := b.Watch(WithFilter(func(v int) bool {
					if v == 1 {
						close(asked)
						<-goOn
						runtime.Goexit()
					}
					return v%2 == 0
				}), WithDropHandler(func(d Drop) {
					if errors.Is(d.Err, errFilterExited) {
						handle(b, errs)
					}
				}))
				require.NoError(t, b.Action(1))
				read := async(func() error {
					defer close(errs)
					_, err := r.Recv(context.Background(), make([]int, 4))
					return err
				})
				<-asked
				require.NoError(t, b.Action(3)) // full again, of a value the filter rejects
				close(goOn)
				synctest.Wait()
				assert.True(t, pending(read), "the read's goroutine ended, returning nothing")
				for err := range errs {
					assert.NoError(t, err, "the handler's publish")
				}
				require.NoError(t, b.Action(7), "a publish after the read ended")
				assert.Equal(t, uint64(1), r.Stats().DroppedPanic)
			})
		})
	}
}

// A topic retired while a batch published to it waits for room (its last
// watcher stopped) ends that broadcaster's publish with ErrStopped after
// the values it accepted: those count as published once, and only the rest
// as unheard. It looked the topic up again and published the whole batch
// once more, to nobody: the value the watcher had received counted as
// unheard too.
func TestTopicRetiredDuringABatchCountsOnlyTheRestUnheard(t *testing.T) {
	tp := NewTopics[string, int](WithQueueLength(1))
	w, err := tp.Watch("a")
	if err != nil {
		t.Fatal(err)
	}
	sleeping := make(chan struct{}, 1)
	defer setHook(hookRoomSleep, func() {
		select {
		case sleeping <- struct{}{}:
		default:
		}
	})()
	release := make(chan struct{})
	defer setHook(hookRoomWoken, func() { <-release })()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := tp.PublishBatch("a", []int{1, 2, 3})
		done <- result{n, err}
	}()
	<-sleeping // 1 queued, waiting for room for 2
	w.Stop()   // the last watcher: the topic retires, its broadcaster shut down
	close(release)
	r := <-done
	if r.n != 3 || r.err != nil {
		t.Errorf("PublishBatch = %d, %v; want 3, nil (1 accepted, 2 to nobody)", r.n, r.err)
	}
	if st := tp.Stats(); st.Published != 3 || st.Unheard != 2 {
		t.Errorf("stats %+v: want 3 published, 2 of them unheard", st)
	}
	got, _ := w.Next(context.Background())
	if got != 1 {
		t.Errorf("the watcher received %d, want 1", got)
	}
}

// A publisher gives its value to a channel watcher with room, then waits
// for a full one; the latter's Stop retires the topic, and the
// retirement's Shutdown takes the broadcaster before the woken publisher
// does: the publish ends in ErrStopped. The channel watcher holds the
// value, so the family counts it published and heard, and neither tries it
// again on a later broadcaster of the topic nor counts it unheard.
func TestProtocolTopicsValueGivenBeforeItsTopicRetiredIsHeard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tp := NewTopics[string, int](WithQueueLength(1))
		defer tp.Shutdown()
		given, err := tp.Watch("a")
		require.NoError(t, err)
		full, err := tp.Watch("a")
		require.NoError(t, err)
		ch, _ := given.ResultChan(), full.ResultChan()
		require.NoError(t, tp.Publish("a", 1))
		require.Equal(t, 1, <-ch) // given has room again; full does not
		woken, resume := pauseAt(t, hookSendsEnded)
		pub := async(func() error { return tp.Publish("a", 2) })
		require.True(t, pending(pub)) // given holds 2; the publisher waits for full
		require.Len(t, ch, 1)
		given.Stop()
		full.Stop() // wakes the publisher, then retires the topic
		<-woken
		synctest.Wait()
		require.EqualValues(t, 1, tp.Stats().Retired, "the retirement ran while the publisher was paused")
		resume()
		require.NoError(t, done(t, pub, "the publisher"))
		assert.Equal(t, 2, <-ch, "given heard 2")
		s := tp.Stats()
		assert.EqualValues(t, 0, s.Unheard, "%+v", s)
		assert.EqualValues(t, 2, s.Published, "%+v", s)
	})
}

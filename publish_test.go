package fanout_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
)

// A stopped watcher must not stay reachable from the broadcaster, also when
// only Action publishes (an earlier version kept stopped watchers on a list
// that only strict publishes pruned).
func TestStoppedWatchersAreNotRetained(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(b *fanout.Broadcaster[int], i int) *fanout.Watcher[int]
	}{
		{"hand-off", func(b *fanout.Broadcaster[int], i int) *fanout.Watcher[int] {
			w, err := b.Watch(fanout.WithQueueLength(0))
			require.NoError(t, err)
			return w
		}},
		{"filled channel", func(b *fanout.Broadcaster[int], i int) *fanout.Watcher[int] {
			w, err := b.Watch(fanout.WithQueueLength(1))
			require.NoError(t, err)
			ch := w.ResultChan()
			require.NoError(t, b.Action(i)) // fills it
			<-ch
			return w
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fanout.New[int]()
			defer b.Shutdown()
			const n = 100
			ptrs := make([]weak.Pointer[fanout.Watcher[int]], n)
			for i := range n {
				w := tc.make(b, i)
				w.Stop()
				ptrs[i] = weak.Make(w)
			}
			require.NoError(t, b.Action(-1)) // Action only: no strict publish
			assert.Zero(t, b.Stats().Watchers)
			runtime.GC()
			runtime.GC()
			alive := 0
			for _, p := range ptrs {
				if p.Value() != nil {
					alive++
				}
			}
			assert.Zero(t, alive, "stopped watchers still reachable from the broadcaster")
		})
	}
}

// "A bounded wait is measured from when the publish call first had to wait":
// a wait for a shared-ring reader's room is such a first wait, as a wait for
// a full channel watcher is (with a ResultChan watcher instead of the pull
// one, Action returns after 1s).
func TestBoundedWaitCountsRingWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := fanout.New[int](fanout.WithQueueLength(1))
		defer b.Shutdown()
		ringW, err := b.Watch() // pull, WaitIfChannelFull: shared ring
		require.NoError(t, err)
		bounded, err := b.Watch(fanout.WithFullChannelBehavior(fanout.WaitTimeoutIfChannelFull(100 * time.Millisecond)))
		require.NoError(t, err)
		publish(t, b, 1) // both full
		start := time.Now()
		took := make(chan time.Duration, 1)
		go func() {
			assert.NoError(t, b.Action(2))
			took <- time.Since(start)
		}()
		time.Sleep(time.Second)
		v, err := ringW.Next(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, v)
		assert.Equal(t, time.Second, <-took, "the 100ms bound started when Action first waited")
		assert.Equal(t, uint64(1), bounded.Stats().DroppedTimeout)
	})
}

type review3Wait struct{}

func (review3Wait) OnFull(fanout.FullState) fanout.Decision {
	return fanout.Decision{Verdict: fanout.VerdictWait}
}

// Optimistic Action, strict ActionOrDrop and strict ActionContext from
// concurrent goroutines, with slow consumers of channel watchers (built-in and
// custom waiting behaviour), a hand-off, a shared-ring reader and one
// converted by ResultChan mid-stream. Lossless watchers never drop (a full
// waiting watcher that a strict publish overlooked would make ActionOrDrop
// drop with DropFull), refused values reach nobody, nothing is delivered
// twice, and every watcher sees the accepted values in one order.
func TestStressMixedPublishers(t *testing.T) {
	b := fanout.New[int](fanout.WithQueueLength(2))
	type rw struct {
		w        *fanout.Watcher[int]
		lossless bool
		got      []int
	}
	var ws []*rw
	add := func(lossless bool, opts ...fanout.Option) *rw {
		w, err := b.Watch(opts...)
		require.NoError(t, err)
		r := &rw{w: w, lossless: lossless}
		ws = append(ws, r)
		return r
	}
	chanW := add(true)
	customW := add(true, fanout.WithFullChannelBehavior(review3Wait{}))
	handoff := add(false, fanout.WithQueueLength(0))
	shared := add(true, fanout.WithQueueLength(3))
	convert := add(true, fanout.WithQueueLength(2))

	var cwg sync.WaitGroup
	slow := func() {
		if rand.IntN(4) == 0 {
			time.Sleep(time.Duration(rand.IntN(20)) * time.Microsecond)
		}
	}
	rangeChan := func(r *rw, ch <-chan int) {
		for v := range ch {
			r.got = append(r.got, v)
			slow()
		}
	}
	cwg.Add(5)
	go func() { defer cwg.Done(); rangeChan(chanW, chanW.w.ResultChan()) }()
	go func() { defer cwg.Done(); rangeChan(customW, customW.w.ResultChan()) }()
	go func() { defer cwg.Done(); rangeChan(handoff, handoff.w.ResultChan()) }()
	go func() {
		defer cwg.Done()
		buf := make([]int, 2)
		for {
			n, err := shared.w.Recv(context.Background(), buf)
			if err != nil {
				return
			}
			shared.got = append(shared.got, buf[:n]...)
			slow()
		}
	}()
	go func() {
		defer cwg.Done()
		for range 50 {
			v, err := convert.w.Next(context.Background())
			if err != nil {
				return
			}
			convert.got = append(convert.got, v)
			slow()
		}
		rangeChan(convert, convert.w.ResultChan())
	}()

	const per = 2000
	var ok [3][per]bool
	var pwg sync.WaitGroup
	pwg.Add(3)
	go func() {
		defer pwg.Done()
		for i := range per {
			ok[0][i] = assert.NoError(t, b.Action(i))
		}
	}()
	go func() {
		defer pwg.Done()
		for i := range per {
			acc, err := b.ActionOrDrop(1e6 + i)
			ok[1][i] = assert.NoError(t, err) && acc
		}
	}()
	go func() {
		defer pwg.Done()
		for i := range per {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(50))*time.Microsecond)
			err := b.ActionContext(ctx, 2e6+i)
			cancel()
			ok[2][i] = err == nil
		}
	}()
	pwg.Wait()
	b.Shutdown()
	cwg.Wait()

	accepted := map[int]bool{}
	refused := 0
	for p := range 3 {
		for i := range per {
			if ok[p][i] {
				accepted[p*1e6+i] = true
			} else if p == 1 {
				refused++
			}
		}
	}
	s := b.Stats()
	assert.Equal(t, uint64(len(accepted)), s.Accepted)
	assert.Equal(t, uint64(refused), s.Refused)
	assert.Equal(t, handoff.w.Stats().Dropped, s.Dropped, "only the hand-off may miss values")

	var ref []int
	for _, r := range ws {
		seen := map[int]bool{}
		var filtered []int
		for _, v := range r.got {
			require.False(t, seen[v], "watcher %d got %d twice", r.w.ID(), v)
			seen[v] = true
			if v >= 1e6 && v < 2e6 {
				require.True(t, accepted[v], "refused value %d reached watcher %d", v, r.w.ID())
			}
			if accepted[v] {
				filtered = append(filtered, v)
			}
		}
		if !r.lossless {
			continue
		}
		assert.Zero(t, r.w.Stats().Dropped, "watcher %d", r.w.ID())
		if ref == nil {
			ref = filtered
			require.Len(t, ref, len(accepted))
			last := [3]int{-1, 1e6 - 1, 2e6 - 1}
			for _, v := range ref {
				require.Greater(t, v, last[v/1e6], "a publisher's values out of order")
				last[v/1e6] = v
			}
		} else {
			require.Equal(t, ref, filtered, "watcher %d", r.w.ID())
		}
	}
}

package fanout_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

type msg struct{ producer, n int }

// TestStress runs several producers while watchers join and leave at random
// on both read paths. A reference watcher registered first defines the total
// order: every other lossless watcher must have received a contiguous run of
// it (no gap, no duplicate, no reordering, identical order across watchers),
// and every lossy watcher an in-order subsequence whose misses are all
// counted.
func TestStress(t *testing.T) {
	const (
		producers = 4
		perProd   = 3000
		churners  = 4
	)
	b := fanout.New[msg](fanout.WithQueueLength(4))
	defer b.Shutdown()

	collect := func(w *fanout.Watcher[msg], useChan bool, stopAfter int) []msg {
		var got []msg
		if useChan {
			for v := range w.ResultChan() {
				got = append(got, v)
				if len(got) == stopAfter {
					go w.Stop() // from another goroutine, while we keep reading
				}
			}
			return got
		}
		buf := make([]msg, 1+rand.IntN(8))
		for {
			n, err := w.Recv(context.Background(), buf)
			got = append(got, buf[:n]...)
			if err != nil {
				return got
			}
			if stopAfter >= 0 && len(got) >= stopAfter {
				w.Stop()
				stopAfter = -1
			}
		}
	}

	ref, err := b.Watch()
	require.NoError(t, err)
	var lossy []*fanout.Watcher[msg]
	for _, beh := range []fanout.FullChannelBehavior{fanout.DropIfChannelFull, fanout.DropOldestIfChannelFull} {
		w, err := b.Watch(fanout.WithFullChannelBehavior(beh), fanout.WithQueueLength(2))
		require.NoError(t, err)
		lossy = append(lossy, w)
	}

	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		runs     [][]msg
		refList  []msg
		lossyGot = make([][]msg, len(lossy))
	)
	var consumers sync.WaitGroup
	consumers.Go(func() { refList = collect(ref, false, -1) })
	for i, w := range lossy {
		consumers.Go(func() { lossyGot[i] = collect(w, i%2 == 0, -1) })
	}

	done := make(chan struct{})
	var ready sync.WaitGroup
	ready.Add(churners)
	churn(&consumers, churners, b, done, &ready, func(w *fanout.Watcher[msg]) {
		got := collect(w, rand.IntN(2) == 0, rand.IntN(200))
		mu.Lock()
		runs = append(runs, got)
		mu.Unlock()
	})
	ready.Wait() // every churner's first watcher sees the first values
	for p := range producers {
		wg.Go(func() {
			for n := range perProd {
				if p%2 == 0 {
					require.NoError(t, b.Action(msg{p, n}))
					continue
				}
				for {
					ok, err := b.ActionOrDrop(msg{p, n})
					require.NoError(t, err)
					if ok {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	close(done)
	b.Shutdown()
	consumers.Wait()

	require.Len(t, refList, producers*perProd)
	pos := make(map[msg]int, len(refList))
	next := make([]int, producers)
	for i, m := range refList {
		require.Equal(t, next[m.producer], m.n, "producer %d out of order at %d", m.producer, i)
		next[m.producer]++
		pos[m] = i
	}
	nonEmpty := 0
	for _, run := range runs {
		if len(run) == 0 {
			continue
		}
		nonEmpty++
		start, ok := pos[run[0]]
		require.True(t, ok)
		require.LessOrEqual(t, start+len(run), len(refList))
		require.Equal(t, refList[start:start+len(run)], run, "a watcher's values must be a contiguous run of the total order")
	}
	assert.GreaterOrEqual(t, nonEmpty, churners, "each churner's first watcher saw values")

	for i, got := range lossyGot {
		last := -1
		for _, m := range got {
			p, ok := pos[m]
			require.True(t, ok)
			require.Greater(t, p, last, "lossy watcher %d reordered", i)
			last = p
		}
		assert.Equal(t, uint64(len(refList)), uint64(len(got))+lossy[i].Stats().Dropped,
			"lossy watcher %d: every value is either received or counted as dropped", i)
	}
}

func TestStressFanouttestHelpers(t *testing.T) {
	b := fanouttest.New[int](t, fanout.WithQueueLength(16))
	ws := make([]*fanout.Watcher[int], 8)
	for i := range ws {
		ws[i] = fanouttest.Watch(t, b)
	}
	var wg sync.WaitGroup
	results := make([][]int, len(ws))
	for i, w := range ws {
		wg.Go(func() { results[i] = fanouttest.Collect(t, w, 1000) })
	}
	publish(t, b, seq(1, 1000)...)
	wg.Wait()
	for _, r := range results {
		assert.Equal(t, seq(1, 1000), r)
	}
}

// Mixed read paths under load: watchers start on the shared ring, switch to
// their channel with ResultChan at a random point while values keep coming,
// are read by two goroutines at once, and are stopped from yet another
// goroutine. Each must still see one contiguous run of the total order.
func TestStressModeSwitch(t *testing.T) {
	const total = 20000
	b := fanout.New[int](fanout.WithQueueLength(4))
	defer b.Shutdown()
	ref, err := b.Watch(fanout.WithQueueLength(64))
	require.NoError(t, err)
	var refGot []int
	var consumers sync.WaitGroup
	consumers.Go(func() {
		buf := make([]int, 16)
		for {
			n, err := ref.Recv(context.Background(), buf)
			refGot = append(refGot, buf[:n]...)
			if err != nil {
				return
			}
		}
	})
	var mu sync.Mutex
	var runs [][]int
	done := make(chan struct{})
	churn(&consumers, 4, b, done, nil, func(w *fanout.Watcher[int]) {
		switchAt := rand.IntN(50)
		stopAt := rand.IntN(300)
		var got []int
		var gmu sync.Mutex
		var rd sync.WaitGroup
		for r := range 2 {
			rd.Go(func() {
				last := -1
				for i := 0; ; i++ {
					if r == 0 && i == switchAt {
						w.ResultChan()
					}
					v, err := w.Next(context.Background())
					if err != nil {
						return
					}
					if v <= last {
						t.Errorf("one reader got %d after %d", v, last)
					}
					last = v
					gmu.Lock()
					got = append(got, v)
					n := len(got)
					gmu.Unlock()
					if n == stopAt {
						go w.Stop()
					}
				}
			})
		}
		rd.Wait()
		mu.Lock()
		runs = append(runs, got)
		mu.Unlock()
	})
	for i := range total {
		switch i % 3 {
		case 0:
			require.NoError(t, b.Action(i))
		case 1:
			for {
				ok, err := b.ActionOrDrop(i)
				require.NoError(t, err)
				if ok {
					break
				}
				runtime.Gosched()
			}
		case 2:
			require.NoError(t, b.ActionContext(context.Background(), i))
		}
	}
	close(done)
	b.Shutdown()
	consumers.Wait()
	require.Equal(t, seq(0, total-1), refGot)
	for _, run := range runs {
		if len(run) == 0 {
			continue
		}
		// Two readers interleave, so sort is not allowed: check as a set that
		// it is exactly a contiguous range.
		seen := make(map[int]bool, len(run))
		lo, hi := run[0], run[0]
		for _, v := range run {
			require.False(t, seen[v], "duplicate %d", v)
			seen[v] = true
			lo, hi = min(lo, v), max(hi, v)
		}
		require.Equal(t, hi-lo+1, len(run), "gap in a watcher's run %d..%d", lo, hi)
	}
}

// churn runs n goroutines that register watchers on b one after another and
// hand each to fn, until done is closed or b shuts down. If ready is not nil,
// each goroutine marks it done once its first watcher is registered.
func churn[T any](wg *sync.WaitGroup, n int, b *fanout.Broadcaster[T], done <-chan struct{}, ready *sync.WaitGroup, fn func(*fanout.Watcher[T])) {
	for range n {
		wg.Go(func() {
			first := true
			for {
				select {
				case <-done:
					return
				default:
				}
				w, err := b.Watch()
				if first && ready != nil {
					ready.Done()
				}
				first = false
				if err != nil {
					return
				}
				fn(w)
			}
		})
	}
}

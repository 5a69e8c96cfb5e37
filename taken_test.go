package fanout_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

// take reads n values from w, through the read path r.
func take(t *testing.T, w *fanout.Watcher[int], chanRead bool, n int) {
	t.Helper()
	for range n {
		if chanRead {
			<-w.ResultChan()
			continue
		}
		_, err := w.Next(context.Background())
		require.NoError(t, err)
	}
}

func TestTakenFollowsTheSlowestLosslessWatcher(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			chanRead := r.name == "chan"
			b := fanouttest.New[int](t, fanout.WithQueueLength(20))
			fast, slow := fanouttest.Watch(t, b), fanouttest.Watch(t, b)
			r.prepare(fast)
			r.prepare(slow)
			assert.Equal(t, uint64(0), b.Taken())
			publish(t, b, seq(0, 9)...)
			assert.Equal(t, uint64(0), b.Taken(), "nothing read yet")
			take(t, fast, chanRead, 10)
			take(t, slow, chanRead, 3)
			assert.Equal(t, uint64(3), b.Taken())
			take(t, slow, chanRead, 7)
			assert.Equal(t, uint64(10), b.Taken())
		})
	}
}

func TestTakenIsNotHeldBackByLossyWatchers(t *testing.T) {
	behaviours := []fanout.FullChannelBehavior{
		fanout.DropIfChannelFull, fanout.DropOldestIfChannelFull, fanout.EvictIfChannelFull,
		fanout.WaitTimeoutIfChannelFull(0),
	}
	for _, beh := range behaviours {
		b := fanouttest.New[int](t, fanout.WithQueueLength(4), fanout.WithFullChannelBehavior(beh))
		fanouttest.Watch(t, b)
		for i := range 3 {
			require.NoError(t, b.Action(i))
		}
		assert.Equal(t, uint64(3), b.Taken(), "%v", beh)
	}
}

func TestTakenIsReleasedByAWatcherThatLeaves(t *testing.T) {
	b := fanouttest.New[int](t)
	w := fanouttest.Watch(t, b)
	publish(t, b, 1, 2, 3)
	assert.Equal(t, uint64(0), b.Taken())
	w.Stop()
	assert.Equal(t, uint64(3), b.Taken(), "a stopped watcher holds nothing back")
}

func TestTakenIgnoresValuesAcceptedBeforeAWatcherRegistered(t *testing.T) {
	b := fanouttest.New[int](t, fanout.WithHistory(5))
	publish(t, b, 0, 1, 2, 3, 4)
	w, err := b.WatchWithPrefix([]int{-2, -1}, fanout.WithReplay(3))
	require.NoError(t, err)
	assert.Equal(t, uint64(5), b.Taken(), "replayed and prefix values are not held back")
	publish(t, b, 5, 6)
	assert.Equal(t, uint64(5), b.Taken())
	take(t, w, false, 2+3+1) // prefix, replay, then 5
	assert.Equal(t, uint64(6), b.Taken())
}

func TestTakenWaitsForCommitWithCommit(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			chanRead := r.name == "chan"
			b := fanouttest.New[int](t)
			w := fanouttest.Watch(t, b, fanout.WithCommit())
			r.prepare(w)
			publish(t, b, seq(0, 5)...)
			take(t, w, chanRead, 4)
			assert.Equal(t, uint64(0), b.Taken(), "read but not committed")
			w.Commit()
			assert.Equal(t, uint64(4), b.Taken())
			w.Commit()
			assert.Equal(t, uint64(4), b.Taken(), "Commit is idempotent")
			take(t, w, chanRead, 2)
			w.Commit()
			assert.Equal(t, uint64(6), b.Taken())
		})
	}
}

func TestCommitDoesNothingForALossyWatcher(t *testing.T) {
	b := fanouttest.New[int](t, fanout.WithQueueLength(2))
	w := fanouttest.Watch(t, b, fanout.WithCommit(), fanout.WithFullChannelBehavior(fanout.DropIfChannelFull))
	publish(t, b, 1, 2, 3)
	w.Commit()
	assert.Equal(t, uint64(3), b.Taken())
}

func TestTakenAfterShutdownFollowsWhatStaysQueued(t *testing.T) {
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			b := fanout.New[int]()
			w, err := b.Watch()
			require.NoError(t, err)
			r.prepare(w)
			publish(t, b, 1, 2, 3)
			b.Shutdown()
			assert.Equal(t, uint64(0), b.Taken(), "the values stay queued for the watcher")
			assert.Equal(t, []int{1, 2, 3}, r.drain(w))
			assert.Equal(t, uint64(3), b.Taken())
		})
	}
}

func TestActionSeqReturnsEachValuesPlaceInTheOrder(t *testing.T) {
	const producers, each = 4, 500
	b := fanouttest.New[int](t, fanout.WithQueueLength(7))
	w := fanouttest.Watch(t, b)
	got := make([]int, 0, producers*each)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range producers * each {
			v, err := w.Next(context.Background())
			if !assert.NoError(t, err) {
				return
			}
			got = append(got, v)
		}
	}()
	seqs := make([]uint64, producers*each)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				v := p*each + i
				var err error
				if i%2 == 0 {
					seqs[v], err = b.ActionSeq(context.Background(), v)
				} else {
					var n int
					seqs[v], n, err = b.ActionBatchSeq(context.Background(), []int{v})
					assert.Equal(t, 1, n)
				}
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	<-done
	for i, v := range got {
		require.Equal(t, uint64(i), seqs[v], "value %d was received at %d", v, i)
	}
}

func TestActionBatchSeqNumbersABatchContiguously(t *testing.T) {
	b := fanouttest.New[int](t, fanout.WithQueueLength(2))
	w := fanouttest.Watch(t, b)
	publish(t, b, 100)
	read := make(chan []int)
	go func() {
		var got []int
		for v := range w.All(context.Background()) {
			got = append(got, v)
		}
		read <- got
	}()
	first, n, err := b.ActionBatchSeq(context.Background(), seq(0, 9))
	require.NoError(t, err)
	b.Shutdown()
	assert.Equal(t, append([]int{100}, seq(0, 9)...), <-read)
	assert.Equal(t, 10, n)
	assert.Equal(t, uint64(1), first)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, n, err = b.ActionBatchSeq(ctx, []int{1})
	assert.Error(t, err)
	assert.Zero(t, n)
}

// Under concurrent publishers and readers, Taken never runs ahead of what
// every committing watcher had finished, and never decreases.
func TestTakenNeverPassesACommittedValue(t *testing.T) {
	const readersN, values = 3, 3000
	b := fanouttest.New[int](t, fanout.WithQueueLength(16))
	finished := make([]atomic.Uint64, readersN)
	var wg sync.WaitGroup
	for i := range readersN {
		w := fanouttest.Watch(t, b, fanout.WithCommit())
		wg.Go(func() {
			buf := make([]int, 1+i*5)
			var n uint64
			for n < values {
				k, err := w.Recv(context.Background(), buf)
				if !assert.NoError(t, err) {
					return
				}
				n += uint64(k)
				finished[i].Store(n) // done with them, then commit
				w.Commit()
			}
		})
	}
	stop := make(chan struct{})
	wg.Go(func() {
		var last uint64
		for {
			select {
			case <-stop:
				return
			default:
			}
			got := b.Taken()
			assert.GreaterOrEqual(t, got, last, "Taken decreased")
			last = got
			for i := range finished {
				if f := finished[i].Load(); got > f {
					assert.Failf(t, "Taken ran ahead", "Taken %d, reader %d finished %d", got, i, f)
					return
				}
			}
		}
	})
	var pub sync.WaitGroup
	for p := range 2 {
		pub.Go(func() {
			for i := range values / 2 {
				if i%3 == 0 {
					assert.NoError(t, b.Action(p))
				} else {
					_, err := b.ActionSeq(context.Background(), p)
					assert.NoError(t, err)
				}
			}
		})
	}
	pub.Wait()
	close(stop)
	wg.Wait()
	assert.Equal(t, uint64(values), b.Taken())
}

// A filtered reader's Recv takes raw values off its queue and asks the
// filter about them with no lock held: until it has, the values are
// neither returned nor rejected, so Taken (and a Commit made meanwhile
// from another goroutine) stays below them, also if the watcher moves to
// a channel while the filter runs.
func TestTakenWaitsForTheValuesAFilteredReadIsStillFiltering(t *testing.T) {
	for _, during := range []string{"Taken", "Commit", "ResultChan"} {
		t.Run(during, func(t *testing.T) {
			b := fanout.New[int](fanout.WithQueueLength(8))
			entered, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			opts := []fanout.Option{fanout.WithFilter(func(int) bool {
				once.Do(func() { close(entered); <-release })
				return true
			})}
			if during == "Commit" {
				opts = append(opts, fanout.WithCommit())
			}
			w, err := b.Watch(opts...)
			require.NoError(t, err)
			publish(t, b, 0, 1, 2)
			got := make(chan []int, 1)
			go func() {
				buf := make([]int, 8)
				n, _ := w.Recv(context.Background(), buf)
				got <- buf[:n]
			}()
			<-entered // the read took 0, 1 and 2 and asks the filter about 0
			switch during {
			case "Commit":
				w.Commit()
			case "ResultChan":
				w.ResultChan()
			}
			assert.Zero(t, b.Taken(), "while the filter is asked about the values")
			close(release)
			assert.Equal(t, []int{0, 1, 2}, <-got)
			if during == "Commit" {
				w.Commit()
			}
			assert.EqualValues(t, 3, b.Taken(), "once Recv returned them")
			b.Shutdown()
		})
	}
}

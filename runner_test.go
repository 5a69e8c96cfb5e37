package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

// With a correlator, repeats become updates that refer to what the sink
// returned, and spam is skipped and counted.
func TestSinkRunnerUpdatesRepeatsAndSkipsSpam(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t)
		c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: dedupStage(), Spam: spamStage(3, 1e-9)})
		sink := &fanouttest.Sink[ev]{Store: func(op string, e ev) ev {
			if op == "create" {
				e.ID = "stored " + e.Msg
			}
			return e
		}}
		run, err := r.StartSink(sink, c)
		require.NoError(t, err)
		for range 5 {
			require.NoError(t, r.Record(ev{Obj: "pod", Reason: "R", Msg: "m"}))
		}
		require.NoError(t, r.Flush(t.Context()))
		calls := sink.Calls()
		require.Len(t, calls, 3, "burst 3: two skipped")
		assert.Equal(t, "create", calls[0].Op)
		for i, c := range calls[1:] {
			assert.Equal(t, "update", c.Op)
			assert.Equal(t, i+2, c.Value.Count)
			assert.Equal(t, "stored m", c.Value.ID, "updates refer to the stored record")
		}
		st := run.Stats()
		assert.Equal(t, uint64(5), st.Received)
		assert.Equal(t, uint64(3), st.Written)
		assert.Equal(t, uint64(2), st.DroppedSpam)
		assert.Equal(t, uint64(2), st.Dropped)
	})
}

// seriesSinkCorrelator is a custom SinkCorrelator: the first value of a message is
// created, the second updates it, later ones are merged (not written) and
// every stored value is observed.
type seriesSinkCorrelator struct {
	seen     map[string]int
	observed []ev
}

func (c *seriesSinkCorrelator) Correlate(v ev) fanout.Correlation[ev] {
	c.seen[v.Msg]++
	n := c.seen[v.Msg]
	v.Count = n
	return fanout.Correlation[ev]{Value: v, Count: n, Merged: n > 2}
}

func (c *seriesSinkCorrelator) Observe(v ev) { c.observed = append(c.observed, v) }

func TestSinkRunnerCountsMergedValuesAsHandled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t)
		c := &seriesSinkCorrelator{seen: map[string]int{}}
		sink := &fanouttest.Sink[ev]{}
		run, err := r.StartSink(sink, c)
		require.NoError(t, err)
		for range 4 {
			require.NoError(t, r.Record(ev{Msg: "m"}))
		}
		require.NoError(t, r.Flush(t.Context()), "merged values count as handled")
		calls := sink.Calls()
		require.Len(t, calls, 2)
		assert.Equal(t, "create", calls[0].Op)
		assert.Equal(t, "update", calls[1].Op)
		assert.Len(t, c.observed, 2, "Observe follows each successful write")
		st := run.Stats()
		assert.Equal(t, uint64(4), st.Received)
		assert.Equal(t, uint64(2), st.Written)
		assert.Equal(t, uint64(2), st.Merged)
		assert.Zero(t, st.Dropped, "a merge is not a drop")
		assert.Equal(t, uint64(2), r.Stats().Merged)
	})
}

func TestSinkRunnerTreatsTypedNilCorrelatorAsNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t)
		sink := &fanouttest.Sink[ev]{}
		var c *fanout.Correlator[ev]
		_, err := r.StartSink(sink, c)
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "m"}))
		require.NoError(t, r.Record(ev{Msg: "m"}))
		require.NoError(t, r.Flush(t.Context()))
		calls := sink.Calls()
		require.Len(t, calls, 2, "a typed nil *Correlator means no correlation, not a panic")
		assert.Equal(t, "create", calls[1].Op)
	})
}

func TestRunnerPanicInSinkOrHandlerDropsOneValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t, fastRetry(3))
		sink := &fanouttest.Sink[ev]{Panic: func(e ev) bool { return e.Msg == "panic" }}
		run, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		var handled []string
		hrun, err := r.StartHandler(func(e ev) {
			if e.Msg == "panic" {
				panic("handler bug")
			}
			handled = append(handled, e.Msg)
		})
		require.NoError(t, err)
		for _, m := range []string{"a", "panic", "b"} {
			require.NoError(t, r.Record(ev{Msg: m}))
		}
		require.NoError(t, r.Flush(t.Context()))
		assert.Equal(t, 2, len(sink.Written()))
		assert.Equal(t, uint64(1), run.Stats().DroppedRejected)
		assert.Equal(t, []string{"a", "b"}, handled)
		assert.Equal(t, uint64(1), hrun.Stats().DroppedRejected)
		assert.Equal(t, uint64(2), hrun.Stats().Written)
	})
}

// Panics in correlator functions drop the value as DropRejected and the
// runner goes on; a panic in Observe (after the write) loses nothing.
func TestRunnerPanicInCorrelatorDropsOneValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := fanout.NewCorrelator(fanout.CorrelatorConfig[item]{
			Dedup: &fanout.DedupStage[item]{
				Key: func(v item) string {
					if v.Key == "bad key" {
						panic("key bug")
					}
					return v.Key
				},
				Count: func(v item) int {
					if v.ID == "stored-bad" {
						panic("count bug") // only Observe sees stored values
					}
					return 1
				},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		var rejected atomic.Int32
		r := newRev(t, fanout.WithDropHandler(func(d fanout.Drop) {
			if d.Reason == fanout.DropRejected && d.Err != nil && strings.Contains(d.Err.Error(), "key bug") {
				rejected.Add(1)
			}
		}))
		run := must[*fanout.Runner[item]](t)(r.StartSink(funcSink{func(_ context.Context, _ string, v item) (item, error) {
			if v.Key == "observe" {
				v.ID = "stored-bad"
			}
			return v, nil
		}}, c))
		for _, k := range []string{"a", "bad key", "observe", "b"} {
			_ = r.Record(item{Key: k})
		}
		if err := r.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := run.Stats()
		if st.Written != 3 || st.DroppedRejected != 1 || rejected.Load() != 1 {
			t.Errorf("stats %+v, rejected reports %d", st, rejected.Load())
		}
	})
}

// A sink that cannot keep up loses values from its own queue only, counted;
// the recorder's caller never waits and other runners get everything.
func TestFullQueueDropsForThatRunnerOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var full atomic.Int64
		r := newRecorder(t, fanout.WithQueueLength(4), fanout.WithDropHandler(func(d fanout.Drop) {
			if d.Reason == fanout.DropFull {
				full.Add(1)
			}
		}))
		slow := &fanouttest.Sink[ev]{Block: make(chan struct{})}
		srun, err := r.StartSink(slow, nil)
		require.NoError(t, err)
		var got []string
		_, err = r.StartHandler(func(e ev) { got = append(got, e.Msg) })
		require.NoError(t, err)

		for i := range 20 {
			require.NoError(t, r.Record(ev{Msg: fmt.Sprint(i)}), "Record never blocks")
			synctest.Wait() // the handler keeps up; the sink is stuck in its first write
		}
		st := srun.Stats()
		assert.Equal(t, 4, st.Queued)
		assert.Equal(t, uint64(15), st.DroppedFull, "1 in flight, 4 queued, 15 dropped")
		assert.Equal(t, int64(15), full.Load())
		assert.Len(t, got, 20, "the other runner got every value")

		close(slow.Block)
		require.NoError(t, r.Flush(t.Context()))
		var written []string
		for _, c := range slow.Calls() {
			written = append(written, c.Value.Msg)
		}
		assert.Equal(t, []string{"0", "1", "2", "3", "4"}, written)
		total := r.Stats()
		assert.Equal(t, uint64(20), total.Recorded)
		assert.Equal(t, uint64(25), total.Written, "20 handled + 5 written")
		assert.Equal(t, uint64(15), total.DroppedFull)
	})
}

// Queue length 0 is a hand-off: a runner gets a value only while it waits in
// its receive; a busy runner misses it as DropFull. Accounting stays exact
// and Flush does not wait for missed values.
func TestRunnerWithQueueZeroMissesValuesWhileBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var full atomic.Int32
		r := newRev(t, fanout.WithQueueLength(0), fanout.WithDropHandler(func(d fanout.Drop) {
			if d.Reason == fanout.DropFull {
				full.Add(1)
			}
		}))
		block := make(chan struct{})
		var got []int
		h := must[*fanout.Runner[item]](t)(r.StartHandler(func(v item) {
			if v.N < 0 {
				<-block
			}
			got = append(got, v.N)
		}))
		var created atomic.Int32
		s := must[*fanout.Runner[item]](t)(r.StartSink(funcSink{func(_ context.Context, _ string, v item) (item, error) {
			created.Add(1)
			return v, nil
		}}, nil))
		synctest.Wait() // both runners wait in their receive
		for i := range 5 {
			if err := r.Record(item{N: i}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		if err := r.Record(item{N: -1}); err != nil { // the handler blocks on it
			t.Fatal(err)
		}
		synctest.Wait()
		for i := range 3 {
			if err := r.Record(item{N: 10 + i}); err != nil { // the handler is busy: missed
				t.Fatal(err)
			}
			synctest.Wait()
		}
		if st := h.Stats(); st.Queued != 0 || st.DroppedFull != 3 || st.Received != 6 {
			t.Errorf("handler stats %+v: want nothing queued, 3 missed, 6 received", st)
		}
		done := make(chan error, 1)
		go func() { done <- r.Flush(context.Background()) }()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Flush returned while the handler still held a value")
		default:
		}
		close(block)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if want := []int{0, 1, 2, 3, 4, -1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("handler got %v, want %v", got, want)
		}
		if c := created.Load(); c != 9 {
			t.Errorf("sink created %d values, want 9 (it kept up)", c)
		}
		st := r.Stats()
		if st.Recorded != 9 || st.DroppedFull != 3 || full.Load() != 3 || st.Written != 6+9 {
			t.Errorf("recorder stats %+v, DropFull reports %d", st, full.Load())
		}
		for _, run := range []*fanout.Runner[item]{h, s} {
			st := run.Stats()
			if st.Received+st.DroppedFull != 9 || st.Written+st.Dropped-st.DroppedFull != st.Received {
				t.Errorf("runner accounting not exact: %+v", st)
			}
		}
	})
}

func TestRunnerStopEndsRetriesAndLeavesOtherRunners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t, fanout.WithRetry(fanout.DefaultRetryPolicy()))
		sink := &fanouttest.Sink[ev]{Fail: func(string, ev, int) error { return errors.New("down") }}
		run, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		var handled atomic.Int64
		other, err := r.StartHandler(func(ev) { handled.Add(1) })
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "a"}))
		synctest.Wait()
		run.Stop()
		run.Stop()
		<-run.Done()
		assert.Len(t, sink.Calls(), 1)
		assert.Equal(t, uint64(1), run.Stats().DroppedShutdown)

		require.NoError(t, r.Record(ev{Msg: "b"}), "the other runners go on")
		require.NoError(t, r.Flush(t.Context()))
		assert.Equal(t, int64(2), handled.Load())
		assert.Equal(t, 1, r.Stats().Runners)
		other.Stop()
		<-other.Done()
	})
}

// Only one goroutine per runner, however many values are queued or retrying.
func TestGoroutinesAreBoundedByRunners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := fanout.NewRecorder[item](fanout.WithRetry(fanout.DefaultRetryPolicy()))
		if err != nil {
			t.Fatal(err)
		}
		failing := funcSink{func(context.Context, string, item) (item, error) { return item{}, errors.New("down") }}
		_ = must[*fanout.Runner[item]](t)(r.StartSink(failing, nil))
		_ = must[*fanout.Runner[item]](t)(r.StartSlog(slog.New(slog.DiscardHandler), slog.LevelInfo, "v", nil))
		_ = must[*fanout.Runner[item]](t)(r.StartHandler(func(item) {}))
		for i := range 2000 {
			_ = r.Record(item{N: i})
		}
		for range 3 {
			synctest.Wait()
			if n := fanoutGoroutines(); n != 3 {
				t.Errorf("%d pipeline goroutines for 3 runners", n)
			}
			time.Sleep(7 * time.Second)
		}
		if err := r.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // a runner closes Done just before its goroutine returns
		if n := fanoutGoroutines(); n != 0 {
			t.Errorf("%d pipeline goroutines left after Shutdown", n)
		}
	})
}

// fanoutGoroutines counts the goroutines running code of package fanout
// (not its tests); the caller is not one of them.
func fanoutGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/fanout-go/fanout.(") {
			n++
		}
	}
	return n
}

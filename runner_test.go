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
		r := newRecorder[ev](t)
		c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: dedupStage(), Spam: spamStage(3, 1e-9)})
		sink := &fanouttest.Sink[ev]{Store: func(op string, e ev) ev {
			if op == "create" {
				e.ID = "stored " + e.Msg
			}
			return e
		}}
		run := startSink(t, r, sink, c)
		for range 5 {
			require.NoError(t, r.Record(ev{Obj: "pod", Reason: "R", Msg: "m"}))
		}
		require.NoError(t, r.Flush(t.Context()))
		calls := sink.Calls()
		require.Len(t, calls, 3, "burst 3: two skipped")
		assert.Equal(t, "create", calls[0].Op)
		assert.Empty(t, calls[0].Value.ID)
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

// A custom SinkCorrelator may merge values into an earlier record: they are
// counted as merged and handled, not written and not dropped.
func TestSinkRunnerCountsMergedValuesAsHandled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[ev](t)
		c := &seriesSinkCorrelator{seen: map[string]int{}}
		sink := &fanouttest.Sink[ev]{}
		run := startSink(t, r, sink, c)
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

// A typed nil *Correlator means no correlation, as an untyped nil does.
func TestSinkRunnerTreatsTypedNilCorrelatorAsNone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[ev](t)
		sink := &fanouttest.Sink[ev]{}
		var c *fanout.Correlator[ev]
		startSink(t, r, sink, c)
		require.NoError(t, r.Record(ev{Msg: "m"}))
		require.NoError(t, r.Record(ev{Msg: "m"}))
		require.NoError(t, r.Flush(t.Context()))
		calls := sink.Calls()
		require.Len(t, calls, 2, "a typed nil *Correlator means no correlation, not a panic")
		assert.Equal(t, "create", calls[1].Op)
	})
}

// A panic in a sink or a handler drops that one value as DropRejected,
// without a retry, and the runner goes on.
func TestRunnerPanicInSinkOrHandlerDropsOneValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[ev](t, fastRetry(3))
		sink := &fanouttest.Sink[ev]{Panic: func(e ev) bool { return e.Msg == "panic" }}
		run := startSink(t, r, sink, nil)
		var handled []string
		hrun := startHandler(t, r, func(e ev) {
			if e.Msg == "panic" {
				panic("handler bug")
			}
			handled = append(handled, e.Msg)
		})
		for _, m := range []string{"a", "panic", "b"} {
			require.NoError(t, r.Record(ev{Msg: m}))
		}
		require.NoError(t, r.Flush(t.Context()))
		assert.Len(t, sink.Written(), 2)
		assert.Equal(t, uint64(1), run.Stats().Failures, "the panicking write is not retried")
		assert.Equal(t, uint64(1), run.Stats().DroppedRejected)
		assert.Equal(t, []string{"a", "b"}, handled)
		assert.Equal(t, uint64(1), hrun.Stats().DroppedRejected)
		assert.Equal(t, uint64(2), hrun.Stats().Written)
	})
}

// A panic in a correlator function drops the value as DropRejected and the
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
		require.NoError(t, err)
		var rejected atomic.Int32
		r := newRecorder[item](t, fanout.WithDropHandler(func(d fanout.Drop) {
			if d.Reason == fanout.DropRejected && d.Err != nil && strings.Contains(d.Err.Error(), "key bug") {
				rejected.Add(1)
			}
		}))
		run := startSink(t, r, &fanouttest.Sink[item]{Store: func(_ string, v item) item {
			if v.Key == "observe" {
				v.ID = "stored-bad"
			}
			return v
		}}, c)
		for _, k := range []string{"a", "bad key", "observe", "b"} {
			require.NoError(t, r.Record(item{Key: k}))
		}
		require.NoError(t, r.Flush(context.Background()))
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
		r := newRecorder[ev](t, fanout.WithQueueLength(4), fanout.WithDropHandler(func(d fanout.Drop) {
			if d.Reason == fanout.DropFull {
				full.Add(1)
			}
		}))
		slow := &fanouttest.Sink[ev]{Block: make(chan struct{})}
		srun := startSink(t, r, slow, nil)
		var got []string
		startHandler(t, r, func(e ev) { got = append(got, e.Msg) })

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
		for _, v := range slow.Written() {
			written = append(written, v.Msg)
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
		r := newRecorder[item](t, fanout.WithQueueLength(0), fanout.WithDropHandler(func(d fanout.Drop) {
			if d.Reason == fanout.DropFull {
				full.Add(1)
			}
		}))
		block := make(chan struct{})
		var got []int
		h := startHandler(t, r, func(v item) {
			if v.N < 0 {
				<-block
			}
			got = append(got, v.N)
		})
		sink := &fanouttest.Sink[item]{}
		s := startSink(t, r, sink, nil)
		synctest.Wait() // both runners wait in their receive
		for i := range 5 {
			require.NoError(t, r.Record(item{N: i}))
			synctest.Wait()
		}
		require.NoError(t, r.Record(item{N: -1})) // the handler blocks on it
		synctest.Wait()
		for i := range 3 {
			require.NoError(t, r.Record(item{N: 10 + i})) // the handler is busy: missed
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
		require.NoError(t, <-done)
		if want := []int{0, 1, 2, 3, 4, -1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("handler got %v, want %v", got, want)
		}
		if c := len(sink.Written()); c != 9 {
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

// Stop is idempotent, ends the stopped runner's retry pause at once (the
// value is dropped as DropShutdown) and leaves the other runners running.
func TestRunnerStopEndsRetriesAndLeavesOtherRunners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[ev](t, fanout.WithRetry(fanout.DefaultRetryPolicy()))
		sink := &fanouttest.Sink[ev]{Fail: func(string, ev, int) error { return errors.New("down") }}
		run := startSink(t, r, sink, nil)
		var handled atomic.Int64
		other := startHandler(t, r, func(ev) { handled.Add(1) })
		require.NoError(t, r.Record(ev{Msg: "a"}))
		synctest.Wait()
		start := time.Now()
		run.Stop()
		run.Stop()
		<-run.Done()
		assert.Equal(t, start, time.Now(), "Stop cuts the retry pause short")
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

// Drain takes no new value but writes those already queued with their
// retries, in order, and then the runner exits; Stop during the drain cuts
// the retries short.
func TestRunnerDrainWritesQueuedValuesWithRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[ev](t, fanout.WithRetry(fanout.DefaultRetryPolicy()))
		sink := &fanouttest.Sink[ev]{Fail: func(_ string, _ ev, call int) error {
			if call <= 3 {
				return errors.New("down")
			}
			return nil
		}}
		run := startSink(t, r, sink, nil)
		require.NoError(t, r.Record(ev{Msg: "a"}))
		require.NoError(t, r.Record(ev{Msg: "b"}))
		synctest.Wait()
		run.Drain()
		run.Drain()
		require.NoError(t, r.Record(ev{Msg: "c"}), "recording goes on for the other runners")
		<-run.Done()
		st := run.Stats()
		assert.Equal(t, uint64(2), st.Written, "both queued values written after their retries")
		assert.Equal(t, uint64(3), st.Retries)
		assert.Zero(t, st.Dropped)
		var msgs []string
		for _, c := range sink.Calls() {
			msgs = append(msgs, c.Value.Msg)
		}
		assert.Equal(t, []string{"a", "a", "a", "a", "b"}, msgs, "nothing recorded after Drain reaches it")
	})
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[ev](t, fanout.WithRetry(fanout.DefaultRetryPolicy()))
		sink := &fanouttest.Sink[ev]{Fail: func(string, ev, int) error { return errors.New("down") }}
		run := startSink(t, r, sink, nil)
		require.NoError(t, r.Record(ev{Msg: "a"}))
		synctest.Wait()
		run.Drain()
		synctest.Wait()
		start := time.Now()
		run.Stop()
		<-run.Done()
		assert.Equal(t, start, time.Now(), "Stop cuts the drain's retry pause short")
		assert.Equal(t, uint64(1), run.Stats().DroppedShutdown)
	})
}

// Each runner is one goroutine, however many values are queued or
// retrying, and none is left after Shutdown.
func TestGoroutinesAreBoundedByRunners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := fanout.NewRecorder[item](fanout.WithRetry(fanout.DefaultRetryPolicy()))
		require.NoError(t, err)
		startSink(t, r, &fanouttest.Sink[item]{Fail: func(string, item, int) error { return errors.New("down") }}, nil)
		_, err = r.StartSlog(slog.New(slog.DiscardHandler), slog.LevelInfo, "v", nil)
		require.NoError(t, err)
		startHandler(t, r, func(item) {})
		for i := range 2000 {
			require.NoError(t, r.Record(item{N: i}))
		}
		for range 3 {
			synctest.Wait()
			if n := fanoutGoroutines(); n != 3 {
				t.Errorf("%d goroutines of package fanout for 3 runners", n)
			}
			time.Sleep(7 * time.Second) // fake time: the sink runner retries
		}
		require.NoError(t, r.Shutdown(context.Background()))
		synctest.Wait() // a runner closes Done just before its goroutine returns
		if n := fanoutGoroutines(); n != 0 {
			t.Errorf("%d goroutines of package fanout left after Shutdown", n)
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

// A sink runner counts what a merging correlator reports after the fact:
// merged values lost move from Merged to their Dropped counter, in the
// runner's and the recorder's stats, also once the runner has exited, and
// the correlator's failed writes count as failures. Each loss is reported
// to the drop handler.
func TestSinkRunnerCountsLateLosses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var drops []fanout.Drop
		r := newRecorder[ev](t, fanout.WithDropHandler(func(d fanout.Drop) { drops = append(drops, d) }))
		c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: mergeStage(2), CacheSize: 1})
		run := startSink(t, r, &fanouttest.Sink[ev]{}, c)
		for _, e := range []ev{at("a", 0), at("a", 1), at("a", 2), at("a", 3), at("a", 4)} {
			require.NoError(t, r.Record(e))
		}
		require.NoError(t, r.Flush(t.Context()))
		assert.EqualValues(t, 3, run.Stats().Merged)

		failing := func(_ context.Context, e ev) (ev, error) { return e, errors.New("no") }
		require.NoError(t, c.WriteOpen(t.Context(), fanout.Sweep[ev]{Write: failing}))
		require.NoError(t, r.Record(at("b", 0))) // evicts a and its 3 merged values
		require.NoError(t, r.Flush(t.Context()))
		s := run.Stats()
		assert.Equal(t, fanout.RunnerStats{Received: 6, Written: 3, Failures: 1, Dropped: 3, DroppedFull: 3, MergedLost: 3}, s)
		merged := `fanout_recorder_runner_values_total{result=merged}`
		assert.EqualValues(t, 3, sampleValues(t, r.Metrics())[merged], "the merged counter does not go down")

		require.NoError(t, r.Record(at("b", 1)))
		require.NoError(t, r.Record(at("b", 2)))
		run.Stop()
		<-run.Done()
		c.Purge() // after the runner exited: b's merged value is lost
		rs := r.Stats()
		assert.Equal(t, fanout.RunnerStats{Received: 8, Written: 4, Failures: 1, Dropped: 4, DroppedFull: 3, DroppedShutdown: 1, MergedLost: 4}, rs.RunnerStats)
		assert.EqualValues(t, 4, sampleValues(t, r.Metrics())[merged])
		require.Len(t, drops, 4)
		assert.Equal(t, fanout.DropShutdown, drops[3].Reason)
	})
}

// A merging correlator serves one sink runner: a second StartSink with it
// fails, and the first keeps it.
func TestStartSinkRefusesSharedMergingCorrelator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[ev](t)
		c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: mergeStage(2)})
		startSink(t, r, &fanouttest.Sink[ev]{}, c)
		_, err := r.StartSink(&fanouttest.Sink[ev]{}, c)
		require.Error(t, err)
		assert.Equal(t, 1, r.Stats().Runners)
	})
}

// purgeAfterMerge purges its correlator right after a Correlate that
// merged, before the runner has counted the value: an interleaving of a
// Purge on another goroutine, made deterministic.
type purgeAfterMerge struct{ *fanout.Correlator[ev] }

func (p purgeAfterMerge) Correlate(v ev) fanout.Correlation[ev] {
	r := p.Correlator.Correlate(v)
	if r.Merged {
		p.Correlator.Purge()
	}
	return r
}

// A merged value reported lost before its runner counted it as merged is
// counted once: lost, not also merged. It was in both Merged and
// DroppedShutdown, and the counts no longer added up.
func TestSinkRunnerCountsAMergedValueLostBeforeItsCountOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[ev](t)
		c := newCorrelator(t, fanout.CorrelatorConfig[ev]{Dedup: mergeStage(2)})
		startSink[ev](t, r, &fanouttest.Sink[ev]{}, purgeAfterMerge{c})
		for i := range 3 {
			require.NoError(t, r.Record(at("a", i)))
		}
		require.NoError(t, r.Flush(t.Context()))
		s := r.Stats()
		assert.EqualValues(t, 3, s.Received)
		assert.EqualValues(t, 2, s.Written)
		assert.EqualValues(t, 1, s.DroppedShutdown)
		assert.EqualValues(t, 1, s.MergedLost)
		assert.Zero(t, s.Merged)
		assert.Equal(t, s.Received, s.Written+s.Merged+s.Dropped)
	})
}

package fanout_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

func newRecorder(t *testing.T, opts ...fanout.RecorderOption) *fanout.Recorder[ev] {
	t.Helper()
	r, err := fanout.NewRecorder[ev](opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	return r
}

func fastRetry(tries int) fanout.RecorderOption {
	return fanout.WithRetry(fanout.RetryPolicy{MaxTries: tries, Sleep: time.Second})
}

func TestRecorderConfigErrors(t *testing.T) {
	for name, opt := range map[string]fanout.RecorderOption{
		"negative queue":   fanout.WithQueueLength(-1),
		"zero tries":       fanout.WithRetry(fanout.RetryPolicy{}),
		"negative sleep":   fanout.WithRetry(fanout.RetryPolicy{MaxTries: 1, Sleep: -1}),
		"negative jitter":  fanout.WithRetry(fanout.RetryPolicy{MaxTries: 1, Jitter: -0.5}),
		"stamp other type": fanout.WithStamp(func(v int, _ time.Time) int { return v }),
	} {
		t.Run(name, func(t *testing.T) {
			r, err := fanout.NewRecorder[ev](opt)
			assert.Nil(t, r)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "fanout: "), err.Error())
		})
	}
	r := newRecorder(t)
	_, err := r.StartSink(nil, nil)
	assert.Error(t, err)
	_, err = r.StartHandler(nil)
	assert.Error(t, err)
	_, err = r.StartSlog(nil, slog.LevelInfo, "x", nil)
	assert.Error(t, err)
}

func TestRecorderStampAndCreate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newManualClock()
		r := newRecorder(t, fanout.WithClock(clk), fanout.WithStamp(func(e ev, now time.Time) ev { e.First, e.Last = now, now; return e }))
		sink := &fanouttest.Sink[ev]{}
		_, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		for i := range 3 {
			require.NoError(t, r.Record(ev{Msg: fmt.Sprint(i)}))
			clk.Advance(time.Minute)
		}
		require.NoError(t, r.Flush(t.Context()))
		calls := sink.Calls()
		require.Len(t, calls, 3)
		start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
		for i, c := range calls {
			assert.Equal(t, "create", c.Op, "no correlator: every value is created")
			assert.Equal(t, fmt.Sprint(i), c.Value.Msg, "in order")
			assert.Equal(t, start.Add(time.Duration(i)*time.Minute), c.Value.First, "stamped with the recorder's clock")
		}
		st := r.Stats()
		assert.Equal(t, uint64(3), st.Recorded)
		assert.Equal(t, uint64(3), st.Written)
		assert.Equal(t, uint64(0), st.Dropped)
	})
}

// With a correlator, repeats become updates that refer to what the sink
// returned, and spam is skipped and counted.
func TestRecorderSinkWithCorrelator(t *testing.T) {
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

// client-go's schedule: after the first failure a random pause in [0, Sleep),
// then Sleep each time; MaxTries attempts in all.
func TestRecorderRetrySchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var drops []fanout.Drop
		var mu sync.Mutex
		r := newRecorder(t, fanout.WithRetry(fanout.DefaultRetryPolicy()), fanout.WithDropHandler(func(d fanout.Drop) {
			mu.Lock()
			drops = append(drops, d)
			mu.Unlock()
		}))
		boom := errors.New("connection refused")
		sink := &fanouttest.Sink[ev]{Fail: func(string, ev, int) error { return boom }}
		run, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		start := time.Now()
		require.NoError(t, r.Record(ev{Msg: "m"}))
		require.NoError(t, r.Flush(t.Context()))

		calls := sink.Calls()
		require.Len(t, calls, 12, "12 tries")
		assert.Equal(t, start, calls[0].At, "the first try is immediate")
		first := calls[1].At.Sub(calls[0].At)
		assert.GreaterOrEqual(t, first, time.Duration(0))
		assert.Less(t, first, 10*time.Second, "the first pause is random in [0, 10 s)")
		for i := 2; i < len(calls); i++ {
			assert.Equal(t, 10*time.Second, calls[i].At.Sub(calls[i-1].At), "pause %d", i)
		}
		st := run.Stats()
		assert.Equal(t, uint64(12), st.Failures)
		assert.Equal(t, uint64(1), st.DroppedRetries)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, drops, 1)
		assert.Equal(t, fanout.DropRetries, drops[0].Reason)
		assert.ErrorIs(t, drops[0].Err, boom)
		assert.Equal(t, run.Stats().Received, uint64(1))
	})
}

func TestRecorderRetryJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t, fanout.WithRetry(fanout.RetryPolicy{MaxTries: 30, Sleep: 10 * time.Second, Jitter: 0.25}))
		sink := &fanouttest.Sink[ev]{Fail: func(string, ev, int) error { return errors.New("down") }}
		_, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "m"}))
		require.NoError(t, r.Flush(t.Context()))
		calls := sink.Calls()
		require.Len(t, calls, 30)
		distinct := map[time.Duration]bool{}
		for i := 1; i < len(calls); i++ {
			d := calls[i].At.Sub(calls[i-1].At)
			assert.GreaterOrEqual(t, d, 10*time.Second)
			assert.LessOrEqual(t, d, 12500*time.Millisecond)
			distinct[d] = true
		}
		assert.Greater(t, len(distinct), 1, "pauses vary")
	})
}

func TestRecorderRetryThenSucceed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t, fastRetry(5))
		sink := &fanouttest.Sink[ev]{
			Key: func(e ev) string { return e.Msg },
			Fail: func(_ string, _ ev, attempt int) error {
				if attempt < 3 {
					return errors.New("flaky")
				}
				return nil
			},
		}
		run, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "a"}))
		require.NoError(t, r.Record(ev{Msg: "b"}))
		require.NoError(t, r.Flush(t.Context()))
		var order []string
		for _, c := range sink.Calls() {
			order = append(order, fmt.Sprint(c.Value.Msg, c.Err == nil))
		}
		assert.Equal(t, []string{"afalse", "afalse", "atrue", "bfalse", "bfalse", "btrue"}, order,
			"one write at a time, in order")
		st := run.Stats()
		assert.Equal(t, uint64(2), st.Written)
		assert.Equal(t, uint64(4), st.Failures)
		assert.Equal(t, uint64(0), st.Dropped)
	})
}

func TestRecorderNotRetryable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		invalid := errors.New("invalid")
		r := newRecorder(t, fanout.WithRetry(fanout.RetryPolicy{MaxTries: 12, Sleep: time.Second,
			Retryable: func(err error) bool { return !errors.Is(err, invalid) }}))
		sink := &fanouttest.Sink[ev]{Fail: func(_ string, e ev, _ int) error {
			if e.Msg == "bad" {
				return fmt.Errorf("rejected: %w", invalid)
			}
			return nil
		}}
		run, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "bad"}))
		require.NoError(t, r.Record(ev{Msg: "good"}))
		require.NoError(t, r.Flush(t.Context()))
		assert.Len(t, sink.Calls(), 2, "no retry of a rejected value")
		st := run.Stats()
		assert.Equal(t, uint64(1), st.DroppedRejected)
		assert.Equal(t, uint64(1), st.Written)
	})
}

func TestRecorderPanicsAreContained(t *testing.T) {
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

// A sink that cannot keep up loses values from its own queue only, counted;
// the recorder's caller never waits and other runners get everything.
func TestRecorderFullQueueDropsForThatRunnerOnly(t *testing.T) {
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

func TestFlushWaitsForWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t)
		sink := &fanouttest.Sink[ev]{Block: make(chan struct{})}
		_, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		for i := range 3 {
			require.NoError(t, r.Record(ev{Msg: fmt.Sprint(i)}))
		}
		var flushed atomic.Bool
		go func() {
			_ = r.Flush(context.Background())
			flushed.Store(true)
		}()
		for i := range 3 {
			synctest.Wait()
			assert.False(t, flushed.Load(), "Flush returned with %d of 3 written", i)
			sink.Block <- struct{}{}
		}
		synctest.Wait()
		assert.True(t, flushed.Load())
		assert.Equal(t, 3, len(sink.Written()))
	})
}

// Values recorded after Flush began are not waited for.
func TestFlushIgnoresLaterValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t)
		sink := &fanouttest.Sink[ev]{Block: make(chan struct{})}
		_, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "before"}))
		done := make(chan error)
		go func() { done <- r.Flush(context.Background()) }()
		synctest.Wait()
		require.NoError(t, r.Record(ev{Msg: "after"}))
		sink.Block <- struct{}{}
		require.NoError(t, <-done)
		assert.Equal(t, 1, len(sink.Written()))
		sink.Block <- struct{}{}
	})
}

func TestFlushContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t)
		sink := &fanouttest.Sink[ev]{Block: make(chan struct{})}
		_, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "stuck"}))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		assert.ErrorIs(t, r.Flush(ctx), context.DeadlineExceeded)
		close(sink.Block)
	})
}

// Dropped values count as done: Flush does not wait for values that missed
// a full queue, nor for refused ones.
func TestFlushCountsDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(t, fanout.WithQueueLength(1))
		sink := &fanouttest.Sink[ev]{Block: make(chan struct{})}
		_, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		w, err := r.Watch(fanout.WithFullChannelBehavior(fanout.WaitIfChannelFull), fanout.WithQueueLength(1))
		require.NoError(t, err)

		require.NoError(t, r.Record(ev{Msg: "0"})) // in flight at the sink; w full
		synctest.Wait()
		assert.ErrorIs(t, r.Record(ev{Msg: "refused"}), fanout.ErrDropped)
		_, err = w.Next(t.Context())
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "1"})) // queued at the sink
		_, err = w.Next(t.Context())
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "2"})) // sink queue full: dropped
		_, err = w.Next(t.Context())
		require.NoError(t, err)

		done := make(chan error)
		go func() { done <- r.Flush(context.Background()) }()
		sink.Block <- struct{}{}
		sink.Block <- struct{}{}
		require.NoError(t, <-done)
		st := r.Stats()
		assert.Equal(t, uint64(1), st.Refused)
		assert.Equal(t, uint64(1), st.DroppedFull)
		assert.Equal(t, uint64(2), st.Written)
		assert.Equal(t, uint64(2), st.Dropped)
		w.Stop()
	})
}

func TestFlushNoRunners(t *testing.T) {
	r := newRecorder(t)
	require.NoError(t, r.Record(ev{}))
	assert.NoError(t, r.Flush(context.Background()))
}

func TestRecorderShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := fanout.NewRecorder[ev](fanout.WithRetry(fanout.DefaultRetryPolicy()))
		require.NoError(t, err)
		sink := &fanouttest.Sink[ev]{Fail: func(_ string, e ev, _ int) error {
			if e.Msg == "failing" {
				return errors.New("down")
			}
			return nil
		}}
		run, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "failing"}))
		time.Sleep(45 * time.Second) // retrying: 5 or 6 of 12 tries made
		synctest.Wait()
		tries := len(sink.Calls())
		require.NoError(t, r.Record(ev{Msg: "queued"}))

		start := time.Now()
		require.NoError(t, r.Shutdown(context.Background()))
		assert.Equal(t, start, time.Now(), "Shutdown cuts the retry pause short")
		calls := sink.Calls()
		require.Len(t, calls, tries+1, "no retry after Shutdown; the queued value is tried once")
		assert.Equal(t, "queued", calls[tries].Value.Msg)
		assert.NoError(t, calls[tries].Err)
		st := run.Stats()
		assert.Equal(t, uint64(1), st.DroppedShutdown)
		assert.Equal(t, uint64(1), st.Written)
		<-run.Done()

		assert.ErrorIs(t, r.Record(ev{}), fanout.ErrStopped)
		_, err = r.StartSink(sink, nil)
		assert.ErrorIs(t, err, fanout.ErrStopped)
		_, err = r.StartHandler(func(ev) {})
		assert.ErrorIs(t, err, fanout.ErrStopped)
		_, err = r.Watch()
		assert.ErrorIs(t, err, fanout.ErrStopped)
		assert.NoError(t, r.Shutdown(context.Background()), "idempotent")
		assert.NoError(t, r.Flush(context.Background()), "nothing left to wait for")
		assert.Equal(t, 0, r.Stats().Runners)
		assert.Equal(t, uint64(1), r.Stats().DroppedShutdown, "exited runners still count")
	})
}

// Shutdown is bounded by its context: a sink that hangs has its context
// cancelled and what is still queued is dropped.
func TestRecorderShutdownContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := fanout.NewRecorder[ev]()
		require.NoError(t, err)
		sink := &fanouttest.Sink[ev]{Block: make(chan struct{})} // never released
		run, err := r.StartSink(sink, nil)
		require.NoError(t, err)
		for i := range 5 {
			require.NoError(t, r.Record(ev{Msg: fmt.Sprint(i)}))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.ErrorIs(t, r.Shutdown(ctx), context.DeadlineExceeded)
		<-run.Done()
		st := run.Stats()
		assert.Equal(t, uint64(5), st.DroppedShutdown, "one in flight, cancelled; four never tried")
		assert.Len(t, sink.Calls(), 1)
		assert.Equal(t, uint64(0), st.Written)
	})
}

func TestRunnerStop(t *testing.T) {
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

func TestRecorderLogging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs, drops bytes.Buffer
		dropLog := slog.New(slog.NewTextHandler(&drops, &slog.HandlerOptions{
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			},
		}))
		r := newRecorder(t, fanout.WithLogger(dropLog), fastRetry(1))
		_, err := r.StartSlog(slog.New(slog.NewTextHandler(&logs, nil)), slog.LevelInfo, "event",
			func(e ev) []slog.Attr { return []slog.Attr{slog.String("reason", e.Reason), slog.String("msg", e.Msg)} })
		require.NoError(t, err)
		_, err = r.StartSink(&fanouttest.Sink[ev]{Fail: func(string, ev, int) error { return errors.New("down") }}, nil)
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Reason: "Started", Msg: "hello"}))
		require.NoError(t, r.Flush(t.Context()))
		assert.Contains(t, logs.String(), `level=INFO msg=event reason=Started msg=hello`)
		assert.Contains(t, drops.String(), `level=WARN msg="fanout: value dropped" reason=retries`)
		assert.Contains(t, drops.String(), `err=down`)

		var plain bytes.Buffer
		_, err = r.StartSlog(slog.New(slog.NewTextHandler(&plain, nil)), slog.LevelWarn, "v", nil)
		require.NoError(t, err)
		require.NoError(t, r.Record(ev{Msg: "x"}))
		require.NoError(t, r.Flush(t.Context()))
		assert.Contains(t, plain.String(), `level=WARN msg=v value="{Obj: Reason: Msg:x`)
	})
}

// Many goroutines record while others flush: every recorded value is
// written or counted as dropped, and each Flush sees its values written.
func TestRecorderConcurrentAccounting(t *testing.T) {
	r := newRecorder(t, fanout.WithQueueLength(8))
	sink := &fanouttest.Sink[ev]{}
	run, err := r.StartSink(sink, nil)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 2000 {
				require.NoError(t, r.Record(ev{Msg: "m"}))
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 50 {
				before := r.Stats()
				require.NoError(t, r.Flush(context.Background()))
				after := run.Stats()
				assert.GreaterOrEqual(t, after.Written+after.Dropped, before.Recorded-before.Refused,
					"everything recorded before Flush is written or dropped")
			}
		})
	}
	wg.Wait()
	require.NoError(t, r.Flush(context.Background()))
	st := run.Stats()
	assert.Equal(t, uint64(8000), st.Written+st.DroppedFull)
	assert.Equal(t, int(st.Written), len(sink.Written()))
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

func TestRecorderCustomSinkCorrelatorMerges(t *testing.T) {
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

func TestRecorderTypedNilCorrelator(t *testing.T) {
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

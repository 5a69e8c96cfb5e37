package fanout_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fanout-go/fanout"
	"github.com/fanout-go/fanout/fanouttest"
)

// item is a numbered value for the recorder, runner and retry tests: N
// identifies it (and decides how a fake treats it), Key groups values for a
// correlator and ID is what a sink stored. The log-like ev of the
// correlator tests serves where messages and timestamps matter.
type item struct {
	N   int
	Key string
	ID  string
}

// newRecorder returns a recorder that is shut down when the test ends.
func newRecorder[T any](t *testing.T, opts ...fanout.RecorderOption) *fanout.Recorder[T] {
	t.Helper()
	r, err := fanout.NewRecorder[T](opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	return r
}

// startSink starts a sink runner, failing the test on error.
func startSink[T any](t *testing.T, r *fanout.Recorder[T], s fanout.Sink[T], c fanout.SinkCorrelator[T]) *fanout.Runner[T] {
	t.Helper()
	run, err := r.StartSink(s, c)
	require.NoError(t, err)
	return run
}

// startHandler starts a handler runner, failing the test on error.
func startHandler[T any](t *testing.T, r *fanout.Recorder[T], f func(T)) *fanout.Runner[T] {
	t.Helper()
	run, err := r.StartHandler(f)
	require.NoError(t, err)
	return run
}

// fastRetry retries a failed write tries times in all, a second apart.
func fastRetry(tries int) fanout.RecorderOption {
	return fanout.WithRetry(fanout.RetryPolicy{MaxTries: tries, Sleep: time.Second})
}

// NewRecorder rejects invalid options with an error that names the package,
// before it allocates or starts anything; the Start methods reject nil.
func TestNewRecorderRejectsInvalidConfig(t *testing.T) {
	for name, opt := range map[string]fanout.RecorderOption{
		"negative queue":              fanout.WithQueueLength(-1),
		"queue above MaxQueueLength":  fanout.WithQueueLength(fanout.MaxQueueLength + 1),
		"queue of 1<<45":              fanout.WithQueueLength(min(1<<45, math.MaxInt)), // MaxInt on 32-bit platforms
		"queue of math.MaxInt":        fanout.WithQueueLength(math.MaxInt),
		"zero tries":                  fanout.WithRetry(fanout.RetryPolicy{}),
		"negative sleep":              fanout.WithRetry(fanout.RetryPolicy{MaxTries: 1, Sleep: -1}),
		"negative jitter":             fanout.WithRetry(fanout.RetryPolicy{MaxTries: 1, Jitter: -0.5}),
		"infinite jitter":             fanout.WithRetry(fanout.RetryPolicy{MaxTries: 3, Sleep: time.Second, Jitter: math.Inf(1)}),
		"NaN jitter":                  fanout.WithRetry(fanout.RetryPolicy{MaxTries: 3, Sleep: time.Second, Jitter: math.NaN()}),
		"stamp hook for another type": fanout.WithStamp(func(v int, _ time.Time) int { return v }),
	} {
		t.Run(name, func(t *testing.T) {
			r, err := fanout.NewRecorder[ev](opt)
			assert.Nil(t, r)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "fanout: "), err.Error())
		})
	}
	r := newRecorder[ev](t)
	_, err := r.StartSink(nil, nil)
	assert.Error(t, err)
	_, err = r.StartHandler(nil)
	assert.Error(t, err)
	_, err = r.StartSlog(nil, slog.LevelInfo, "x", nil)
	assert.Error(t, err)
}

// Record stamps each value with the recorder's clock; a sink runner without
// a correlator creates every value, in order.
func TestRecordStampsValuesWithTheRecordersClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newManualClock()
		r := newRecorder[ev](t, fanout.WithClock(clk), fanout.WithStamp(func(e ev, now time.Time) ev { e.First, e.Last = now, now; return e }))
		sink := &fanouttest.Sink[ev]{}
		startSink(t, r, sink, nil)
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

// A plain watcher with queue length 0 (hand-off) that waits when full cannot
// make Record wait: it misses each value its reader is not already waiting
// for, counted in its own stats (documented on Recorder.Watch).
func TestHandOffPlainWatcherNeverMakesRecordWait(t *testing.T) {
	r := newRecorder[item](t, fanout.WithQueueLength(0))
	w, err := r.Watch(fanout.WithFullChannelBehavior(fanout.WaitIfChannelFull))
	require.NoError(t, err)
	defer w.Stop()
	require.NoError(t, r.Record(item{N: 1})) // nobody is receiving from w
	assert.Equal(t, uint64(1), w.Stats().DroppedFull)
	assert.Equal(t, uint64(1), r.Stats().Recorded)
}

// Record and StartHandler called from inside a handler and a sink work (the
// recorder is not held while runners run), and the recorded values reach
// the other runners; Flush from outside then sees all of them.
func TestRunnersMayRecordAndStartRunners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder[item](t)
		var seen sync.Map
		var extra *fanout.Runner[item]
		startHandler(t, r, func(v item) {
			if v.N < 3 {
				if err := r.Record(item{N: v.N + 1, Key: "from handler"}); err != nil {
					t.Error(err)
				}
			}
			if v.N == 0 && extra == nil {
				var err error
				extra, err = r.StartHandler(func(v item) { seen.Store(fmt.Sprint("extra ", v.N, v.Key), true) })
				if err != nil {
					t.Error(err)
				}
			}
		})
		sink := &fanouttest.Sink[item]{
			// Store runs inside the sink's write, on the runner's goroutine.
			Store: func(_ string, v item) item {
				if v.Key == "" && v.N == 0 {
					if err := r.Record(item{N: 100, Key: "from sink"}); err != nil {
						t.Error(err)
					}
				}
				return v
			},
		}
		startSink(t, r, sink, nil)
		require.NoError(t, r.Record(item{N: 0}))
		synctest.Wait()
		require.NoError(t, r.Flush(context.Background()))
		for _, v := range sink.Written() {
			seen.Store(fmt.Sprint("sink ", v.N, v.Key), true)
		}
		for _, k := range []string{"sink 0", "sink 1from handler", "sink 3from handler", "sink 100from sink", "extra 3from handler"} {
			if _, ok := seen.Load(k); !ok {
				t.Errorf("missing %q", k)
			}
		}
		if st := r.Stats(); st.Recorded != 5 || st.Dropped != 0 {
			t.Errorf("stats %+v: want 5 recorded, none dropped", st)
		}
	})
}

// Drops are logged at WARN with their reason and error; StartSlog logs each
// value with the attributes given, or the value itself.
func TestRecorderLogsDropsAndStartSlogLogsValues(t *testing.T) {
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
		r := newRecorder[ev](t, fanout.WithLogger(dropLog), fastRetry(1))
		_, err := r.StartSlog(slog.New(slog.NewTextHandler(&logs, nil)), slog.LevelInfo, "event",
			func(e ev) []slog.Attr { return []slog.Attr{slog.String("reason", e.Reason), slog.String("msg", e.Msg)} })
		require.NoError(t, err)
		startSink(t, r, &fanouttest.Sink[ev]{Fail: func(string, ev, int) error { return errors.New("down") }}, nil)
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

// Shutdown ends a retry pause at once and gives a queued value its one
// attempt; afterwards every call returns ErrStopped, Shutdown and Flush
// return nil, and the exited runner's counters still count.
func TestShutdownCutsRetryPausesAndStopsIntake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := fanout.NewRecorder[ev](fanout.WithRetry(fanout.DefaultRetryPolicy()))
		require.NoError(t, err)
		sink := &fanouttest.Sink[ev]{Fail: func(_ string, e ev, _ int) error {
			if e.Msg == "failing" {
				return errors.New("down")
			}
			return nil
		}}
		run := startSink(t, r, sink, nil)
		require.NoError(t, r.Record(ev{Msg: "failing"}))
		time.Sleep(45 * time.Second) // fake time: retrying, 5 or 6 of 12 tries made
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

		recorded := r.Stats().Recorded
		assert.ErrorIs(t, r.Record(ev{}), fanout.ErrStopped)
		assert.Equal(t, recorded, r.Stats().Recorded, "a value refused after Shutdown is not recorded")
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

// After Shutdown starts nothing is retried: a value in its retry pause is
// dropped at once, and each queued value gets at most one attempt although
// the sink keeps failing. With MaxTries 1 the reason is DropRetries, else
// DropShutdown. Shutdown takes no (fake) time.
func TestShutdownGivesEachQueuedValueOneAttempt(t *testing.T) {
	for _, tries := range []int{1, 5} {
		t.Run(fmt.Sprint("MaxTries=", tries), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, err := fanout.NewRecorder[item](fanout.WithRetry(fanout.RetryPolicy{MaxTries: tries, Sleep: 10 * time.Second}))
				require.NoError(t, err)
				sink := &fanouttest.Sink[item]{
					Block: make(chan struct{}), // holds value 0 until closed
					Fail:  func(string, item, int) error { return errors.New("down") },
				}
				attempts := func() map[int]int {
					m := map[int]int{}
					for _, c := range sink.Calls() {
						m[c.Value.N]++
					}
					return m
				}
				run := startSink(t, r, sink, nil)
				for i := range 4 {
					require.NoError(t, r.Record(item{N: i}))
				}
				close(sink.Block)
				time.Sleep(15 * time.Second) // fake time: value 0 has made 2 attempts if retried, then pauses
				synctest.Wait()
				before := attempts()
				start := time.Now()
				require.NoError(t, r.Shutdown(context.Background()))
				if d := time.Since(start); d != 0 {
					t.Errorf("Shutdown took %v", d)
				}
				after := attempts()
				if after[0] != before[0] {
					t.Errorf("value 0 retried after Shutdown: %d attempts, %d before", after[0], before[0])
				}
				for i := 1; i < 4; i++ {
					if after[i]-before[i] > 1 {
						t.Errorf("value %d: %d attempts after Shutdown began", i, after[i]-before[i])
					}
				}
				st := run.Stats()
				want := st.DroppedShutdown
				if tries == 1 {
					want = st.DroppedRetries
				}
				if want != 4 || st.Dropped != 4 || st.Received != 4 || st.Written != 0 {
					t.Errorf("stats %+v", st)
				}
			})
		})
	}
}

// Shutdown is bounded by its context: a sink that hangs has its context
// cancelled and what is still queued is dropped.
func TestShutdownContextCancelsAHangingSink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := fanout.NewRecorder[ev]()
		require.NoError(t, err)
		sink := &fanouttest.Sink[ev]{Block: make(chan struct{})} // never released
		run := startSink(t, r, sink, nil)
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

// A handler that ignores the end of Shutdown's context keeps its runner in
// its call: what is queued behind it shows as queued until the call
// returns, and is then counted as dropped at shutdown, as Shutdown's doc
// says.
func TestShutdownCountsAStuckHandlersQueueOnceItsCallReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := fanout.NewRecorder[ev]()
		require.NoError(t, err)
		release, entered := make(chan struct{}), make(chan struct{}, 1)
		run, err := r.StartHandler(func(ev) {
			entered <- struct{}{}
			<-release
		})
		require.NoError(t, err)
		for i := range 10 {
			require.NoError(t, r.Record(ev{Msg: fmt.Sprint(i)}))
		}
		<-entered
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.ErrorIs(t, r.Shutdown(ctx), context.DeadlineExceeded)
		st := run.Stats()
		assert.Equal(t, 9, st.Queued, "behind the call in flight")
		assert.Zero(t, st.DroppedShutdown)
		close(release)
		<-run.Done()
		st = run.Stats()
		assert.Equal(t, uint64(9), st.DroppedShutdown)
		assert.Equal(t, uint64(1), st.Written)
		assert.Zero(t, st.Queued)
	})
}

// Shutdown called from inside a handler or a sink waits for that very
// runner, which cannot finish until the call returns: it returns
// context.DeadlineExceeded when its context ends, and the runner then exits.
// (In the synctest bubble, a Shutdown that never returned would fail the
// test as a deadlock instead of hanging it.)
func TestShutdownFromInsideARunnerReturnsWhenItsContextEnds(t *testing.T) {
	for _, where := range []string{"handler", "sink"} {
		t.Run(where, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, err := fanout.NewRecorder[item]()
				require.NoError(t, err)
				res := make(chan error, 1)
				shut := func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					res <- r.Shutdown(ctx)
				}
				var run *fanout.Runner[item]
				if where == "handler" {
					run = startHandler(t, r, func(item) { shut() })
				} else {
					run = startSink(t, r, &fanouttest.Sink[item]{Fail: func(string, item, int) error {
						shut() // inside the sink's write, on the runner's goroutine
						return errors.New("fatal")
					}}, nil)
				}
				start := time.Now()
				require.NoError(t, r.Record(item{}))
				select {
				case err := <-res:
					assert.ErrorIs(t, err, context.DeadlineExceeded)
					assert.Equal(t, time.Second, time.Since(start), "Shutdown waited for its whole context")
				case <-time.After(time.Hour):
					t.Fatalf("Shutdown(ctx with a 1 s timeout) called from a %s did not return within an hour", where)
				}
				<-run.Done()
			})
		})
	}
}

// From the start of Shutdown, Record fails as the Start methods do: once a
// Start method has returned ErrStopped, no Record succeeds. Shutdown marked
// the recorder stopped before it shut its broadcaster down, and a Record
// in between was accepted (40 rounds in 300).
func TestNoRecordSucceedsAfterAStartMethodSawShutdown(t *testing.T) {
	accepted := 0
	for range 100 {
		r, err := fanout.NewRecorder[int]()
		require.NoError(t, err)
		for range 200 {
			_, err := r.StartHandler(func(int) {})
			require.NoError(t, err)
		}
		done := make(chan struct{})
		go func() { defer close(done); _ = r.Shutdown(context.Background()) }()
		for {
			if _, err := r.StartHandler(func(int) {}); err != nil {
				break
			}
		}
		if r.Record(1) == nil {
			accepted++
		}
		<-done
	}
	assert.Zero(t, accepted, "Records accepted after a Start method returned ErrStopped")
}

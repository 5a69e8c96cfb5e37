package fanout_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
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

// item is a numbered value for the recorder, runner and retry tests.
type item struct {
	N   int
	Key string
	ID  string
}

func newRecorder(t *testing.T, opts ...fanout.RecorderOption) *fanout.Recorder[ev] {
	t.Helper()
	r, err := fanout.NewRecorder[ev](opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	return r
}

func newRev(t *testing.T, opts ...fanout.RecorderOption) *fanout.Recorder[item] {
	t.Helper()
	r, err := fanout.NewRecorder[item](opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	return r
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// funcSink is a Sink made of one function for both Create and Update.
type funcSink struct {
	f func(ctx context.Context, op string, v item) (item, error)
}

func (s funcSink) Create(ctx context.Context, v item) (item, error) { return s.f(ctx, "create", v) }

func (s funcSink) Update(ctx context.Context, v item) (item, error) { return s.f(ctx, "update", v) }

func fastRetry(tries int) fanout.RecorderOption {
	return fanout.WithRetry(fanout.RetryPolicy{MaxTries: tries, Sleep: time.Second})
}

const childEnv = "FANOUT_REVIEW_CHILD"

// inChild reports whether this process is the child for test name.
func inChild(name string) bool { return os.Getenv(childEnv) == name }

// runChild runs test t.Name() in a child process with the child marker set
// and returns its combined output and exit error.
func runChild(t *testing.T) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func TestNewRecorderRejectsInvalidConfig(t *testing.T) {
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

// TestNewRecorderRejectsHugeQueueLength: WithQueueLength documents only negative
// lengths as errors (NewRecorder returns one).
//
// Actual, for absurd but non-negative lengths:
//   - n > 1<<62: NewRecorder never returns. New (fanout.go:109-112) doubles
//     ringCap until it reaches n; the int overflows to a negative number and
//     then 0, and 0<<1 stays 0: an endless loop.
//   - n = 1<<45: NewRecorder succeeds, then StartSink panics with
//     "makechan: size out of range": the runner's channel of n values is
//     allocated at once (watcher.go:70) and the panic is not turned into an
//     error.
//
// The fix: bound the queue length in config.validate (for example by what a
// channel of T can hold, or a documented maximum) and stop the ringCap loop
// at a maximum.
func TestNewRecorderRejectsHugeQueueLength(t *testing.T) {
	if inChild(t.Name() + "/NewRecorder") {
		done := make(chan error, 1)
		go func() {
			_, err := fanout.NewRecorder[item](fanout.WithQueueLength(math.MaxInt))
			done <- err
		}()
		select {
		case err := <-done:
			fmt.Println("RETURNED", err)
		case <-time.After(3 * time.Second):
			fmt.Println("HUNG")
			os.Exit(3) // the goroutine spins forever
		}
		return
	}
	t.Run("NewRecorder", func(t *testing.T) {
		if os.Getenv(childEnv) != "" {
			return
		}
		out, err := runChild(t)
		if err != nil || !strings.Contains(out, "RETURNED") {
			t.Errorf("NewRecorder(WithQueueLength(math.MaxInt)) did not return in 3 s: %v\n%s", err, tail(out, 4))
		}
	})
	t.Run("StartSink", func(t *testing.T) {
		if os.Getenv(childEnv) != "" {
			return
		}
		r, err := fanout.NewRecorder[item](fanout.WithQueueLength(1 << 45))
		if err != nil {
			return // rejected: fine
		}
		defer r.Shutdown(context.Background())
		var perr any
		func() {
			defer func() { perr = recover() }()
			run, err := r.StartHandler(func(item) {})
			if err == nil {
				run.Stop()
			}
		}()
		if perr != nil {
			t.Errorf("StartHandler panicked instead of returning an error: %v", perr)
		}
	})
}

func TestRecordStampsValuesWithTheRecordersClock(t *testing.T) {
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

// A plain watcher with queue length 0 (hand-off) that waits when full cannot
// make Record wait: it misses each value its reader is not already waiting
// for, counted in its own stats (documented on Recorder.Watch).
func TestHandOffPlainWatcherNeverMakesRecordWait(t *testing.T) {
	r := newRev(t, fanout.WithQueueLength(0))
	w := must[*fanout.Watcher[item]](t)(r.Watch(fanout.WithFullChannelBehavior(fanout.WaitIfChannelFull)))
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
		r := newRev(t)
		var seen sync.Map
		var extra *fanout.Runner[item]
		_ = must[*fanout.Runner[item]](t)(r.StartHandler(func(v item) {
			if v.N < 3 {
				if err := r.Record(item{N: v.N + 1, Key: "from handler"}); err != nil {
					t.Error(err)
				}
			}
			if v.N == 0 && extra == nil {
				extra = must[*fanout.Runner[item]](t)(r.StartHandler(func(v item) { seen.Store(fmt.Sprint("extra ", v.N, v.Key), true) }))
			}
		}))
		_ = must[*fanout.Runner[item]](t)(r.StartSink(funcSink{func(_ context.Context, _ string, v item) (item, error) {
			seen.Store(fmt.Sprint("sink ", v.N, v.Key), true)
			if v.Key == "" && v.N == 0 {
				if err := r.Record(item{N: 100, Key: "from sink"}); err != nil {
					t.Error(err)
				}
			}
			return v, nil
		}}, nil))
		if err := r.Record(item{N: 0}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := r.Flush(context.Background()); err != nil {
			t.Fatal(err)
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

// After Shutdown starts nothing is retried: a value in its retry pause is
// dropped at once, and each queued value gets exactly one attempt although
// the sink keeps failing. With MaxTries 1 the reason is DropRetries, else
// DropShutdown. Shutdown takes no (synctest) time.
func TestShutdownGivesEachQueuedValueOneAttempt(t *testing.T) {
	for _, tries := range []int{1, 5} {
		t.Run(fmt.Sprint("MaxTries=", tries), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, err := fanout.NewRecorder[item](fanout.WithRetry(fanout.RetryPolicy{MaxTries: tries, Sleep: 10 * time.Second}))
				if err != nil {
					t.Fatal(err)
				}
				block := make(chan struct{})
				var mu sync.Mutex
				attempts := map[int]int{}
				run := must[*fanout.Runner[item]](t)(r.StartSink(funcSink{func(_ context.Context, _ string, v item) (item, error) {
					if v.N == 0 {
						<-block
					}
					mu.Lock()
					attempts[v.N]++
					mu.Unlock()
					return item{}, errors.New("down")
				}}, nil))
				for i := range 4 {
					if err := r.Record(item{N: i}); err != nil {
						t.Fatal(err)
					}
				}
				close(block)
				time.Sleep(15 * time.Second) // value 0: 2 attempts if retried, then pausing
				synctest.Wait()
				before := map[int]int{}
				mu.Lock()
				for k, v := range attempts {
					before[k] = v
				}
				mu.Unlock()
				start := time.Now()
				if err := r.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("Shutdown took %v", d)
				}
				mu.Lock()
				defer mu.Unlock()
				if attempts[0] != before[0] {
					t.Errorf("value 0 retried after Shutdown: %d attempts, %d before", attempts[0], before[0])
				}
				for i := 1; i < 4; i++ {
					if attempts[i]-before[i] > 1 {
						t.Errorf("value %d: %d attempts after Shutdown began", i, attempts[i]-before[i])
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

// TestShutdownFromInsideARunnerReturnsWhenItsContextEnds: Shutdown is documented as
// "safe from any goroutine" and bounded by its ctx ("waits ... until ctx
// ends; then ... returns ctx.Err()"). A sink that gives up on a fatal error
// by calling Shutdown, or a handler doing so, is a natural use.
//
// Before the fix: called from a sink or handler, Shutdown never returns, even after
// its ctx has ended: after the ctx branch it waits unconditionally for every
// runner's done channel (recorder.go:342-344), including the runner whose
// goroutine is the caller. The runner and the caller are stuck forever (and
// any later Shutdown too).
//
// The fix: do not wait for in-flight calls once ctx has ended (return and let
// Runner.Done report the exit), or detect the caller's own runner (for
// example by handing sinks and handlers a ctx carrying the runner, or
// marking the runner "in handler" and skipping it), and document it.
func TestShutdownFromInsideARunnerReturnsWhenItsContextEnds(t *testing.T) {
	if c := os.Getenv(childEnv); strings.HasPrefix(c, t.Name()+"/") {
		shutdownFromRunnerChild(t, strings.TrimPrefix(c, t.Name()+"/"))
		return
	}
	for _, where := range []string{"handler", "sink"} {
		t.Run(where, func(t *testing.T) {
			if os.Getenv(childEnv) != "" {
				return
			}
			out, err := runChild(t)
			if err != nil || !strings.Contains(out, "SHUTDOWN RETURNED") {
				t.Errorf("Shutdown(ctx with a 1 s timeout) called from a %s did not return within an hour "+
					"(synctest time); child: %v\n%s", where, err, tail(out, 6))
			}
		})
	}
}

func shutdownFromRunnerChild(t *testing.T, where string) {
	synctest.Test(t, func(t *testing.T) {
		r, err := fanout.NewRecorder[item]()
		if err != nil {
			t.Fatal(err)
		}
		res := make(chan error, 1)
		shut := func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			res <- r.Shutdown(ctx)
		}
		if where == "handler" {
			_ = must[*fanout.Runner[item]](t)(r.StartHandler(func(item) { shut() }))
		} else {
			_ = must[*fanout.Runner[item]](t)(r.StartSink(funcSink{func(_ context.Context, _ string, v item) (item, error) {
				shut()
				return v, errors.New("fatal")
			}}, nil))
		}
		if err := r.Record(item{}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-res:
			fmt.Println("SHUTDOWN RETURNED", err)
		case <-time.After(time.Hour):
			fmt.Println("SHUTDOWN HUNG")
			os.Exit(3) // the runner goroutine can never be released
		}
	})
}

// nil contexts mean no deadline.
func TestFlushAndShutdownAcceptANilContext(t *testing.T) {
	r := newRev(t)
	_ = must[*fanout.Runner[item]](t)(r.StartHandler(func(item) {}))
	_ = r.Record(item{})
	//lint:ignore SA1012 nil is documented to mean no deadline
	if err := r.Flush(nil); err != nil { //nolint:staticcheck
		t.Fatal(err)
	}
	//lint:ignore SA1012 nil is documented to mean no deadline
	if err := r.Shutdown(nil); err != nil { //nolint:staticcheck
		t.Fatal(err)
	}
}

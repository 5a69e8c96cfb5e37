package events

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fanout-go/fanout"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
)

func TestNewBroadcasterIsBroadcaster(t *testing.T) {
	eb := NewBroadcaster(newRecordingSink())
	b, ok := eb.(*Broadcaster)
	require.True(t, ok)
	b.Shutdown()
	// nil sink: watchers only; recording to the sink is an error.
	nb := NewBroadcaster(nil)
	assert.ErrorIs(t, nb.StartRecordingToSinkWithContext(context.Background()), errNoSink)
	nb.Shutdown()
}

// gatedSink blocks every call until its gate is closed.
func gatedSink(gate chan struct{}) *recordingSink {
	s := newRecordingSink()
	s.HoldAll(gate)
	return s
}

func TestFullQueueDropsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		sink := gatedSink(gate)
		// One writer: one event in flight, two queued.
		b, r := startQuiet(t, sink, WithQueueLength(2), WithWriters(1))
		r.Eventf(pod("p0", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		synctest.Wait() // the runner holds p0 in the sink
		for i := 1; i < 10; i++ {
			r.Eventf(pod(fmt.Sprint("p", i), "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		}
		s := b.Stats()
		assert.EqualValues(t, 10, s.Recorded)
		assert.EqualValues(t, 7, s.DroppedFull)
		assert.Equal(t, 2, s.Queued)
		close(gate)
		flush(t, b)
		s = b.Stats()
		assert.EqualValues(t, 3, s.Written)
		assert.EqualValues(t, 7, s.Dropped())
	})
}

func TestFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		sink.Delay = time.Second
		b, r := startQuiet(t, sink)
		start := time.Now()
		for i := range 5 {
			r.Eventf(pod(fmt.Sprint("p", i), "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		}
		flush(t, b)
		assert.Equal(t, time.Second, time.Since(start), "five series written side by side")
		assert.EqualValues(t, 5, b.Stats().Written)

		// A context that ends first.
		r.Eventf(pod("late", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		assert.ErrorIs(t, b.Flush(ctx), context.DeadlineExceeded)
		flush(t, b)
		assert.EqualValues(t, 6, b.Stats().Written)
	})
}

// hangingSink blocks every call until its context ends.
func hangingSink() *recordingSink {
	s := newRecordingSink()
	s.hang = func(op) bool { return true }
	return s
}

func TestShutdownContextBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := hangingSink()
		b, err := New(sink)
		require.NoError(t, err)
		require.NoError(t, b.StartRecordingToSinkWithContext(quietCtx(context.Background())))
		r := b.NewRecorder(scheme.Scheme, "ctrl").WithLogger(quiet)
		for i := range 3 {
			r.Eventf(pod(fmt.Sprint("p", i), "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		}
		synctest.Wait()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		assert.ErrorIs(t, b.ShutdownContext(ctx), context.DeadlineExceeded)
		assert.Equal(t, 2*time.Second, time.Since(start))
		synctest.Wait() // the write in flight saw its context end
		s := b.Stats()
		assert.EqualValues(t, 3, s.DroppedShutdown)
		assert.Zero(t, s.Sinks)
		assert.Len(t, sink.ops(), 3, "three series, each write in flight")
		// A second shutdown has nothing left to wait for.
		assert.NoError(t, b.ShutdownContext(context.Background()))
	})
}

func TestShutdownDefaultTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, r := startQuiet(t, hangingSink())
		r.Eventf(pod("p", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		synctest.Wait()
		start := time.Now()
		b.Shutdown()
		assert.Equal(t, ShutdownTimeout, time.Since(start))
	})
}

// Shutdown gives each queued event one more attempt, without retries.
// One writer, so that good waits in the queue behind bad's retry: with
// more, good was written beside bad's first attempt, in either order.
func TestShutdownLastAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		sink.fail = func(n int, o op) error {
			if o.Name == nameAt("bad", 0) {
				return errTransport
			}
			return nil
		}
		b, r := startQuiet(t, sink, WithWriters(1))
		r.Eventf(pod("bad", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		r.Eventf(pod("good", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		synctest.Wait() // bad failed once and sleeps before its retry; good is queued
		require.NoError(t, b.ShutdownContext(context.Background()))
		ops := sink.ops()
		require.Len(t, ops, 2)
		assert.Equal(t, nameAt("good", 0), ops[1].Name)
		s := b.Stats()
		assert.EqualValues(t, 1, s.Written)
		assert.EqualValues(t, 1, s.DroppedShutdown)
	})
}

func TestAfterShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, r := startQuiet(t, sink)
		b.Shutdown()
		b.Shutdown() // idempotent
		r.Eventf(pod("p", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		assert.EqualValues(t, 1, b.Stats().Refused)
		assert.EqualValues(t, 1, b.Stats().Dropped())
		assert.ErrorIs(t, b.StartRecordingToSinkWithContext(context.Background()), fanout.ErrStopped)
		_, err := b.StartEventWatcher(func(k8sruntime.Object) {})
		assert.ErrorIs(t, err, fanout.ErrStopped)
		_, err = b.StartLogging(quiet)
		assert.ErrorIs(t, err, fanout.ErrStopped)
		stop := b.StartStructuredLogging(0)
		require.NotNil(t, stop)
		stop()
		b.StartRecordingToSink(nil) // logs, no panic
		assert.NoError(t, b.Flush(context.Background()))
		assert.Empty(t, sink.ops())
	})
}

func TestStartRecordingContextCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, err := New(sink)
		require.NoError(t, err)
		defer b.Shutdown()
		ctx, cancel := context.WithCancel(quietCtx(context.Background()))
		require.NoError(t, b.StartRecordingToSinkWithContext(ctx))
		r := b.NewRecorder(scheme.Scheme, "ctrl").WithLogger(quiet)
		r.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		flush(t, b)
		cancel()
		synctest.Wait()
		assert.Zero(t, b.Stats().Sinks, "the runner exited")
		b.mu.Lock()
		assert.Empty(t, b.sinks, "the maintenance goroutine exited")
		b.mu.Unlock()
		r.Eventf(pod("b", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		time.Sleep(time.Hour)
		assert.Len(t, sink.ops(), 1)
	})
}

func TestStartRecordingToSinkStopChannel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, err := New(sink)
		require.NoError(t, err)
		defer b.Shutdown()
		stopCh := make(chan struct{})
		b.StartRecordingToSink(stopCh)
		r := b.NewRecorder(scheme.Scheme, "ctrl").WithLogger(quiet)
		r.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		flush(t, b)
		assert.Len(t, sink.ops(), 1)
		close(stopCh)
		synctest.Wait()
		assert.Zero(t, b.Stats().Sinks)
	})
}

// Each StartRecordingToSink call has its own runner and series cache.
func TestTwoSinkRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, r := startQuiet(t, sink)
		require.NoError(t, b.StartRecordingToSinkWithContext(quietCtx(t.Context())))
		r.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		r.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		flush(t, b)
		verbs := map[string]int{}
		for _, o := range sink.ops() {
			verbs[o.Verb]++
		}
		assert.Equal(t, map[string]int{"create": 2, "patch": 2}, verbs)
	})
}

// Goroutines are bounded by sinks and watchers, never by events.
func TestGoroutinesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		sink.Delay = time.Second
		b, r := startQuiet(t, sink)
		stop, err := b.StartEventWatcher(func(k8sruntime.Object) { time.Sleep(time.Millisecond) })
		require.NoError(t, err)
		defer stop()
		synctest.Wait()
		base := runtime.NumGoroutine()
		peak := base
		for i := range 10000 {
			r.Eventf(pod(fmt.Sprint("p", i), "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
			if i%100 == 0 {
				peak = max(peak, runtime.NumGoroutine())
			}
		}
		peak = max(peak, runtime.NumGoroutine())
		// The sink's writers; slack for goroutines of the test framework,
		// not per event.
		assert.LessOrEqual(t, peak, base+DefaultWriters+5, "no goroutine per event")
		flush(t, b)
		s := b.Stats()
		assert.EqualValues(t, 10000, s.Recorded)
		// The watcher took one event at once and queued 1000; the sink
		// as much, and up to as many more as its queue is long.
		assert.EqualValues(t, 2*10000, s.Written+s.DroppedFull)
		assert.GreaterOrEqual(t, s.Written, uint64(2*1001))
		assert.LessOrEqual(t, s.Written, uint64(1001+2000))
	})
}

func TestStartEventWatcher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := New(nil)
		require.NoError(t, err)
		defer b.Shutdown()
		var mu sync.Mutex
		var seen []string
		stop, err := b.StartEventWatcher(func(obj k8sruntime.Object) {
			ev := obj.(*eventsv1.Event)
			if ev.Reason == "Panic" {
				panic("handler")
			}
			mu.Lock()
			seen = append(seen, ev.Reason)
			mu.Unlock()
		})
		require.NoError(t, err)
		_, err = b.StartEventWatcher(nil)
		assert.Error(t, err)
		r := b.NewRecorder(scheme.Scheme, "ctrl")
		r.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "One", "A", "n")
		r.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "Panic", "A", "n")
		r.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "Two", "A", "n")
		flush(t, b)
		stop()
		synctest.Wait()
		r.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "Three", "A", "n")
		flush(t, b)
		mu.Lock()
		assert.Equal(t, []string{"One", "Two"}, seen)
		mu.Unlock()
		s := b.Stats()
		assert.EqualValues(t, 1, s.DroppedRejected, "the panic")
		assert.EqualValues(t, 2, s.Written)
	})
}

func TestStartLogging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := New(nil)
		require.NoError(t, err)
		defer b.Shutdown()
		var mu sync.Mutex
		var lines []string
		logger := funcr.New(func(prefix, args string) {
			mu.Lock()
			lines = append(lines, args)
			mu.Unlock()
		}, funcr.Options{})
		stop, err := b.StartLogging(logger)
		require.NoError(t, err)
		defer stop()
		b.NewRecorder(scheme.Scheme, "ctrl").Eventf(pod("a", "ns"), nil, corev1.EventTypeWarning, "Failed", "Pull", "oops %d", 1)
		flush(t, b)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, lines, 1)
		assert.Equal(t, `"level"=0 "msg"="Event occurred" "object"={"name"="a" "namespace"="ns"} "kind"="Pod" "apiVersion"="v1" "type"="Warning" "reason"="Failed" "action"="Pull" "note"="oops 1"`, lines[0])
	})
}

func TestStartStructuredLogging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := New(nil)
		require.NoError(t, err)
		defer b.Shutdown()
		stop := b.StartStructuredLogging(10) // not shown at klog's default verbosity
		b.NewRecorder(scheme.Scheme, "ctrl").Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		flush(t, b)
		assert.EqualValues(t, 1, b.Stats().Written)
		stop()
	})
}

// Many recorders at once, with -race; every event is accounted for.
func TestConcurrentRecording(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, r := startQuiet(t, sink)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				rr := r.WithLogger(quiet)
				for i := range 100 {
					rr.Eventf(pod(fmt.Sprint("p", i%10), "ns"), nil, corev1.EventTypeNormal, fmt.Sprint("R", g), "A", "n")
				}
			})
		}
		wg.Wait()
		flush(t, b)
		s := b.Stats()
		assert.EqualValues(t, 800, s.Recorded)
		assert.EqualValues(t, 800, s.Written+s.Merged+s.Dropped())
		assert.EqualValues(t, 160, s.Written, "80 keys, each created and patched once")
		time.Sleep(time.Hour) // finish writes the 80 series
		patches := 0
		for _, o := range sink.ops() {
			if o.Verb == "patch" && o.Count == 10 {
				patches++
			}
		}
		assert.Equal(t, 80, patches)
	})
}

// logDrop logs what the sink adapter has not: a panic in a sink or
// handler as an error, a full queue and a drop at shutdown at V(2); API
// errors and exhausted retries were logged by the sink adapter already.
func TestLogDropLogsWhatTheSinkAdapterDidNot(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	// ContextualLogger: the logger, not klog's -v flag, decides verbosity.
	klog.SetLoggerWithOptions(funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{Verbosity: 2}), klog.ContextualLogger(true))
	t.Cleanup(klog.ClearLogger)
	for _, tc := range []struct {
		name string
		drop fanout.Drop
		want string // a fragment of the one line logged; "" for none
	}{
		{"panic in a sink", fanout.Drop{Reason: fanout.DropRejected, Err: errors.New("sink bug")}, `"msg"="Event handler failed, event dropped" "error"="sink bug"`},
		{"API error", fanout.Drop{Reason: fanout.DropRejected, Err: badRequest()}, ""},
		{"rejected without error", fanout.Drop{Reason: fanout.DropRejected}, ""},
		{"queue full", fanout.Drop{Reason: fanout.DropFull}, `"level"=2 "msg"="Event dropped: queue full"`},
		{"shutdown", fanout.Drop{Reason: fanout.DropShutdown, Err: fanout.ErrStopped}, `"level"=2 "msg"="Event dropped: shutting down"`},
		{"retries exhausted", fanout.Drop{Reason: fanout.DropRetries, Err: errTransport}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			lines = nil
			mu.Unlock()
			logDrop(tc.drop)
			mu.Lock()
			defer mu.Unlock()
			if tc.want == "" {
				assert.Empty(t, lines)
				return
			}
			require.Len(t, lines, 1)
			assert.Contains(t, lines[0], tc.want)
		})
	}
}

// Shutdown waits for a maintenance write in flight only as long as its
// context lasts, then cancels it.
func TestShutdownBoundsMaintenanceWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		sink.hang = func(o op) bool { return o.At == 30*time.Minute }
		b, r := startQuiet(t, sink)
		r.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		for m := 5; m <= 25; m += 5 { // keep the series open
			sleepUntil(time.Duration(m)*time.Minute + 10*time.Second)
			r.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		}
		sleepUntil(30*time.Minute + time.Second) // the refresh hangs
		require.Len(t, sink.ops(), 3)
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		assert.ErrorIs(t, b.ShutdownContext(ctx), context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start))
		synctest.Wait()
		b.mu.Lock()
		defer b.mu.Unlock()
		for sr := range b.sinks {
			select {
			case <-sr.done:
			default:
				t.Error("the maintenance goroutine is still running")
			}
		}
		assert.EqualValues(t, 1, b.Stats().Failures, "the cancelled refresh")
	})
}

// recordSeries starts recording to sink, records five occurrences of one
// series and one of another event, and flushes: the sink then has the two
// creates and the count-2 patch, and three occurrences are merged.
func recordSeries(t *testing.T, sink *recordingSink) (*Broadcaster, context.CancelFunc) {
	t.Helper()
	b, err := New(sink)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(quietCtx(context.Background()))
	require.NoError(t, b.StartRecordingToSinkWithContext(ctx))
	r := b.NewRecorder(scheme.Scheme, "ctrl").WithLogger(quiet)
	for range 5 {
		r.Eventf(pod("foo", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
	}
	r.Eventf(pod("bar", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
	flush(t, b)
	require.Len(t, sink.ops(), 3, "two creates and the count-2 patch; 3 occurrences merged")
	return b, cancel
}

// At Shutdown, a series holding occurrences not yet written gets a last
// write with its final count, so that nothing recorded is lost: client-go
// leaves it at count 2. The occurrences stay counted as merged.
func TestShutdownWritesOpenSeriesFinalCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, cancel := recordSeries(t, sink)
		defer cancel()
		require.NoError(t, b.ShutdownContext(context.Background()))
		ops := sink.ops()
		require.Len(t, ops, 4)
		assert.Equal(t, "patch", ops[3].Verb)
		created := 0 // the series' event was created first (the sink writes series side by side)
		for _, o := range ops[:3] {
			if o.Verb == "create" && o.Name == ops[3].Name {
				created++
			}
		}
		assert.Equal(t, 1, created, "the series' event")
		assert.EqualValues(t, 5, ops[3].Count)
		time.Sleep(time.Hour)
		assert.Len(t, sink.ops(), 4, "nothing more is written")
		s := b.Stats()
		assert.EqualValues(t, 6, s.Recorded)
		assert.EqualValues(t, 3, s.Written, "the last write is the series', not a new event")
		assert.EqualValues(t, 3, s.Merged)
		assert.Zero(t, s.Dropped())
		assert.Zero(t, s.Failures)
	})
}

// A series whose count was written in full (two occurrences, or a refresh
// since the last one) is not written again at Shutdown.
func TestShutdownLeavesWrittenSeries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, r := startQuiet(t, sink)
		for range 2 {
			r.Eventf(pod("two", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		}
		for range 3 {
			r.Eventf(pod("refreshed", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		}
		flush(t, b)
		time.Sleep(refreshTime + time.Minute) // the refresh writes both series
		require.Len(t, sink.ops(), 6, "two creates, two count-2 patches, two refreshes")
		require.NoError(t, b.ShutdownContext(context.Background()))
		assert.Len(t, sink.ops(), 6)
		assert.Zero(t, b.Stats().Dropped())
	})
}

// A last write that fails loses the series' merged occurrences, counted:
// as rejected for an API error, as dropped at shutdown for an error worth
// retrying (there is no retry after Shutdown), and so when the shutdown's
// context ends before the write.
func TestShutdownCountsOpenSeriesWhoseLastWriteFails(t *testing.T) {
	for _, tc := range []struct {
		name             string
		fail             error
		hang             bool
		rejected, dropSh uint64
	}{
		{name: "API error", fail: badRequest(), rejected: 3},
		{name: "transport error", fail: errTransport, dropSh: 3},
		{name: "context ends", hang: true, dropSh: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := newRecordingSink()
				b, cancel := recordSeries(t, sink)
				defer cancel()
				sink.fail = func(n int, o op) error {
					if n >= 3 {
						return tc.fail
					}
					return nil
				}
				sink.hang = func(o op) bool { return tc.hang && o.Count == 5 }
				ctx, stop := context.WithTimeout(context.Background(), time.Second)
				defer stop()
				err := b.ShutdownContext(ctx)
				if tc.hang {
					assert.ErrorIs(t, err, context.DeadlineExceeded)
				} else {
					assert.NoError(t, err)
				}
				synctest.Wait()
				s := b.Stats()
				assert.EqualValues(t, 3, s.Written)
				assert.Zero(t, s.Merged)
				assert.Equal(t, tc.rejected, s.DroppedRejected)
				assert.Equal(t, tc.dropSh, s.DroppedShutdown)
				assert.EqualValues(t, 1, s.Failures, "the failed last write")
			})
		})
	}
}

// Occurrences merged into a series still open when the context given to
// StartRecordingToSinkWithContext ends are never written, as in client-go
// (the sink's writes end with that context); they move from Merged to
// DroppedShutdown, since Merged means "written later".
func TestOpenSeriesMergedOccurrencesCountedDroppedWhenRecordingContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, cancel := recordSeries(t, sink)
		defer b.Shutdown()
		cancel()
		time.Sleep(time.Hour)
		require.Len(t, sink.ops(), 3, "the open series is never written")
		s := b.Stats()
		assert.EqualValues(t, 6, s.Recorded)
		assert.EqualValues(t, 3, s.Written)
		assert.Zero(t, s.Merged, "nothing merged was written")
		assert.EqualValues(t, 3, s.DroppedShutdown, "the 3 merged occurrences were lost when recording ended")
	})
}

func TestNilContextIsAnError(t *testing.T) {
	var nilCtx context.Context
	b, err := New(newRecordingSink())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	assert.ErrorContains(t, b.StartRecordingToSinkWithContext(nilCtx), "nil context")
	assert.ErrorContains(t, b.ShutdownContext(nilCtx), "nil context")
	assert.NoError(t, b.StartRecordingToSinkWithContext(quietCtx(context.Background())),
		"a nil context changed nothing: the broadcaster still starts")
}

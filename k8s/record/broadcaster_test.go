package record_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	restclient "k8s.io/client-go/rest"
	clientrecord "k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/fanout-go/fanout/k8s/internal/apitest"
	"github.com/fanout-go/fanout/k8s/record"
)

var source = v1.EventSource{Component: "ctl", Host: "node-1"}

func pod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
}

// start returns a broadcaster recording to a new test sink, shut down at
// the end of the test.
func start(t *testing.T, opts ...record.BroadcasterOption) (*record.Broadcaster, *apitest.CoreSink, record.EventRecorderLogger) {
	t.Helper()
	b := record.New(opts...)
	t.Cleanup(b.Shutdown)
	sink := apitest.NewCoreSink()
	b.StartRecordingToSink(sink)
	return b, sink, b.NewRecorder(scheme.Scheme, source)
}

// sinkCall is one call the fake sink received.
type sinkCall = apitest.Call[*v1.Event]

func flush(t *testing.T, b *record.Broadcaster) {
	t.Helper()
	require.NoError(t, b.Flush(t.Context()))
}

func TestEventFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, sink, r := start(t)
		now := time.Now()
		r.AnnotatedEventf(pod("web"), map[string]string{"a": "b"}, v1.EventTypeWarning, "BackOff", "restarting %d", 3)
		r.Event(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, v1.EventTypeNormal, "Ready", "node ready")
		flush(t, b)
		calls := sink.Calls()
		require.Len(t, calls, 2)
		if calls[0].Event.InvolvedObject.Name != "web" { // written side by side
			calls[0], calls[1] = calls[1], calls[0]
		}
		e := calls[0].Event
		assert.Equal(t, "create", calls[0].Op)
		assert.Equal(t, "web."+strings.TrimPrefix(e.Name, "web."), e.Name)
		assert.Regexp(t, `^web\.[0-9a-f]+$`, e.Name)
		assert.Equal(t, "ns", e.Namespace)
		assert.Equal(t, map[string]string{"a": "b"}, e.Annotations)
		assert.Equal(t, v1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web", UID: "uid-web", APIVersion: "v1"}, e.InvolvedObject)
		assert.Equal(t, "BackOff", e.Reason)
		assert.Equal(t, "restarting 3", e.Message)
		assert.Equal(t, v1.EventTypeWarning, e.Type)
		assert.Equal(t, int32(1), e.Count)
		assert.True(t, e.FirstTimestamp.Time.Equal(now))
		assert.Equal(t, e.FirstTimestamp, e.LastTimestamp)
		assert.Equal(t, source, e.Source)
		assert.Equal(t, "ctl", e.ReportingController)
		assert.Equal(t, "node-1", e.ReportingInstance)
		assert.Empty(t, e.ResourceVersion)
		assert.Equal(t, metav1.NamespaceDefault, calls[1].Event.Namespace, "cluster-scoped objects' events go to default")
		st := b.Stats()
		assert.Equal(t, uint64(2), st.Recorded)
		assert.Equal(t, uint64(2), st.Written)
		assert.Zero(t, st.Dropped())
	})
}

func TestRepeatsArePatchedWithCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, sink, r := start(t)
		for range 3 {
			r.Event(pod("web"), v1.EventTypeNormal, "Pulled", "image pulled")
			time.Sleep(time.Second)
		}
		flush(t, b)
		calls := sink.Calls()
		require.Equal(t, []string{"create", "patch", "patch"}, sink.Ops())
		name := calls[0].Event.Name
		for i, c := range calls[1:] {
			assert.Equal(t, name, c.Event.Name, "a repeat refers to the first event")
			assert.Equal(t, int32(i+2), c.Event.Count)
			assert.True(t, c.Event.FirstTimestamp.Equal(&calls[0].Event.FirstTimestamp))
			assert.Equal(t, calls[0].Event.LastTimestamp.Add(time.Duration(i+1)*time.Second), c.Event.LastTimestamp.Time)
			assert.Contains(t, c.Patch, `"count":`+string(rune('0'+i+2)))
			assert.Contains(t, c.Patch, `"message":"image pulled"`)
			assert.Contains(t, c.Patch, `"lastTimestamp":`)
		}
		assert.Equal(t, int32(3), sink.Stored(name).Count)
	})
}

func TestPatch404FallsBackToCreate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, sink, r := start(t)
		r.Event(pod("web"), v1.EventTypeNormal, "Pulled", "image pulled")
		flush(t, b)
		first := sink.Calls()[0].Event
		sink.Forget() // the server lost the event (TTL)
		r.Event(pod("web"), v1.EventTypeNormal, "Pulled", "image pulled")
		flush(t, b)
		calls := sink.Calls()
		require.Equal(t, []string{"create", "patch", "create"}, sink.Ops())
		assert.Equal(t, first.Name, calls[2].Event.Name)
		assert.Empty(t, calls[2].Event.ResourceVersion, "resource version cleared for the create")
		assert.Equal(t, "1", calls[1].Event.ResourceVersion, "the patch carried the stored version")
		assert.Equal(t, int32(2), calls[2].Event.Count)
		assert.Equal(t, uint64(2), b.Stats().Written)
		assert.Zero(t, b.Stats().Failures, "the fallback is part of the same attempt")
	})
}

func TestErrorClassification(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		tries int
	}{
		{"status error", apierrors.NewBadRequest("no"), 1},
		{"already exists", apierrors.NewAlreadyExists(schema.GroupResource{Resource: "events"}, "x"), 1},
		{"request construction", &restclient.RequestConstructionError{Err: errors.New("bad")}, 1},
		{"unexpected object", &apierrors.UnexpectedObjectError{}, 12},
		{"transport", errors.New("connection refused"), 12},
		{"wrapped status error", wrapped{apierrors.NewBadRequest("no")}, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, sink, r := start(t)
				sink.Fail = func(sinkCall) error { return tc.err }
				r.Event(pod("web"), v1.EventTypeNormal, "R", "m")
				flush(t, b)
				calls := sink.Calls()
				require.Len(t, calls, tc.tries)
				st := b.Stats()
				assert.Equal(t, uint64(tc.tries), st.Failures)
				if tc.tries == 1 {
					assert.Equal(t, uint64(1), st.DroppedRejected)
					return
				}
				assert.Equal(t, uint64(1), st.DroppedRetries)
				// client-go's schedule: a random first pause in [0, 10 s),
				// then 10 s.
				first := calls[1].At.Sub(calls[0].At)
				assert.GreaterOrEqual(t, first, time.Duration(0))
				assert.Less(t, first, 10*time.Second)
				for i := 2; i < len(calls); i++ {
					assert.Equal(t, 10*time.Second, calls[i].At.Sub(calls[i-1].At))
				}
			})
		})
	}
}

// wrapped hides a status error the way client-go does not look through.
type wrapped struct{ err error }

func (w wrapped) Error() string { return w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }

func TestSleepDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, sink, r := start(t, record.WithSleepDuration(time.Minute))
		n := 0
		sink.Fail = func(sinkCall) error {
			if n++; n < 4 {
				return errors.New("down")
			}
			return nil
		}
		r.Event(pod("web"), v1.EventTypeNormal, "R", "m")
		flush(t, b)
		calls := sink.Calls()
		require.Len(t, calls, 4)
		assert.Equal(t, time.Minute, calls[3].At.Sub(calls[2].At))
		assert.Equal(t, uint64(1), b.Stats().Written)
	})
}

func TestInvalidInputIsCountedNotPanicked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, sink, r := start(t)
		var nilPod *v1.Pod
		r.Event(nil, v1.EventTypeNormal, "R", "nil object")
		r.Event(nilPod, v1.EventTypeNormal, "R", "typed nil object")
		r.Event(pod("web"), "Bogus", "R", "unsupported type")
		r.Event(pod("web"), "", "R", "empty type")
		r.Event(&unregistered{}, v1.EventTypeNormal, "R", "kind unknown to the scheme")
		b.NewRecorder(nil, source).Event(&v1.Pod{}, v1.EventTypeNormal, "R", "nil scheme")
		format := "%d %s"
		r.Eventf(pod("web"), v1.EventTypeNormal, "R", format, "bad") // formatting is not an error
		flush(t, b)
		st := b.Stats()
		assert.Equal(t, uint64(6), st.Invalid)
		assert.Equal(t, uint64(1), st.Recorded)
		assert.Len(t, sink.Calls(), 1)
		assert.Equal(t, uint64(6), st.Dropped())
	})
}

// unregistered is a runtime.Object no scheme knows.
type unregistered struct{ metav1.TypeMeta }

func (u *unregistered) DeepCopyObject() k8sruntime.Object { c := *u; return &c }

// With one writer, a sink holds one event in flight and its queue's; the
// rest is dropped and counted.
func TestQueueFullDropsAreCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, sink, r := start(t, record.WithQueueLength(3), record.WithWriters(1))
		release := make(chan struct{})
		sink.HoldAll(release)
		r.Event(pod("p0"), v1.EventTypeNormal, "R", "m")
		synctest.Wait() // the sink holds p0
		for i := 1; i < 10; i++ {
			r.Eventf(pod("p"), v1.EventTypeNormal, "R", "m%d", i)
		}
		st := b.Stats()
		assert.Equal(t, uint64(10), st.Recorded)
		assert.Equal(t, uint64(6), st.DroppedFull, "1 in flight, 3 queued")
		assert.Equal(t, 3, st.Queued)
		close(release)
		flush(t, b)
		st = b.Stats()
		assert.Equal(t, uint64(4), st.Written)
		assert.Equal(t, st.Recorded, st.Written+st.DroppedFull)
	})
}

// With several writers, a sink takes from its queue as many events as the
// queue is long, or as it has writers if more, while their writes are in
// flight or wait for their Event's: the queue's length and that many
// more wait before an event is dropped.
func TestQueueFullWithWritersHoldsAsManyMoreAsItHasWriters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, sink, r := start(t, record.WithQueueLength(3), record.WithWriters(5))
		release := make(chan struct{})
		sink.HoldAll(release)
		for i := range 12 {
			r.Event(pod(fmt.Sprint("p", i)), v1.EventTypeNormal, "R", "m")
			synctest.Wait()
		}
		st := b.Stats()
		assert.Equal(t, uint64(4), st.DroppedFull, "5 in flight, 3 queued")
		assert.Equal(t, 3, st.Queued)
		close(release)
		flush(t, b)
		st = b.Stats()
		assert.Equal(t, uint64(8), st.Written)
		assert.Equal(t, st.Recorded, st.Written+st.DroppedFull)
	})
}

// Events dropped from a full queue are logged once, then at most once per
// 10 s with the number dropped since: a sink that is down does not flood
// the log (client-go logs none of them; Stats counts every one).
func TestQueueFullDropsAreLoggedAtMostOncePerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l lines
		// One writer: the sink holds one event, its queue three.
		b, sink, r := start(t, record.WithQueueLength(3), record.WithWriters(1), record.WithContext(klog.NewContext(t.Context(), l.logger())))
		release := make(chan struct{})
		sink.HoldAll(release)
		r.Event(pod("p0"), v1.EventTypeNormal, "R", "m")
		synctest.Wait() // the sink holds p0; 3 more fill its queue
		for i := 1; i < 10; i++ {
			r.Eventf(pod("p"), v1.EventTypeNormal, "R", "m%d", i)
		}
		time.Sleep(10 * time.Second)
		r.Event(pod("p"), v1.EventTypeNormal, "R", "m10")
		assert.Equal(t, uint64(7), b.Stats().DroppedFull)
		var full []string
		for _, line := range l.get() {
			if strings.Contains(line, "too many queued events") {
				full = append(full, line)
			}
		}
		require.Len(t, full, 2)
		assert.Contains(t, full[0], `"dropped"=1`)
		assert.Contains(t, full[1], `"dropped"=6`)
		close(release)
	})
}

func TestGoroutinesBoundedBySinksNotEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := runtime.NumGoroutine()
		b, sink, r := start(t)
		b.StartLogging(func(string, ...any) {})
		sink.Delay = time.Millisecond
		peak := 0
		for i := range 10_000 {
			r.Eventf(pod("web"), v1.EventTypeWarning, "Failed", "attempt %d", i)
			if i%500 == 0 {
				peak = max(peak, runtime.NumGoroutine())
			}
		}
		peak = max(peak, runtime.NumGoroutine())
		assert.LessOrEqual(t, peak-base, 1+record.DefaultWriters+1, "per sink its runner and writers, one per watcher")
		flush(t, b)
		st := b.Stats()
		assert.Equal(t, uint64(10_000), st.Recorded)
		assert.Equal(t, 2*st.Recorded, st.Written+st.Merged+st.Dropped()-st.Invalid-st.Refused,
			"every event reached each runner or was counted")
		assert.NotZero(t, st.DroppedFull+st.DroppedSpam, "the burst overflows the queue or the spam budget")
	})
}

func TestFlushWaitsForRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, sink, r := start(t)
		n := 0
		sink.Fail = func(sinkCall) error {
			if n++; n < 3 {
				return errors.New("down")
			}
			return nil
		}
		r.Event(pod("web"), v1.EventTypeNormal, "R", "m")
		flush(t, b)
		assert.Len(t, sink.Calls(), 3)
		assert.Equal(t, uint64(1), b.Stats().Written)

		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		sink.Fail = func(sinkCall) error { return errors.New("down") }
		r.Event(pod("web"), v1.EventTypeNormal, "R", "other")
		assert.ErrorIs(t, b.Flush(ctx), context.DeadlineExceeded, "Flush honours its context")
	})
}

func TestShutdownIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := record.New()
		sink := apitest.NewCoreSink()
		release := make(chan struct{})
		sink.HoldAll(release) // a write that never ends on its own
		b.StartRecordingToSink(sink)
		r := b.NewRecorder(scheme.Scheme, source)
		for range 5 { // one Event: its patches wait for its create
			r.Event(pod("web"), v1.EventTypeNormal, "R", "m")
		}
		start := time.Now()
		b.Shutdown()
		assert.Equal(t, record.ShutdownTimeout, time.Since(start))
		assert.Equal(t, 4, b.Stats().Queued, "one in flight")
		r.Event(pod("web"), v1.EventTypeNormal, "R", "late")
		assert.Equal(t, uint64(1), b.Stats().Refused)
		close(release)
		synctest.Wait()
		st := b.Stats()
		assert.Equal(t, uint64(1), st.Written, "the write in flight ends on its own")
		assert.Equal(t, uint64(4), st.DroppedShutdown, "the queued events are given up")
		assert.Zero(t, st.Sinks)
	})
}

func TestShutdownGivesOneLastAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := record.New()
		sink := apitest.NewCoreSink()
		sink.Fail = func(sinkCall) error { return errors.New("down") }
		b.StartRecordingToSink(sink)
		r := b.NewRecorder(scheme.Scheme, source)
		r.Event(pod("a"), v1.EventTypeNormal, "R", "m")
		r.Event(pod("b"), v1.EventTypeNormal, "R", "m")
		synctest.Wait() // a failed once and waits to retry
		require.NoError(t, b.ShutdownContext(t.Context()))
		calls := sink.Calls()
		assert.Len(t, calls, 2, "a is not retried; b is tried once")
		st := b.Stats()
		assert.Equal(t, uint64(2), st.DroppedShutdown)
		assert.Zero(t, st.Queued)
	})
}

func TestWithContextCancelShutsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		b := record.New(record.WithContext(ctx))
		sink := apitest.NewCoreSink()
		w := b.StartRecordingToSink(sink)
		r := b.NewRecorder(scheme.Scheme, source)
		r.Event(pod("a"), v1.EventTypeNormal, "R", "m")
		cancel()
		synctest.Wait()
		_, open := <-w.ResultChan()
		assert.False(t, open, "the sink stopped")
		r.Event(pod("a"), v1.EventTypeNormal, "R", "after")
		st := b.Stats()
		assert.Equal(t, uint64(1), st.Written)
		assert.Equal(t, uint64(1), st.Refused)
		_, open = <-b.StartEventWatcher(func(*v1.Event) {}).ResultChan()
		assert.False(t, open, "a watcher started after shutdown is already stopped")
	})
}

func TestWatchStopAndNilArguments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := record.New()
		defer b.Shutdown()
		got := 0
		w := b.StartEventWatcher(func(*v1.Event) { got++ })
		r := b.NewRecorder(scheme.Scheme, source)
		r.Event(pod("a"), v1.EventTypeNormal, "R", "m")
		flush(t, b)
		w.Stop()
		w.Stop() // idempotent
		_, open := <-w.ResultChan()
		assert.False(t, open)
		r.Event(pod("a"), v1.EventTypeNormal, "R", "m2")
		flush(t, b)
		assert.Equal(t, 1, got)
		for _, w := range []interface{ Stop() }{
			b.StartEventWatcher(nil), b.StartRecordingToSink(nil), b.StartLogging(nil),
		} {
			w.Stop()
		}
		// A panicking handler drops its event, counted, and goes on.
		b.StartEventWatcher(func(*v1.Event) { panic("boom") })
		r.Event(pod("a"), v1.EventTypeNormal, "R", "m3")
		flush(t, b)
		assert.Equal(t, uint64(1), b.Stats().DroppedRejected)
	})
}

// Stopping a sink's watch stops it taking events, but, as in client-go,
// the events already queued are still written with their retries: the
// same sink calls for each event on both (ours writes a and b side by
// side), where a Stop that cut the retries made 2 calls and lost both
// events.
func TestStoppingASinkWatchStillWritesQueuedEventsWithRetries(t *testing.T) {
	sides := map[string]func() clientrecord.EventBroadcaster{
		"client-go": func() clientrecord.EventBroadcaster {
			return clientrecord.NewBroadcaster(clientrecord.WithSleepDuration(time.Second))
		},
		"fanout": func() clientrecord.EventBroadcaster {
			return record.NewBroadcaster(record.WithSleepDuration(time.Second))
		},
	}
	calls := map[string][]string{}
	for name, mk := range sides {
		synctest.Test(t, func(t *testing.T) {
			b := mk()
			sink := apitest.NewCoreSink()
			fails := 0
			sink.Fail = func(c apitest.Call[*v1.Event]) error {
				if c.Event.InvolvedObject.Name == "a" && fails < 3 {
					fails++
					return errors.New("connection refused")
				}
				return nil
			}
			w := b.StartRecordingToSink(sink)
			r := b.NewRecorder(scheme.Scheme, source)
			r.Event(pod("a"), v1.EventTypeNormal, "R", "m1")
			r.Event(pod("b"), v1.EventTypeNormal, "R", "m2")
			synctest.Wait() // the first write failed; the sink pauses
			w.Stop()
			r.Event(pod("c"), v1.EventTypeNormal, "R", "m3")
			time.Sleep(time.Minute)
			for _, c := range sink.Calls() {
				obj := c.Event.InvolvedObject.Name
				calls[name+" "+obj] = append(calls[name+" "+obj], fmt.Sprintf("%s %s err=%v", c.Op, obj, c.Err))
			}
			b.Shutdown()
			synctest.Wait()
		})
	}
	assert.Len(t, calls, 4, "a and b on both sides; c came after Stop")
	for _, obj := range []string{"a", "b"} {
		assert.Equal(t, calls["client-go "+obj], calls["fanout "+obj])
	}
	assert.Len(t, calls["fanout a"], 4, "a: 3 failures and a create")
	assert.Len(t, calls["fanout b"], 1, "b: a create")
}

// A KeyFunc of the caller's that changes the event it is given changes
// that sink's copy only, as in client-go: the sink writes the changed
// event, a watcher sees the event as recorded. Ours used to hand it the
// event every sink and watcher shares (a data race with two sinks).
func TestKeyFuncChangesOnlyItsSinksCopy(t *testing.T) {
	opts := clientrecord.CorrelatorOptions{KeyFunc: func(e *v1.Event) (string, string) {
		e.Message = strings.ToUpper(e.Message)
		return clientrecord.EventAggregatorByReasonFunc(e)
	}}
	sides := map[string]func() clientrecord.EventBroadcaster{
		"client-go": func() clientrecord.EventBroadcaster {
			return clientrecord.NewBroadcaster(clientrecord.WithCorrelatorOptions(opts))
		},
		"fanout": func() clientrecord.EventBroadcaster { return record.NewBroadcaster(record.WithCorrelatorOptions(opts)) },
	}
	seen := map[string][]string{}
	for name, mk := range sides {
		synctest.Test(t, func(t *testing.T) {
			b := mk()
			sinks := []*apitest.CoreSink{apitest.NewCoreSink(), apitest.NewCoreSink()}
			written := make(chan struct{}, len(sinks))
			for _, sink := range sinks {
				sink.Hold = func(apitest.Call[*v1.Event]) <-chan struct{} { written <- struct{}{}; return nil }
				b.StartRecordingToSink(sink)
			}
			var watched string
			b.StartEventWatcher(func(e *v1.Event) {
				<-written // once both sinks have correlated the event
				<-written
				watched = e.Message
			})
			b.NewRecorder(scheme.Scheme, source).Event(pod("a"), v1.EventTypeNormal, "R", "mixed Case")
			synctest.Wait()
			for _, sink := range sinks {
				seen[name] = append(seen[name], "sink: "+sink.Calls()[0].Event.Message)
			}
			seen[name] = append(seen[name], "watcher: "+watched)
			b.Shutdown()
			synctest.Wait()
		})
	}
	assert.Equal(t, seen["client-go"], seen["fanout"])
	assert.Equal(t, []string{"sink: MIXED CASE", "sink: MIXED CASE", "watcher: mixed Case"}, seen["fanout"])
}

// A context already cancelled when the broadcaster is built (a manager
// that has already stopped): context.AfterFunc then runs the shutdown at
// once on its own goroutine while New is still running; the race detector
// would report any field both touch.
func TestWithContextAlreadyCancelledShutsDownWithoutRace(t *testing.T) {
	// In a bubble, so that the test waits for AfterFunc's goroutine and the
	// race is reported against this test.
	synctest.Test(t, func(t *testing.T) {
		for range 20 {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			b := record.New(record.WithContext(ctx))
			require.NoError(t, b.ShutdownContext(context.Background()))
		}
	})
}

// Shutdown from inside a handler cannot wait for that handler; it is
// documented to be bounded by ShutdownTimeout (ShutdownContext by its
// context), never to hang, and the other sinks still get their events.
// (client-go's returns at once, but does not wait for any sink either.)
func TestShutdownFromHandlerIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := record.New()
		sink := apitest.NewCoreSink()
		b.StartRecordingToSink(sink)
		var took time.Duration
		done := make(chan struct{})
		b.StartEventWatcher(func(e *v1.Event) {
			if e.Reason != "Stop" {
				return
			}
			start := time.Now()
			b.Shutdown()
			took = time.Since(start)
			close(done)
		})
		r := b.NewRecorder(scheme.Scheme, source)
		r.Event(pod("web"), v1.EventTypeNormal, "Stop", "m")
		<-done
		assert.Equal(t, record.ShutdownTimeout, took, "bounded by ShutdownTimeout")
		assert.Len(t, sink.Calls(), 1, "the sink wrote its event meanwhile")

		b2 := record.New()
		done2 := make(chan error)
		b2.StartEventWatcher(func(*v1.Event) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			done2 <- b2.ShutdownContext(ctx)
		})
		b2.NewRecorder(scheme.Scheme, source).Event(pod("web"), v1.EventTypeNormal, "Stop", "m")
		assert.ErrorIs(t, <-done2, context.DeadlineExceeded)
		b.Shutdown()
		b2.Shutdown()
	})
}

// Accounting under concurrency: recorders racing with Shutdown, sinks that
// fail in every way, a handler that panics. For sinks and watchers that
// lived the whole time, once everything has finished, each one's events
// add up: Recorded = Written + Merged + Dropped by cause.
func TestStatsAddUpUnderConcurrentShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := record.New(record.WithQueueLength(50), record.WithSleepDuration(time.Second))
		const runners = 4
		for i := range 3 {
			s := apitest.NewCoreSink()
			n := 0
			s.Fail = func(c sinkCall) error {
				n++
				switch (n + i) % 7 {
				case 0:
					return errors.New("down")
				case 1:
					return apierrors.NewBadRequest("no")
				case 2:
					panic("sink panic")
				}
				return nil
			}
			b.StartRecordingToSink(s)
		}
		k := 0
		b.StartEventWatcher(func(*v1.Event) {
			if k++; k%5 == 0 {
				panic("handler panic")
			}
		})
		r := b.NewRecorder(scheme.Scheme, source)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 200 {
					r.Eventf(pod(fmt.Sprint("p", i%7)), v1.EventTypeNormal, "R", "g%d m%d", g, i%13)
					if i%20 == 0 {
						time.Sleep(time.Second)
					}
				}
			})
		}
		time.Sleep(3 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = b.ShutdownContext(ctx)
		cancel()
		wg.Wait()
		synctest.Wait()
		st := b.Stats()
		require.Zero(t, st.Sinks)
		lost := st.DroppedFull + st.DroppedSpam + st.DroppedRejected + st.DroppedRetries + st.DroppedShutdown
		assert.Equal(t, runners*st.Recorded, st.Written+st.Merged+lost, "%+v", st)
		assert.Equal(t, uint64(4*200), st.Recorded+st.Refused+st.Invalid, "%+v", st)
	})
}

// Every method used at once from several goroutines, with a WithContext
// cancellation and a Shutdown in the middle: no panic, race, hang or leaked
// goroutine, and the invalid events are all counted.
func TestEveryMethodConcurrentlyWithShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b := record.New(record.WithContext(ctx), record.WithQueueLength(5))
		r := b.NewRecorder(scheme.Scheme, source)
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Go(func() {
				for i := range 50 {
					switch (g + i) % 6 {
					case 0:
						w := b.StartEventWatcher(func(*v1.Event) {})
						_ = w.ResultChan()
						if i%2 == 0 {
							w.Stop()
						}
					case 1:
						r.Eventf(pod("p"), v1.EventTypeWarning, "R", "%d", i)
					case 2:
						fctx, c := context.WithTimeout(context.Background(), time.Second)
						_ = b.Flush(fctx)
						c()
					case 3:
						_ = b.Stats()
					case 4:
						s := b.StartRecordingToSink(apitest.NewCoreSink())
						if i%3 == 0 {
							s.Stop()
						}
					case 5:
						r.WithLogger(logr.Discard()).Event(nil, v1.EventTypeNormal, "R", "invalid")
						if i == 45 {
							b.Shutdown()
						}
					}
					if i == 40 && g == 0 {
						cancel()
					}
				}
			})
		}
		wg.Wait()
		b.Shutdown()
		synctest.Wait()
		st := b.Stats()
		assert.Zero(t, st.Sinks)
		assert.Equal(t, uint64(50), st.Invalid)
	})
}

func TestNilContextIsAnError(t *testing.T) {
	var nilCtx context.Context
	b, sink, r := start(t)
	if err := b.Flush(nilCtx); err == nil || !strings.Contains(err.Error(), "nil context") {
		t.Fatalf("Flush(nil) = %v, want a nil context error", err)
	}
	if err := b.ShutdownContext(nilCtx); err == nil || !strings.Contains(err.Error(), "nil context") {
		t.Fatalf("ShutdownContext(nil) = %v, want a nil context error", err)
	}
	r.Event(pod("a"), v1.EventTypeNormal, "R", "recorded after the refused calls")
	if err := b.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(sink.Calls()); got != 1 {
		t.Fatalf("%d events written, want 1: the nil contexts shut nothing down", got)
	}
}

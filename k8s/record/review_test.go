package record_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	clientrecord "k8s.io/client-go/tools/record"

	"github.com/fanout-go/fanout/k8s/internal/apitest"
	"github.com/fanout-go/fanout/k8s/record"
)

// reviewPanics runs f and returns what it panicked with, if anything.
func reviewPanics(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}

// A context that is already cancelled when the broadcaster is built (a
// manager that has already stopped): context.AfterFunc then runs Shutdown
// at once on its own goroutine, which reads b.stopCtx while New is still
// writing it (broadcaster.go, New: b.stopCtx = context.AfterFunc(...);
// ShutdownContext: if b.stopCtx != nil). The race detector reports it.
func TestReviewWithContextAlreadyCancelledNoRace(t *testing.T) {
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

// doc.go: "No input panics"; a weird CorrelatorOptions must not crash the
// process. client-go computes time.Duration(uint(MaxIntervalInSeconds)) *
// time.Second (events_cache.go:261) and goes on; this package's
// aggregateStage (correlator.go) makes the same overflowed, negative
// Interval, fanout.NewCorrelator rejects it, and newCorrelator panics
// ("record: correlator configuration"), in StartRecordingToSink, in
// NewEventCorrelatorWithOptions and in NewEventAggregator.
func TestReviewHugeMaxIntervalDoesNotPanic(t *testing.T) {
	const huge = 9_300_000_000 // seconds: ×1e9 overflows int64 to a negative Duration
	opts := record.CorrelatorOptions{MaxIntervalInSeconds: huge}
	assert.Nil(t, reviewPanics(func() { record.NewEventCorrelatorWithOptions(opts) }), "NewEventCorrelatorWithOptions")
	assert.Nil(t, reviewPanics(func() { record.NewEventAggregator(0, nil, nil, 0, huge, nil) }), "NewEventAggregator")
	synctest.Test(t, func(t *testing.T) {
		var b *record.Broadcaster
		var sink *apitest.CoreSink
		var r record.EventRecorderLogger
		p := reviewPanics(func() { b, sink, r = start(t, record.WithCorrelatorOptions(opts)) })
		require.Nil(t, p, "StartRecordingToSink")
		r.Event(pod("web"), v1.EventTypeNormal, "R", "m")
		flush(t, b)
		assert.Len(t, sink.Calls(), 1)
	})
}

// reviewKindless is a runtime.Object whose GetObjectKind returns nil.
type reviewKindless struct{}

func (reviewKindless) GetObjectKind() schema.ObjectKind  { return nil }
func (reviewKindless) DeepCopyObject() k8sruntime.Object { return reviewKindless{} }

// FakeRecorder with IncludeObject: fake.go objectString only guards an
// untyped nil object, so a typed nil (*v1.Pod)(nil) or an object without an
// ObjectKind panics, against doc.go "No input panics" (the fake is what
// tests pass odd objects to).
func TestReviewFakeRecorderIncludeObjectOddObjects(t *testing.T) {
	f := record.NewFakeRecorder(10)
	f.IncludeObject = true
	var nilPod *v1.Pod
	assert.Nil(t, reviewPanics(func() { f.Event(nilPod, v1.EventTypeNormal, "R", "typed nil") }), "typed nil object")
	assert.Nil(t, reviewPanics(func() { f.Event(reviewKindless{}, v1.EventTypeNormal, "R", "no kind") }), "nil ObjectKind")
}

// Shutdown from inside a handler cannot wait for that handler; it is
// documented to be bounded by ShutdownTimeout (ShutdownContext by its
// context), never to hang, and the other sinks still get their events.
// (client-go's returns at once, but does not wait for any sink either.)
func TestReviewShutdownFromHandlerIsBounded(t *testing.T) {
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
func TestReviewAccountingUnderConcurrentShutdown(t *testing.T) {
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

// A repeat whose Patch meets a 404 and whose fallback Create then fails
// with a transport error is retried. client-go clears ResourceVersion on
// the event itself before that Create (event.go:349, "event.ResourceVersion
// = \"\""), so the retried Patch carries an empty resourceVersion; this
// package clears it on a copy (sink.go, create) and the retry patches with
// the stale version.
func TestReviewRetryAfter404KeepsClientGoResourceVersion(t *testing.T) {
	run := func(t *testing.T, b clientrecord.EventBroadcaster) []sinkCall {
		sink := apitest.NewCoreSink()
		creates := 0
		sink.Fail = func(c sinkCall) error {
			if c.Op == "create" {
				if creates++; creates == 2 {
					return errors.New("connection refused")
				}
			}
			return nil
		}
		b.StartRecordingToSink(sink)
		r := b.NewRecorder(scheme.Scheme, source)
		r.Event(pod("web"), v1.EventTypeNormal, "Pulled", "image pulled")
		synctest.Wait()
		time.Sleep(time.Second)
		sink.Forget() // the server lost the event
		r.Event(pod("web"), v1.EventTypeNormal, "Pulled", "image pulled")
		time.Sleep(time.Minute)
		b.Shutdown()
		return sink.Calls()
	}
	var theirs, ours []sinkCall
	synctest.Test(t, func(t *testing.T) { theirs = run(t, clientrecord.NewBroadcasterForTests(time.Second)) })
	synctest.Test(t, func(t *testing.T) { ours = run(t, record.NewBroadcasterForTests(time.Second)) })
	var opsT, opsO, rvT, rvO []string
	for _, c := range theirs {
		opsT, rvT = append(opsT, c.Op), append(rvT, c.Event.ResourceVersion)
	}
	for _, c := range ours {
		opsO, rvO = append(opsO, c.Op), append(rvO, c.Event.ResourceVersion)
	}
	require.Equal(t, opsT, opsO)
	assert.Equal(t, rvT, rvO, "resourceVersion of the event passed to each sink call")
}

// Every method used at once from several goroutines, with a WithContext
// cancellation and a Shutdown in the middle: no panic, race, hang or leaked
// goroutine, and the invalid events are all counted (not covered elsewhere).
func TestReviewConcurrentAPIUse(t *testing.T) {
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

// A typed nil *v1.ObjectReference: client-go's ref.GetReference returns it
// as is, (nil, nil) (tools/reference/ref.go: "Don't make a reference to a
// reference"), and recorder.generate (recorder.go, after reference())
// dereferences objRef.Namespace on the caller's goroutine. doc.go: "No
// input panics: a nil ... object ... is logged and counted".
func TestReviewTypedNilObjectReferenceIsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, sink, r := start(t)
		var nilRef *v1.ObjectReference
		p := reviewPanics(func() { r.Event(nilRef, v1.EventTypeNormal, "R", "typed nil reference") })
		require.Nil(t, p)
		flush(t, b)
		assert.Empty(t, sink.Calls())
		assert.Equal(t, uint64(1), b.Stats().Invalid)
	})
}

package events

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	clientevents "k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
)

type logLines struct {
	mu sync.Mutex
	l  []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) { l.mu.Lock(); l.l = append(l.l, prefix+" "+args); l.mu.Unlock() }, funcr.Options{Verbosity: 10})
}
func (l *logLines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.l...)
}

// StartLogging's lines and the recorder's and sink's error lines are
// client-go's, message and key/values.
func TestLogLinesMatchClientGo(t *testing.T) {
	got := map[string][]string{}
	logs := map[string][]string{}
	for _, name := range []string{"client-go", "fanout"} {
		synctest.Test(t, func(t *testing.T) {
			var sinkLog, watch logLines
			sink := newRecordingSink()
			sink.fail = func(n int, o op) error {
				switch {
				case o.Note == "transport":
					return errTransport
				case o.Note == "bad":
					return badRequest()
				case o.Note == "exists":
					return alreadyExists(o.Name)
				}
				return nil
			}
			var b EventBroadcaster
			if name == "client-go" {
				b = clientevents.NewBroadcaster(sink)
			} else {
				b = NewBroadcaster(sink)
			}
			ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), sinkLog.logger()))
			assert.NoError(t, b.StartRecordingToSinkWithContext(ctx))
			synctest.Wait()
			stop, err := b.StartLogging(watch.logger())
			assert.NoError(t, err)
			r := b.NewRecorder(scheme.Scheme, "ctrl").WithLogger(watch.logger())
			for _, note := range []string{"ok", "bad", "exists", "transport"} {
				r.Eventf(pod(note, "ns"), nil, corev1.EventTypeNormal, "R", "Act", note)
				synctest.Wait()
				time.Sleep(10 * time.Minute)
				synctest.Wait()
			}
			r.Eventf(nil, nil, corev1.EventTypeNormal, "R", "Act", "nil")
			r.Eventf(pod("x", "ns"), nil, "Odd", "R", "Act", "odd")
			synctest.Wait()
			got[name] = watch.get()
			logs[name] = sinkLog.get()
			stop()
			cancel()
			b.Shutdown()
			synctest.Wait()
		})
	}
	for _, m := range []map[string][]string{got, logs} {
		a, b := m["client-go"], m["fanout"]
		assert.Equal(t, len(a), len(b))
		for i := range max(len(a), len(b)) {
			var x, y string
			if i < len(a) {
				x = a[i]
			}
			if i < len(b) {
				y = b[i]
			}
			if x != y {
				t.Errorf("line %d\nclient-go: %.400s\nfanout:    %.400s", i, x, y)
			}
		}
	}
}

// A burst of distinct events larger than the sink's queue into a slow sink
// writes a queue's worth (and the one in flight) and counts the rest as
// dropped full, as the package doc says; with several writers, it writes
// at least that, and at most as many more as the queue is long (what the
// sink took from its queue while the burst lasted).
func TestBurstBeyondTheQueueDropsTheExcessCounted(t *testing.T) {
	for _, writers := range []int{1, DefaultWriters} {
		synctest.Test(t, func(t *testing.T) {
			sink := newRecordingSink()
			sink.Delay = 5 * time.Millisecond
			b, r := startQuiet(t, sink, WithWriters(writers))
			for i := range 1500 {
				r.Eventf(pod("p", "ns"), nil, corev1.EventTypeNormal, "R", "A"+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676)), "n")
			}
			flush(t, b)
			st := b.Stats()
			t.Logf("%d writers: %+v", writers, st)
			// The queue's worth, and the one in flight if the sink took it
			// before the burst filled the queue (scheduling decides); with
			// several writers, up to a queue's worth more.
			most := uint64(1001)
			if writers > 1 {
				most = 2000
			}
			assert.GreaterOrEqual(t, st.Written, uint64(1000))
			assert.LessOrEqual(t, st.Written, most)
			assert.EqualValues(t, 1500, st.Written+st.DroppedFull)
		})
	}
}

// Shutdown waits up to its bound for a slow watcher: one taking 1 s per event
// with 10 queued gets about 5 of them, as the package doc says.
func TestShutdownGivesASlowWatcherWhatItReachesWithinTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := New(nil)
		assert.NoError(t, err)
		var got atomic.Int32
		_, err = b.StartEventWatcher(func(runtime.Object) { time.Sleep(time.Second); got.Add(1) })
		assert.NoError(t, err)
		r := b.NewRecorder(scheme.Scheme, "c").WithLogger(quiet)
		for range 10 {
			r.Eventf(pod("p", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		}
		b.Shutdown()
		time.Sleep(2 * time.Second) // the handler in flight ends on its own
		st := b.Stats()
		t.Logf("got %d, %+v", got.Load(), st)
		assert.EqualValues(t, 10, st.Written+st.DroppedShutdown)
		assert.InDelta(t, 5, int(got.Load()), 1)
	})
}

// Every method called concurrently with Shutdown and a context cancel: no
// race, no panic, and no sink left running.
func TestEveryMethodConcurrentWithShutdownLeavesNothingRunning(t *testing.T) {
	for range 20 {
		sink := newRecordingSink()
		b, err := New(sink, WithSleepDuration(time.Millisecond))
		assert.NoError(t, err)
		r := b.NewRecorder(scheme.Scheme, "c").WithLogger(quiet)
		var wg sync.WaitGroup
		ctx, cancel := context.WithCancel(quietCtx(context.Background()))
		for i := range 4 {
			wg.Go(func() {
				for j := range 200 {
					r.Eventf(pod(string(rune('a'+j%3)), "ns"), nil, corev1.EventTypeNormal, "R", "A", "n %d", i)
				}
			})
		}
		wg.Go(func() { _ = b.StartRecordingToSinkWithContext(ctx) })
		wg.Go(func() { _ = b.StartRecordingToSinkWithContext(ctx) })
		wg.Go(func() {
			stop, err := b.StartEventWatcher(func(runtime.Object) {})
			if err == nil {
				stop()
			}
		})
		wg.Go(func() { _, _ = b.StartLogging(quiet) })
		wg.Go(func() { _ = b.Flush(context.Background()) })
		wg.Go(func() { _ = b.SeriesEvicted(); _ = b.Stats() })
		wg.Go(func() { time.Sleep(time.Millisecond); b.Shutdown() })
		wg.Go(func() { time.Sleep(time.Millisecond); cancel() })
		wg.Wait()
		b.Shutdown()
		cancel()
		st := b.Stats()
		assert.Zero(t, st.Sinks, "%+v", st)
	}
}

// A series evicted from a full cache is counted, and written + merged +
// dropped full adds up to what was recorded.
func TestSeriesEvictionIsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, r := startQuiet(t, sink, WithCacheSize(1))
		for _, n := range []string{"a", "a", "a", "a", "b", "a"} {
			r.Eventf(pod(n, "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
			synctest.Wait()
		}
		flush(t, b)
		st := b.Stats()
		t.Logf("%+v evicted=%d", st, b.SeriesEvicted())
		for _, o := range sink.ops() {
			t.Log(o)
		}
		assert.EqualValues(t, 6, st.Written+st.Merged+st.DroppedFull)
		assert.EqualValues(t, 2, st.DroppedFull)
		assert.EqualValues(t, 1, b.SeriesEvicted())
	})
}

// FakeRecorder's strings (verbose or not, related objects, annotations, %
// in a reason, nil objects) and GetFieldSelector match client-go's.
func TestFakeRecorderAndFieldSelectorMatchClientGo(t *testing.T) {
	p := pod("p", "ns")
	typed := pod("q", "ns")
	typed.APIVersion, typed.Kind = "v1", "Pod"
	ref := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "n"}
	for _, verbose := range []bool{false, true} {
		c := &clientevents.FakeRecorder{Events: make(chan string, 10), Verbose: verbose}
		o := &FakeRecorder{Events: make(chan string, 10), Verbose: verbose}
		for _, r := range []EventRecorder{c, o} {
			r.Eventf(p, nil, "Normal", "R", "A", "n %d %s", 1, "x")
			r.Eventf(typed, ref, "Warning", "R%", "A", "n")
			r.(AnnotatedEventRecorder).AnnotatedEventf(typed, typed, map[string]string{"b": "2", "a": "1"}, "Normal", "R", "A", "100%%")
			r.Eventf(nil, nil, "", "", "", "")
		}
		for range 4 {
			assert.Equal(t, <-c.Events, <-o.Events)
		}
	}
	for _, gv := range []schema.GroupVersion{{Group: "events.k8s.io", Version: "v1"}, {Version: "v1"}, {Group: "events.k8s.io", Version: "v1beta1"}, {Group: "x", Version: "v1"}} {
		for _, gvk := range []schema.GroupVersionKind{{}, {Kind: "Pod", Version: "v1"}, {Group: "apps", Version: "v1", Kind: "Deployment"}, {Group: "apps"}} {
			s1, e1 := clientevents.GetFieldSelector(gv, gvk, "n", "u")
			s2, e2 := GetFieldSelector(gv, gvk, "n", "u")
			assert.Equal(t, e1 == nil, e2 == nil)
			if e1 == nil {
				a, b := strings.Split(s1.String(), ","), strings.Split(s2.String(), ",")
				slices.Sort(a)
				slices.Sort(b)
				assert.Equal(t, a, b)
			} else {
				assert.Equal(t, e1.Error(), e2.Error())
			}
		}
	}
}

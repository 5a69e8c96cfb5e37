package record_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	clientrecord "k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fanout-go/fanout/k8s/internal/apitest"
	"github.com/fanout-go/fanout/k8s/record"
)

// With two failing sinks and a slow watcher, every recorded event is accounted
// for in each of them once Flush returns: written, merged or dropped by cause.
func TestStatsAccountForEveryRecordedEventInEverySink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := record.New(record.WithSleepDuration(0), record.WithQueueLength(50),
			record.WithContext(klog.NewContext(context.Background(), (&lines{}).logger())))
		for i := range 2 {
			n := 0
			sink := apitest.NewCoreSink()
			sink.Fail = func(c apitest.Call[*v1.Event]) error {
				n++
				switch n % 7 {
				case 1:
					return errors.New("transport")
				case 3:
					return apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "x", errors.New("no"))
				}
				return nil
			}
			_ = i
			b.StartRecordingToSink(sink)
		}
		b.StartEventWatcher(func(*v1.Event) { time.Sleep(time.Millisecond) })
		r := b.NewRecorder(scheme.Scheme, source)
		for i := range 3000 {
			r.Eventf(pod(string(rune('a'+i%5))), v1.EventTypeNormal, "R", "m %d", i%13)
			if i%100 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		_ = b.Flush(context.Background())
		st := b.Stats()
		t.Logf("%+v", st)
		sum := st.Written + st.Merged + st.DroppedFull + st.DroppedSpam + st.DroppedRejected + st.DroppedRetries + st.DroppedShutdown
		assert.Equal(t, st.Recorded*3, sum)
		b.Shutdown()
	})
}

// A SpamKeyFunc keyed on the fields correlation changes (name, message,
// count) gives the same skips, names, counts and patches as client-go's.
func TestSpamKeyOnCorrelatedFieldsSkipsAsClientGo(t *testing.T) {
	keyFuncs := map[string]record.EventSpamKeyFunc{
		"name":    func(e *v1.Event) string { return e.Name },
		"message": func(e *v1.Event) string { return e.Message },
		"count":   func(e *v1.Event) string { return fmt.Sprint(e.Count) },
		"rv":      func(e *v1.Event) string { return e.ResourceVersion + e.FirstTimestamp.String() },
	}
	for kn, kf := range keyFuncs {
		t.Run(kn, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			opts := clientrecord.CorrelatorOptions{Clock: clk, SpamKeyFunc: kf, BurstSize: 2, QPS: 0.001, MaxEvents: 3}
			c := clientrecord.NewEventCorrelatorWithOptions(opts)
			o := record.NewEventCorrelatorWithOptions(opts)
			for i := range 60 {
				clk.Step(time.Second)
				e := &v1.Event{
					ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("p.%d", i), Namespace: "ns"},
					InvolvedObject: v1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "ns"},
					Reason:         []string{"A", "B"}[i%2], Message: fmt.Sprintf("m%d", i%4), Count: 1, Type: "Normal",
					FirstTimestamp: metav1.NewTime(clk.Now()), LastTimestamp: metav1.NewTime(clk.Now()),
				}
				e2 := e.DeepCopy()
				rc, errc := c.EventCorrelate(e)
				ro, erro := o.EventCorrelate(e2)
				assert.Equal(t, errc == nil, erro == nil)
				if rc.Skip != ro.Skip {
					t.Fatalf("step %d: skip client-go %v ours %v", i, rc.Skip, ro.Skip)
				}
				if !rc.Skip {
					assert.Equal(t, rc.Event.Name, ro.Event.Name, "step %d", i)
					assert.Equal(t, rc.Event.Count, ro.Event.Count, "step %d", i)
					assert.Equal(t, string(rc.Patch), string(ro.Patch), "step %d", i)
					if i%5 == 0 {
						s := rc.Event.DeepCopy()
						s.ResourceVersion = fmt.Sprint(i)
						c.UpdateState(s)
						o.UpdateState(s.DeepCopy())
					}
				}
			}
		})
	}
}

// A KeyFunc, MessageFunc, SpamKeyFunc or Clock that panics costs that event
// (logged, counted as rejected), never the process.
func TestPanickingCorrelatorFunctionsAreCountedAsRejected(t *testing.T) {
	for name, o := range map[string]record.CorrelatorOptions{
		"key":   {KeyFunc: func(*v1.Event) (string, string) { panic("k") }},
		"msg":   {MessageFunc: func(*v1.Event) string { panic("m") }, MaxEvents: 1},
		"spam":  {SpamKeyFunc: func(*v1.Event) string { panic("s") }},
		"clock": {Clock: panicClock{}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var l lines
				b := record.New(record.WithCorrelatorOptions(o), record.WithContext(klog.NewContext(t.Context(), l.logger())))
				sink := apitest.NewCoreSink()
				b.StartRecordingToSink(sink)
				r := b.NewRecorder(scheme.Scheme, source)
				r.Event(pod("a"), v1.EventTypeNormal, "R", "m")
				r.Event(pod("a"), v1.EventTypeNormal, "R", "m")
				_ = b.Flush(context.Background())
				st := b.Stats()
				t.Logf("%+v calls=%d logs=%q", st, len(sink.Calls()), l.get())
				assert.EqualValues(t, 2, st.Written+st.Dropped())
				b.Shutdown()
			})
		})
	}
}

type panicClock struct{}

func (panicClock) Now() time.Time                { panic("clock") }
func (panicClock) Since(time.Time) time.Duration { panic("clock") }

// Behind a slow sink, aggregation, dedup and spam decisions are made when an
// event is taken off the queue, as client-go makes them: the same sink
// calls. With one writer: with several, each event is taken (and
// correlated) as soon as it is recorded, while the writes of others are
// in flight (see record.WithWriters).
func TestASlowSinkCorrelatesEachEventWhenTakenAsClientGo(t *testing.T) {
	for _, opts := range []clientrecord.CorrelatorOptions{
		{BurstSize: 2, QPS: 0.01, MaxEvents: 3, MaxIntervalInSeconds: 20},
		{},
	} {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			c := newSide(ctx, func(a ...any) clientrecord.EventBroadcaster { return clientGo(a[0], a[1]) }, opts)
			o := newSide(ctx, func(a ...any) clientrecord.EventBroadcaster {
				return record.NewBroadcaster(record.WithContext(a[0].(context.Context)),
					record.WithCorrelatorOptions(a[1].(clientrecord.CorrelatorOptions)), record.WithWriters(1))
			}, opts)
			c.sink.Delay = 7 * time.Second
			o.sink.Delay = 7 * time.Second
			for i := range 150 {
				for _, sd := range []*side{c, o} {
					sd.recorders[0].Eventf(pod([]string{"a", "b"}[i%2]), v1.EventTypeNormal, "R", "m%d", i)
				}
				time.Sleep(time.Second)
			}
			time.Sleep(time.Hour)
			cc, oc := c.sink.Calls(), o.sink.Calls()
			assert.Equal(t, len(cc), len(oc))
			for i := range min(len(cc), len(oc)) {
				if cc[i].Op != oc[i].Op || cc[i].Patch != oc[i].Patch || cc[i].Event.Name != oc[i].Event.Name || cc[i].Event.Message != oc[i].Event.Message {
					t.Errorf("call %d:\nclient-go %s %s %q %s\nours      %s %s %q %s", i, cc[i].Op, cc[i].Event.Name, cc[i].Event.Message, cc[i].Patch, oc[i].Op, oc[i].Event.Name, oc[i].Event.Message, oc[i].Patch)
					break
				}
			}
			for i := range max(len(cc), len(oc)) {
				if i < len(cc) {
					t.Logf("C %d %v %s %s %q %s", i, cc[i].At.Format("04:05"), cc[i].Op, cc[i].Event.Name, cc[i].Event.Message, cc[i].Patch)
				}
				if i < len(oc) {
					t.Logf("O %d %v %s %s %q %s", i, oc[i].At.Format("04:05"), oc[i].Op, oc[i].Event.Name, oc[i].Event.Message, oc[i].Patch)
				}
			}
			c.b.Shutdown()
			o.b.Shutdown()
		})
	}
}

// EventCorrelate returns a copy of the event it is given, as client-go's does.
func TestEventCorrelateReturnsACopyAsClientGo(t *testing.T) {
	e := &v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "a.1", Namespace: "ns"}, Message: "m", Count: 1, Type: "Normal"}
	rc, _ := clientrecord.NewEventCorrelator(clocktesting.NewFakeClock(time.Unix(1, 0))).EventCorrelate(e)
	ro, _ := record.NewEventCorrelator(clocktesting.NewFakeClock(time.Unix(1, 0))).EventCorrelate(e)
	assert.Equal(t, rc.Event != e, ro.Event != e)
}

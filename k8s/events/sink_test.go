package events

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fanout-go/fanout/k8s/internal/adapt"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	restclient "k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
)

func TestEventSinkImplEmptyNamespace(t *testing.T) {
	s := &EventSinkImpl{Interface: fake.NewClientset().EventsV1()}
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	_, err := s.Create(context.Background(), ev)
	assert.EqualError(t, err, "can't create an event with empty namespace")
	_, err = s.Update(context.Background(), ev)
	assert.EqualError(t, err, "can't update an event with empty namespace")
	_, err = s.Patch(context.Background(), ev, []byte("{}"))
	assert.EqualError(t, err, "can't patch an event with empty namespace")
}

func TestEventSinkImplRoundTrip(t *testing.T) {
	client := fake.NewClientset()
	s := &EventSinkImpl{Interface: client.EventsV1()}
	ctx := context.Background()
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}, Note: "a", Type: corev1.EventTypeNormal}
	_, err := s.Create(ctx, ev)
	require.NoError(t, err)
	ev.Note = "b"
	got, err := s.Update(ctx, ev)
	require.NoError(t, err)
	assert.Equal(t, "b", got.Note)
	got, err = s.Patch(ctx, ev, []byte(`{"series":{"count":2,"lastObservedTime":"2000-01-01T00:00:01.000000Z"}}`))
	require.NoError(t, err)
	require.NotNil(t, got.Series)
	assert.EqualValues(t, 2, got.Series.Count)
}

// write, one attempt: a series is patched, and created with its resource
// version cleared when the patch finds nothing.
func TestWriteSeries404CreatesWithoutResourceVersion(t *testing.T) {
	sink := newRecordingSink()
	sink.fail = func(n int, o op) error {
		if o.Verb == "patch" {
			return notFound(o.Name)
		}
		return nil
	}
	w := &sinkAdapter{sink: sink, ctx: context.Background(), logger: quiet}
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns", ResourceVersion: "7"},
		Series:     &eventsv1.EventSeries{Count: 3, LastObservedTime: metav1.MicroTime{Time: bubbleStart}},
	}
	stored, err := w.write(ev)
	require.NoError(t, err)
	require.NotNil(t, stored)
	ops := sink.ops()
	require.Len(t, ops, 2)
	assert.Equal(t, "patch", ops[0].Verb)
	assert.Equal(t, "7", ops[0].RV)
	assert.Equal(t, `{"series":{"count":3,"lastObservedTime":"2000-01-01T00:00:00.000000Z"}}`, ops[0].Patch)
	assert.Equal(t, "create", ops[1].Verb)
	assert.Empty(t, ops[1].RV)
	assert.EqualValues(t, 3, ops[1].Count)
}

func TestErrorClassification(t *testing.T) {
	type tc struct {
		name    string
		series  bool // record the event twice: the second write is a series
		fail    func(n int, o op) error
		wantOps []string // verbs of the calls for the write under test
		// counters for the write under test
		rejected, retries, written uint64
	}
	always := func(err error) func(int, op) error { return func(int, op) error { return err } }
	twelve := func(verb string) []string {
		v := make([]string, 12)
		for i := range v {
			v[i] = verb
		}
		return v
	}
	cases := []tc{
		{name: "bad request", fail: always(badRequest()), wantOps: []string{"create"}, rejected: 1},
		{name: "already exists", fail: always(alreadyExists("x")), wantOps: []string{"create"}, rejected: 1},
		{name: "forbidden", fail: always(apierrors.NewForbidden(eventsGR, "x", nil)), wantOps: []string{"create"}, rejected: 1},
		{name: "request construction", fail: always(&restclient.RequestConstructionError{}), wantOps: []string{"create"}, rejected: 1},
		{name: "unexpected object", fail: always(&apierrors.UnexpectedObjectError{}), wantOps: twelve("create"), retries: 1},
		{name: "transport", fail: always(errTransport), wantOps: twelve("create"), retries: 1},
		{name: "transient", fail: func(n int, o op) error {
			if n < 2 {
				return errTransport
			}
			return nil
		}, wantOps: []string{"create", "create", "create"}, written: 1},
		{name: "series rejected", series: true, fail: func(n int, o op) error {
			if o.Verb == "patch" {
				return badRequest()
			}
			return nil
		}, wantOps: []string{"patch"}, rejected: 1},
		{name: "series 404 then create", series: true, fail: func(n int, o op) error {
			if o.Verb == "patch" {
				return notFound(o.Name)
			}
			return nil
		}, wantOps: []string{"patch", "create"}, written: 1},
		{name: "series 404 then already exists is retried", series: true, fail: func(n int, o op) error {
			switch {
			case n == 1:
				return notFound(o.Name)
			case n == 2:
				return alreadyExists(o.Name)
			}
			return nil
		}, wantOps: []string{"patch", "create", "patch"}, written: 1},
		{name: "series 404 then already exists until retries run out", series: true, fail: func(n int, o op) error {
			switch o.Verb {
			case "patch":
				return notFound(o.Name)
			case "create":
				if n > 0 {
					return alreadyExists(o.Name)
				}
			}
			return nil
		}, wantOps: append(twelve("patch"), twelve("create")...), retries: 1},
		{name: "series transport", series: true, fail: func(n int, o op) error {
			if n > 0 {
				return errTransport
			}
			return nil
		}, wantOps: twelve("patch"), retries: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := newRecordingSink()
				first := 0
				if c.series {
					first = 1 // the creating write is not under test
				}
				sink.fail = func(n int, o op) error {
					if n < first {
						return nil
					}
					return c.fail(n, o)
				}
				b, r := startQuiet(t, sink, WithSleepDuration(time.Second))
				if c.series {
					r.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
				}
				r.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
				flush(t, b)
				ops := sink.ops()[first:]
				verbs := make([]string, 0, len(ops))
				for _, o := range ops {
					verbs = append(verbs, o.Verb)
				}
				// a 404 and its create are one attempt: pair them up.
				if c.name == "series 404 then already exists until retries run out" {
					verbs = pairUp(verbs)
					want := pairUp(interleave(twelve("patch"), twelve("create")))
					assert.Equal(t, want, verbs)
				} else {
					assert.Equal(t, c.wantOps, verbs)
				}
				s := b.Stats()
				assert.Equal(t, c.rejected, s.DroppedRejected, "rejected")
				assert.Equal(t, c.retries, s.DroppedRetries, "retries")
				assert.Equal(t, c.written+uint64(first), s.Written, "written")
			})
		})
	}
}

func interleave(a, b []string) []string {
	var out []string
	for i := range a {
		out = append(out, a[i], b[i])
	}
	return out
}

func pairUp(v []string) []string {
	var out []string
	for i := 0; i+1 < len(v); i += 2 {
		out = append(out, v[i]+"+"+v[i+1])
	}
	if len(v)%2 == 1 {
		out = append(out, v[len(v)-1])
	}
	return out
}

// client-go's schedule: 12 tries, sleep plus up to 25% jitter between them.
func TestRetrySchedule(t *testing.T) {
	for _, sleep := range []time.Duration{0, 2 * time.Second, adapt.DefaultSleepDuration} {
		t.Run(sleep.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := newRecordingSink()
				sink.fail = func(int, op) error { return errTransport }
				var opts []Option
				if sleep != adapt.DefaultSleepDuration {
					opts = append(opts, WithSleepDuration(sleep))
				}
				b, r := startQuiet(t, sink, opts...)
				r.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
				flush(t, b)
				ops := sink.ops()
				require.Len(t, ops, 12)
				for i := 1; i < len(ops); i++ {
					gap := ops[i].At - ops[i-1].At
					assert.GreaterOrEqual(t, gap, sleep, "pause %d", i)
					assert.LessOrEqual(t, gap, sleep+sleep/4, "pause %d", i)
				}
				s := b.Stats()
				assert.EqualValues(t, 12, s.Failures)
				assert.EqualValues(t, 1, s.DroppedRetries)
			})
		})
	}
}

// The fake clientset with an injected error, through the whole pipeline.
func TestFakeClientsetReactors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		calls := 0
		client.PrependReactor("create", "events", func(action clienttesting.Action) (bool, runtime.Object, error) {
			calls++
			if calls <= 2 {
				return true, nil, errTransport
			}
			return false, nil, nil
		})
		b, r := startQuiet(t, &EventSinkImpl{Interface: client.EventsV1()})
		r.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		r.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		flush(t, b)
		list, err := client.EventsV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, list.Items, 1)
		require.NotNil(t, list.Items[0].Series)
		assert.EqualValues(t, 2, list.Items[0].Series.Count)
		assert.Equal(t, 3, calls)
		s := b.Stats()
		assert.EqualValues(t, 2, s.Written)
		assert.EqualValues(t, 2, s.Failures)
	})
}

// A sink that panics is contained on every goroutine this package starts:
// on the runner (the write is dropped as rejected) and on the series
// maintenance goroutine, whose finish pass writes the series 12 minutes
// after the second occurrence. The sink is an EventSinkImpl without a
// client (its nil Interface panics). It runs in a child process, so that a
// panic that escapes fails this test instead of killing the test binary.
func TestSinkPanicInSeriesMaintenanceIsContained(t *testing.T) {
	if os.Getenv("FANOUT_TEST_CHILD") == t.Name() {
		synctest.Test(t, func(t *testing.T) {
			b, err := New(&EventSinkImpl{})
			require.NoError(t, err)
			require.NoError(t, b.StartRecordingToSinkWithContext(quietCtx(t.Context())))
			defer b.Shutdown()
			r := b.NewRecorder(scheme.Scheme, "ctrl").WithLogger(quiet)
			p := pod("foo", "ns")
			for range 3 {
				r.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n")
			}
			flush(t, b)
			assert.EqualValues(t, 2, b.Stats().DroppedRejected, "the runner contained both panics")
			sleepUntil(13 * time.Minute) // finish writes the series: panic
			assert.Positive(t, b.Stats().Failures)
		})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "FANOUT_TEST_CHILD="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		if len(out) > 3000 {
			out = out[:3000]
		}
		t.Fatalf("the child process failed (%v): a sink panic in series maintenance crashed it:\n%s", err, out)
	}
}

// A write that fails because the sink panicked is logged with the logger of
// the context given to StartRecordingToSinkWithContext, as every other
// error of the sink's writes, not with the global logger.
func TestSinkPanicLoggedWithContextLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var lines []string
		logger := funcr.New(func(prefix, args string) {
			mu.Lock()
			lines = append(lines, args)
			mu.Unlock()
		}, funcr.Options{})
		sink := newRecordingSink()
		sink.Panic = func(c sinkCall) bool { return c.Op == "create" }
		b, err := New(sink)
		require.NoError(t, err)
		defer b.Shutdown()
		require.NoError(t, b.StartRecordingToSinkWithContext(klog.NewContext(t.Context(), logger)))
		b.NewRecorder(scheme.Scheme, "ctrl").WithLogger(quiet).Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		flush(t, b)
		require.EqualValues(t, 1, b.Stats().DroppedRejected)
		mu.Lock()
		defer mu.Unlock()
		assert.NotEmpty(t, lines, "the failed write is logged with the context's logger")
	})
}

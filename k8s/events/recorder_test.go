package events

import (
	"context"
	"fmt"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
)

func testScheme() *runtime.Scheme { return scheme.Scheme }

// unregistered is a runtime.Object no scheme knows.
type unregistered struct {
	metav1.TypeMeta
	metav1.ObjectMeta
}

func (u *unregistered) DeepCopyObject() runtime.Object { c := *u; return &c }

// noKind is a runtime.Object whose GetObjectKind returns nil.
type noKind struct{ metav1.ObjectMeta }

func (*noKind) GetObjectKind() schema.ObjectKind { return nil }
func (n *noKind) DeepCopyObject() runtime.Object { c := *n; return &c }

func TestEventConstruction(t *testing.T) {
	hostname, _ := os.Hostname()
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		b, err := New(&EventSinkImpl{Interface: client.EventsV1()})
		require.NoError(t, err)
		defer b.Shutdown()
		require.NoError(t, b.StartRecordingToSinkWithContext(quietCtx(t.Context())))
		seen := make(chan *eventsv1.Event, 2)
		stop, err := b.StartEventWatcher(func(obj runtime.Object) { seen <- obj.(*eventsv1.Event) })
		require.NoError(t, err)
		defer stop()
		r := b.NewRecorder(scheme.Scheme, "example.com/ctrl")
		ar, ok := r.(AnnotatedEventRecorder)
		require.True(t, ok, "the recorder implements AnnotatedEventRecorder")

		now := time.Now()
		p, rel := pod("foo", "baz"), pod("bar", "baz")
		ar.AnnotatedEventf(p, rel, map[string]string{"k": "v"}, corev1.EventTypeWarning, "Failed", "Pulling", "image %q: %d", "nginx", 3)
		r.Eventf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, nil, corev1.EventTypeNormal, "Ready", "Check", "plain")
		flush(t, b)

		got, err := client.EventsV1().Events("baz").Get(context.Background(), fmt.Sprintf("foo.%x", now.UnixNano()), metav1.GetOptions{})
		require.NoError(t, err)
		want := &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("foo.%x", now.UnixNano()),
				Namespace:   "baz",
				Annotations: map[string]string{"k": "v"},
			},
			EventTime:           metav1.MicroTime{Time: now},
			ReportingController: "example.com/ctrl",
			ReportingInstance:   "example.com/ctrl-" + hostname,
			Action:              "Pulling",
			Reason:              "Failed",
			Regarding:           corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: "foo", Namespace: "baz", UID: "uid-foo"},
			Related:             &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: "bar", Namespace: "baz", UID: "uid-bar"},
			Note:                `image "nginx": 3`,
			Type:                corev1.EventTypeWarning,
		}
		assert.Equal(t, want, <-seen, "the event as built")
		// What the fake server stored, less what it set itself.
		got.TypeMeta, got.ResourceVersion, got.ManagedFields = metav1.TypeMeta{}, "", nil
		assert.Equal(t, want, got, "the event as stored")

		// No namespace: "default"; no related object: nil.
		list, err := client.EventsV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, list.Items, 1)
		node := list.Items[0]
		assert.Equal(t, fmt.Sprintf("n1.%x", now.UnixNano()), node.Name)
		assert.Nil(t, node.Related)
		assert.Equal(t, "Node", node.Regarding.Kind)
		assert.Equal(t, "plain", node.Note)
	})
}

func TestEventNameNotDNSSubdomain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, r := startQuiet(t, sink)
		r.Eventf(pod("Not_A_Valid_Name", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		flush(t, b)
		ops := sink.ops()
		require.Len(t, ops, 1)
		// client-go's util.GenerateEventName falls back to a UUID.
		assert.Len(t, ops[0].Name, 36)
	})
}

func TestRelatedReferenceFailureLeavesRelatedNil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		b, err := New(&EventSinkImpl{Interface: client.EventsV1()})
		require.NoError(t, err)
		defer b.Shutdown()
		require.NoError(t, b.StartRecordingToSinkWithContext(quietCtx(t.Context())))
		r := b.NewRecorder(scheme.Scheme, "ctrl").WithLogger(quiet)
		r.Eventf(pod("a", "ns"), &unregistered{}, corev1.EventTypeNormal, "R", "A", "n")
		var typedNil *corev1.Pod
		r.Eventf(pod("b", "ns"), typedNil, corev1.EventTypeNormal, "R", "A", "n")
		flush(t, b)
		list, err := client.EventsV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, list.Items, 2)
		for _, ev := range list.Items {
			assert.Nil(t, ev.Related, ev.Name)
		}
		assert.Zero(t, b.Stats().Invalid)
	})
}

func TestRelatedObjectReferenceIsCopied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := New(nil)
		require.NoError(t, err)
		defer b.Shutdown()
		got := make(chan *eventsv1.Event, 1)
		stop, err := b.StartEventWatcher(func(obj runtime.Object) { got <- obj.(*eventsv1.Event) })
		require.NoError(t, err)
		defer stop()
		ref := &corev1.ObjectReference{Kind: "Pod", Name: "x", Namespace: "ns"}
		b.NewRecorder(scheme.Scheme, "ctrl").Eventf(pod("a", "ns"), ref, corev1.EventTypeNormal, "R", "A", "n")
		ref.Name = "changed"
		flush(t, b)
		ev := <-got
		assert.Equal(t, "x", ev.Related.Name)
	})
}

func TestInvalidInputCountedNoPanic(t *testing.T) {
	var typedNilPod *corev1.Pod
	var typedNilRef *corev1.ObjectReference
	cases := []struct {
		name      string
		scheme    *runtime.Scheme
		regarding runtime.Object
		eventtype string
	}{
		{"nil regarding", scheme.Scheme, nil, corev1.EventTypeNormal},
		{"typed nil pod", scheme.Scheme, typedNilPod, corev1.EventTypeNormal},
		{"typed nil reference", scheme.Scheme, typedNilRef, corev1.EventTypeNormal},
		{"unregistered type", scheme.Scheme, &unregistered{}, corev1.EventTypeNormal},
		{"nil kind", scheme.Scheme, &noKind{}, corev1.EventTypeNormal},
		{"nil scheme", nil, pod("a", "ns"), corev1.EventTypeNormal},
		{"bad type", scheme.Scheme, pod("a", "ns"), "Bogus"},
		{"empty type", scheme.Scheme, pod("a", "ns"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := newRecordingSink()
				b, _ := startQuiet(t, sink)
				r := b.NewRecorder(tc.scheme, "ctrl").WithLogger(quiet)
				r.Eventf(tc.regarding, nil, tc.eventtype, "R", "A", "note %v", "x")
				r.(AnnotatedEventRecorder).AnnotatedEventf(tc.regarding, tc.regarding, nil, tc.eventtype, "R", "A", "n")
				flush(t, b)
				assert.Empty(t, sink.ops())
				s := b.Stats()
				assert.EqualValues(t, 2, s.Invalid)
				assert.EqualValues(t, 2, s.Dropped())
				assert.Zero(t, s.Recorded)
			})
		})
	}
}

func TestWithLoggerKeepsBroadcaster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newRecordingSink()
		b, r := startQuiet(t, sink)
		r2 := r.WithLogger(quiet)
		assert.NotSame(t, r, r2)
		r2.Eventf(pod("a", "ns"), nil, corev1.EventTypeNormal, "R", "A", "n")
		flush(t, b)
		require.Len(t, sink.ops(), 1)
	})
}

// Recording an event allocates the event and its name, nothing else: the
// reference is built in place and a note without verbs is not copied.
func TestEventfAllocatesOnlyTheEventAndItsName(t *testing.T) {
	b, err := New(newRecordingSink())
	require.NoError(t, err)
	defer b.Shutdown()
	r := b.NewRecorder(scheme.Scheme, "ctrl")
	p := pod("web", "ns")
	if n := testing.AllocsPerRun(100, func() {
		r.Eventf(p, nil, corev1.EventTypeNormal, "Synced", "Sync", "synced")
	}); n != 2 {
		t.Errorf("Eventf allocated %v times, want 2 (the event and its name)", n)
	}
}

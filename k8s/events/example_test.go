package events_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fanout-go/fanout/k8s/events"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
)

// A broadcaster writing to a (fake) API server. Flush waits until the
// events are written; the second occurrence became a series of the first.
func ExampleNew() {
	client := fake.NewClientset()
	b, err := events.New(&events.EventSinkImpl{Interface: client.EventsV1()})
	if err != nil {
		panic(err)
	}
	defer b.Shutdown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		panic(err)
	}

	recorder := b.NewRecorder(scheme.Scheme, "example.com/web-controller")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop"}}
	for range 2 {
		recorder.Eventf(pod, nil, corev1.EventTypeWarning, "BackOff", "Restart", "back-off restarting container %s", "app")
	}
	if err := b.Flush(ctx); err != nil {
		panic(err)
	}

	list, _ := client.EventsV1().Events("shop").List(ctx, metav1.ListOptions{})
	for _, ev := range list.Items {
		fmt.Printf("%s %s/%s: %s (series count %d)\n", ev.Type, ev.Regarding.Kind, ev.Regarding.Name, ev.Note, ev.Series.Count)
	}
	s := b.Stats()
	fmt.Printf("recorded %d, written %d, dropped %d\n", s.Recorded, s.Written, s.Dropped())
	// Output:
	// Warning Pod/web-0: back-off restarting container app (series count 2)
	// recorded 2, written 2, dropped 0
}

// Options are never refused: zero means client-go's default, and a value
// out of range is normalised (here a negative pause means none).
func ExampleNew_options() {
	b, err := events.New(nil, events.WithQueueLength(100), events.WithCacheSize(512), events.WithSleepDuration(-time.Second))
	fmt.Println(err)
	b.Shutdown()
	// Output:
	// <nil>
}

// A watcher sees every event, in order, on its own goroutine.
func ExampleBroadcaster_StartEventWatcher() {
	b := events.NewBroadcaster(nil).(*events.Broadcaster)
	defer b.Shutdown()
	stop, err := b.StartEventWatcher(func(obj runtime.Object) {
		ev := obj.(*eventsv1.Event)
		fmt.Println(ev.Namespace, ev.Reason, ev.Note)
	})
	if err != nil {
		panic(err)
	}
	defer stop()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	b.NewRecorder(scheme.Scheme, "example.com/node-controller").Eventf(node, nil, corev1.EventTypeNormal, "Ready", "Check", "node is ready")
	_ = b.Flush(context.Background())
	// Output:
	// default Ready node is ready
}

// FakeRecorder turns events into strings; a full buffer discards instead
// of blocking the code under test.
func ExampleFakeRecorder() {
	recorder := events.NewFakeRecorder(1)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0"}}
	recorder.Eventf(pod, nil, corev1.EventTypeWarning, "Failed", "Pull", "image %q not found", "nginx:9")
	recorder.Eventf(pod, nil, corev1.EventTypeNormal, "Pulled", "Pull", "discarded: the buffer is full")
	fmt.Println(<-recorder.Events)
	fmt.Println("dropped:", recorder.Dropped())

	recorder.Verbose = true
	pod.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	recorder.AnnotatedEventf(pod, nil, map[string]string{"team": "web"}, corev1.EventTypeNormal, "Pulled", "Pull", "done")
	fmt.Println(<-recorder.Events)
	// Output:
	// Warning Failed image "nginx:9" not found
	// dropped: 1
	// Normal Pulled Pull done {kind=Pod,apiVersion=v1} map[team:web]
}

func ExampleGetFieldSelector() {
	sel, err := events.GetFieldSelector(eventsv1.SchemeGroupVersion, schema.GroupVersionKind{}, "web-0", "")
	fmt.Println(sel, err)
	sel, err = events.GetFieldSelector(corev1.SchemeGroupVersion, schema.GroupVersionKind{}, "web-0", "")
	fmt.Println(sel, err)
	// Output:
	// regarding.name=web-0 <nil>
	// involvedObject.name=web-0 <nil>
}

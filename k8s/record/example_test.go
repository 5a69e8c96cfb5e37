package record_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/fanout-go/fanout/k8s/record"
)

// A controller's setup, as with client-go, plus Flush and Stats.
func Example() {
	client := fake.NewClientset()
	b := record.New()
	defer b.Shutdown()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "my-controller"})

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod"}}
	recorder.Eventf(pod, v1.EventTypeNormal, "Synced", "synced %d times", 1)
	recorder.Eventf(pod, v1.EventTypeNormal, "Synced", "synced %d times", 1) // a repeat: count 2
	recorder.Event(pod, "Bogus", "Invalid", "not Normal or Warning")         // counted, not sent

	if err := b.Flush(context.Background()); err != nil {
		panic(err)
	}
	list, _ := client.CoreV1().Events("prod").List(context.Background(), metav1.ListOptions{})
	for _, e := range list.Items {
		fmt.Println(e.Reason, e.Message, e.Count)
	}
	st := b.Stats()
	fmt.Println("written:", st.Written, "invalid:", st.Invalid)
	// Output:
	// Synced synced 1 times 2
	// written: 2 invalid: 1
}

// A FakeRecorder whose buffer is full drops and counts instead of blocking.
func ExampleFakeRecorder() {
	f := record.NewFakeRecorder(1)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	f.Eventf(pod, v1.EventTypeWarning, "BackOff", "restart %d", 1)
	f.Eventf(pod, v1.EventTypeWarning, "BackOff", "restart %d", 2)
	fmt.Println(<-f.Events)
	fmt.Println("dropped:", f.Dropped())
	// Output:
	// Warning BackOff restart 1
	// dropped: 1
}

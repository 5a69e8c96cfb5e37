// Command recorder is what a client-go controller looks like after
// switching to github.com/fanout-go/fanout/k8s/record: the same calls as
// with k8s.io/client-go/tools/record, here against a fake clientset. The
// release test builds and runs it in a module of its own that gets the
// adapter from a module proxy, and checks that it links no Prometheus.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/fanout-go/fanout/k8s/record" // was: "k8s.io/client-go/tools/record"
)

func main() {
	client := fake.NewClientset()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: "uid-web-1"}}

	eventBroadcaster := record.NewBroadcaster()
	eventBroadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := eventBroadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "my-controller"})
	for range 3 {
		recorder.Eventf(pod, v1.EventTypeNormal, "Synced", "synced %s", pod.Name)
	}

	// Beyond client-go: wait until everything recorded is written.
	b := eventBroadcaster.(*record.Broadcaster)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	eventBroadcaster.Shutdown()

	list, err := client.CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range list.Items {
		fmt.Printf("%s %s %q count %d\n", e.InvolvedObject.Name, e.Reason, e.Message, e.Count)
	}
	st := b.Stats()
	fmt.Printf("recorded %d, dropped %d\n", st.Recorded, st.Dropped())
}

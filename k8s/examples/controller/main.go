// Command controller is a minimal controller that records Kubernetes events
// through github.com/fanout-go/fanout/k8s/record, the drop-in replacement
// for client-go's tools/record: the only change from a client-go controller
// is that import path. It also shows what client-go lacks: the broadcaster's
// drop counters, and a Flush before exit. (To export the counters to
// Prometheus, register github.com/fanout-go/fanout/k8s/metrics.NewCollector,
// a separate module: this program, like the record package, links no
// Prometheus.)
//
// With -kubeconfig it watches the pods of a real cluster and records an event
// for each pod it sees, until interrupted; without, it runs against a fake
// clientset with a few pods, prints the events it stored, and exits. Both
// print the counters at the end.
//
//	go run ./examples/controller                         # self-contained demo
//	go run ./examples/controller -kubeconfig ~/.kube/config
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fanout-go/fanout/k8s/record" // was: "k8s.io/client-go/tools/record"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster to watch (empty: a fake clientset demo)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *kubeconfig); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, out io.Writer, kubeconfig string) error {
	demo := kubeconfig == ""
	client, err := newClient(kubeconfig)
	if err != nil {
		return err
	}

	// The same calls as with client-go's tools/record.
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(4)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "example-controller"})

	// Beyond client-go: Flush, Stats and a bounded Shutdown.
	b := broadcaster.(*record.Broadcaster)

	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			pod := obj.(*v1.Pod)
			recorder.Eventf(pod, v1.EventTypeNormal, "Observed", "pod %s is %s", pod.Name, pod.Status.Phase)
		},
	}); err != nil {
		return err
	}
	informerCtx, stopInformers := context.WithCancel(ctx)
	factory.Start(informerCtx.Done())
	defer factory.Shutdown()
	defer stopInformers() // before Shutdown, which waits for the informers
	if !cache.WaitForCacheSync(informerCtx.Done(), pods.HasSynced) {
		return ctx.Err()
	}

	if !demo {
		<-ctx.Done()
	}
	// Beyond client-go: wait until every event recorded so far is written
	// (or counted as dropped), then shut down within a bound.
	flushCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Flush(flushCtx); err != nil {
		log.Printf("flush: %v", err)
	}
	defer b.Shutdown()

	if demo {
		if err := printEvents(out, client); err != nil {
			return err
		}
	}
	// Beyond client-go: every event is accounted for, by cause.
	st := b.Stats()
	fmt.Fprintf(out, "recorded %d, dropped %d\n", st.Recorded, st.Dropped())
	return nil
}

// newClient connects to the cluster of kubeconfig, or returns a fake
// clientset holding two pods when kubeconfig is empty.
func newClient(kubeconfig string) (kubernetes.Interface, error) {
	if kubeconfig == "" {
		return fake.NewClientset(
			&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop"}, Status: v1.PodStatus{Phase: v1.PodRunning}},
			&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-2", Namespace: "shop"}, Status: v1.PodStatus{Phase: v1.PodPending}},
		), nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// printEvents prints the events the demo recorded in namespace shop.
func printEvents(out io.Writer, client kubernetes.Interface) error {
	list, err := client.CoreV1().Events("shop").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, e := range list.Items {
		fmt.Fprintf(out, "event %s: %s %s %q\n", e.InvolvedObject.Name, e.Type, e.Reason, e.Message)
	}
	return nil
}

// Command controller is a minimal controller-runtime controller whose
// events go through fanout: the only change from a stock controller is
// fanoutctrl.NewManager in place of ctrl.NewManager. It records an
// events.k8s.io event for each pod it reconciles, with leader election if
// asked, exports the event counters in controller-runtime's /metrics, and
// prints them when it stops (after every event recorded was written).
//
//	go run ./examples/controller -kubeconfig ~/.kube/config -namespace default
//	go run ./examples/controller -kubeconfig ~/.kube/config -namespace default -leader-elect
//
// Stop it with Ctrl-C.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	fanoutctrl "github.com/fanout-go/fanout/k8s/ctrl"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster (empty: in-cluster configuration)")
	namespace := flag.String("namespace", "default", "namespace whose pods are reconciled")
	leaderElect := flag.Bool("leader-elect", false, "run with leader election (a Lease in -namespace)")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	if err := run(ctrl.SetupSignalHandler(), os.Stdout, cfg, *namespace, *leaderElect); err != nil {
		log.Fatal(err)
	}
}

// run runs the controller until ctx ends, then prints the event counters.
func run(ctx context.Context, out io.Writer, cfg *rest.Config, namespace string, leaderElect bool) error {
	mgr, err := fanoutctrl.NewManager(cfg, ctrl.Options{ // was: ctrl.NewManager
		Metrics:                       metricsserver.Options{BindAddress: "0"}, // ":8080" to serve /metrics
		Cache:                         cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
		LeaderElection:                leaderElect,
		LeaderElectionID:              "fanout-example-controller",
		LeaderElectionNamespace:       namespace,
		LeaderElectionReleaseOnCancel: true,
	}, fanoutctrl.WithMetrics(nil))
	if err != nil {
		return err
	}
	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.Pod{}).Complete(&podReconciler{
		client: mgr.GetClient(),
		events: mgr.GetEventRecorder("example-controller"),
	})
	if err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	// Beyond controller-runtime: when Start returns, every event recorded
	// is written or counted as dropped, by cause.
	st := mgr.EventsBroadcaster().Stats()
	fmt.Fprintf(out, "recorded %d, written %d, merged into series %d, dropped %d\n", st.Recorded, st.Written, st.Merged, st.Dropped())
	return nil
}

// podReconciler records an event about each pod it reconciles.
type podReconciler struct {
	client client.Client
	events recorder.EventRecorder
}

func (r *podReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pod corev1.Pod
	if err := r.client.Get(ctx, req.NamespacedName, &pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.events.Eventf(&pod, nil, corev1.EventTypeNormal, "Observed", "Reconcile", "pod %s is %s", pod.Name, pod.Status.Phase)
	return ctrl.Result{}, nil
}

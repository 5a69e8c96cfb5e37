package fanoutctrl_test

import (
	"context"
	"fmt"
	"log"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fanoutctrl "github.com/fanout-go/fanout/k8s/ctrl"
)

// A controller's main: fanoutctrl.NewManager instead of ctrl.NewManager,
// and the rest as before. Here the manager stops at once; a controller
// gives Start ctrl.SetupSignalHandler().
func Example() {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"} // ctrl.GetConfigOrDie(); not contacted here
	mgr, err := fanoutctrl.NewManager(cfg, ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"},
		// LeaderElection: true, LeaderElectionID: "my-controller", ...
	}, fanoutctrl.WithMetrics(nil)) // the counters in controller-runtime's /metrics
	if err != nil {
		log.Fatal(err)
	}
	// Controllers get their recorders as before, e.g.
	// ctrl.NewControllerManagedBy(mgr).For(&corev1.Pod{}).Complete(&reconciler{
	//	events: mgr.GetEventRecorder("my-controller")})
	_ = mgr.GetEventRecorder("my-controller")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Start returns once the manager has stopped and every event recorded
	// is written, or counted as dropped once what is left of the manager's
	// GracefulShutdownTimeout (30 s by default) has passed.
	if err := mgr.Start(ctx); err != nil {
		log.Fatal(err)
	}
	st := mgr.EventsBroadcaster().Stats()
	fmt.Printf("recorded %d, dropped %d, sinks running %d\n", st.Recorded, st.Dropped(), st.Sinks)
	// Output: recorded 0, dropped 0, sinks running 0
}

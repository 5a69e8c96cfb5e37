//go:build e2e

package e2etest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	ctrlrecorder "sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/fanout-go/fanout/k8s/apiservertest"
	fanoutctrl "github.com/fanout-go/fanout/k8s/ctrl"
)

// repeats is how often the reconciler records each event about each
// ConfigMap: once, twice (a core/v1 count of 2, an events.k8s.io series of
// 2), and six times (the six events: a series whose four last
// occurrences are only merged until Shutdown writes its final count).
var repeats = map[string]int{"once": 1, "twice": 2, "six": 6}

// reconciler records, the first time it sees each ConfigMap, repeats[name]
// core/v1 events (GetEventRecorderFor) and as many events.k8s.io ones
// (GetEventRecorder), and closes all once it has seen every ConfigMap.
type reconciler struct {
	client client.Client
	core   record.EventRecorder
	events ctrlrecorder.EventRecorder

	mu   sync.Mutex
	seen map[string]bool
	all  chan struct{}
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cm corev1.ConfigMap
	if err := r.client.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.mu.Lock()
	first := !r.seen[cm.Name]
	r.seen[cm.Name] = true
	done := first && len(r.seen) == len(repeats)
	r.mu.Unlock()
	if !first {
		return reconcile.Result{}, nil
	}
	for range repeats[cm.Name] {
		r.core.Eventf(&cm, corev1.EventTypeNormal, "Synced", "synced %s", cm.Name)
		r.events.Eventf(&cm, nil, corev1.EventTypeNormal, "Progressing", "Reconcile", "reconciled %s", cm.Name)
	}
	if done {
		close(r.all)
	}
	return reconcile.Result{}, nil
}

// writes counts the event writes a client makes, by API and verb.
type writes struct {
	mu sync.Mutex
	n  map[string]int // "core POST", "events.k8s.io PATCH", ...
}

func (w *writes) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		p := req.URL.Path
		if req.Method != http.MethodGet && (strings.HasSuffix(p, "/events") || strings.Contains(p, "/events/")) {
			api := "core"
			if strings.HasPrefix(p, "/apis/events.k8s.io/") {
				api = "events.k8s.io"
			}
			w.mu.Lock()
			w.n[api+" "+req.Method]++
			w.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

func (w *writes) get() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.n))
	for k, v := range w.n {
		out[k] = v
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// A controller-runtime manager made with fanoutctrl.NewManager, with or
// without leader election, writes every event once: the API server holds
// one core/v1 Event per object with the count recorded, one
// events.k8s.io Event per object with its full series count (the final
// count written at shutdown), and the leader election's two events; the
// requests are exactly the creates and patches that takes; nothing is
// dropped; Start returns only once everything is written, and leaves no
// goroutine behind.
func TestManagerWritesEveryEventOnce(t *testing.T) {
	for _, leader := range []bool{true, false} {
		t.Run(fmt.Sprintf("leader election %v", leader), func(t *testing.T) {
			env := apiservertest.Shared(t)
			admin, err := kubernetes.NewForConfig(env.Config())
			require.NoError(t, err)
			ns := apiservertest.Namespace(t, admin, fmt.Sprintf("ctrl-leader-%v", leader))
			for name := range repeats {
				_, err := admin.CoreV1().ConfigMaps(ns).Create(t.Context(),
					&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			ignore := goleak.IgnoreCurrent()

			cfg := env.Config()
			cfg.QPS, cfg.Burst = 1000, 1000
			w := &writes{n: map[string]int{}}
			cfg.Wrap(w.wrap)
			reg := prometheus.NewRegistry()
			mgr, err := fanoutctrl.NewManager(cfg, manager.Options{
				Scheme:                        scheme.Scheme,
				Metrics:                       metricsserver.Options{BindAddress: "0"},
				Cache:                         cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
				LeaderElection:                leader,
				LeaderElectionID:              "fanoutctrl-e2e",
				LeaderElectionNamespace:       ns,
				LeaderElectionReleaseOnCancel: true,
			}, fanoutctrl.WithMetrics(reg))
			require.NoError(t, err)
			r := &reconciler{
				client: mgr.GetClient(),
				//lint:ignore SA1019 the deprecated core/v1 recorder is what most controllers use
				core:   mgr.GetEventRecorderFor("configmaps"),
				events: mgr.GetEventRecorder("configmaps"),
				seen:   map[string]bool{},
				all:    make(chan struct{}),
			}
			require.NoError(t, ctrl.NewControllerManagedBy(mgr).Named(fmt.Sprint("configmaps-", leader)).
				For(&corev1.ConfigMap{}).Complete(r))

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			started := time.Now()
			stopped := make(chan error, 1)
			go func() { stopped <- mgr.Start(ctx) }()
			select {
			case <-r.all:
			case err := <-stopped:
				t.Fatalf("the manager stopped: %v", err)
			case <-time.After(time.Minute):
				t.Fatal("the reconciler did not see every ConfigMap within a minute")
			}
			flushCtx, stopFlush := context.WithTimeout(context.Background(), 30*time.Second)
			defer stopFlush()
			require.NoError(t, mgr.RecordBroadcaster().Flush(flushCtx))
			require.NoError(t, mgr.EventsBroadcaster().Flush(flushCtx))
			assert.Equal(t, 2, countMetrics(t, reg, "fanout_k8s_events_recorded_total"), "one per API")
			cancel()
			require.NoError(t, <-stopped)
			t.Logf("manager ran and stopped in %v", time.Since(started))
			assert.Zero(t, countMetrics(t, reg, "fanout_k8s_events_recorded_total"), "unregistered when Start returns")
			mgr.GetHTTPClient().CloseIdleConnections()
			goleak.VerifyNone(t, ignore)

			leaderEvents := 0
			if leader {
				leaderEvents = 2 // became leader, stopped leading
			}
			checkStored(t, admin, ns, leaderEvents)
			assert.Equal(t, map[string]int{
				"core POST":          3 + leaderEvents,
				"core PATCH":         0 + 1 + 5, // the repeats
				"events.k8s.io POST": 3,
				// twice: the count-2 patch; six: the same, and the final
				// count at shutdown.
				"events.k8s.io PATCH": 3,
			}, w.get(), "every event written once")

			core, ev := mgr.RecordBroadcaster().Stats(), mgr.EventsBroadcaster().Stats()
			assert.EqualValues(t, 1+2+6+leaderEvents, core.Recorded)
			assert.Equal(t, core.Recorded, core.Written, "%+v", core)
			assert.Zero(t, core.Dropped(), "%+v", core)
			assert.EqualValues(t, 1+2+6, ev.Recorded)
			assert.EqualValues(t, 3+2, ev.Written, "three creates, two count-2 patches: %+v", ev)
			assert.EqualValues(t, 4, ev.Merged, "the third to sixth occurrences, written at shutdown: %+v", ev)
			assert.Zero(t, ev.Dropped(), "%+v", ev)
		})
	}
}

// checkStored checks what the API server holds in ns: per ConfigMap one
// core/v1 event with the count recorded and one events.k8s.io event with
// its series count, and leaderEvents leader election events.
func checkStored(t *testing.T, admin kubernetes.Interface, ns string, leaderEvents int) {
	t.Helper()
	core, err := admin.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	synced, leader := map[string]int32{}, []string{}
	for _, e := range core.Items {
		switch e.Reason {
		case "Synced":
			_, dup := synced[e.InvolvedObject.Name]
			assert.False(t, dup, "one core/v1 event about %s", e.InvolvedObject.Name)
			synced[e.InvolvedObject.Name] = e.Count
		case "LeaderElection":
			assert.Equal(t, "Lease", e.InvolvedObject.Kind)
			assert.EqualValues(t, 1, e.Count)
			leader = append(leader, e.Message)
		}
	}
	assert.Equal(t, map[string]int32{"once": 1, "twice": 2, "six": 6}, synced)
	assert.Len(t, leader, leaderEvents, "leader election events: %q", leader)
	if leaderEvents > 0 {
		assert.Contains(t, strings.Join(leader, "\n"), "became leader")
		assert.Contains(t, strings.Join(leader, "\n"), "stopped leading")
	}

	evs, err := admin.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	series := map[string]int32{}
	for _, e := range evs.Items {
		if e.Reason != "Progressing" {
			continue
		}
		_, dup := series[e.Regarding.Name]
		assert.False(t, dup, "one events.k8s.io event about %s", e.Regarding.Name)
		assert.Equal(t, "configmaps", e.ReportingController)
		assert.Equal(t, "Reconcile", e.Action)
		series[e.Regarding.Name] = 1
		if e.Series != nil {
			series[e.Regarding.Name] = e.Series.Count
		}
	}
	assert.Equal(t, map[string]int32{"once": 1, "twice": 2, "six": 6}, series)
}

// countMetrics returns how many series of the metric name reg gathers.
func countMetrics(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

//go:build e2e

package e2etest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fanout-go/fanout/k8s/apiservertest"
	fanoutctrl "github.com/fanout-go/fanout/k8s/ctrl"
)

// The workload of the shutdown test, per API: for each of burstObjects
// ConfigMaps, the calls of phase (19), written; then burstPerObject calls
// each, the burst (a sink's queue of 1000), the manager stopped right after
// the last one.
const (
	burstObjects   = 50
	burstPerObject = 20
)

// call is one record call of the workload.
type call struct{ typ, reason, msg string }

// phase is what the workload records about each ConfigMap, per API, before
// the burst: three distinct events, one three times, a Warning, and twelve
// events that differ only in their message (core/v1 aggregates the tenth to
// twelfth into one combined event; events.k8s.io counts the twelve as one
// series).
func phase() []call {
	calls := []call{{"Normal", "Created", "created"}, {"Normal", "Scaled", "scaled"}, {"Normal", "Updated", "updated"}}
	for range 3 {
		calls = append(calls, call{"Normal", "Repeated", "again"})
	}
	calls = append(calls, call{"Warning", "Failed", "failed once"})
	for i := range 12 {
		calls = append(calls, call{"Normal", "Similar", fmt.Sprintf("similar %d", i)})
	}
	return calls
}

// burst is the calls of the burst about one ConfigMap: Warnings, so that
// no spam bucket of client-go's core/v1 filter (25 events per object and
// type) runs dry.
func burst() []call {
	calls := make([]call, burstPerObject)
	for i := range calls {
		calls[i] = call{"Warning", "Burst", "burst"}
	}
	return calls
}

// With default options (no WithShutdownTimeout), a manager stopped right
// after a burst of a thousand events per API still writes every event
// recorded before it stops: the flush gets what is left of the manager's
// GracefulShutdownTimeout (30 s), the sinks write several events at once,
// the open series get their final counts, and "stopped leading" is written
// once. The API server then holds exactly what client-go's correlation
// rules make of the calls, written with the fewest requests.
func TestManagerWithDefaultOptionsWritesABurstBeforeItStops(t *testing.T) {
	env := apiservertest.Shared(t)
	admin, err := kubernetes.NewForConfig(env.Config())
	require.NoError(t, err)
	ns := apiservertest.Namespace(t, admin, "ctrl-burst")
	cms := make([]*corev1.ConfigMap, burstObjects)
	for i := range cms {
		cms[i], err = admin.CoreV1().ConfigMaps(ns).Create(t.Context(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i), Namespace: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
		cms[i].Kind, cms[i].APIVersion = "ConfigMap", "v1"
	}

	cfg := env.Config()
	cfg.QPS, cfg.Burst = 1000, 1000 // the client's own limit is not what is tested
	w := &writes{n: map[string]int{}}
	cfg.Wrap(w.wrap)
	mgr, err := fanoutctrl.NewManager(cfg, manager.Options{
		Scheme:                        scheme.Scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		Cache:                         cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		LeaderElection:                true,
		LeaderElectionID:              "fanoutctrl-burst",
		LeaderElectionNamespace:       ns,
		LeaderElectionReleaseOnCancel: true,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	select {
	case <-mgr.Elected():
	case err := <-stopped:
		t.Fatalf("the manager stopped: %v", err)
	}

	//lint:ignore SA1019 the deprecated core/v1 recorder is what most controllers use
	core := mgr.GetEventRecorderFor("configmaps")
	events := mgr.GetEventRecorder("configmaps")
	record := func(cm *corev1.ConfigMap, calls []call) {
		for _, c := range calls { // core/v1 reasons apart: the API server shows each API's Events in both
			core.Event(cm, c.typ, "Core"+c.reason, c.msg)
			events.Eventf(cm, nil, c.typ, c.reason, "Reconcile", c.msg)
		}
	}
	for _, cm := range cms {
		record(cm, phase())
	}
	// The phase is written before the burst, as a controller's events
	// spread over time would be: the burst alone fills each sink's queue.
	require.NoError(t, mgr.RecordBroadcaster().Flush(t.Context()))
	require.NoError(t, mgr.EventsBroadcaster().Flush(t.Context()))
	start := time.Now()
	for _, cm := range cms {
		record(cm, burst())
	}
	cancel()
	require.NoError(t, <-stopped)
	t.Logf("the manager stopped %v after the burst began", time.Since(start))

	calls := burstObjects * (len(phase()) + burstPerObject)
	rs, es := mgr.RecordBroadcaster().Stats(), mgr.EventsBroadcaster().Stats()
	assert.EqualValues(t, calls+2, rs.Recorded, "the calls and the two leader election events")
	assert.Zero(t, rs.Dropped(), "%+v", rs)
	assert.EqualValues(t, calls, es.Recorded)
	assert.Zero(t, es.Dropped(), "%+v", es)

	checkBurstStored(t, admin, ns)
	// core/v1: each call is one write (a create or a patch); the leader
	// election's two events. events.k8s.io: per object, the three distinct
	// events and the Warning once each, and the repeated, similar and
	// burst series three writes each (create, count 2, final count).
	assert.Equal(t, calls+2, w.get()["core POST"]+w.get()["core PATCH"], "core/v1 writes: %v", w.get())
	assert.Equal(t, burstObjects*(4+3*3), w.get()["events.k8s.io POST"]+w.get()["events.k8s.io PATCH"],
		"events.k8s.io writes: %v", w.get())
}

// checkBurstStored checks that the Events in ns add up to the workload's
// calls under client-go's correlation rules, with the leader election's
// "stopped leading" once.
func checkBurstStored(t *testing.T, admin kubernetes.Interface, ns string) {
	t.Helper()
	core, err := admin.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	counts := map[string]map[string]int32{} // object → reason → sum of counts
	stoppedLeading := 0
	for _, e := range core.Items {
		if e.InvolvedObject.Kind == "Lease" {
			if assert.Contains(t, []string{"became leader", "stopped leading"}, leaderWords(e.Message)) &&
				leaderWords(e.Message) == "stopped leading" {
				stoppedLeading++
			}
			continue
		}
		reason, ok := strings.CutPrefix(e.Reason, "Core")
		if !ok {
			continue // an events.k8s.io Event
		}
		if counts[e.InvolvedObject.Name] == nil {
			counts[e.InvolvedObject.Name] = map[string]int32{}
		}
		counts[e.InvolvedObject.Name][reason] += e.Count
	}
	assert.Equal(t, 1, stoppedLeading, `"stopped leading" once`)
	series := map[string]map[string]int32{}
	evs, err := admin.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range evs.Items {
		if strings.HasPrefix(e.Reason, "Core") || e.Regarding.Kind != "ConfigMap" {
			continue // a core/v1 Event
		}
		if series[e.Regarding.Name] == nil {
			series[e.Regarding.Name] = map[string]int32{}
		}
		n := int32(1)
		if e.Series != nil {
			n = e.Series.Count
		}
		series[e.Regarding.Name][e.Reason] += n
	}
	want := map[string]int32{"Created": 1, "Scaled": 1, "Updated": 1, "Repeated": 3, "Failed": 1, "Similar": 12, "Burst": burstPerObject}
	for i := range burstObjects {
		name := fmt.Sprint("cm-", i)
		assert.Equal(t, want, counts[name], "core/v1 counts about %s", name)
		assert.Equal(t, want, series[name], "events.k8s.io series counts about %s", name)
	}
}

// leaderWords returns which leader election event msg is: "became leader"
// or "stopped leading" (the message names the holder first).
func leaderWords(msg string) string {
	for _, w := range []string{"became leader", "stopped leading"} {
		if len(msg) >= len(w) && msg[len(msg)-len(w):] == w {
			return w
		}
	}
	return msg
}

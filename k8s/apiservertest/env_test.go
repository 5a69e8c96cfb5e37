//go:build e2e

package apiservertest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kube-apiserver is served from the cached binaries with etcd behind it:
// both event APIs store and list, and after StopAPIServer and StartAPIServer
// the same clientset finds the data again, while a second StartAPIServer is
// refused.
func TestEnvServesEventsAcrossAPIServerRestart(t *testing.T) {
	start := time.Now()
	env := Start(t)
	t.Logf("env up in %v (apiserver %s, etcd %s)", time.Since(start), env.Host(), env.EtcdURL())
	cs := env.MustClientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const ns = "e2e-smoke"
	if _, err := cs.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: "smoke-pod"}
	now := metav1.Now()
	if _, err := cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "core-event", Namespace: ns},
		InvolvedObject: ref,
		Reason:         "Smoke",
		Message:        "core/v1 event",
		Source:         corev1.EventSource{Component: "e2e-test"},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
		Type:           corev1.EventTypeNormal,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create core/v1 event: %v", err)
	}
	if _, err := cs.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "events-event", Namespace: ns},
		EventTime:           metav1.NowMicro(),
		ReportingController: "fanout-go.dev/e2e-test",
		ReportingInstance:   "e2e-test-1",
		Action:              "Testing",
		Reason:              "Smoke",
		Regarding:           ref,
		Note:                "events.k8s.io/v1 event",
		Type:                corev1.EventTypeNormal,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create events.k8s.io/v1 event: %v", err)
	}
	checkEvents(ctx, t, cs, ns)

	// Outage: kube-apiserver down, etcd up; then back on the same address.
	stop := time.Now()
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("apiserver stopped in %v", time.Since(stop))
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	_, err := cs.CoreV1().Namespaces().Get(short, ns, metav1.GetOptions{})
	cancelShort()
	if err == nil {
		t.Fatal("apiserver still answers after StopAPIServer")
	}
	restart := time.Now()
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("apiserver restarted in %v", time.Since(restart))
	if err := env.StartAPIServer(); err == nil {
		t.Error("StartAPIServer on a running apiserver: want an error")
	}
	// The same clientset (same config, same CA) works again, and the data
	// survived in etcd.
	checkEvents(ctx, t, cs, ns)
}

// checkEvents lists both events back through both APIs.
func checkEvents(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	want := map[string]bool{"core-event": true, "events-event": true}
	core, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list core/v1 events: %v", err)
	}
	got := map[string]bool{}
	for _, ev := range core.Items {
		got[ev.Name] = true
	}
	for name := range want {
		if !got[name] {
			t.Errorf("core/v1 list lacks %s; got %v", name, got)
		}
	}
	evs, err := cs.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list events.k8s.io/v1 events: %v", err)
	}
	got = map[string]bool{}
	for _, ev := range evs.Items {
		got[ev.Name] = true
	}
	for name := range want {
		if !got[name] {
			t.Errorf("events.k8s.io/v1 list lacks %s; got %v", name, got)
		}
	}
}

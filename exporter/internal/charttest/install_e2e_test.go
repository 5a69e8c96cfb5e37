//go:build e2e

package charttest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fanout-go/fanout/exporter"
	"github.com/fanout-go/fanout/k8s/apiservertest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// serviceMonitorCRD stands for the Prometheus Operator's CRD: the test
// API server has no operator, and the chart's ServiceMonitor needs only
// the type to exist.
const serviceMonitorCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// install creates every object on the API server, as `helm install`
// does, waiting for the types of new CRDs to be served.
func install(t *testing.T, cfg *rest.Config, objs []*unstructured.Unstructured) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err == nil {
				if _, err := dyn.Resource(m.Resource).Namespace(o.GetNamespace()).Create(t.Context(), o, metav1.CreateOptions{}); err != nil {
					t.Fatalf("creating %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", gvk, err)
			}
			mapper.Reset() // a CRD created just before: not discovered yet
		}
	}
}

// countingSink counts what it stores and closes done at want.
type countingSink struct {
	mu   sync.Mutex
	n    int
	want int
	done chan struct{}
}

func (s *countingSink) Write(_ context.Context, b []*exporter.Occurrence) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.n
	s.n += len(b)
	if before < s.want && s.n >= s.want {
		close(s.done)
	}
	return len(b), nil
}

func (s *countingSink) Close(context.Context) error { return nil }

func TestChartInstallsOnTheAPIServerAndTheExporterRunsAsItsServiceAccount(t *testing.T) {
	env := apiservertest.Shared(t)
	cfg := env.Config()
	client := env.MustClientset(t)
	ns := apiservertest.Namespace(t, client, "fanout-eventer")
	objs := render(t, ns, `serviceMonitor: {enabled: true}`)
	var crd unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(serviceMonitorCRD), &crd.Object); err != nil {
		t.Fatal(err)
	}
	install(t, cfg, append([]*unstructured.Unstructured{&crd}, objs...))
	if _, err := client.AppsV1().Deployments(ns).Get(t.Context(), release, metav1.GetOptions{}); err != nil {
		t.Fatalf("the chart's Deployment: %v", err)
	}

	// The exporter, with the chart's configuration, as the chart's
	// ServiceAccount: its RBAC is enough (the server enforces it).
	config := configOf(t, objs)
	const n = 50
	sink := &countingSink{want: n, done: make(chan struct{})}
	config.Receivers[0].Stdout, config.Receivers[0].Sink = nil, sink
	saCfg := rest.CopyConfig(cfg)
	saCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + release}
	sa, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- exporter.Run(ctx, exporter.Options{Config: config, Client: sa, LeaderElection: &exporter.LeaderElection{
			Namespace: ns, Name: release, Identity: "e2e",
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond}})
	}()
	evNS := apiservertest.Namespace(t, client, "chart-events")
	for i := range n {
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: evNS, Name: fmt.Sprintf("ev-%d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: evNS, Name: "p"}, Reason: "Test",
			Message: "m", Type: corev1.EventTypeNormal, Count: 1, Source: corev1.EventSource{Component: "test"}}
		if _, err := client.CoreV1().Events(evNS).Create(t.Context(), ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-sink.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the exporter stored fewer than %d occurrences as the chart's ServiceAccount", n)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("the exporter: %v", err)
	}
	// The last checkpoint went to the chart's ConfigMap, by the Role's
	// grant.
	if _, err := client.CoreV1().ConfigMaps(ns).Get(t.Context(), release+"-checkpoint", metav1.GetOptions{}); err != nil {
		t.Errorf("no checkpoint ConfigMap after the stop: %v", err)
	}
}

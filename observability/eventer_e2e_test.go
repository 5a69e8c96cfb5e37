//go:build e2e

package observability_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/fanout-go/fanout/exporter"
	"github.com/fanout-go/fanout/k8s/apiservertest"
	"github.com/fanout-go/fanout/observability/internal/promtest"
)

// eventerRules are fanout-eventer's rules.
const eventerRules = "prometheus/fanout-eventer-alerts.yaml"

// eventerNS is the namespace the exporters watch.
const eventerNS = "obs"

// A real Prometheus scrapes four fanout-eventers exporting the events of
// a real kube-apiserver while a test makes an event every 20 ms:
//
//   - "stuck": a file sink, and a webhook whose server never answers
//     (Wait, queue 4, one writer, a timeout of an hour): it holds the source back, and
//     the checkpoint does not move; its drop rule on labels looks every involved object up
//     (Widgets, which the API server does not know);
//   - "failing": a webhook whose server answers 500 after 200 ms
//     (DropNewest, queue 2, batch 1, one writer, two tries): retries, occurrences given up on
//     and dropped by the queue; its checkpoint (a file) is written;
//   - "nocheckpoint": a file sink, its checkpoint in a ConfigMap of a
//     namespace that does not exist: every checkpoint write fails;
//   - "standby": leader election on a Lease that the test renews for
//     another holder: it never leads.
//
// Every panel and variable of grafana/fanout-eventer.json returns data,
// and each alerting rule is pending or firing for what it describes,
// naming the instance and the sink, and for nothing else.
func TestEventerDashboardAndRulesAgainstPrometheus(t *testing.T) {
	env := apiservertest.Start(t)
	client := env.MustClientset(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: eventerNS}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hang, flaky := hangingServer(t), failingServer(t)
	stuck := runEventer(t, client, dyn, nil, fmt.Sprintf(stuckConfig, dir, dir, hang))
	failing := runEventer(t, client, nil, nil, fmt.Sprintf(failingConfig, dir, flaky))
	nockp := runEventer(t, client, nil, nil, fmt.Sprintf(noCheckpointConfig, dir))
	holdLease(ctx, t, client, "eventer")
	standby := runEventer(t, client, nil, &exporter.LeaderElection{Namespace: eventerNS, Name: "eventer",
		Identity: "standby", RetryPeriod: time.Second}, fmt.Sprintf(stuckConfig, dir, dir, hang))
	go makeEvents(ctx, client)

	prom := promtest.Start(t, promtest.Config{Targets: []promtest.Target{
		{Job: "eventer", Addr: stuck}, {Job: "eventer", Addr: failing}, {Job: "eventer", Addr: nockp},
		{Job: "eventer-standby", Addr: standby}}, RuleFiles: []string{eventerRules}})
	want := []wantAlert{
		{"FanoutEventerSinkHoldingSourceBack", model.LabelSet{"instance": model.LabelValue(stuck), "sink": "hook"}},
		{"FanoutEventerCheckpointBehind", model.LabelSet{"instance": model.LabelValue(stuck)}},
		{"FanoutEventerSinkFailing", model.LabelSet{"instance": model.LabelValue(failing), "sink": "flaky"}},
		{"FanoutEventerSinkDropping", model.LabelSet{"instance": model.LabelValue(failing), "sink": "flaky"}},
		{"FanoutEventerCheckpointFailing", model.LabelSet{"instance": model.LabelValue(nockp)}},
		{"FanoutEventerCheckpointBehind", model.LabelSet{"instance": model.LabelValue(nockp)}},
		{"FanoutEventerNoLeader", model.LabelSet{"job": "eventer-standby"}},
	}
	checkEveryRuleIsWanted(t, want, eventerRules)
	checkDashboard(t, prom, "grafana/fanout-eventer.json")
	checkRules(t, prom, want, eventerRules)
}

// The configurations of the exporters (see the test).
const (
	stuckConfig = `
namespace: obs
checkpoint: {file: %s/stuck.json, interval: 1s}
shutdownTimeout: 2s
route:
  drop:
    - labels: {fanout.dev/drop: "true"}
  match:
    - receiver: archive
    - receiver: hook
receivers:
  - name: archive
    file: {path: %s/stuck.jsonl}
  - name: hook
    webhook: {endpoint: %q, timeout: 1h}
    writers: 1
    queue: {length: 4, strategy: Wait}
`
	failingConfig = `
namespace: obs
checkpoint: {file: %s/failing.json, interval: 1s}
shutdownTimeout: 2s
route:
  match:
    - receiver: flaky
receivers:
  - name: flaky
    webhook: {endpoint: %q}
    batch: 1
    writers: 1
    queue: {length: 2, strategy: DropNewest}
    retry: {maxTries: 2, initialBackoff: 10ms, maxBackoff: 10ms}
`
	noCheckpointConfig = `
namespace: obs
checkpoint: {configMap: {namespace: nowhere, name: checkpoint}, interval: 1s}
shutdownTimeout: 2s
route:
  match:
    - receiver: archive
receivers:
  - name: archive
    file: {path: %s/nocheckpoint.jsonl}
`
)

// runEventer runs an exporter with the configuration yaml on a loopback
// listener until t ends, and returns the listener's address.
func runEventer(t *testing.T, client kubernetes.Interface, dyn dynamic.Interface, le *exporter.LeaderElection, yaml string) string {
	t.Helper()
	cfg, err := exporter.ParseConfig("test", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts := exporter.Options{Config: cfg, Client: client, Dynamic: dyn, Listener: l, LeaderElection: le}
	go func() { done <- exporter.Run(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("exporter on %s: %v", l.Addr(), err)
		}
	})
	return l.Addr().String()
}

// hangingServer returns the URL of a webhook that never answers, until
// the request is cancelled or t ends.
func hangingServer(t *testing.T) string {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the handlers
	return srv.URL
}

// failingServer returns the URL of a webhook that answers 500 after
// 200 ms: with two tries, a sink takes more than 400 ms per occurrence.
func failingServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(200 * time.Millisecond):
		case <-r.Context().Done():
		}
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// holdLease makes the Lease name, held by another replica that renews it
// every second until ctx ends.
func holdLease(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	holder, secs := "elsewhere", int32(15)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: eventerNS, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs,
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	leases := client.CoordinationV1().Leases(eventerNS)
	created, err := leases.Create(ctx, lease, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			created.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			if updated, err := leases.Update(ctx, created, metav1.UpdateOptions{}); err == nil {
				created = updated
			}
		}
	}()
}

// makeEvents makes an event every 20 ms in eventerNS until ctx ends, each
// about another Widget (a kind the API server does not know: its lookup
// fails, unmapped).
func makeEvents(ctx context.Context, client kubernetes.Interface) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := metav1.Now()
		e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: eventerNS, Name: fmt.Sprintf("e%d", i)},
			InvolvedObject: corev1.ObjectReference{Kind: "Widget", APIVersion: "example.com/v1", Namespace: eventerNS,
				Name: fmt.Sprintf("w%d", i)},
			Reason: "Spun", Message: "spun", Type: corev1.EventTypeNormal, Count: 1,
			FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "test"}}
		_, _ = client.CoreV1().Events(eventerNS).Create(ctx, e, metav1.CreateOptions{})
	}
}

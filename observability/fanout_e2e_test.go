//go:build e2e

package observability_test

import (
	"testing"

	"github.com/prometheus/common/model"

	"github.com/fanout-go/fanout/observability/internal/demo"
	"github.com/fanout-go/fanout/observability/internal/promtest"
)

// fanoutRules are the rules of the metrics and k8s/metrics collectors.
const fanoutRules = "prometheus/fanout-alerts.yaml"

// startDemo starts the demo program, stopped by t's cleanup.
func startDemo(t *testing.T) *demo.Program {
	t.Helper()
	p, err := demo.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// A real Prometheus scrapes the demo program (a stalled publisher, a
// watcher dropping, a failing recorder sink, a failing Kubernetes event
// sink, a panicking drop handler): every panel and variable of
// grafana/fanout.json returns data, and each alerting rule is pending or
// firing for what it describes, naming the broadcaster and the watcher,
// and for nothing else (the healthy watchers "reader" and "evens" fire
// nothing).
func TestFanoutDashboardAndRulesAgainstPrometheus(t *testing.T) {
	p := startDemo(t)
	prom := promtest.Start(t, promtest.Config{Targets: []promtest.Target{{Job: "demo", Addr: p.Addr}},
		RuleFiles: []string{fanoutRules}})
	runner := model.LabelValue(p.Audit.Snapshot().Runners[0].Name)
	want := []wantAlert{
		{"FanoutPublisherHeldBack", model.LabelSet{"broadcaster": "orders", "watcher": "stalled"}},
		{"FanoutWatcherDropping", model.LabelSet{"broadcaster": "clicks", "watcher": "lossy"}},
		{"FanoutRunnerFailing", model.LabelSet{"broadcaster": "audit", "watcher": runner}},
		{"FanoutRunnerLosingValues", model.LabelSet{"broadcaster": "audit", "watcher": runner}},
		{"FanoutCallbackPanics", model.LabelSet{"broadcaster": "clicks"}},
		{"FanoutK8sEventsDropped", model.LabelSet{"api": "core/v1"}},
		{"FanoutK8sEventWritesFailing", model.LabelSet{"api": "core/v1"}},
	}
	checkEveryRuleIsWanted(t, want, fanoutRules)
	checkDashboard(t, prom, "grafana/fanout.json")
	checkRules(t, prom, want, fanoutRules)
}

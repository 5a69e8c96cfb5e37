// Package observability holds what the repository gives operators besides
// the code: Grafana dashboards (grafana/) and Prometheus alerting rules
// (prometheus/) for the metrics of fanout's collectors
// (github.com/fanout-go/fanout/metrics, github.com/fanout-go/fanout/k8s/metrics)
// and of fanout-eventer (github.com/fanout-go/fanout/exporter), and the
// tests that run them against real servers (build tag e2e, which `make
// test` sets):
//
//   - a real Prometheus (Debian's package, internal/promtest) scrapes
//     running programs, loads the rules, and answers every dashboard
//     panel's query; each query must return data, and each alerting rule
//     must be pending or firing for what it describes and for nothing
//     else;
//   - a real headless Chromium (Debian's package, internal/chromiumtest)
//     loads the live view (github.com/fanout-go/fanout/debug) of a running
//     program with a stalled watcher.
//
// Files, in FS:
//
//	grafana/fanout.json                 broadcasters, recorders, runners, Kubernetes events
//	grafana/fanout-eventer.json         fanout-eventer
//	prometheus/fanout-alerts.yaml       alerting rules for the first
//	prometheus/fanout-eventer-alerts.yaml  and for fanout-eventer
//
// It is a module of its own, so that what its tests need (Prometheus's API
// client, a browser driver, the exporter) is linked into nothing else.
package observability

import "embed"

// FS holds the dashboards and the rule files, for a program that installs
// them (a Grafana provisioning sidecar, an operator).
//
//go:embed grafana/*.json prometheus/*.yaml
var FS embed.FS

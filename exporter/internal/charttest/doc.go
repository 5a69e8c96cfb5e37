// Package charttest tests the Helm chart in exporter/deploy/chart: it
// renders it with the Helm Go SDK (helm.sh/helm/v3) and checks what comes
// out, and, behind the e2e build tag, applies it to a real kube-apiserver
// (github.com/fanout-go/fanout/k8s/apiservertest) and runs the exporter as
// the chart's ServiceAccount with the chart's configuration. It is a module
// of its own so that only it carries Helm's dependencies; it is not
// released (its directory is internal).
package charttest

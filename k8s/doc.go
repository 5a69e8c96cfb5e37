// Package k8s is the root of the Kubernetes adapter module. Its packages
// [github.com/fanout-go/fanout/k8s/record] and
// [github.com/fanout-go/fanout/k8s/events] are drop-in replacements for
// client-go's tools/record and tools/events, built on the fanout engine;
// [github.com/fanout-go/fanout/k8s/eventstats] holds what they count.
//
// Like client-go's packages, they link no Prometheus: the collector is the
// separate module github.com/fanout-go/fanout/k8s/metrics. The separate
// module github.com/fanout-go/fanout/k8s/ctrl gives controller-runtime
// managers these recorders (fanoutctrl.NewManager), so that controller-runtime
// stays out of this module.
// [github.com/fanout-go/fanout/k8s/apiservertest] is test support (a real
// kube-apiserver and etcd for end-to-end tests), with no API stability
// promise.
package k8s

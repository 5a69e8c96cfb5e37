// Package k8s is the root of the Kubernetes adapter module. Its packages
// [github.com/fanout-go/fanout/k8s/record] and
// [github.com/fanout-go/fanout/k8s/events] are drop-in replacements for
// client-go's tools/record and tools/events, built on the fanout engine.
package k8s

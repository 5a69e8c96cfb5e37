// Package e2etest holds the adapter's end-to-end tests: the record and
// events packages against a real kube-apiserver and etcd on loopback,
// which the tests build from the Go module proxy and cache (see
// internal/e2e). It has no non-test code.
package e2etest

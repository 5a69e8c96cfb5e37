// Package e2etest holds the end-to-end tests of
// [github.com/fanout-go/fanout/k8s/ctrl]: a real controller-runtime
// manager, leader election on, recording both kinds of events to a real
// kube-apiserver and etcd on loopback (see
// [github.com/fanout-go/fanout/k8s/apiservertest], which builds them from
// the Go module proxy the first time and caches them). It has no non-test
// code.
//
// The tests are behind the e2e build tag, which `make test` sets:
//
//	go test -race -tags e2e ./e2etest/
//
// Without it, `go test ./...` finds no test files here and builds nothing.
package e2etest

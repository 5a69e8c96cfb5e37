// Package e2e holds the exporter's end-to-end tests, behind the e2e build
// tag (`make test` sets it): against a real kube-apiserver and etcd
// (github.com/fanout-go/fanout/k8s/apiservertest, one per package run), an
// httptest webhook and an embedded NATS JetStream server, with the
// exporter run in-process or, to be killed, as a child process.
package e2e

// Command fanout-eventer exports Kubernetes events to files, webhooks, NATS
// JetStream and logs, each occurrence once to every sink, with per-sink
// queues and strategies, a checkpoint and Prometheus metrics. It is a thin
// main over [github.com/fanout-go/fanout/exporter.Main]:
//
//	fanout-eventer --config example.yaml --kubeconfig ~/.kube/config
//
// SIGINT or SIGTERM stops it gracefully: the source stops, the sinks flush
// within the configuration's shutdownTimeout, and the checkpoint is written.
//
// The binary carries the Mozilla CA roots (used where the system has none,
// as in the image, which holds nothing but the binary) and the time zone
// database (for templates that format times in a zone).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	_ "time/tzdata"

	"github.com/fanout-go/fanout/exporter"
	_ "golang.org/x/crypto/x509roots/fallback"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := exporter.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
